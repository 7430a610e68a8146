//! A switch zone: fake dpd (with its instance NAT RPW) and MGS, and the
//! switch's data path (uplink ingress through the NAT table).

use std::{future::Future, net::SocketAddr, rc::Rc, sync::Arc, time::Duration};

use http::Method;
use racksim_fakes::{
    dpd::{DpdState, NatChange, NatRpwTimer},
    fault::Fault,
    http::{ApiError, ApiRequest, ApiResponse},
    mgs::MgsState,
};
use racksim_nexus::instances::NatEntryView;
use racksim_reconciler::{
    discovery::SwitchSlot, http::HttpClient, nat::NatEntry, DPD_PORT, MGS_PORT,
};

use super::{control_plane::NEXUS_INTERNAL_PORT, fmt_entry, spawn_server, PacketSocket};
use crate::{
    dataplane::{Geneve, Inbound},
    era::PeriodicTask,
    net::{TurmoilConnector, GENEVE_PORT, UPLINK_PORT},
    rack::ZoneKind,
    services::{times::Draws, Handler},
    trace::{Kind, TraceLine},
    world::{ServiceFault, World},
};

/// Period of dpd's instance NAT RPW (dendrite: 30 s).
pub const NAT_RPW_PERIOD: Duration = Duration::from_secs(30);
/// Changes asked for per changeset request (dendrite asks for 100).
pub const NAT_CHANGESET_LIMIT: u32 = 100;

/// The software of a switch zone host.
pub async fn run(world: World, slot: SwitchSlot) -> turmoil::Result {
    let name = slot.to_string();
    let boot = world.boot(&name);
    let held = {
        let mut st = world.lock();
        // The NAT table lives in the ASIC and is lost with the zone: a
        // crash or restart removed it (`World::host_down`), so this boot
        // starts empty. Only at the very start of a run may the ASIC hold
        // entries from before it (a plan step at 0s planted them).
        let held = st
            .switches
            .dpd
            .entry(slot)
            .or_insert_with(|| DpdState::new(slot.index()))
            .ipv4_entries()
            .len();
        st.switches.dropping.remove(&slot);
        st.version += 1;
        held
    };
    let table = match held {
        0 => "NAT table empty".to_string(),
        1 => "NAT table holds 1 entry from before this run".to_string(),
        n => format!("NAT table holds {n} entries from before this run"),
    };
    world.trace(
        &name,
        Kind::Boot,
        format!("switch zone up (dpd :12224, MGS :12225); {table}"),
    );
    // Made as the zone starts: a started dpd's RPW is due at once.
    let trigger = Arc::new(NatRpwTimer::new());
    spawn_server(
        &world,
        &name,
        DPD_PORT,
        DpdHandler {
            world: world.clone(),
            slot,
            trigger: trigger.clone(),
            draws: Rc::new(Draws::new(&world, &name, "dpd", boot)),
        },
    );
    // dendrite of the instance-start networking issue's time (the era start `inline` stands for) had
    // no NAT RPW: Nexus pushed instance NAT to it.
    if world.params.era.dpd_nat_rpw == PeriodicTask::On {
        world.lock().switches.nat_rpw.insert(slot, trigger.clone());
        crate::task::spawn(nat_rpw(world.clone(), slot, trigger));
    }
    spawn_server(
        &world,
        &name,
        MGS_PORT,
        MgsHandler {
            world: world.clone(),
            slot,
            mgs: MgsState::new(slot.index()),
            draws: Rc::new(Draws::new(&world, &name, "mgs", boot)),
        },
    );
    dataplane(world, slot).await
}

struct DpdHandler {
    world: World,
    slot: SwitchSlot,
    /// This dpd's NAT RPW timer, which `POST /rpw/nat/trigger` makes due.
    trigger: Arc<NatRpwTimer>,
    /// This boot's service times of the NAT routes ([`crate::services::times`]).
    draws: Rc<Draws>,
}

impl Handler for DpdHandler {
    fn call(&self, req: ApiRequest) -> impl Future<Output = ApiResponse> {
        let (world, slot, trigger) = (self.world.clone(), self.slot, self.trigger.clone());
        let draws = self.draws.clone();
        async move {
            let fault = world.lock().switches.faults.get(&slot).copied();
            if let Some(response) = faulted(fault, "dpd").await {
                return response;
            }
            // A request that is served takes its time (the NAT routes:
            // dendrite writes the switch's tables), and its change happens
            // at the end of it, when dpd answers. Milliseconds, far below
            // any caller's timeout, so whether a caller that gives up
            // cancels the work never arises. A fault above keeps its own
            // timing.
            if req.segments().first().map(|s| &**s) == Some("nat") {
                let time = draws.draw(&world.params.service_times.dpd_nat);
                tokio::time::sleep(time).await;
            }
            let (response, change) = {
                let mut st = world.lock();
                match st.switches.dpd.get_mut(&slot) {
                    None => (
                        ApiError::unavailable("dpd is not running").into_response(),
                        None,
                    ),
                    Some(dpd) => {
                        let (resp, change) = dpd.handle(&req);
                        // `/rpw/nat/gen` is the generation this dpd's NAT
                        // RPW last pulled (`nat_rpw` below); API changes
                        // do not move it, as in dendrite.
                        if change.is_some() {
                            st.version += 1;
                        }
                        (resp, change)
                    }
                }
            };
            if let Some(change) = change {
                world.record(nat_change_line(&world, slot, &change));
            }
            if response.status.is_success()
                && req.method == Method::POST
                && req.segments() == ["rpw", "nat", "trigger"]
            {
                // As dendrite: the RPW is due now and sees it within a
                // second; one that arrives while a pull runs only moves
                // the base of the next scheduled run (see NatRpwTimer).
                // This handler runs on the zone's own host, the clock of
                // its RPW.
                trigger.trigger();
            }
            response
        }
    }
}

/// dpd's instance NAT RPW: at start (from generation 0: a restarted dpd has
/// an empty table), every [`NAT_RPW_PERIOD`] and whenever
/// `POST /rpw/nat/trigger` is called, pull the changes since this dpd's
/// generation from Nexus and apply them. It runs as long as the switch zone
/// does (turmoil drops its tasks when the zone goes down).
async fn nat_rpw(world: World, slot: SwitchSlot, trigger: Arc<NatRpwTimer>) {
    let nexus = NexusClients::new(trigger.clone());
    racksim_fakes::dpd::run_nat_rpw(
        trigger,
        NAT_RPW_PERIOD,
        || pull_nat(&world, &nexus, slot),
        |e| {
            world.record(
                world
                    .line(
                        &slot.to_string(),
                        Kind::Reconciler,
                        format!("dpd NAT RPW: {}", world.name_addrs(e)),
                    )
                    .field("task", "dpd-nat-rpw"),
            )
        },
    )
    .await
}

/// One pull: fetch changesets from this dpd's generation until one is
/// empty, applying each and advancing the generation to the last change
/// applied. Fails if no Nexus answers.
async fn pull_nat(world: &World, nexus: &NexusClients, slot: SwitchSlot) -> Result<(), String> {
    loop {
        let from_gen = {
            let st = world.lock();
            let Some(from_gen) = st.switches.dpd.get(&slot).map(DpdState::generation) else {
                return Ok(());
            };
            from_gen
        };
        // A dpd restart cannot land between here and the table: the RPW
        // drops a pull the moment its dpd restarts (`run_nat_rpw`), so an
        // answer is only ever applied to the process that asked.
        let changes = fetch_changeset(world, nexus, from_gen).await?;
        let Some(last) = changes.last().map(|c| c.gen) else {
            return Ok(());
        };
        let mut lines = Vec::new();
        {
            let mut st = world.lock();
            // The zone went down while the request was out.
            let Some(dpd) = st.switches.dpd.get_mut(&slot) else {
                return Ok(());
            };
            for change in &changes {
                lines.extend(dpd.apply_nat_change(change));
            }
            dpd.set_generation(last);
            st.version += 1;
        }
        let applied = lines.iter().filter(|l| l.is_ok()).count();
        for line in lines {
            world.record(match line {
                Ok(change) => nat_change_line(world, slot, &change),
                Err(e) => world
                    .line(
                        &slot.to_string(),
                        Kind::Reconciler,
                        format!("dpd NAT RPW: {}", world.name_addrs(&e)),
                    )
                    .field("task", "dpd-nat-rpw"),
            });
        }
        world.record(
            world
                .line(
                    &slot.to_string(),
                    Kind::Reconciler,
                    format!(
                        "dpd NAT RPW: applied {} change(s) from generation {from_gen} to {last} ({applied} table operation(s))",
                        changes.len()
                    ),
                )
                .field("task", "dpd-nat-rpw")
                .field("generation", last),
        );
    }
}

/// dpd's Nexus clients, kept as dendrite keeps its one: built once per dpd
/// process (dendrite 2df9101e `dpd/src/rpw/mod.rs`: `run` builds it with
/// `nexus_client_with_resolver` before the RPW's loop), so a pull takes the
/// connection the last one left, for reqwest's 90 s, unless Nexus's
/// dropshot closed it after 30 s idle. A restarted dpd starts with none.
/// Simplified: dendrite's one client finds Nexus through DNS and pools by
/// its service name; here there is a client per Nexus zone, tried in order.
struct NexusClients {
    /// The RPW's timer, which counts dpd's restarts.
    timer: Arc<NatRpwTimer>,
    /// The dpd process (its restart count) the clients belong to.
    process: std::cell::Cell<u64>,
    clients:
        std::cell::RefCell<std::collections::BTreeMap<SocketAddr, HttpClient<TurmoilConnector>>>,
}

impl NexusClients {
    fn new(timer: Arc<NatRpwTimer>) -> Self {
        NexusClients {
            process: std::cell::Cell::new(timer.restart_count()),
            timer,
            clients: Default::default(),
        }
    }

    /// The client of the Nexus at `addr` for the running dpd process (a
    /// clone: it shares the pool).
    fn client(&self, addr: SocketAddr) -> HttpClient<TurmoilConnector> {
        let mut clients = self.clients.borrow_mut();
        let process = self.timer.restart_count();
        if self.process.get() != process {
            // The old process's connections die with it.
            clients.clear();
            self.process.set(process);
        }
        clients
            .entry(addr)
            // dpd's Nexus client has no timeout: dendrite builds it with
            // `reqwest::ClientBuilder::new()` and a DNS resolver, nothing
            // else (`nexus_client_with_resolver`; reqwest 0.12.23's
            // defaults: no connect timeout, no timeout, keepalive 15 s,
            // idle connections kept 90 s). A Nexus that is down holds a
            // pull for as long as TCP tries to connect (127 s).
            .or_insert_with(|| HttpClient::new(TurmoilConnector, addr).without_timeouts())
            .clone()
    }
}

/// `GET /nat/ipv4/changeset/{from_gen}` from the first Nexus that answers,
/// trying the rack's Nexus zones in order. Real dpd finds Nexus through
/// internal DNS; the simulation takes the rack's zone list instead.
async fn fetch_changeset(
    world: &World,
    nexus: &NexusClients,
    from_gen: i64,
) -> Result<Vec<NatEntryView>, String> {
    // The Nexus zones of the current config (a config change may move one).
    let nexus_sleds: Vec<usize> = world
        .zones()
        .zones()
        .iter()
        .filter(|z| z.spec.kind == ZoneKind::Nexus)
        .map(|z| z.spec.sled)
        .collect();
    let mut errors = Vec::new();
    for sled in nexus_sleds {
        let addr = SocketAddr::new(world.sled(sled).address.into(), NEXUS_INTERNAL_PORT);
        match nexus
            .client(addr)
            .get::<Vec<NatEntryView>>(&format!(
                "/nat/ipv4/changeset/{from_gen}?limit={NAT_CHANGESET_LIMIT}"
            ))
            .await
        {
            Ok(changes) => return Ok(changes),
            Err(e) => errors.push(e.to_string()),
        }
    }
    Err(format!("no Nexus answered: {}", errors.join("; ")))
}

/// A NAT table change as a trace line with its entry's fields.
fn nat_change_line(world: &World, slot: SwitchSlot, change: &NatChange) -> TraceLine {
    let host = slot.to_string();
    let entry = |op: &str, text: String, ip: String, low: u16, high: u16, target: String, vni| {
        world
            .line(&host, Kind::Nat, text)
            .field("switch", slot)
            .field("op", op)
            .field("external_ip", ip)
            .field("first_port", low)
            .field("last_port", high)
            .field("target", target)
            .field("vni", vni)
    };
    let (op, sign) = match change {
        NatChange::Created(_) | NatChange::Created6(_) => ("add", '+'),
        _ => ("remove", '-'),
    };
    match change {
        NatChange::Created(e) | NatChange::Deleted(e) => {
            let n = NatEntry::from_dpd(e);
            let text = format!("dpd: NAT {sign} {}", fmt_entry(world, &n));
            let target = world.name_of(n.target.internal_ip);
            let ip = n.external_ip.to_string();
            entry(
                op,
                text,
                ip,
                n.first_port,
                n.last_port,
                target,
                n.target.vni,
            )
        }
        NatChange::Created6(e) | NatChange::Deleted6(e) => {
            let text = format!("dpd: NAT6 {sign} {}/{}-{}", e.external, e.low, e.high);
            let target = world.name_of(e.target.internal_ip);
            let ip = e.external.to_string();
            entry(op, text, ip, e.low, e.high, target, e.target.vni)
        }
        NatChange::Reset { removed } => world
            .line(
                &host,
                Kind::Nat,
                format!("dpd: NAT table reset ({removed} entries removed)"),
            )
            .field("switch", slot)
            .field("op", "reset"),
    }
}

/// The answer of a service showing `fault` now, if it is still in its
/// window: a 500 at once, or a hold for the rest of the window and then a
/// 503 (the client's timeout decides what it sees).
async fn faulted(fault: Option<ServiceFault>, service: &str) -> Option<ApiResponse> {
    let now = turmoil::sim_elapsed().unwrap_or_default();
    match fault.filter(|f| now < f.until())? {
        ServiceFault::Errors { .. } => Some(Fault::Errors.error(service).into_response()),
        ServiceFault::Hang { until } => {
            tokio::time::sleep(until - now).await;
            Some(Fault::Hang.error(service).into_response())
        }
    }
}

struct MgsHandler {
    world: World,
    slot: SwitchSlot,
    mgs: MgsState,
    /// This boot's MGS service times ([`crate::services::times`]).
    draws: Rc<Draws>,
}

impl Handler for MgsHandler {
    fn call(&self, req: ApiRequest) -> impl Future<Output = ApiResponse> {
        let (world, slot, mgs) = (self.world.clone(), self.slot, self.mgs);
        let draws = self.draws.clone();
        async move {
            let fault = world.lock().switches.mgs_faults.get(&slot).copied();
            match faulted(fault, "MGS").await {
                Some(response) => response,
                None => {
                    // Served: MGS's calls read state, so the answer is the
                    // state at the end of the service time.
                    let time = draws.draw(&world.params.service_times.mgs);
                    tokio::time::sleep(time).await;
                    mgs.handle(&req)
                }
            }
        }
    }
}

/// Inbound traffic from the uplink: NAT it to a sled or drop it.
async fn dataplane(world: World, slot: SwitchSlot) -> turmoil::Result {
    let mut sock = PacketSocket::bind(UPLINK_PORT).await?;
    loop {
        let pkt: Inbound = sock.recv().await?;
        let (hit, was_dropping) = {
            let st = world.lock();
            let hit = st
                .switches
                .dpd
                .get(&slot)
                .and_then(|d| d.ipv4_get(pkt.dst_ip, pkt.dst_port));
            (
                hit,
                st.switches.dropping.get(&slot).copied().unwrap_or(false),
            )
        };
        match hit {
            Some(entry) => {
                if was_dropping {
                    dropping_changed(&world, slot, false, &pkt);
                }
                let g = Geneve {
                    via: slot,
                    vni: entry.target.vni,
                    inner_mac: entry.target.inner_mac,
                    inner: pkt,
                };
                let to = SocketAddr::new(entry.target.internal_ip.into(), GENEVE_PORT);
                sock.send(&g, to).await;
            }
            None => {
                if !was_dropping {
                    dropping_changed(&world, slot, true, &pkt);
                }
            }
        }
    }
}

/// The switch starts or stops dropping inbound traffic: recorded once per
/// change, not per packet.
fn dropping_changed(world: &World, slot: SwitchSlot, dropping: bool, pkt: &Inbound) {
    world.lock().switches.dropping.insert(slot, dropping);
    let text = if dropping {
        format!(
            "dataplane: dropping inbound {}:{}: no NAT entry",
            pkt.dst_ip, pkt.dst_port
        )
    } else {
        format!(
            "dataplane: forwarding inbound {}:{} again",
            pkt.dst_ip, pkt.dst_port
        )
    };
    world.record(
        world
            .line(&slot.to_string(), Kind::Dataplane, text)
            .field("switch", slot)
            .field("dropping", dropping),
    );
}
