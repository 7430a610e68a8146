//! One workload, run and measured in this process (`racksim bench-one`):
//! a catalogued scenario's run, a rack of N sleds with no plan, or a sweep.

use std::time::{Duration, Instant};

use racksim_reconciler::discovery::SwitchSlot;
use racksim_sim::{rack::RackBuilder, run::RunConfig, Engine, RackSpec, ServiceNat, Verdict};
use serde::{Deserialize, Serialize};

use super::{
    unknown, EngineName, QUICK_SWEEP_SEEDS, RACK_SIM_TIME, SEED, SWEEP_SEEDS, SWEEP_THREADS,
};
use crate::{catalogue, file::Scenario, fuzz, matrix, runner};

/// The soak's simulated time: a thousand hours of a rack that never
/// converges, so its connections go on being made and ended throughout.
pub const SOAK_SIM_TIME: Duration = Duration::from_secs(1000 * 3600);

/// One measurement of one workload, made in its own process.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    pub workload: String,
    /// The engine it ran on ([`EngineName`]).
    pub engine: EngineName,
    /// Simulated hosts in the rack: sleds, switch zones and upstream NTP.
    pub hosts: usize,
    /// Simulation runs in the workload (1, or the sweep's seeds).
    pub runs: u64,
    /// Simulated time, summed over the runs.
    pub sim_secs: f64,
    /// Wall-clock time of the runs (not of process start-up).
    pub wall_secs: f64,
    /// Driver steps (`RunOutcome::events`), summed over the runs.
    pub events: u64,
    /// How the run ended, or for a sweep how many converged.
    pub outcome: String,
    /// Peak resident set size of the process (`VmHWM`), if the OS says.
    pub peak_rss_kib: Option<u64>,
}

/// The size of a workload: as listed ([`Form::listed`]), or a reduced form
/// for the tick engine, on which the listed one would take too long
/// ([`super::peer()`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Form {
    /// Seeds of the sweep workload.
    pub seeds: u64,
    /// For a single run: this simulated time instead of the workload's own
    /// (a rack's simulated time; a scenario's deadline).
    pub sim_time: Option<Duration>,
}

impl Form {
    /// The workload as [`super::WORKLOADS`] lists it (the sweep's seeds depend on
    /// `--quick`).
    pub fn listed(quick: bool) -> Form {
        Form {
            seeds: if quick {
                QUICK_SWEEP_SEEDS
            } else {
                SWEEP_SEEDS
            },
            sim_time: None,
        }
    }
}

/// Run one workload in this process on `engine` and measure it.
pub fn measure(workload: &str, engine: EngineName, form: Form) -> Result<Sample, String> {
    let catalogued = |name: &str| {
        catalogue::get(name).ok_or_else(|| format!("error: no catalogued scenario {name:?}"))
    };
    let e = engine.engine();
    let t = form.sim_time;
    let sample = match workload {
        "madrid-legacy" => one(workload, &catalogued("madrid-one-switch")?, "legacy", e, t)?,
        "madrid-sled-task" => one(
            workload,
            &catalogued("madrid-one-switch")?,
            "sled-task",
            e,
            t,
        )?,
        "race-naive" => one(workload, &catalogued("start-delete-race")?, "naive", e, t)?,
        "race-saga" => one(workload, &catalogued("start-delete-race")?, "saga", e, t)?,
        "rack-8" => rack(workload, 8, t.unwrap_or(RACK_SIM_TIME), e),
        "rack-16" => rack(workload, 16, t.unwrap_or(RACK_SIM_TIME), e),
        "rack-32" => rack(workload, 32, t.unwrap_or(RACK_SIM_TIME), e),
        // The same rack for longer: how cost grows with simulated time.
        "rack-32-2h" => rack(workload, 32, t.unwrap_or(RACK_SIM_TIME * 4), e),
        "rack-32-8h" => rack(workload, 32, t.unwrap_or(RACK_SIM_TIME * 16), e),
        "soak-1000h" => one(
            workload,
            &catalogued("madrid-one-switch")?,
            "legacy",
            e,
            Some(t.unwrap_or(SOAK_SIM_TIME)),
        )?,
        "madrid-sweep" => sweep(workload, &catalogued("madrid-one-switch")?, form.seeds, e)?,
        // A tenth of the sweep's seeds per 1,000 (300, `--quick`: 30), a
        // tenth of that on the 32-sled rack, whose seeds cost about eight
        // times a madrid seed.
        "fuzz-madrid" => fuzz_campaign(workload, "madrid", form.seeds * 3 / 10, e)?,
        "fuzz-standard" => fuzz_campaign(workload, "standard", form.seeds * 3 / 10, e)?,
        "fuzz-full" => fuzz_campaign(workload, "full", form.seeds / 10, e)?,
        other => return Err(unknown(other)),
    };
    Ok(Sample {
        engine,
        peak_rss_kib: peak_rss_kib(),
        ..sample
    })
}

fn hosts(rack: &RackSpec) -> usize {
    rack.sleds.len() + rack.switches.len() + 1
}

fn one(
    workload: &str,
    scenario: &Scenario,
    strategy: &str,
    engine: Engine,
    deadline: Option<Duration>,
) -> Result<Sample, String> {
    let strategy = scenario.strategy(strategy)?;
    let mut cfg = runner::config(scenario, strategy, SEED)
        .ok_or_else(|| format!("error: {} has no strategy {strategy}", scenario.name))?;
    cfg.engine = engine;
    if let Some(d) = deadline {
        cfg.deadline = d;
    }
    Ok(timed(workload, &cfg))
}

/// One run of `cfg`, timed, as a sample.
fn timed(workload: &str, cfg: &RunConfig) -> Sample {
    let started = Instant::now();
    let out = racksim_sim::run(cfg);
    let wall = started.elapsed();
    Sample {
        workload: workload.to_string(),
        engine: EngineName::of(cfg.engine),
        hosts: hosts(&cfg.rack),
        runs: 1,
        sim_secs: out.sim_time.as_secs_f64(),
        wall_secs: wall.as_secs_f64(),
        events: out.events,
        outcome: outcome(&out.verdict),
        peak_rss_kib: None,
    }
}

fn outcome(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Converged { .. } => "converged".into(),
        // A run whose stability window outlasts its deadline ends here
        // with nothing missing: it converged and held to the end.
        Verdict::NotConverged { gaps, .. } if gaps.is_empty() => {
            "converged, held to the end".into()
        }
        Verdict::NotConverged { gaps, .. } => format!("not converged ({} gaps)", gaps.len()),
        Verdict::TestbedError { .. } => "testbed error".into(),
        Verdict::InvariantViolated { invariant, .. } => format!("violated {invariant}"),
    }
}

/// A rack of `sleds` sleds: two scrimlets, then plain sleds, with the
/// service zones spread over the rack — boundary NTP on sled2, Nexus in the
/// middle, external DNS on the last sled, internal DNS just before the middle.
pub fn rack_of(sleds: usize) -> RackSpec {
    assert!(sleds >= 4, "a benchmark rack has at least 4 sleds");
    let mut b = RackBuilder::new(&format!("bench-{sleds}"))
        .scrimlet(SwitchSlot::Switch0)
        .scrimlet(SwitchSlot::Switch1);
    for _ in 2..sleds {
        b = b.sled();
    }
    b.service_zones(2, sleds / 2, sleds - 1)
        .internal_dns_on(sleds / 2 - 1)
        .build()
}

fn rack(workload: &str, sleds: usize, sim_time: Duration, engine: Engine) -> Sample {
    // The stability window equals the deadline, so the run never ends
    // early as converged: it simulates exactly `sim_time`, whatever N.
    let mut cfg =
        RunConfig::new(rack_of(sleds), ServiceNat::SLED_TASK, SEED).with_deadline(sim_time);
    cfg.stability = sim_time;
    cfg.engine = engine;
    timed(workload, &cfg)
}

fn sweep(
    workload: &str,
    scenario: &Scenario,
    seeds: u64,
    engine: Engine,
) -> Result<Sample, String> {
    let strategy = scenario.strategy("sled-task")?;
    let configs = (1..=seeds)
        .map(|seed| {
            let mut cfg = runner::config(scenario, strategy, seed)
                .ok_or_else(|| format!("error: {} has no strategy sled-task", scenario.name))?;
            cfg.engine = engine;
            Ok(cfg)
        })
        .collect::<Result<Vec<_>, String>>()?;
    let started = Instant::now();
    let runs = matrix::parallel(configs.len(), SWEEP_THREADS, &|_| {}, &|i| {
        let out = racksim_sim::run(&configs[i]);
        (out.verdict.converged(), out.sim_time, out.events)
    });
    let wall = started.elapsed();
    let converged = runs.iter().filter(|r| r.0).count();
    Ok(Sample {
        workload: workload.to_string(),
        engine: EngineName::of(engine),
        hosts: hosts(&scenario.rack),
        runs: seeds,
        sim_secs: runs.iter().map(|r| r.1.as_secs_f64()).sum(),
        wall_secs: wall.as_secs_f64(),
        events: runs.iter().map(|r| r.2).sum(),
        outcome: format!("{converged}/{seeds} converged"),
        peak_rss_kib: None,
    })
}

/// `racksim fuzz --seeds 1..SEEDS --rack RACK` of what ships (the
/// scrimlet reconcilers beside the zone-start path, saga starts) on the
/// sweep's threads: each seed draws its plan, runs and is judged, as the
/// command does.
fn fuzz_campaign(workload: &str, rack: &str, seeds: u64, engine: Engine) -> Result<Sample, String> {
    let opts = fuzz::Options::new(
        rack,
        ServiceNat::SCRIMLET_LOCAL_WITH_ZONE_START,
        racksim_nexus::instances::StartImpl::Saga,
    )?;
    let strategy = opts.file_strategy();
    let started = Instant::now();
    let runs = matrix::parallel(seeds as usize, SWEEP_THREADS, &|_| {}, &|i| {
        let seed = i as u64 + 1;
        let scenario = fuzz::scenario(&opts, seed);
        let mut cfg =
            runner::config(&scenario, strategy, seed).expect("the plan has its expectation");
        cfg.engine = engine;
        let out = racksim_sim::run(&cfg);
        let failed = fuzz::result_of(seed, &scenario.expectations[&strategy], &out)
            .failure
            .is_some();
        (failed, out.sim_time, out.events, hosts(&cfg.rack))
    });
    let wall = started.elapsed();
    let failed = runs.iter().filter(|r| r.0).count();
    Ok(Sample {
        workload: workload.to_string(),
        engine: EngineName::of(engine),
        hosts: runs.first().map_or(0, |r| r.3),
        runs: seeds,
        sim_secs: runs.iter().map(|r| r.1.as_secs_f64()).sum(),
        wall_secs: wall.as_secs_f64(),
        events: runs.iter().map(|r| r.2).sum(),
        outcome: format!("{}/{seeds} passed", seeds as usize - failed),
        peak_rss_kib: None,
    })
}

/// This process's peak resident set size, from `/proc/self/status`.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
