//! Live mode's control plane: `racksim-nexus`'s Nexus — the one the
//! simulation runs, with the same instance API, sagas, background tasks and
//! database — hosted beside the live fakes ([`LiveHost`], its
//! `NexusHost`): it connects over live mode's links, keeps its database
//! under a mutex, measures reincarnation's cooldown by the wall clock, and
//! writes live mode's trace. Which tasks run is the run's era
//! (`racksim_nexus::era::Era`), as in the simulation.
//!
//! * `control-plane-down` is an orderly stop (no new requests, those in
//!   flight finish, the background tasks finish their activation);
//!   `control-plane-crash` abandons everything where it is, and the next
//!   start resumes the unfinished sagas from the saga log.
//! * Every switch zone's dpd pulls instance NAT from the internal API
//!   (`GET /nat/ipv4/changeset/{from_gen}`), every period and on trigger —
//!   a restarted dpd pulls from generation 0 ([`dpd_nat_rpw`]).
//!
//! What live mode simplifies: one Nexus, not one per Nexus zone, listening
//! on the underlay address of the rack's first Nexus zone; it runs beside
//! the rack rather than in that zone (a crash of its sled does not take it
//! down — the control-plane actions do), and it is up from the start
//! (there is no time synchronisation to wait for). Database transactions
//! take no simulated round trip.

use std::{
    future::Future,
    net::{Ipv6Addr, SocketAddr},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use dropshot::HttpServer;
use racksim_nexus::instances::{InstanceRecord, NatEntryView, OpError, SledRef};
use racksim_nexus::{
    api::ChannelRequests, Db, Event, InstanceRequest, NexusHost, NexusStore, Write,
    NEXUS_INTERNAL_PORT,
};
use racksim_reconciler::{discovery::SwitchSlot, http::HttpClient, scrimlet_local::ServiceZoneNat};
use racksim_servers::DpdContext;
use racksim_sim::hosts::switch_zone::NAT_CHANGESET_LIMIT;
use tokio::{
    sync::{mpsc, watch},
    task::{JoinHandle, JoinSet},
};

use super::{
    net::{FixedResolver, LinkConnector},
    trace::LiveTrace,
    Shared,
};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the database knows of the rack's hardware: sleds (by id, their
/// index) and the boundary switches' zones.
#[derive(Clone, Default)]
pub(super) struct Inventory {
    inner: Arc<Mutex<InventoryInner>>,
}

#[derive(Default)]
struct InventoryInner {
    /// Name, underlay address, retired.
    sleds: Vec<(String, Ipv6Addr, bool)>,
    boundary: std::collections::BTreeMap<SwitchSlot, Ipv6Addr>,
}

impl Inventory {
    pub fn add_sled(&self, name: &str, address: Ipv6Addr) {
        lock(&self.inner)
            .sleds
            .push((name.to_string(), address, false));
    }

    pub fn retire_sled(&self, index: usize) {
        if let Some(s) = lock(&self.inner).sleds.get_mut(index) {
            s.2 = true;
        }
    }

    /// The switch zone in `slot` (an uplinked one) is at `zone`.
    pub fn boundary_switch(&self, slot: SwitchSlot, zone: Ipv6Addr) {
        lock(&self.inner).boundary.insert(slot, zone);
    }

    fn sled_name(&self, id: u32) -> String {
        lock(&self.inner)
            .sleds
            .get(id as usize)
            .map_or_else(|| format!("sled {id}"), |s| s.0.clone())
    }
}

/// What the Nexus needs from the rack around it.
#[derive(Clone)]
pub(super) struct NexusEnv {
    pub shared: Shared,
    /// The service zones as the current config places them.
    pub desired: watch::Receiver<Vec<ServiceZoneNat>>,
    /// Declared instances' names, by id - 1.
    pub instances: Vec<String>,
}

/// Where live mode's Nexus runs: beside the live fakes.
#[derive(Clone)]
pub(super) struct LiveHost {
    env: NexusEnv,
    /// The host name of its zone's sled (trace lines, saga executor).
    host: String,
    db: Arc<Mutex<Db>>,
    inventory: Inventory,
}

impl NexusHost for LiveHost {
    type Connector = LinkConnector;
    type Resolver = FixedResolver;

    fn name(&self) -> &str {
        &self.host
    }

    fn era(&self) -> racksim_nexus::era::Era {
        self.env.shared.era
    }

    fn start(&self) -> racksim_nexus::instances::StartImpl {
        self.env.shared.start
    }

    fn rpw_period(&self) -> Duration {
        self.env.shared.period
    }

    fn connector(&self) -> LinkConnector {
        LinkConnector {
            from: self.host.clone(),
            links: self.env.shared.links.clone(),
        }
    }

    fn resolver(&self) -> FixedResolver {
        self.env.shared.resolver.clone()
    }

    fn db<R>(&self, f: impl FnOnce(&mut Db) -> R) -> R {
        f(&mut lock(&self.db))
    }

    /// Live mode's database answers at once and has no faults (its
    /// control API refuses `db-stall` and `db-errors`).
    async fn round_trip(&self) -> Result<(), racksim_nexus::instances::StoreError> {
        Ok(())
    }

    fn wrote(&self, _write: Write<'_>) {}

    fn sleds(&self) -> Vec<SledRef> {
        lock(&self.inventory.inner)
            .sleds
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.2)
            .map(|(i, s)| SledRef {
                id: i as u32,
                address: s.1,
            })
            .collect()
    }

    fn boundary_switches(&self) -> Vec<SwitchSlot> {
        lock(&self.inventory.inner)
            .boundary
            .keys()
            .copied()
            .collect()
    }

    /// MGS on each boundary switch zone's underlay address.
    fn mgs(&self) -> Vec<SocketAddr> {
        lock(&self.inventory.inner)
            .boundary
            .values()
            .map(|zone| SocketAddr::new((*zone).into(), racksim_reconciler::MGS_PORT))
            .collect()
    }

    /// Simplified: every sled of a live rack answers, and runs every zone
    /// the config puts on it (live mode has no zone-start path to block
    /// one, and its sleds do not crash).
    fn inventory(&self) -> Vec<racksim_nexus::SledInventory> {
        let zones = self.env.desired.borrow().clone();
        let sleds = lock(&self.inventory.inner).sleds.clone();
        sleds
            .into_iter()
            .filter(|(_, _, retired)| !retired)
            .map(|(name, address, _)| racksim_nexus::SledInventory {
                sled: name,
                zones: Some(
                    zones
                        .iter()
                        .filter(|z| z.entry.target.internal_ip == address)
                        .cloned()
                        .collect(),
                ),
            })
            .collect()
    }

    /// The wall clock: live mode runs in real time.
    fn now(&self) -> Duration {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    }

    fn record(&self, event: Event) {
        self.env.shared.trace.record(&self.host, event.text);
    }

    fn instance_name(&self, id: u32) -> String {
        self.env
            .instances
            .get((id as usize).wrapping_sub(1))
            .cloned()
            .unwrap_or_else(|| format!("instance {id}"))
    }

    fn sled_name(&self, id: u32) -> String {
        self.inventory.sled_name(id)
    }

    fn zone_name(&self, zone: Ipv6Addr) -> String {
        zone.to_string()
    }

    fn names(&self, text: &str) -> String {
        text.to_string()
    }

    fn spawn(&self, set: &mut JoinSet<()>, op: impl Future<Output = ()> + Send + 'static) {
        set.spawn(op);
    }

    fn op_done(&self, _req: &InstanceRequest, _outcome: &Result<InstanceRecord, OpError>) {}

    fn stopping(&self) {}
}

/// A running Nexus incarnation.
struct Running {
    requests: mpsc::UnboundedSender<InstanceRequest>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    server: HttpServer<NexusStore<LiveHost>>,
}

/// Live mode's control plane.
pub(super) struct LiveNexus {
    host: LiveHost,
    /// Where dpds reach its internal API (its zone's underlay address).
    pub internal: SocketAddr,
    running: Option<Running>,
    /// Stopped incarnations finishing what they were doing.
    draining: Vec<JoinHandle<()>>,
    /// The instances someone has asked to create: live mode declares its
    /// instances up front (in state `Creating`), and one never asked for
    /// is not on its way anywhere.
    asked: std::collections::BTreeSet<u32>,
}

/// A dropped live rack's Nexus stops with it: its server shuts down when
/// dropped, and its task and draining incarnations are aborted (see the
/// hosts' `Drop`).
impl Drop for LiveNexus {
    fn drop(&mut self) {
        if let Some(r) = &self.running {
            r.task.abort();
        }
        for t in &self.draining {
            t.abort();
        }
    }
}

impl LiveNexus {
    /// A Nexus in the zone on `host` (at `address`), not started.
    pub fn new(env: NexusEnv, host: &str, address: Ipv6Addr, inventory: Inventory) -> Self {
        let mut db = Db::default();
        for (i, name) in env.instances.iter().enumerate() {
            db.declare(i as u32 + 1, name);
        }
        LiveNexus {
            host: LiveHost {
                env,
                host: host.to_string(),
                db: Arc::new(Mutex::new(db)),
                inventory,
            },
            internal: SocketAddr::new(address.into(), NEXUS_INTERNAL_PORT),
            running: None,
            draining: Vec::new(),
            asked: Default::default(),
        }
    }

    pub fn host(&self) -> &str {
        &self.host.host
    }

    pub fn up(&self) -> bool {
        self.running.is_some()
    }

    pub fn instances(&self) -> Vec<InstanceRecord> {
        self.host.db(|db| {
            db.instances
                .values()
                .map(|r| InstanceRecord::clone(r))
                .collect()
        })
    }

    /// The instances someone has asked for: every record but the declared
    /// ones no request has named yet.
    pub fn instances_asked_for(&self) -> Vec<std::sync::Arc<InstanceRecord>> {
        self.host.db(|db| {
            db.instances
                .values()
                .filter(|r| self.asked.contains(&r.id))
                .cloned()
                .collect()
        })
    }

    /// The instance NAT table's version.
    pub fn nat_version(&self) -> i64 {
        self.host.db(|db| db.nat.version())
    }

    /// Starts the control plane: its internal API, then the Nexus itself
    /// (the unfinished sagas, then its instance API and background tasks).
    pub fn start(&mut self) -> Result<(), String> {
        if self.running.is_some() {
            return Ok(());
        }
        let links = &self.host.env.shared.links;
        let server = racksim_servers::nexus::server(
            NexusStore::new(self.host.clone()),
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), 0),
        )?;
        links.serves(&self.host.host, server.local_addr());
        links.maps(self.internal, server.local_addr());
        let (stop, stop_rx) = watch::channel(false);
        let (requests, rx) = mpsc::unbounded_channel();
        let host = self.host.clone();
        let task = tokio::spawn(async move {
            let internal_stop = stop_rx.clone();
            racksim_nexus::serve(
                &host,
                ChannelRequests::new(rx),
                stop_rx,
                |_store| async move {
                    // The dropshot server runs on its own; this incarnation's
                    // part ends with the stop.
                    let mut stop = internal_stop;
                    racksim_nexus::stop_requested(&mut stop).await
                },
            )
            .await
        });
        self.host.env.shared.trace.record(
            &self.host.host,
            "nexus: control plane up; starting background tasks",
        );
        self.running = Some(Running {
            requests,
            stop,
            task,
            server,
        });
        Ok(())
    }

    /// An orderly stop: no new requests; those in flight and the
    /// background tasks' activations finish.
    pub fn stop(&mut self) {
        if let Some(r) = self.running.take() {
            r.stop.send_replace(true);
            let trace = self.host.env.shared.trace.clone();
            let host = self.host.host.clone();
            self.draining.push(tokio::spawn(async move {
                let _ = r.task.await;
                let _ = r.server.close().await;
                trace.record(
                    &host,
                    "nexus: control plane stopped; in-flight operations finished first",
                );
            }));
        }
    }

    /// A crash: everything in flight is abandoned where it is; the
    /// database (and its saga log) survives. (A request submitted an
    /// instant before, which the aborted incarnation had not yet taken off
    /// its channel, is lost with it, without a refusal line: its caller's
    /// connection would have died. The simulation refuses such a request
    /// with a line.)
    pub fn crash(&mut self) {
        if let Some(r) = self.running.take() {
            r.task.abort();
            self.draining.push(tokio::spawn(async move {
                let _ = r.server.close().await;
            }));
            self.host.env.shared.trace.record(
                &self.host.host,
                "nexus: control plane crashed; in-flight operations abandoned",
            );
        }
    }

    /// Stops it without a word, when the live rack stops.
    pub async fn shut_down(&mut self) {
        if let Some(r) = self.running.take() {
            r.task.abort();
            let _ = r.server.close().await;
        }
        for t in self.draining.drain(..) {
            let _ = t.await;
        }
    }

    /// A request to the instance API: run now, or, while the control plane
    /// is down, refused (as the simulation refuses it: no API is there to
    /// take it, and nothing keeps it for a later Nexus).
    pub fn submit(&mut self, req: InstanceRequest) {
        self.asked.insert(req.instance());
        match &self.running {
            Some(r) => {
                let _ = r.requests.send(req);
            }
            None => racksim_nexus::api::refuse(&self.host, [req], "the control plane is down"),
        }
    }
}

/// dpd's instance NAT RPW (dendrite): at start — from generation 0, a
/// started dpd's table is empty — every period and on
/// `POST /rpw/nat/trigger`, pull the changes since this dpd's generation
/// from Nexus and apply them. Runs as long as the switch zone does.
pub(super) async fn dpd_nat_rpw(
    slot: SwitchSlot,
    dpd: DpdContext,
    nexus: SocketAddr,
    connector: LinkConnector,
    period: Duration,
    trace: LiveTrace,
) {
    racksim_fakes::dpd::run_nat_rpw(
        dpd.trigger(),
        period,
        || pull_nat(slot, &dpd, nexus, &connector, &trace),
        |e| trace.record(&slot.to_string(), format!("dpd NAT RPW: {e}")),
    )
    .await
}

/// One pull: changesets from this dpd's generation until one is empty.
async fn pull_nat(
    slot: SwitchSlot,
    dpd: &DpdContext,
    nexus: SocketAddr,
    connector: &LinkConnector,
    trace: &LiveTrace,
) -> Result<(), String> {
    let client = HttpClient::new(connector.clone(), nexus);
    loop {
        let from_gen = dpd.lock().generation();
        let changes: Vec<NatEntryView> = client
            .get(&format!(
                "/nat/ipv4/changeset/{from_gen}?limit={NAT_CHANGESET_LIMIT}"
            ))
            .await
            .map_err(|e| format!("Nexus did not answer: {e}"))?;
        let Some(last) = changes.last().map(|c| c.gen) else {
            return Ok(());
        };
        let failures = dpd.apply(|d| {
            let (mut done, mut failed) = (Vec::new(), Vec::new());
            for c in &changes {
                for r in d.apply_nat_change(c) {
                    match r {
                        Ok(change) => done.push(change),
                        Err(e) => failed.push(e),
                    }
                }
            }
            d.set_generation(last);
            (failed, done)
        });
        for e in failures {
            trace.record(&slot.to_string(), format!("dpd NAT RPW: {e}"));
        }
        trace.record(
            &slot.to_string(),
            format!(
                "dpd NAT RPW: applied {} change(s) from generation {from_gen} to {last}",
                changes.len()
            ),
        );
    }
}
