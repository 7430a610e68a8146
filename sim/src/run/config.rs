//! Everything a run depends on besides the code: the [`RunConfig`] a
//! scenario file, a sweep or a test builds, and its defaults.

use std::{ops::RangeInclusive, time::Duration};

use racksim_reconciler::discovery::SwitchSlot;

use racksim_nexus::instances::StartImpl;

use super::engine::Engine;
use crate::{era::Era, plan::Plan, rack::RackSpec, strategy::ServiceNat, world::InstanceSpec};

/// How long the rack must stay converged before a run ends as converged.
pub const DEFAULT_STABILITY: Duration = Duration::from_secs(60);

/// The local ports a host's outgoing connections are given: Linux's
/// default `net.ipv4.ip_local_port_range`, 32768-60999 (28,232 ports).
/// illumos, which the rack runs, hands out 32768-65535
/// (`tcp_smallest_anon_port`, `tcp_largest_anon_port`); the TCP model's
/// timers are Linux's (docs/fidelity.md), and so is its range. A port is
/// free again as soon as its connection ends (no TIME-WAIT), so a long
/// run never exhausts it; `sim/tests/tcp.rs` and `sim/tests/run_ports.rs`
/// check that.
pub const EPHEMERAL_PORTS: RangeInclusive<u16> = 32768..=60999;

/// Everything a run depends on besides the code.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub rack: RackSpec,
    pub strategy: ServiceNat,
    pub seed: u64,
    pub plan: Plan,
    /// The run ends unconverged at this simulated time.
    pub deadline: Duration,
    pub stability: Duration,
    pub ntp_return_switch: SwitchSlot,
    /// How the control plane starts instances.
    pub start: StartImpl,
    /// Which control-plane tasks run: by default those of the era the
    /// strategy and `start` stand for ([`Era::of`]). Set
    /// `start` with [`RunConfig::with_start`], which keeps the two in step.
    pub era: Era,
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
    /// [`RunOutcome::uncounted_changes`](super::RunOutcome::uncounted_changes) each step at which they differ
    /// from the last gaps judged: a change of what the checks read that no
    /// `version` bump counted; and check the safety invariants at every
    /// step too, recording each broken one that the scheduled checks (at
    /// every change, and when a time-based invariant's grace runs out)
    /// would have missed. The run itself goes on exactly as without
    /// the knob (the extra look changes nothing it decides), so the two
    /// runs must agree byte for byte; each cell of the scenario suite
    /// (`racksim/tests/cells.rs`) runs its first seeds both ways. A step's
    /// snapshot that the checks read as the judged one
    /// ([`Snapshot::same_as`](crate::check::Snapshot::same_as)) is judged
    /// as it was, without judging it again.
    pub recheck_every_event: bool,
    /// The external-IP pool ([`RunParams::ip_pool`](crate::world::RunParams::ip_pool));
    /// none by default.
    pub ip_pool: Option<racksim_nexus::IpPool>,
    /// How long each fake takes to serve a request
    /// ([`RunParams::service_times`](crate::world::RunParams::service_times)):
    /// upstream's by default.
    pub service_times: crate::services::ServiceTimes,
    /// How time advances: event-driven unless a benchmark asks for the
    /// tick engine ([`Engine`]).
    pub engine: Engine,
    /// Every host's local ports for outgoing connections:
    /// [`EPHEMERAL_PORTS`] unless a test narrows them to catch a
    /// connection that keeps its port after it ended.
    pub ephemeral_ports: RangeInclusive<u16>,
}

impl RunConfig {
    /// A run of `rack` under `strategy` with no plan: a 2-hour deadline, the
    /// default stability window, NTP replies through the first switch, no
    /// instances, saga starts, the control plane of the strategy's era.
    /// Adjust the fields or use the `with_*` methods.
    pub fn new(rack: RackSpec, strategy: ServiceNat, seed: u64) -> Self {
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
            era: Era::of(strategy.era(), StartImpl::Saga),
            instances: Vec::new(),
            mutant: None,
            sabotage: None,
            recheck_every_event: false,
            ip_pool: None,
            service_times: crate::services::ServiceTimes::default(),
            engine: Engine::EventDriven,
            ephemeral_ports: EPHEMERAL_PORTS,
        }
    }

    /// Start instances with `start`, in the control plane of its era.
    pub fn with_start(mut self, start: StartImpl) -> Self {
        self.start = start;
        self.era = Era::of(self.strategy.era(), start);
        self
    }

    /// Run another control plane than the era's (after `with_start`,
    /// which would reset it).
    pub fn with_era(mut self, era: Era) -> Self {
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
