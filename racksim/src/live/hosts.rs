//! The live rack's hosts and their lives: each switch zone (a dpd and an
//! MGS) and each sled (a sled-agent and the strategy's reconcilers) can be
//! up or down, and every plan action that acts on hosts is applied here.
//!
//! A host that goes down (crash, sidecar or rack power loss) stops its
//! servers — connections to it are refused — and loses everything it held:
//! a dpd's NAT table, a sled-agent's V2P mappings and VMMs, a sled's
//! reconcilers. A host that comes back starts from nothing on the same
//! loopback ports, as a rebooted host keeps its addresses. A replaced
//! scrimlet is new hardware: a new sled (`sled{N}`, as the simulation
//! names it) with a new underlay address, and its switch zone with new
//! ports and a new underlay address that discovery learns.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use dropshot::HttpServer;
use racksim_fakes::{
    api::{serve_dpd, serve_mgs, serve_sled_agent, DpdContext, MgsContext, SledAgentContext},
    dpd::{DpdState, NatChange},
    mgs::MgsState,
    sled_agent::{SledAgentChange, SledAgentState},
};
use racksim_nexus::instances::SLED_AGENT_PORT;
use racksim_reconciler::{
    discovery::SwitchSlot,
    legacy::{self, LegacyProgress},
    nat::NatEntry,
    scrimlet_local::ServiceZoneNat,
    scrimlet_local::{scrimlet_reconcilers, SwitchZoneServices, SystemNetworkingConfig},
    sled_task::SledNatReconciler,
    task::{run_reconciler_task, ScrimletStatus, TaskStatus},
    DPD_PORT, MGS_PORT,
};
use racksim_sim::{
    plan::ConfigChange,
    rack::{sled_address, switch_zone_address},
    strategy::sled_task::follow_entries,
    world::{zone_nat_entry, ZoneId, ZoneSet},
    RackSpec,
};
use rand::{rngs::SmallRng, SeedableRng};
use tokio::{sync::watch, task::JoinHandle};
use tracing::Instrument;

use super::{
    net::LinkConnector,
    nexus::{dpd_nat_rpw, Inventory},
    trace::{nat_line, sled_agent_line},
    Shared,
};

/// How long a restart waits for the previous incarnation's servers to let
/// go of their ports.
const CLOSE_BOUND: Duration = Duration::from_secs(10);

/// Waits until the servers being closed have let go of their ports, or
/// says why not (a client holding a connection open): the host then stays
/// down rather than the control API hanging.
async fn closed(closing: &mut Vec<JoinHandle<()>>, host: &str) -> Result<(), String> {
    while let Some(c) = closing.last_mut() {
        tokio::time::timeout(CLOSE_BOUND, c)
            .await
            .map_err(|_| {
                format!(
                    "{host}'s servers from before have not closed within {CLOSE_BOUND:?} \
                 (a connection is still open); try again"
                )
            })?
            .ok();
        closing.pop();
    }
    Ok(())
}

fn loopback() -> SocketAddr {
    SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0)
}

/// A switch zone: its dpd and MGS.
pub(super) struct SwitchHost {
    pub slot: SwitchSlot,
    /// Its underlay address (what discovery names).
    pub zone: Ipv6Addr,
    pub dpd_addr: SocketAddr,
    pub mgs_addr: SocketAddr,
    pub dpd: DpdContext,
    pub mgs: MgsContext,
    servers: Option<(HttpServer<DpdContext>, HttpServer<MgsContext>)>,
    /// dpd's instance NAT RPW, while the zone runs.
    rpw: Option<JoinHandle<()>>,
    /// Servers being closed; a restart waits for them to let go of the
    /// ports.
    closing: Vec<JoinHandle<()>>,
}

impl SwitchHost {
    pub fn up(&self) -> bool {
        self.servers.is_some()
    }
}

/// A live rack dropped without `stop()` (a failing test) leaves nothing
/// running: its dropshot servers shut down when dropped, and the tasks are
/// aborted here. Only aborts: a `Drop` may run while the runtime shuts
/// down, where spawning (as `stop` does, to close servers) could fail.
impl Drop for SwitchHost {
    fn drop(&mut self) {
        if let Some(rpw) = &self.rpw {
            rpw.abort();
        }
    }
}

/// A sled: its sled-agent and the strategy's reconcilers.
pub(super) struct SledHost {
    pub name: String,
    /// Its underlay address: where its zones' NAT entries point.
    pub address: Ipv6Addr,
    pub scrimlet_of: Option<SwitchSlot>,
    pub agent_addr: SocketAddr,
    pub agent: SledAgentContext,
    server: Option<HttpServer<SledAgentContext>>,
    closing: Vec<JoinHandle<()>>,
    tasks: Vec<JoinHandle<()>>,
    /// sled-task: its task's config, this sled's zones' entries.
    config: Option<watch::Sender<Vec<NatEntry>>>,
    /// scrimlet-local: whether it is a scrimlet now.
    pub status: Option<watch::Sender<ScrimletStatus>>,
    /// The strategies that block zone start: each of its zones' start,
    /// in the zone-start NAT path or done.
    pub zone_starts: BTreeMap<ZoneId, ZoneStart>,
    /// Replaced: it never comes back.
    pub retired: bool,
}

impl SledHost {
    pub fn up(&self) -> bool {
        self.server.is_some()
    }
}

/// Its reconcilers and zone starts end with it (see [`SwitchHost`]'s `Drop`).
impl Drop for SledHost {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        for z in self.zone_starts.values() {
            z.task.abort();
        }
    }
}

/// One zone's start in the blocking zone-start NAT path (`legacy`,
/// `scrimlet-local-with-zone-start`): where the path is, and its task.
pub(super) struct ZoneStart {
    pub progress: watch::Receiver<LegacyProgress>,
    task: JoinHandle<()>,
}

/// Every host of the live rack, and the rack-wide inputs of the
/// reconcilers (the zones and the bootstore).
pub(super) struct Hosts {
    pub switches: BTreeMap<SwitchSlot, SwitchHost>,
    pub sleds: Vec<SledHost>,
    pub zones: ZoneSet,
    bootstore: watch::Sender<Option<SystemNetworkingConfig>>,
    sidecars_off: BTreeSet<SwitchSlot>,
}

/// What never changes while a live rack runs, and what its hosts share.
pub(super) struct Env {
    pub spec: RackSpec,
    pub shared: Shared,
    /// The database's inventory of sleds and boundary switches.
    pub inventory: Inventory,
    /// The service zones as the current config places them (every zone of
    /// the config runs in live mode; the inventory reports them all).
    pub desired: watch::Sender<Vec<ServiceZoneNat>>,
    /// Where dpds pull instance NAT from (Nexus's internal API).
    pub nexus: SocketAddr,
}

impl Env {
    fn new_dpd(&self, slot: SwitchSlot) -> DpdContext {
        let trace = self.shared.trace.clone();
        let name = slot.to_string();
        DpdContext::new(DpdState::new(slot.index())).with_observer(Arc::new(
            move |c: &NatChange| trace.record(&name, nat_line(c)),
        ))
    }

    fn new_switch(&self, slot: SwitchSlot, zone: Ipv6Addr) -> SwitchHost {
        SwitchHost {
            slot,
            zone,
            dpd_addr: loopback(),
            mgs_addr: loopback(),
            dpd: self.new_dpd(slot),
            mgs: MgsContext::new(MgsState::new(slot.index())),
            servers: None,
            rpw: None,
            closing: Vec::new(),
        }
    }

    fn new_sled(&self, name: &str, address: Ipv6Addr, scrimlet_of: Option<SwitchSlot>) -> SledHost {
        let trace = self.shared.trace.clone();
        let host = name.to_string();
        self.inventory.add_sled(name, address);
        SledHost {
            name: name.to_string(),
            address,
            scrimlet_of,
            agent_addr: loopback(),
            agent: SledAgentContext::new(SledAgentState::default()).with_observer(Arc::new(
                move |c: &SledAgentChange| trace.record(&host, sled_agent_line(c)),
            )),
            server: None,
            closing: Vec::new(),
            tasks: Vec::new(),
            config: None,
            status: None,
            zone_starts: BTreeMap::new(),
            retired: false,
        }
    }
}

impl Hosts {
    /// The rack's hosts, none started yet.
    pub fn new(env: &Env) -> Self {
        let spec = &env.spec;
        let switches = spec
            .switches
            .iter()
            .map(|s| (s.slot, env.new_switch(s.slot, s.zone_address)))
            .collect();
        let sleds = spec
            .sleds
            .iter()
            .map(|s| env.new_sled(&s.name, s.address, s.scrimlet_of))
            .collect();
        let zones = ZoneSet::from_rack(spec);
        let config = zones.config(1, |i| spec.sleds[i].address);
        env.desired.send_replace(config.service_nat.clone());
        let bootstore = watch::Sender::new(Some(config));
        Hosts {
            switches,
            sleds,
            zones,
            bootstore,
            sidecars_off: BTreeSet::new(),
        }
    }

    /// Starts every host (power on).
    pub async fn start_all(&mut self, env: &Env) -> Result<(), String> {
        let slots: Vec<SwitchSlot> = self.switches.keys().copied().collect();
        for slot in slots {
            if !self.sidecars_off.contains(&slot) {
                self.start_switch(env, slot).await?;
            }
        }
        for i in 0..self.sleds.len() {
            if !self.sleds[i].retired {
                self.start_sled(env, i).await?;
            }
        }
        Ok(())
    }

    /// Stops every host (power loss).
    pub fn stop_all(&mut self) {
        let slots: Vec<SwitchSlot> = self.switches.keys().copied().collect();
        for slot in slots {
            self.stop_switch(slot);
        }
        for i in 0..self.sleds.len() {
            self.stop_sled(i);
        }
    }

    /// Waits until every stopped server has let go of its port.
    pub async fn wait_closed(&mut self) {
        for s in self.switches.values_mut() {
            for c in s.closing.drain(..) {
                let _ = c.await;
            }
        }
        for s in &mut self.sleds {
            for c in s.closing.drain(..) {
                let _ = c.await;
            }
        }
    }

    /// Starts the switch zone in `slot` from nothing; nothing if it runs.
    pub async fn start_switch(&mut self, env: &Env, slot: SwitchSlot) -> Result<(), String> {
        let s = self.switches.get_mut(&slot).expect("a switch of the rack");
        if s.up() {
            return Ok(());
        }
        closed(&mut s.closing, &slot.to_string()).await?;
        *s.dpd.lock() = DpdState::new(slot.index());
        s.dpd.resume();
        s.mgs.resume();
        let dpd = serve_dpd(s.dpd_addr, s.dpd.clone()).map_err(|e| format!("{slot} dpd: {e}"))?;
        let mgs = serve_mgs(s.mgs_addr, s.mgs.clone()).map_err(|e| format!("{slot} MGS: {e}"))?;
        s.dpd_addr = dpd.local_addr();
        s.mgs_addr = mgs.local_addr();
        for (port, real) in [(DPD_PORT, s.dpd_addr), (MGS_PORT, s.mgs_addr)] {
            env.shared.links.serves(&slot.to_string(), real);
            env.shared
                .links
                .maps(SocketAddr::new(s.zone.into(), port), real);
        }
        env.shared.resolver.register(slot, s.zone);
        if env.spec.switch(slot).is_some_and(|sw| sw.uplinked) {
            env.inventory.boundary_switch(slot, s.zone);
        }
        // dendrite of the instance-start networking issue's time (what the `inline` start models) had no
        // NAT RPW: Nexus pushed instance NAT to it. The era says whether
        // anything writes rows for dpd to pull (instance operations, or
        // the legacy era's service-zone NAT tracker).
        if env.shared.era.dpd_nat_rpw == racksim_nexus::era::Task::On {
            // A started dpd's RPW is due at once, its schedule based on
            // this start (dendrite's `WorkflowServer::new`), whatever the
            // timer held from the previous incarnation.
            s.dpd.trigger().trigger();
            s.rpw = Some(tokio::spawn(dpd_nat_rpw(
                slot,
                s.dpd.clone(),
                env.nexus,
                LinkConnector {
                    from: slot.to_string(),
                    links: env.shared.links.clone(),
                },
                env.shared.period,
                env.shared.trace.clone(),
            )));
        }
        s.servers = Some((dpd, mgs));
        Ok(())
    }

    /// Stops the switch zone in `slot`: its table is gone.
    pub fn stop_switch(&mut self, slot: SwitchSlot) {
        let s = self.switches.get_mut(&slot).expect("a switch of the rack");
        if let Some(rpw) = s.rpw.take() {
            rpw.abort();
        }
        if let Some((dpd, mgs)) = s.servers.take() {
            // Requests held by a hang die with the host, so the server
            // can close.
            s.dpd.interrupt();
            s.mgs.interrupt();
            s.closing.push(tokio::spawn(async move {
                let _ = dpd.close().await;
                let _ = mgs.close().await;
            }));
            *s.dpd.lock() = DpdState::new(slot.index());
        }
    }

    /// Starts sled `index` from nothing, with its reconcilers.
    pub async fn start_sled(&mut self, env: &Env, index: usize) -> Result<(), String> {
        let sled = &mut self.sleds[index];
        if sled.up() || sled.retired {
            return Ok(());
        }
        closed(&mut sled.closing, &sled.name).await?;
        *sled.agent.lock() = SledAgentState::default();
        sled.agent.resume();
        let server = serve_sled_agent(sled.agent_addr, sled.agent.clone())
            .map_err(|e| format!("{} sled-agent: {e}", sled.name))?;
        sled.agent_addr = server.local_addr();
        env.shared.links.serves(&sled.name, sled.agent_addr);
        env.shared.links.maps(
            SocketAddr::new(sled.address.into(), SLED_AGENT_PORT),
            sled.agent_addr,
        );
        sled.server = Some(server);
        if env.shared.reconcilers == super::Reconcilers::None {
            return Ok(());
        }
        // The strategy's parts, as live mode runs them on its own hosts
        // (`LiveRack::start` refuses a strategy without them).
        let parts = env.shared.strategy.live().unwrap_or_default();
        if parts.scrimlet_reconcilers {
            self.start_scrimlet_reconcilers(env, index);
        }
        if env.shared.strategy.blocks_zone_start() {
            self.start_zones(env, index);
        }
        if parts.sled_task {
            self.follow_zones(env, index);
        }
        Ok(())
    }

    /// Stops sled `index`: its reconcilers and its sled-agent's state.
    pub fn stop_sled(&mut self, index: usize) {
        let sled = &mut self.sleds[index];
        for t in sled.tasks.drain(..) {
            t.abort();
        }
        sled.config = None;
        sled.status = None;
        for (_, z) in std::mem::take(&mut sled.zone_starts) {
            z.task.abort();
        }
        if let Some(server) = sled.server.take() {
            sled.agent.interrupt();
            sled.closing.push(tokio::spawn(async move {
                let _ = server.close().await;
            }));
            *sled.agent.lock() = SledAgentState::default();
        }
    }

    /// the scrimlet-reconcilers PR's design: a scrimlet reconciles its own switch zone from
    /// the bootstore's config, told its switch zone's services directly
    /// (live mode has no underlay addresses to find them by).
    fn start_scrimlet_reconcilers(&mut self, env: &Env, index: usize) {
        let Some(slot) = self.sleds[index].scrimlet_of else {
            return;
        };
        let switch = &self.switches[&slot];
        let status = watch::Sender::new(if self.sidecars_off.contains(&slot) {
            ScrimletStatus::NotScrimlet
        } else {
            ScrimletStatus::Scrimlet
        });
        let sled = &mut self.sleds[index];
        let (_handle, driver) = scrimlet_reconcilers(
            LinkConnector {
                from: sled.name.clone(),
                links: env.shared.links.clone(),
            },
            SwitchZoneServices::Explicit {
                dpd: switch.dpd_addr,
                mgs: switch.mgs_addr,
            },
            self.bootstore.subscribe(),
            status.subscribe(),
            env.shared.period,
        );
        sled.tasks.push(tokio::spawn(
            driver.instrument(tracing::info_span!("host", host = %sled.name)),
        ));
        sled.status = Some(status);
    }

    /// The strategies that block zone start: each zone of the sled not yet
    /// started runs the zone-start NAT path (omicron's sled-agent before
    /// #9727: look the uplinked switches up, waiting up to 5 minutes for
    /// all, then ensure the zone's entry on each, retrying forever) and is
    /// started when the path returns. The trace says when each zone starts
    /// and how long its start took. Live mode's zones serve nothing: its one
    /// Nexus is up from the start whatever its zone's start does (see
    /// [`super::nexus`]), so a blocked start shows in the trace and the
    /// state, not in what the rack can do.
    fn start_zones(&mut self, env: &Env, index: usize) {
        let sled = &mut self.sleds[index];
        if !sled.up() {
            return;
        }
        let zones = self.zones.on_sled(index);
        // A zone moved away (or expunged) stops, mid-start or not.
        sled.zone_starts.retain(|id, z| {
            let kept = zones.iter().any(|l| l.id == *id);
            if !kept {
                z.task.abort();
            }
            kept
        });
        let expected: BTreeSet<SwitchSlot> = env.spec.uplinked_switches().into_iter().collect();
        for zone in zones {
            if sled.zone_starts.contains_key(&zone.id) {
                continue;
            }
            let entry = zone_nat_entry(&zone.spec, sled.address);
            let (progress, rx) = watch::channel(LegacyProgress::LookingUpSwitches);
            let connector = LinkConnector {
                from: sled.name.clone(),
                links: env.shared.links.clone(),
            };
            let resolver = env.shared.resolver.clone();
            let trace = env.shared.trace.clone();
            let host = sled.name.clone();
            let expected = expected.clone();
            let what = zone.id.to_string();
            // The backoff's jitter only: live mode is not a replay.
            let mut rng = SmallRng::seed_from_u64(u64::from(zone.id.ordinal));
            let task = tokio::spawn(
                async move {
                    trace.record(&host, format!("starting zone {what}"));
                    let started = tokio::time::Instant::now();
                    legacy::ensure_zone_nat(
                        &connector, &resolver, &expected, &entry, &mut rng, &progress,
                    )
                    .await;
                    trace.record(
                        &host,
                        format!(
                            "zone {what} started (start took {})",
                            racksim_sim::trace::fmt_duration(started.elapsed())
                        ),
                    );
                }
                .instrument(tracing::info_span!("host", host = %sled.name)),
            );
            sled.zone_starts
                .insert(zone.id, ZoneStart { progress: rx, task });
        }
    }

    /// sled-task: the sled's task's config is its zones' entries; the task
    /// starts with the sled's first zone and then follows the set.
    fn follow_zones(&mut self, env: &Env, index: usize) {
        let sled = &mut self.sleds[index];
        if !sled.up() {
            return;
        }
        let entries: Vec<NatEntry> = self
            .zones
            .on_sled(index)
            .iter()
            .map(|z| zone_nat_entry(&z.spec, sled.address))
            .collect();
        if let Some(config_rx) = follow_entries(&mut sled.config, entries) {
            let reconciler = SledNatReconciler::new(
                LinkConnector {
                    from: sled.name.clone(),
                    links: env.shared.links.clone(),
                },
                env.shared.resolver.clone(),
            );
            let status = watch::Sender::new(TaskStatus::NotYetRun);
            sled.tasks.push(tokio::spawn(
                run_reconciler_task(reconciler, config_rx, None, env.shared.period, status)
                    .instrument(tracing::info_span!("host", host = %sled.name)),
            ));
        }
    }

    /// The live sled named `name`, by index.
    pub fn sled_index(&self, name: &str) -> Option<usize> {
        self.sleds.iter().position(|s| s.name == name && !s.retired)
    }

    /// The live scrimlet cabled to `slot`.
    pub fn scrimlet_of(&self, slot: SwitchSlot) -> Option<usize> {
        self.sleds
            .iter()
            .position(|s| s.scrimlet_of == Some(slot) && !s.retired)
    }

    /// The sidecar in `slot` loses power (its switch zone with it) or gets
    /// it back; its scrimlet stops or starts being a scrimlet.
    pub async fn sidecar_power(
        &mut self,
        env: &Env,
        slot: SwitchSlot,
        on: bool,
    ) -> Result<(), String> {
        if on {
            self.sidecars_off.remove(&slot);
            self.start_switch(env, slot).await?;
        } else {
            self.sidecars_off.insert(slot);
            self.stop_switch(slot);
        }
        if let Some(status) = self
            .scrimlet_of(slot)
            .and_then(|i| self.sleds[i].status.as_ref())
        {
            status.send_replace(if on {
                ScrimletStatus::Scrimlet
            } else {
                ScrimletStatus::NotScrimlet
            });
        }
        Ok(())
    }

    /// The scrimlet cabled to `slot` dies for good; a new sled takes its
    /// place, with a new switch zone discovery learns. What happened, for
    /// the trace.
    pub async fn replace_scrimlet(
        &mut self,
        env: &Env,
        slot: SwitchSlot,
    ) -> Result<String, String> {
        let old = self.scrimlet_of(slot);
        if let Some(i) = old {
            self.stop_sled(i);
            self.sleds[i].retired = true;
            env.inventory.retire_sled(i);
        }
        self.stop_switch(slot);
        let index = self.sleds.len();
        let zone = switch_zone_address(index);
        // New hardware: the old dpd's faults do not follow, and its
        // servers (closing) held other ports.
        self.switches.insert(slot, env.new_switch(slot, zone));
        self.sidecars_off.remove(&slot);
        let name = format!("sled{index}");
        // Named and addressed as the simulation names a replacement.
        self.sleds
            .push(env.new_sled(&name, sled_address(index), Some(slot)));
        self.start_switch(env, slot).await?;
        self.start_sled(env, index).await?;
        let old = old.map_or_else(|| "(none)".to_string(), |i| self.sleds[i].name.clone());
        Ok(format!(
            "{old} replaced by {name} ({}); {slot}'s zone now at {zone}",
            self.sleds[index].address
        ))
    }

    /// Applies a config change as Nexus's blueprint execution would: the
    /// zones change and the bootstore gets the next generation, or nothing
    /// changes. What happened, for the trace.
    pub fn change_config(&mut self, env: &Env, change: &ConfigChange) -> Result<String, String> {
        let generation = self.bootstore.borrow().as_ref().map_or(0, |c| c.generation);
        let addresses: Vec<Ipv6Addr> = self.sleds.iter().map(|s| s.address).collect();
        let (next, config) = self.zones.change(
            change,
            |name| self.sled_index(name),
            generation,
            |i| addresses[i],
        )?;
        self.zones = next;
        env.desired.send_replace(config.service_nat.clone());
        self.bootstore.send_replace(Some(config));
        // With no reconcilers of racksim's there is no one to tell.
        let racksim_reconcilers = env.shared.reconcilers == super::Reconcilers::Racksim;
        for i in (0..self.sleds.len()).filter(|_| racksim_reconcilers) {
            if env.shared.strategy.live().is_some_and(|p| p.sled_task) {
                self.follow_zones(env, i);
            }
            if env.shared.strategy.blocks_zone_start() {
                self.start_zones(env, i);
            }
        }
        Ok(format!(
            "{change}; the bootstore now holds generation {}",
            generation + 1
        ))
    }
}
