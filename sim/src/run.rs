//! The driver: builds the turmoil world for a rack, applies the plan at its
//! times, steps the simulation, checks convergence after every step, and
//! ends with a verdict.

use std::{
    net::{IpAddr, Ipv6Addr},
    sync::Arc,
    time::{Duration, SystemTime},
};

use racksim_reconciler::{discovery::SwitchSlot, instances::StartImpl, task::ScrimletStatus};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use tokio::sync::watch;

use crate::{
    check::{convergence_gaps, invariant_violation, observe},
    era::ControlPlaneEra,
    fakes::dpd::DpdState,
    hosts,
    plan::{Action, Plan, ResolvedStep, Strategy},
    rack::{
        sled_address, switch_zone_address, RackSpec, SledSpec, ZoneKind, UPSTREAM_NTP_ADDR,
        UPSTREAM_NTP_NAME,
    },
    trace::{fmt_duration, fmt_time, Kind, TraceLine},
    world::{DpdFault, HostKind, InstanceRequest, InstanceSpec, NexusCommand, RunParams, World},
};

/// How long the rack must stay converged before a run ends as converged.
pub const DEFAULT_STABILITY: Duration = Duration::from_secs(60);
/// Bounds of the in-rack latency of each message, drawn from the seed per
/// message (turmoil's exponential curve between the bounds). A rack's
/// underlay is one switch hop: tens of microseconds to a millisecond.
/// Simplification: one range for every link; the `latency` plan action sets
/// a link's latency outright.
pub const MIN_LATENCY: Duration = Duration::from_micros(50);
pub const MAX_LATENCY: Duration = Duration::from_millis(1);
/// How often the time-based safety invariants are checked when nothing
/// else happens.
const TIMED_CHECK_PERIOD: Duration = Duration::from_secs(1);

/// How simulated time advances (docs/decisions/0001-time-model.md).
///
/// Every run racksim reports — scenarios, sweeps, snapshots — is
/// [`Engine::EventDriven`]. [`Engine::Tick`] is turmoil's stock tick
/// engine, kept as a peer to measure against (`racksim bench --engine`);
/// it runs the same rack, software and checks, but a run on it is a
/// different run (other instants, other interleavings), not a replay of
/// the event-driven one. Where it differs:
///
/// * Every host runs once per tick on its own runtime (each host's clock
///   is its own), in an order drawn from the seed (turmoil's
///   `enable_random_order`); a tick costs the same whether anything
///   happens or not, so an idle rack costs as much as a busy one.
/// * Messages are delivered at tick boundaries: a message reaches its
///   host at the start of that host's turn in the first tick after its
///   latency (drawn at nanosecond resolution in both modes, see
///   vendor/turmoil/PATCH.md) has passed, so with a 1 ms tick an in-rack
///   hop costs one to two ticks instead of 50 µs..1 ms. Loopback traffic
///   arrives a tick late.
/// * Timers fire at their millisecond inside a host's tick (tokio's own
///   granularity); what they send waits for a tick boundary as above.
/// * The world the driver observes after a tick is stamped with the
///   tick's start (the `drained` instant), up to a tick before the host's
///   own stamp of the change.
/// * Plan steps act between ticks, at the first tick boundary at or after
///   their drawn instant (they are stamped with that boundary), always
///   before the hosts' work of the tick that follows (event-driven runs
///   draw that order from the seed); the driver's checks look at the world
///   after every tick.
/// * The driver counts ticks as its steps ([`RunOutcome::events`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Engine {
    /// racksim's patch: time jumps from one timer or delivery to the next.
    #[default]
    EventDriven,
    /// turmoil's stock engine, stepping by this tick.
    Tick(Duration),
}

impl Engine {
    /// `event-driven`, or `tick` (the tick length is not part of the name).
    pub fn name(&self) -> &'static str {
        match self {
            Engine::EventDriven => "event-driven",
            Engine::Tick(_) => "tick",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Engine::EventDriven => f.write_str("event-driven"),
            Engine::Tick(t) => write!(f, "tick ({})", fmt_duration(*t)),
        }
    }
}

/// Everything a run depends on besides the code.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub rack: RackSpec,
    pub strategy: Strategy,
    pub seed: u64,
    pub plan: Plan,
    /// The run ends unconverged at this simulated time.
    pub deadline: Duration,
    pub stability: Duration,
    pub ntp_return_switch: SwitchSlot,
    /// How the control plane starts instances.
    pub start: StartImpl,
    /// Which control-plane tasks run: by default those of the era the
    /// strategy and `start` stand for ([`ControlPlaneEra::of`]). Set
    /// `start` with [`RunConfig::with_start`], which keeps the two in step.
    pub era: ControlPlaneEra,
    /// Instances the plan refers to.
    pub instances: Vec<InstanceSpec>,
    /// A deliberate reconciler bug for this run (test builds only; see
    /// `racksim_mutants`).
    pub mutant: Option<racksim_mutants::Mutant>,
    /// A deliberate failure of the testbed itself, for tests that prove it
    /// ends the run as a testbed error (see [`crate::testbed`]).
    pub sabotage: Option<crate::testbed::Sabotage>,
    /// Judge the convergence gaps after every driver step, not only when
    /// the world's version moved, and record in
    /// [`RunOutcome::uncounted_changes`] each step at which they differ
    /// from the last gaps judged: a change of what the checks read that no
    /// `version` bump counted. The run itself goes on exactly as without
    /// the knob (the extra look changes nothing it decides), so the two
    /// runs must agree byte for byte; `scenarios/tests/recheck.rs` runs the
    /// catalogue both ways.
    pub recheck_every_event: bool,
    /// The widest window of one NAT statement ([`RunParams::nat_window`]);
    /// zero by default.
    pub nat_window: Duration,
    /// How time advances: event-driven unless a benchmark asks for the
    /// tick engine ([`Engine`]).
    pub engine: Engine,
}

impl RunConfig {
    /// A run of `rack` under `strategy` with no plan: a 2-hour deadline, the
    /// default stability window, NTP replies through the first switch, no
    /// instances, saga starts, the control plane of the strategy's era.
    /// Adjust the fields or use the `with_*` methods.
    pub fn new(rack: RackSpec, strategy: Strategy, seed: u64) -> Self {
        let ntp_return_switch = rack
            .switches
            .first()
            .map(|s| s.slot)
            .unwrap_or(SwitchSlot::Switch0);
        RunConfig {
            rack,
            strategy,
            seed,
            plan: Plan::default(),
            deadline: Duration::from_secs(2 * 3600),
            stability: DEFAULT_STABILITY,
            ntp_return_switch,
            start: StartImpl::Saga,
            era: ControlPlaneEra::of(strategy, StartImpl::Saga),
            instances: Vec::new(),
            mutant: None,
            sabotage: None,
            recheck_every_event: false,
            nat_window: Duration::ZERO,
            engine: Engine::EventDriven,
        }
    }

    /// Start instances with `start`, in the control plane of its era.
    pub fn with_start(mut self, start: StartImpl) -> Self {
        self.start = start;
        self.era = ControlPlaneEra::of(self.strategy, start);
        self
    }

    /// Run another control plane than the era's (after `with_start`,
    /// which would reset it).
    pub fn with_era(mut self, era: ControlPlaneEra) -> Self {
        self.era = era;
        self
    }

    pub fn with_plan(mut self, plan: Plan) -> Self {
        self.plan = plan;
        self
    }

    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    pub fn with_ntp_return_switch(mut self, slot: SwitchSlot) -> Self {
        self.ntp_return_switch = slot;
        self
    }
}

/// The exit status of `racksim` commands when a run ended in a testbed
/// error (0 converged / expectation held, 1 not, 2 bad input).
pub const TESTBED_ERROR_EXIT: i32 = 3;

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Converged at `at` (after the last plan step) and stayed so for the
    /// stability window.
    Converged { at: Duration },
    /// Still not converged at the deadline; what was missing then.
    NotConverged {
        deadline: Duration,
        gaps: Vec<String>,
    },
    /// The testbed could not judge the run: a fake's server stopped, a host
    /// task could not start (a socket it could not bind), or a host's
    /// software panicked or returned an error (in a fake, or in the code
    /// under test: `error` says which). It is evidence neither for nor
    /// against the strategy, and no expectation accepts it (`racksim run`
    /// exits with [`TESTBED_ERROR_EXIT`]).
    TestbedError {
        at: Duration,
        /// The host whose software failed (`?` when unknown).
        host: String,
        error: String,
    },
    /// A safety invariant broke; the run stops at the first violation.
    InvariantViolated {
        at: Duration,
        invariant: &'static str,
        message: String,
        /// The last trace line before the violation was seen: the event
        /// that broke it.
        event: Option<String>,
    },
}

impl Verdict {
    pub fn converged(&self) -> bool {
        matches!(self, Verdict::Converged { .. })
    }

    /// The testbed itself failed; see [`Verdict::TestbedError`].
    pub fn is_testbed_error(&self) -> bool {
        matches!(self, Verdict::TestbedError { .. })
    }

    /// Lines of the verdict, for the end of the trace and the CLI.
    pub fn lines(&self) -> Vec<String> {
        match self {
            Verdict::Converged { at } => {
                vec![format!(
                    "CONVERGED at {} (time to converge {})",
                    fmt_time(*at),
                    fmt_duration(*at)
                )]
            }
            Verdict::NotConverged { deadline, gaps } => {
                let mut v = vec![format!(
                    "NOT CONVERGED by the deadline {}",
                    fmt_time(*deadline)
                )];
                v.extend(gaps.iter().map(|g| format!("  - {g}")));
                v
            }
            Verdict::TestbedError { at, host, error } => vec![
                format!("TESTBED ERROR at {} on {host}: {error}", fmt_time(*at)),
                "  the testbed failed: this run says nothing about the strategy".to_string(),
            ],
            Verdict::InvariantViolated {
                at,
                invariant,
                message,
                event,
            } => {
                let mut v = vec![format!(
                    "INVARIANT VIOLATED at {}: {invariant}: {message}",
                    fmt_time(*at)
                )];
                if let Some(e) = event {
                    v.push(format!("  first violating event: {e}"));
                }
                v
            }
        }
    }
}

/// Result of a run.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// The plan with its drawn times.
    pub steps: Vec<ResolvedStep>,
    pub trace: Vec<TraceLine>,
    pub verdict: Verdict,
    /// Simulated time at the end of the run.
    pub sim_time: Duration,
    /// Simulation steps the driver took (the unit of simulation cost).
    pub events: u64,
    /// How long each zone start took: `(sled, zone, duration)`.
    pub zone_starts: Vec<(String, ZoneKind, Duration)>,
    /// When the rack first converged, and each fault's repair time.
    pub timing: crate::timing::Timing,
    /// With [`RunConfig::recheck_every_event`]: each instant at which the
    /// gaps had changed though the world's version had not, with the gaps
    /// the driver held and those it would have found. Empty otherwise, and
    /// empty in a sound world.
    pub uncounted_changes: Vec<String>,
}

/// The fixed epoch of every run: wall-clock time never enters a simulation.
fn epoch() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600) // 2026-01-01
}

/// A simulated host the driver knows by name.
#[derive(Clone, Debug)]
struct HostEntry {
    name: String,
    addr: Ipv6Addr,
    kind: HostKind,
    /// Gone for good (a replaced scrimlet and its switch zone).
    retired: bool,
}

/// The driver's view of the simulation: turmoil plus the hosts by name.
struct Driver<'a> {
    sim: turmoil::Sim<'a>,
    world: World,
    hosts: Vec<HostEntry>,
}

impl<'a> Driver<'a> {
    fn add_host(&mut self, name: String, addr: Ipv6Addr, kind: HostKind) {
        let w = self.world.clone();
        match kind {
            HostKind::SwitchZone(slot) => self.sim.host(IpAddr::V6(addr), move || {
                hosts::switch_zone::run(w.clone(), slot)
            }),
            HostKind::Sled(index) => self
                .sim
                .host(IpAddr::V6(addr), move || hosts::sled::run(w.clone(), index)),
            HostKind::UpstreamNtp => self
                .sim
                .host(IpAddr::V6(addr), move || hosts::upstream::run(w.clone())),
        }
        self.hosts.push(HostEntry {
            name,
            addr,
            kind,
            retired: false,
        });
    }

    fn live(&self, name: &str) -> Option<HostEntry> {
        self.hosts
            .iter()
            .find(|h| h.name == name && !h.retired)
            .cloned()
    }

    fn addrs(&self, names: &[String]) -> Vec<IpAddr> {
        names
            .iter()
            .filter_map(|n| self.live(n))
            .map(|h| IpAddr::V6(h.addr))
            .collect()
    }

    fn crash(&mut self, host: &HostEntry) {
        self.sim.crash(IpAddr::V6(host.addr));
        self.world.host_down(&host.kind);
    }

    fn restart(&mut self, host: &HostEntry) {
        // Whatever the software held is lost, as in a reboot.
        self.world.host_down(&host.kind);
        self.sim.bounce(IpAddr::V6(host.addr));
    }

    fn scrimlet_of(&self, slot: SwitchSlot) -> Option<HostEntry> {
        let sleds = self.world.lock().sleds.specs.clone();
        self.hosts
            .iter()
            .find(|h| {
                !h.retired
                    && matches!(h.kind, HostKind::Sled(i) if sleds[i].scrimlet_of == Some(slot))
            })
            .cloned()
    }

    fn set_scrimlet(&self, slot: SwitchSlot, status: ScrimletStatus) {
        if let Some(HostEntry {
            kind: HostKind::Sled(index),
            ..
        }) = self.scrimlet_of(slot)
        {
            if let Some(tx) = self.world.lock().sleds.scrimlet_status.get(&index) {
                tx.send_replace(status);
            }
        }
    }

    fn rack_hosts(&self) -> Vec<HostEntry> {
        self.hosts
            .iter()
            .filter(|h| !h.retired && h.kind != HostKind::UpstreamNtp)
            .cloned()
            .collect()
    }

    /// Apply one plan step at simulated time `now`.
    fn apply(&mut self, now: Duration, action: &Action) {
        let world = self.world.clone();
        match action {
            Action::HideSwitch(s) => {
                world.lock().dns.hidden.insert(*s);
            }
            Action::RevealSwitch(s) => {
                world.lock().dns.hidden.remove(s);
            }
            Action::Crash(name) => {
                if let Some(h) = self.live(name) {
                    self.crash(&h);
                }
            }
            Action::Restart(name) => {
                if let Some(h) = self.live(name) {
                    self.restart(&h);
                }
            }
            Action::DpdRestart(slot) => {
                // dpd alone restarts: an empty table at generation 0, and
                // its NAT RPW starts over, as a starting dpd's does (at its
                // next look at its timer, within a second: `restart`
                // takes no instant, since the plan does not run on the
                // zone's clock). Simplified: the API does not go away
                // meanwhile.
                let mut st = world.lock();
                if st.switches.dpd.contains_key(slot) {
                    st.switches.dpd.insert(*slot, DpdState::new(slot.index()));
                    if let Some(rpw) = st.switches.nat_rpw.get(slot) {
                        rpw.restart();
                    }
                }
            }
            Action::Partition { a, b, oneway } | Action::Heal { a, b, oneway } => {
                let heal = matches!(action, Action::Heal { .. });
                {
                    let mut st = world.lock();
                    for x in a {
                        for y in b {
                            let mut pairs = vec![(x.clone(), y.clone())];
                            if !*oneway {
                                pairs.push((y.clone(), x.clone()));
                            }
                            for pair in pairs {
                                if heal {
                                    st.net.cuts.remove(&pair);
                                } else {
                                    st.net.cuts.insert(pair);
                                }
                            }
                        }
                    }
                    if heal {
                        st.net.last_heal = now;
                    }
                    st.version += 1;
                }
                for x in self.addrs(a) {
                    for y in self.addrs(b) {
                        match (heal, *oneway) {
                            (false, false) => self.sim.partition(x, y),
                            (false, true) => self.sim.partition_oneway(x, y),
                            (true, false) => self.sim.repair(x, y),
                            (true, true) => self.sim.repair_oneway(x, y),
                        }
                    }
                }
            }
            Action::Latency { a, b, latency } => {
                for x in self.addrs(a) {
                    for y in self.addrs(b) {
                        self.sim.set_link_latency(x, y, *latency);
                    }
                }
            }
            Action::DpdErrors { switch, window } => {
                world.lock().switches.faults.insert(
                    *switch,
                    DpdFault::Errors {
                        until: now + *window,
                    },
                );
            }
            Action::DpdHang { switch, window } => {
                world.lock().switches.faults.insert(
                    *switch,
                    DpdFault::Hang {
                        until: now + *window,
                    },
                );
            }
            Action::SidecarPowerOff(slot) => {
                if let Some(h) = self.live(&slot.to_string()) {
                    self.crash(&h);
                }
                self.set_scrimlet(*slot, ScrimletStatus::NotScrimlet);
            }
            Action::SidecarPowerOn(slot) => {
                if let Some(h) = self.live(&slot.to_string()) {
                    self.restart(&h);
                }
                self.set_scrimlet(*slot, ScrimletStatus::Scrimlet);
            }
            Action::ReplaceScrimlet(slot) => self.replace_scrimlet(now, *slot),
            Action::ControlPlaneDown => world.command_nexus(NexusCommand::Stop),
            Action::ControlPlaneCrash => world.command_nexus(NexusCommand::Crash),
            Action::ControlPlaneUp => world.command_nexus(NexusCommand::Run),
            Action::PowerOff => {
                for h in self.rack_hosts() {
                    self.crash(&h);
                }
            }
            Action::ColdBoot => {
                for h in self.rack_hosts() {
                    self.restart(&h);
                }
            }
            Action::InstanceCreate { instance, sled }
            | Action::InstanceStart { instance, sled } => {
                let (Some(id), Some(s)) = (self.instance_id(instance), self.sled_index(sled))
                else {
                    return;
                };
                let req = if matches!(action, Action::InstanceCreate { .. }) {
                    InstanceRequest::Create {
                        instance: id,
                        sled: s,
                    }
                } else {
                    InstanceRequest::Start {
                        instance: id,
                        sled: s,
                    }
                };
                self.instance_request(now, req);
            }
            Action::InstanceStop { instance } => {
                if let Some(id) = self.instance_id(instance) {
                    self.instance_request(now, InstanceRequest::Stop { instance: id });
                }
            }
            Action::InstanceDelete { instance } => {
                if let Some(id) = self.instance_id(instance) {
                    self.instance_request(now, InstanceRequest::Delete { instance: id });
                }
            }
            Action::ConfigChange(change) => {
                let line = match world.change_config(change) {
                    Ok(done) | Err(done) => format!("  {done}"),
                };
                world.trace_at(now, "plan", Kind::Plan, line);
            }
            Action::StaleEntry { switch, zone } => {
                let zones = world.zones();
                if let Some(z) = zones.zones().iter().find(|z| z.id.kind == *zone) {
                    let mut e = world.zone_nat_entry(&z.spec);
                    e.target.inner_mac.a[5] ^= 0xff;
                    let mut st = world.lock();
                    if let Some(dpd) = st.switches.dpd.get_mut(switch) {
                        let _ = dpd.ipv4_delete(e.external_ip, e.first_port);
                        let _ = dpd.ipv4_create(e.external_ip, e.first_port, e.last_port, e.target);
                    }
                }
            }
            Action::LostEntry { switch, zone } => {
                let zones = world.zones();
                if let Some(z) = zones.zones().iter().find(|z| z.id.kind == *zone) {
                    let e = world.zone_nat_entry(&z.spec);
                    let mut st = world.lock();
                    if let Some(dpd) = st.switches.dpd.get_mut(switch) {
                        let _ = dpd.ipv4_delete(e.external_ip, e.first_port);
                    }
                }
            }
        }
        world.lock().version += 1;
    }

    fn instance_id(&self, name: &str) -> Option<u32> {
        self.world
            .params
            .instances
            .iter()
            .position(|i| i.name == name)
            .map(|i| i as u32 + 1)
    }

    fn sled_index(&self, name: &str) -> Option<u32> {
        let st = self.world.lock();
        st.sleds
            .specs
            .iter()
            .enumerate()
            .find(|(i, s)| s.name == name && !st.sleds.retired.contains(i))
            .map(|(i, _)| i as u32)
    }

    /// Hand a request to Nexus's API, as a client would; while the control
    /// plane is down there is no API to take it.
    fn instance_request(&self, now: Duration, req: InstanceRequest) {
        if self.world.lock().control_plane_up() {
            self.world.request(req);
        } else {
            self.world.trace_at(
                now,
                "plan",
                Kind::Plan,
                "  rejected: the control plane is down (no instance API)",
            );
        }
    }

    fn replace_scrimlet(&mut self, now: Duration, slot: SwitchSlot) {
        let world = self.world.clone();
        let old_sled = self.scrimlet_of(slot);
        let old_zone = self.live(&slot.to_string());
        for old in [old_sled.clone(), old_zone.clone()].into_iter().flatten() {
            self.crash(&old);
            if let Some(h) = self.hosts.iter_mut().find(|h| h.addr == old.addr) {
                h.retired = true;
            }
        }
        let (index, sled_addr, zone_addr) = {
            let mut st = world.lock();
            let index = st.sleds.specs.len();
            let sled = SledSpec {
                name: format!("sled{index}"),
                address: sled_address(index),
                scrimlet_of: Some(slot),
            };
            let zone_addr = switch_zone_address(index);
            if let Some(old) = &old_zone {
                st.names.insert(old.addr, format!("retired-{slot}"));
            }
            st.names.insert(sled.address, sled.name.clone());
            st.names.insert(zone_addr, slot.to_string());
            st.switches.addresses.insert(slot, zone_addr);
            // New hardware: faults injected into the old dpd do not follow.
            st.switches.faults.remove(&slot);
            st.sleds
                .scrimlet_status
                .insert(index, watch::Sender::new(ScrimletStatus::Scrimlet));
            let addr = sled.address;
            st.sleds.specs.push(sled);
            if let Some(HostEntry {
                kind: HostKind::Sled(old),
                ..
            }) = &old_sled
            {
                st.sleds.retired.insert(*old);
            }
            (index, addr, zone_addr)
        };
        world.trace_at(
            now,
            "plan",
            Kind::Plan,
            format!(
                "  {} replaced by sled{index} ({sled_addr}); {slot}'s zone now at {zone_addr}",
                old_sled.map(|h| h.name).unwrap_or_else(|| "(none)".into())
            ),
        );
        self.add_host(slot.to_string(), zone_addr, HostKind::SwitchZone(slot));
        self.add_host(format!("sled{index}"), sled_addr, HostKind::Sled(index));
    }
}

/// Step the simulation up to `limit` (`limit` = now: run what is due now,
/// without moving time). A host's software that panics or fails ends the
/// run as a testbed error. (turmoil, built with `--cfg tokio_unstable`,
/// shuts the runtime down on a panic in any host task, and the panic unwinds
/// out of the step; without the flag a panicking task would vanish
/// silently, which is why the sim crate refuses to build without it.)
fn step_hosts(driver: &mut Driver<'_>, world: &World, limit: Duration) -> Result<(), Verdict> {
    let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        driver.sim.step_until(limit)
    }));
    let panicked = crate::testbed::take_panic();
    let error = match stepped {
        Ok(Ok(_)) => return Ok(()),
        // A host's top-level future failed (if by a panic, the hook noted
        // it).
        Ok(Err(e)) => match &panicked.message {
            Some(m) => format!("panicked: {m}"),
            None => e.to_string(),
        },
        Err(payload) => format!(
            "panicked: {}",
            panicked
                .message
                .clone()
                .unwrap_or_else(|| crate::testbed::panic_message(payload.as_ref()))
        ),
    };
    let host = match panicked.host {
        Some(IpAddr::V6(addr)) => world.name_of(addr),
        Some(other) => other.to_string(),
        None => "?".to_string(),
    };
    Err(Verdict::TestbedError {
        at: panicked.at.unwrap_or_else(|| driver.sim.elapsed()),
        host,
        error,
    })
}

/// Run one simulation to its verdict.
///
/// Panics if `cfg.mutant` names a mutant and this build has none: callers
/// check `racksim_mutants::COMPILED` first.
pub fn run(cfg: &RunConfig) -> RunOutcome {
    // Every host of this run executes on this thread, so the selection is
    // this run's alone.
    let _mutant = racksim_mutants::select(cfg.mutant).unwrap_or_else(|e| panic!("{e}"));
    let steps = cfg.plan.resolve(cfg.seed);
    let world = World::new(RunParams {
        rack: Arc::new(cfg.rack.clone()),
        strategy: cfg.strategy,
        start: cfg.start,
        era: cfg.era,
        instances: cfg.instances.clone(),
        seed: cfg.seed,
        ntp_return_switch: cfg.ntp_return_switch,
        sabotage: cfg.sabotage.clone(),
        nat_window: cfg.nat_window,
    });
    crate::testbed::install_panic_hook();
    crate::testbed::clear_panic();
    // The reconciler's log events become trace lines, for this run only.
    let _logging = crate::logging::install(&world);
    let mut builder = turmoil::Builder::new();
    builder
        .rng_seed(cfg.seed)
        .epoch(epoch())
        .ip_version(turmoil::IpVersion::V6)
        .min_message_latency(MIN_LATENCY)
        .max_message_latency(MAX_LATENCY)
        // The driver enforces the deadline; turmoil's own limit is a backstop.
        .simulation_duration(cfg.deadline + Duration::from_secs(3600));
    match cfg.engine {
        // Event-driven: time jumps from one timer or delivery to the next;
        // see docs/decisions/0001-time-model.md.
        Engine::EventDriven => builder.event_driven(true),
        // turmoil as published (see `Engine` for what differs); hosts
        // ready in a tick run in a seeded order, not registration order.
        Engine::Tick(tick) => builder
            .event_driven(false)
            .tick_duration(tick)
            .enable_random_order(),
    };
    let tick_mode = matches!(cfg.engine, Engine::Tick(_));
    let sim = builder.build();
    let mut driver = Driver {
        sim,
        world: world.clone(),
        hosts: Vec::new(),
    };
    for sw in &cfg.rack.switches {
        driver.add_host(sw.name(), sw.zone_address, HostKind::SwitchZone(sw.slot));
    }
    for (i, sled) in cfg.rack.sleds.iter().enumerate() {
        driver.add_host(sled.name.clone(), sled.address, HostKind::Sled(i));
    }
    driver.add_host(
        UPSTREAM_NTP_NAME.to_string(),
        UPSTREAM_NTP_ADDR,
        HostKind::UpstreamNtp,
    );

    let last_step = steps.last().map(|s| s.at).unwrap_or_default();
    let mut pending = steps.iter().peekable();
    let mut converged_since: Option<Duration> = None;
    let mut gaps: Vec<String> = Vec::new();
    let mut checked_version = u64::MAX;
    let mut next_timed_check = Duration::ZERO;
    let mut events = 0u64;
    let mut uncounted_changes = Vec::new();
    let mut timeline = crate::timing::Timeline::default();
    // The instant whose work the last step ran: the world as observed now
    // is as that instant left it (a step runs everything due at one
    // instant, then moves time to the next one, where nothing has run
    // yet). Changes are stamped with it, not with `now`, which is however
    // far away the next event happens to be.
    let mut drained = Duration::ZERO;
    let mut plan_order = SmallRng::seed_from_u64(world.derive_seed("plan-order", 0));
    let verdict = loop {
        let now = driver.sim.elapsed();
        // Nothing after a failure of the testbed is evidence: stop there.
        if let Some(f) = world.lock().testbed_error.clone() {
            break Verdict::TestbedError {
                at: f.at,
                host: f.host,
                error: f.error,
            };
        }
        // The gaps change only when the world does; safety is checked then
        // too, and at least once a simulated second for the time-based
        // invariant. One snapshot of the world serves both.
        let version = world.lock().version;
        let changed = version != checked_version;
        if cfg.recheck_every_event && !changed {
            let fresh = convergence_gaps(&world, &observe(&world));
            if fresh != gaps {
                uncounted_changes.push(format!(
                    "{} (version {version}): judged gaps {gaps:?}, actual {fresh:?}",
                    fmt_time(drained)
                ));
            }
        }
        if changed || now >= next_timed_check {
            let snapshot = observe(&world);
            if changed {
                checked_version = version;
                gaps = convergence_gaps(&world, &snapshot);
                timeline.sample(drained, gaps.is_empty());
            }
            next_timed_check = now + TIMED_CHECK_PERIOD;
            if let Some(v) = invariant_violation(&world, &snapshot, now) {
                let event = {
                    let st = world.lock();
                    let found = v.cause.as_ref().and_then(|(host, text)| {
                        st.trace
                            .iter()
                            .rev()
                            .find(|l| &l.host == host && l.text.contains(text.as_str()))
                    });
                    found.or(st.trace.last()).map(|l| l.to_string())
                };
                break Verdict::InvariantViolated {
                    // A state that broke an invariant broke it when it was
                    // made; a time-based one breaks when its time is up.
                    at: if changed { drained } else { now },
                    invariant: v.invariant,
                    message: v.message,
                    event,
                };
            }
        }
        if gaps.is_empty() && drained >= last_step && pending.peek().is_none() {
            let since = *converged_since.get_or_insert(drained);
            if now - since >= cfg.stability {
                break Verdict::Converged { at: since };
            }
        } else {
            converged_since = None;
        }
        if now >= cfg.deadline {
            break Verdict::NotConverged {
                deadline: cfg.deadline,
                gaps,
            };
        }
        // Stop at the next instant the driver must act on: a plan step, the
        // end of the stability window, a timed check, the deadline.
        let mut limit = cfg.deadline.min(next_timed_check);
        if let Some(since) = converged_since {
            limit = limit.min(since + cfg.stability);
        }
        // The plan's steps due now act at this instant, together and in
        // plan order. Whether they act before or after the hosts' work due
        // at the same instant is drawn from the seed, as turmoil draws the
        // order of hosts ready at one instant: the simulator picks no
        // winner. (Hosts' work "at an instant" is everything runnable then
        // without time passing; a message sent then arrives later.) Steps
        // at 0s are the exception: they are the rack's condition as it
        // boots (madrid's hidden switch, a stale entry already in the
        // ASIC), so they act before any host's software starts. On the
        // tick engine a step cannot run "what is due now" without moving
        // time a tick, so steps always act between ticks, before the next.
        if pending.peek().is_some_and(|s| s.at <= now) {
            if now > Duration::ZERO && !tick_mode && plan_order.random_bool(0.5) {
                // The hosts first: run what is due now, time stays put.
                if let Err(e) = step_hosts(&mut driver, &world, now) {
                    break e;
                }
            }
            while let Some(step) = pending.next_if(|s| s.at <= now) {
                world.record(
                    TraceLine::new(now, "plan", Kind::Plan, step.action.to_string())
                        .field("step", step.action.kind()),
                );
                driver.apply(now, &step.action);
            }
        }
        if let Some(step) = pending.peek() {
            limit = limit.min(step.at);
        }
        // (On the tick engine `step_until` is one tick whatever `limit`:
        // the loop comes round every tick and acts at the first one at or
        // after each of these instants.)
        events += 1;
        drained = now;
        if let Err(e) = step_hosts(&mut driver, &world, limit) {
            break e;
        }
    };
    let sim_time = driver.sim.elapsed();
    drop(driver);
    for line in verdict.lines() {
        world.trace_at(sim_time, "verdict", Kind::Verdict, line);
    }
    let zone_starts = world.lock().sleds.zone_starts.clone();
    let timing = timeline.timing(&steps, cfg.stability, sim_time);
    RunOutcome {
        steps,
        trace: world.take_trace(),
        verdict,
        sim_time,
        events,
        zone_starts,
        timing,
        uncounted_changes,
    }
}
