//! Swarm fuzzing: each seed draws a whole fault plan.
//!
//! Swarm testing (Groce et al.): rather than every seed mixing a little of
//! every fault, each seed first decides *which kinds* of fault are enabled
//! at all, then how many of each, when, for how long and on which hosts.
//! Plans that leave most of the vocabulary out reach states a uniform mix
//! almost never does (a dpd that hangs while nothing else is wrong; five
//! partitions and nothing else).
//!
//! A plan has a chaos phase, at the end of which every fault has been
//! undone (partitions healed, switches revealed, hosts restarted, sidecars
//! and the control plane back, the rack booted), then a liveness window in
//! which the rack must converge; the safety invariants hold throughout.
//! The plan is a scenario file ([`plan_text`]): what runs is what that file
//! says, parsed, so `racksim run` on the printed file replays the run
//! exactly.
//!
//! The module's parts: `plan.rs` draws a seed's plan; `failure.rs` says how
//! a run failed, as the shrinker and the known defects compare failures;
//! [`known`] is the file of failures that are recorded, not fixed. Running
//! a range of seeds and summarising it is a campaign
//! ([`crate::campaign::fuzz`]).

mod failure;
pub mod known;
mod plan;

use std::time::Duration;

use racksim_mutants::Mutant;
use racksim_nexus::instances::StartImpl;
use racksim_sim::{rack::RackSpec, EraChoices, ServiceNat};

use crate::{file::Strategy, matrix, runner};

pub use failure::{failure, result_of, Failure, SeedResult};
pub use plan::{plan_text, scenario};

/// How long the rack has to converge once the chaos is over.
pub const LIVENESS: Duration = Duration::from_secs(15 * 60);

/// When after the chaos a refused instance create is retried: long enough
/// for the control plane to be up again after an outage that kept time
/// unsynchronised for minutes (decision 0008): boundary NTP's backed-off
/// polls (<= 105.3 s), then internal NTP's on Nexus's sled (as long), then
/// sled-agent's 5 s retry — 3m36s — with a margin.
pub const CREATE_RETRY: Duration = Duration::from_secs(300);

/// Shortest control-plane outage drawn: short enough that an operator's
/// start can come while the stop still drains in-flight work (which once
/// lost the start; regression `control-plane-restart-while-draining`).
pub const CP_MIN_DOWN: Duration = Duration::from_secs(5);

/// What a fuzz run draws plans for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// A rack shape by name (`madrid`, `standard`).
    pub rack: String,
    /// The service-NAT strategy under test.
    pub strategy: ServiceNat,
    /// How the control plane starts instances.
    pub start: StartImpl,
    /// Mechanisms in another era than the start's preset (`--start
    /// saga+nat-ensure=matches-removed`): fuzzing upstream's code before a
    /// fix.
    pub eras: EraChoices,
}

impl Options {
    pub fn new(rack: &str, strategy: ServiceNat, start: StartImpl) -> Result<Self, String> {
        RackSpec::by_name(rack).ok_or_else(|| {
            format!(
                "unknown rack {rack:?} (expected one of: {})",
                RackSpec::NAMES.join(", ")
            )
        })?;
        Ok(Options {
            rack: rack.to_string(),
            strategy,
            start,
            eras: EraChoices::default(),
        })
    }

    /// The options with `eras` chosen over the start's preset; refused
    /// where no run could tell them from it ([`EraChoices::check`]).
    pub fn with_eras(mut self, eras: EraChoices) -> Result<Self, String> {
        let preset = racksim_sim::Era::of(self.strategy.era(), self.start);
        eras.check(preset, self.start, true)?;
        self.eras = eras;
        Ok(self)
    }

    /// `--start` as given: the start implementation and its era choices.
    pub fn start_arg(&self) -> String {
        format!("{}{}", self.start, self.eras)
    }

    /// The options as `racksim fuzz` flags.
    pub fn flags(&self) -> String {
        format!(
            "--rack {} --strategy {} --start {}",
            self.rack,
            self.strategy,
            self.start_arg()
        )
    }

    /// The `--strategy` a fuzz scenario file is run with.
    pub fn file_strategy(&self) -> Strategy {
        Strategy {
            eras: self.eras,
            ..Strategy::start(self.start)
        }
    }
}

/// Run seed `seed`'s plan (with `mutant`, in test builds).
pub fn run_seed(opts: &Options, seed: u64, mutant: Option<Mutant>) -> SeedResult {
    let scenario = scenario(opts, seed);
    let strategy = opts.file_strategy();
    let mut cfg = runner::config(&scenario, strategy, seed).expect("the plan has its expectation");
    cfg.mutant = mutant;
    let outcome = racksim_sim::run(&cfg);
    result_of(seed, &scenario.expectations[&strategy], &outcome)
}

/// Fuzz `seeds` on `threads` threads; results in seed order whatever the
/// thread count.
pub fn fuzz(
    opts: &Options,
    seeds: &[u64],
    mutant: Option<Mutant>,
    threads: usize,
    progress: &(dyn Fn(usize) + Sync),
) -> Vec<SeedResult> {
    matrix::parallel(seeds.len(), threads, progress, &|i| {
        run_seed(opts, seeds[i], mutant)
    })
}
