//! `racksim bench`: what a simulation costs.
//!
//! Each workload is measured in a child process of its own (the hidden
//! `racksim bench-one WORKLOAD`, which prints one JSON line), so each
//! measurement's peak RSS (`VmHWM`) is that workload's alone and no run warms
//! another's caches or allocator. The parent repeats every workload `reps`
//! times and reports, per workload, the deterministic figures (simulated
//! time, driver steps, hosts) once and the wall-clock ones as a median with
//! their spread (min..max).
//!
//! `--engine tick|both` also measures the workloads on turmoil's stock tick
//! engine with a 1 ms tick ([`racksim_sim::Engine::Tick`], [`PEER_TICK`]), a
//! peer measured in the same run on the same machine. A tick costs every
//! host a turn whether anything happens or not, so workloads that simulate
//! hours or a thousand runs would take minutes to hours there: the tick
//! engine runs those in a reduced form ([`peer`]), which `both` runs on the
//! event-driven engine as well, so each ratio compares the same runs; the
//! output names every reduced form and every skipped workload. Each
//! tick-engine form runs once unless `--reps` says otherwise.
//!
//! Timings are for people and machines to read, never for tests to assert.

use std::{
    io::IsTerminal,
    process::Command,
    time::{Duration, Instant},
};

use racksim_reconciler::discovery::SwitchSlot;
use racksim_sim::{rack::RackBuilder, run::RunConfig, Engine, RackSpec, Strategy, Verdict};
use serde::{Deserialize, Serialize};

use racksim_sim::trace::fmt_duration;

use crate::{catalogue, file::Scenario, matrix, runner};

/// The seed of every single-run workload.
pub const SEED: u64 = 7;
/// Seeds of the sweep workload (seeds `1..=N`), and with `--quick`.
pub const SWEEP_SEEDS: u64 = 1000;
pub const QUICK_SWEEP_SEEDS: u64 = 100;
/// Worker threads of the sweep workload.
pub const SWEEP_THREADS: usize = 2;
/// Simulated time of every N-sled rack run: the same for every N, so the
/// cost per host compares.
pub const RACK_SIM_TIME: Duration = Duration::from_secs(30 * 60);
/// Repetitions without `--reps`, and with `--quick`.
pub const DEFAULT_REPS: usize = 5;
pub const QUICK_REPS: usize = 1;
/// Repetitions of each tick-engine measurement without `--reps`.
pub const TICK_REPS: usize = 1;

/// The tick of the peer engine (turmoil's stock tick engine).
pub const PEER_TICK: Duration = Duration::from_millis(1);

/// The engine a measurement ran on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum EngineName {
    /// racksim's event-driven engine (what every other command runs).
    EventDriven,
    /// turmoil's stock tick engine with a [`PEER_TICK`] tick.
    Tick,
}

impl EngineName {
    pub fn engine(self) -> Engine {
        match self {
            EngineName::EventDriven => Engine::EventDriven,
            EngineName::Tick => Engine::Tick(PEER_TICK),
        }
    }

    fn of(engine: Engine) -> EngineName {
        match engine {
            Engine::EventDriven => EngineName::EventDriven,
            Engine::Tick(_) => EngineName::Tick,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EngineName::EventDriven => "event-driven",
            EngineName::Tick => "tick",
        }
    }
}

/// Which engines `racksim bench --engine` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Engines {
    EventDriven,
    Tick,
    /// Each workload on both, side by side, with the ratio.
    Both,
}

impl Engines {
    fn has(self, e: EngineName) -> bool {
        match self {
            Engines::Both => true,
            Engines::EventDriven => e == EngineName::EventDriven,
            Engines::Tick => e == EngineName::Tick,
        }
    }
}

/// The workloads, in the order they run and print: `(name, description)`.
pub const WORKLOADS: [(&str, &str); 10] = [
    (
        "madrid-legacy",
        "madrid-one-switch --strategy legacy --seed 7 (runs to its 2h deadline)",
    ),
    (
        "madrid-sled-task",
        "madrid-one-switch --strategy sled-task --seed 7",
    ),
    ("race-naive", "start-delete-race --strategy naive --seed 7"),
    ("race-saga", "start-delete-race --strategy saga --seed 7"),
    (
        "rack-8",
        "8 sleds (2 scrimlets), sled-task, no plan, 30m simulated",
    ),
    (
        "rack-16",
        "16 sleds (2 scrimlets), sled-task, no plan, 30m simulated",
    ),
    (
        "rack-32",
        "32 sleds (2 scrimlets), sled-task, no plan, 30m simulated",
    ),
    (
        "rack-32-2h",
        "32 sleds (2 scrimlets), sled-task, no plan, 2h simulated",
    ),
    (
        "rack-32-8h",
        "32 sleds (2 scrimlets), sled-task, no plan, 8h simulated",
    ),
    (
        "madrid-sweep",
        "sweep madrid-one-switch --strategy sled-task, seeds 1..=1000 (--quick: 100), 2 threads",
    ),
];

/// Names of the workloads.
pub fn names() -> Vec<&'static str> {
    WORKLOADS.iter().map(|(n, _)| *n).collect()
}

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
/// ([`peer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Form {
    /// Seeds of the sweep workload.
    pub seeds: u64,
    /// For a single run: this simulated time instead of the workload's own
    /// (a rack's simulated time; a scenario's deadline).
    pub sim_time: Option<Duration>,
}

impl Form {
    /// The workload as [`WORKLOADS`] lists it (the sweep's seeds depend on
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
        "madrid-sweep" => sweep(workload, &catalogued("madrid-one-switch")?, form.seeds, e)?,
        other => return Err(unknown(other)),
    };
    Ok(Sample {
        engine,
        peak_rss_kib: peak_rss_kib(),
        ..sample
    })
}

fn unknown(name: &str) -> String {
    format!(
        "error: no benchmark workload {name:?} (known: {})",
        names().join(", ")
    )
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
    let variant = scenario.variant(strategy)?;
    let mut cfg = runner::config(scenario, variant, SEED)
        .ok_or_else(|| format!("error: {} has no strategy {strategy}", scenario.name))?;
    cfg.engine = engine;
    if let Some(d) = deadline {
        cfg.deadline = d;
    }
    let started = Instant::now();
    let out = racksim_sim::run(&cfg);
    let wall = started.elapsed();
    Ok(Sample {
        workload: workload.to_string(),
        engine: EngineName::of(engine),
        hosts: hosts(&scenario.rack),
        runs: 1,
        sim_secs: out.sim_time.as_secs_f64(),
        wall_secs: wall.as_secs_f64(),
        events: out.events,
        outcome: outcome(&out.verdict),
        peak_rss_kib: None,
    })
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
    let rack = rack_of(sleds);
    let hosts = hosts(&rack);
    // The stability window equals the deadline, so the run never ends
    // early as converged: it simulates exactly `sim_time`, whatever N.
    let mut cfg = RunConfig::new(rack, Strategy::SledTask, SEED).with_deadline(sim_time);
    cfg.stability = sim_time;
    cfg.engine = engine;
    let started = Instant::now();
    let out = racksim_sim::run(&cfg);
    let wall = started.elapsed();
    Sample {
        workload: workload.to_string(),
        engine: EngineName::of(engine),
        hosts,
        runs: 1,
        sim_secs: out.sim_time.as_secs_f64(),
        wall_secs: wall.as_secs_f64(),
        events: out.events,
        outcome: outcome(&out.verdict),
        peak_rss_kib: None,
    }
}

fn sweep(
    workload: &str,
    scenario: &Scenario,
    seeds: u64,
    engine: Engine,
) -> Result<Sample, String> {
    let variant = scenario.variant("sled-task")?;
    let configs = (1..=seeds)
        .map(|seed| {
            let mut cfg = runner::config(scenario, variant, seed)
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

/// What `racksim bench` was asked for.
#[derive(Clone, Debug)]
pub struct Options {
    /// Repetitions of each event-driven measurement.
    pub reps: usize,
    /// Repetitions of each tick-engine measurement (its runs take seconds,
    /// not milliseconds: 1 unless `--reps` says otherwise).
    pub tick_reps: usize,
    pub quick: bool,
    /// Only these workloads (all when empty).
    pub only: Vec<String>,
    pub engines: Engines,
}

/// Simulated time of the tick engine's reduced rack runs (`--quick`: 1
/// minute): long enough to boot, converge (at about 25 s) and hold.
pub const PEER_RACK_SIM_TIME: Duration = Duration::from_secs(2 * 60);
pub const QUICK_PEER_RACK_SIM_TIME: Duration = Duration::from_secs(60);
/// The deadline of the tick engine's madrid-legacy run: past the reveal of
/// switch1 (6m..7m30s), so legacy's failure to repair it is judged.
pub const PEER_LEGACY_DEADLINE: Duration = Duration::from_secs(10 * 60);
/// Seeds of the tick engine's sweep (`--quick`: 2).
pub const PEER_SWEEP_SEEDS: u64 = 10;
pub const QUICK_PEER_SWEEP_SEEDS: u64 = 2;

/// What the tick engine runs of a workload. A 1 ms tick costs the same
/// whether anything happens or not, so a listed workload that simulates
/// hours (or a thousand runs of ten minutes) would take minutes to hours
/// on it; those run in a reduced form, which `--engine both` also runs on
/// the event-driven engine, so the ratio compares the same runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    Listed,
    /// The reduced form, and what it reduces (for people).
    Reduced(Form, String),
    /// Not run on the tick engine, and why.
    Skipped(String),
}

/// The tick engine's form of `workload`.
pub fn peer(workload: &str, quick: bool) -> Peer {
    let listed = Form::listed(quick);
    match workload {
        "madrid-legacy" => Peer::Reduced(
            Form {
                sim_time: Some(PEER_LEGACY_DEADLINE),
                ..listed
            },
            format!(
                "deadline {} (listed: 2h)",
                fmt_duration(PEER_LEGACY_DEADLINE)
            ),
        ),
        "rack-8" | "rack-16" | "rack-32" => {
            let t = if quick {
                QUICK_PEER_RACK_SIM_TIME
            } else {
                PEER_RACK_SIM_TIME
            };
            Peer::Reduced(
                Form {
                    sim_time: Some(t),
                    ..listed
                },
                format!(
                    "{} simulated (listed: {})",
                    fmt_duration(t),
                    fmt_duration(RACK_SIM_TIME)
                ),
            )
        }
        "rack-32-2h" | "rack-32-8h" => Peer::Skipped(
            "the same rack as rack-32, for longer; on the tick engine every simulated \
             millisecond is a tick of every host, busy or idle, so it would cost rack-32's \
             wall time per simulated second times its duration"
                .into(),
        ),
        "madrid-sweep" => {
            let seeds = if quick {
                QUICK_PEER_SWEEP_SEEDS
            } else {
                PEER_SWEEP_SEEDS
            };
            Peer::Reduced(
                Form { seeds, ..listed },
                format!("seeds 1..={seeds} (listed: 1..={})", listed.seeds),
            )
        }
        _ => Peer::Listed,
    }
}

/// Median and spread of a figure over the repetitions.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Spread {
        assert!(!v.is_empty(), "at least one repetition");
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v[0],
            max: v[n - 1],
        }
    }
}

/// The machine and build the figures were measured on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub cpu: Option<String>,
    pub os: &'static str,
    pub arch: &'static str,
    pub racksim_version: &'static str,
    /// `release`, or `debug` (built with debug assertions: figures mislead).
    pub profile: &'static str,
    /// How simulated time advances in the measurements (see
    /// docs/decisions/0001-time-model.md): `event-driven`, `tick (1ms)`, or
    /// both; each measurement names its own engine.
    pub time_model: String,
    /// The 1-minute load average when the benchmark started: other work on
    /// the machine skews wall times.
    pub load_avg_at_start: Option<f64>,
}

impl Machine {
    pub fn this(engines: Engines) -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        });
        let tick = format!("tick ({})", fmt_duration(PEER_TICK));
        Machine {
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            cpu,
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
            racksim_version: env!("CARGO_PKG_VERSION"),
            profile: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            time_model: match engines {
                Engines::EventDriven => "event-driven".to_string(),
                Engines::Tick => tick,
                Engines::Both => format!("event-driven and {tick}"),
            },
            load_avg_at_start: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok()),
        }
    }
}

/// One workload's figures over the repetitions, on one engine, in one form.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadReport {
    pub name: String,
    pub description: String,
    /// The engine the measurements ran on.
    pub engine: EngineName,
    /// `as listed`, or the reduced form the tick engine runs ([`peer`]).
    pub form: String,
    pub hosts: usize,
    pub runs: u64,
    /// Simulated seconds (deterministic: the same in every repetition).
    pub sim_secs: f64,
    /// Driver steps (deterministic; on the tick engine, ticks).
    pub events: u64,
    pub outcome: String,
    pub wall_secs: Spread,
    /// Simulated seconds per wall second.
    pub sim_per_wall: Spread,
    /// Peak RSS of the workload's process, in MiB.
    pub peak_rss_mib: Option<Spread>,
    /// For the sweep: seeds (runs) per wall minute.
    pub seeds_per_minute: Option<Spread>,
    pub samples: Vec<Sample>,
}

/// One workload on both engines (`--engine both`): the same form on each.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub workload: String,
    /// What both engines ran: `as listed` or the reduced form.
    pub form: String,
    /// Median wall seconds on the event-driven engine.
    pub event_driven_wall_secs: f64,
    /// Median wall seconds on the tick engine.
    pub tick_wall_secs: f64,
    /// `tick_wall_secs / event_driven_wall_secs` (for the sweep, the same
    /// seeds on both: a ratio per seed).
    pub ratio: f64,
    pub event_driven_outcome: String,
    pub tick_outcome: String,
    /// The two runs reached the same verdict (the same outcome line).
    pub verdict_matched: bool,
}

/// A workload the tick engine did not run.
#[derive(Clone, Debug, Serialize)]
pub struct Skip {
    pub workload: String,
    pub engine: EngineName,
    pub reason: String,
    /// Roughly what it would have taken, in wall seconds, extrapolated
    /// from a measurement of rack-32 on the same engine in this report.
    pub estimated_wall_secs: Option<f64>,
}

/// Everything `racksim bench --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub machine: Machine,
    /// Repetitions of each event-driven measurement.
    pub reps: usize,
    /// Repetitions of each tick-engine measurement.
    pub tick_reps: usize,
    pub quick: bool,
    pub engines: Engines,
    /// The tick engine's tick, in seconds.
    pub tick_secs: f64,
    /// Every measurement, each with its engine and form, in the order run.
    pub workloads: Vec<WorkloadReport>,
    /// With `--engine both`: per workload, the two engines side by side.
    pub comparisons: Vec<Comparison>,
    pub skipped: Vec<Skip>,
}

/// One planned measurement.
struct Planned {
    name: &'static str,
    description: &'static str,
    engine: EngineName,
    form: Form,
    label: String,
    reps: usize,
}

/// Run the benchmark: every selected workload `reps` times on each
/// selected engine, each in a child process (`exe bench-one WORKLOAD`).
pub fn run(exe: &std::path::Path, opts: &Options) -> Result<Report, String> {
    for name in &opts.only {
        if !names().contains(&name.as_str()) {
            return Err(unknown(name));
        }
    }
    let selected: Vec<(&str, &str)> = WORKLOADS
        .iter()
        .copied()
        .filter(|(n, _)| opts.only.is_empty() || opts.only.iter().any(|o| o == n))
        .collect();
    let reps = opts.reps.max(1);
    let tick_reps = opts.tick_reps.max(1);
    let listed = Form::listed(opts.quick);
    const AS_LISTED: &str = "as listed";
    let mut planned = Vec::new();
    let mut skipped = Vec::new();
    for &(name, description) in &selected {
        let plan = |engine, form, label: &str, reps| Planned {
            name,
            description,
            engine,
            form,
            label: label.to_string(),
            reps,
        };
        if opts.engines.has(EngineName::EventDriven) {
            planned.push(plan(EngineName::EventDriven, listed, AS_LISTED, reps));
        }
        if !opts.engines.has(EngineName::Tick) {
            continue;
        }
        match peer(name, opts.quick) {
            Peer::Listed => planned.push(plan(EngineName::Tick, listed, AS_LISTED, tick_reps)),
            Peer::Reduced(form, label) => {
                // The same reduced runs on the event-driven engine, so the
                // ratio compares like with like.
                if opts.engines == Engines::Both {
                    planned.push(plan(EngineName::EventDriven, form, &label, reps));
                }
                planned.push(plan(EngineName::Tick, form, &label, tick_reps));
            }
            Peer::Skipped(reason) => skipped.push(Skip {
                workload: name.to_string(),
                engine: EngineName::Tick,
                reason,
                estimated_wall_secs: None,
            }),
        }
    }
    let total: usize = planned.iter().map(|p| p.reps).sum();
    let bar = if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(total as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} measurements, {elapsed} elapsed: {msg}",
            )
            .expect("valid template"),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let machine = Machine::this(opts.engines);
    let mut workloads = Vec::new();
    for p in &planned {
        let mut samples = Vec::new();
        for rep in 1..=p.reps {
            bar.set_message(format!(
                "{} on {} ({rep}/{})",
                p.name,
                p.engine.as_str(),
                p.reps
            ));
            samples.push(child(exe, p.name, p.engine, p.form)?);
            bar.inc(1);
        }
        workloads.push(summarise(p, samples)?);
    }
    bar.finish_and_clear();
    let comparisons = if opts.engines == Engines::Both {
        compare(&workloads)
    } else {
        Vec::new()
    };
    // The long racks' cost on the tick engine, from rack-32's if measured:
    // its cost is per simulated second.
    let rack32 = workloads
        .iter()
        .find(|w| w.name == "rack-32" && w.engine == EngineName::Tick)
        .map(|w| w.wall_secs.median / w.sim_secs.max(1e-9));
    for s in &mut skipped {
        let sim = match s.workload.as_str() {
            "rack-32-2h" => RACK_SIM_TIME * 4,
            "rack-32-8h" => RACK_SIM_TIME * 16,
            _ => continue,
        };
        s.estimated_wall_secs = rack32.map(|per| per * sim.as_secs_f64());
    }
    Ok(Report {
        machine,
        reps,
        tick_reps,
        quick: opts.quick,
        engines: opts.engines,
        tick_secs: PEER_TICK.as_secs_f64(),
        workloads,
        comparisons,
        skipped,
    })
}

/// Pair each tick measurement with the event-driven one of the same form.
fn compare(workloads: &[WorkloadReport]) -> Vec<Comparison> {
    workloads
        .iter()
        .filter(|t| t.engine == EngineName::Tick)
        .filter_map(|t| {
            let e = workloads.iter().find(|e| {
                e.engine == EngineName::EventDriven && e.name == t.name && e.form == t.form
            })?;
            Some(Comparison {
                workload: t.name.clone(),
                form: t.form.clone(),
                event_driven_wall_secs: e.wall_secs.median,
                tick_wall_secs: t.wall_secs.median,
                ratio: t.wall_secs.median / e.wall_secs.median.max(1e-9),
                event_driven_outcome: e.outcome.clone(),
                tick_outcome: t.outcome.clone(),
                verdict_matched: e.outcome == t.outcome,
            })
        })
        .collect()
}

fn child(
    exe: &std::path::Path,
    workload: &str,
    engine: EngineName,
    form: Form,
) -> Result<Sample, String> {
    let mut cmd = Command::new(exe);
    cmd.args([
        "bench-one",
        workload,
        "--engine",
        engine.as_str(),
        "--seeds",
        &form.seeds.to_string(),
    ]);
    if let Some(t) = form.sim_time {
        cmd.args(["--sim-secs", &t.as_secs().to_string()]);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("error: cannot run {}: {e}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "error: bench-one {workload} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .map_err(|e| format!("error: bench-one {workload} printed {line:?}: {e}"))
}

fn summarise(p: &Planned, samples: Vec<Sample>) -> Result<WorkloadReport, String> {
    let name = p.name;
    let first = samples[0].clone();
    // The simulation is deterministic: a repetition that simulated something
    // else is a bug worth hearing about, not noise to average.
    if let Some(odd) = samples
        .iter()
        .find(|s| s.events != first.events || s.sim_secs != first.sim_secs)
    {
        return Err(format!(
            "error: {name} on {} is not deterministic: {} events in {} s, then {} events in {} s",
            p.engine.as_str(),
            first.events,
            first.sim_secs,
            odd.events,
            odd.sim_secs
        ));
    }
    let spread = |f: &dyn Fn(&Sample) -> f64| Spread::of(samples.iter().map(f).collect());
    let rss: Option<Vec<f64>> = samples
        .iter()
        .map(|s| s.peak_rss_kib.map(|k| k as f64 / 1024.0))
        .collect();
    Ok(WorkloadReport {
        name: name.to_string(),
        description: p.description.to_string(),
        engine: p.engine,
        form: p.label.clone(),
        hosts: first.hosts,
        runs: first.runs,
        sim_secs: first.sim_secs,
        events: first.events,
        outcome: first.outcome.clone(),
        wall_secs: spread(&|s| s.wall_secs),
        sim_per_wall: spread(&|s| s.sim_secs / s.wall_secs.max(1e-9)),
        peak_rss_mib: rss.map(Spread::of),
        seeds_per_minute: (name == "madrid-sweep")
            .then(|| spread(&|s| s.runs as f64 * 60.0 / s.wall_secs.max(1e-9))),
        samples,
    })
}

/// The report as text: the machine, then one row per measurement, and
/// with `--engine both` the engines side by side.
pub fn table(report: &Report) -> String {
    let m = &report.machine;
    let reps = |n: usize| format!("{n} rep{}", if n == 1 { "" } else { "s" });
    let per_workload = match report.engines {
        Engines::EventDriven => format!("{} per workload", reps(report.reps)),
        Engines::Tick => format!("{} per workload", reps(report.tick_reps)),
        Engines::Both => format!(
            "{} per workload on event-driven, {} on tick",
            reps(report.reps),
            reps(report.tick_reps)
        ),
    };
    let mut out = format!(
        "racksim {} ({} build), {} cores{}, {}/{}, load {} at start; {} time; {}{}\n\n",
        m.racksim_version,
        m.profile,
        m.cores,
        m.cpu
            .as_ref()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default(),
        m.os,
        m.arch,
        m.load_avg_at_start
            .map(|l| format!("{l:.2}"))
            .unwrap_or_else(|| "?".into()),
        m.time_model,
        per_workload,
        if report.quick { ", --quick" } else { "" },
    );
    let spread = |s: &Spread, prec: usize| {
        format!("{:.prec$} ({:.prec$}..{:.prec$})", s.median, s.min, s.max)
    };
    // One engine as listed: the table as it always was. Otherwise each row
    // also names its engine and form.
    let tagged = report.engines != Engines::EventDriven;
    let mut header = vec!["workload"];
    if tagged {
        header.extend(["engine", "form"]);
    }
    header.extend([
        "hosts",
        "runs",
        "sim s",
        "wall s (min..max)",
        "sim/wall (min..max)",
        "events",
        "peak RSS MiB",
        "seeds/min",
        "outcome",
    ]);
    let rows: Vec<Vec<String>> = report
        .workloads
        .iter()
        .map(|w| {
            let mut row = vec![w.name.clone()];
            if tagged {
                row.extend([w.engine.as_str().to_string(), w.form.clone()]);
            }
            row.extend([
                w.hosts.to_string(),
                w.runs.to_string(),
                format!("{:.1}", w.sim_secs),
                spread(&w.wall_secs, 3),
                spread(&w.sim_per_wall, 0),
                w.events.to_string(),
                w.peak_rss_mib
                    .map(|s| format!("{:.1}", s.max))
                    .unwrap_or_else(|| "-".into()),
                w.seeds_per_minute
                    .as_ref()
                    .map(|s| spread(s, 0))
                    .unwrap_or_else(|| "-".into()),
                w.outcome.clone(),
            ]);
            row
        })
        .collect();
    out += &crate::matrix::columns(&header, &rows);
    out += "\nwall and sim/wall: median (min..max) over the repetitions; peak RSS: the largest; \
            sim s and events are deterministic.\n";
    if tagged {
        out += &format!(
            "tick: turmoil's stock tick engine, {} tick (events are ticks); workloads too long for \
             it run in a reduced form (the form column).\n",
            fmt_duration(PEER_TICK)
        );
    }
    if !report.comparisons.is_empty() {
        out += &format!(
            "\nSide by side, in this run: the same form on both engines (tick: {}); \
             ratio = tick wall / event-driven wall (medians)\n\n",
            fmt_duration(PEER_TICK)
        );
        let header = [
            "workload",
            "form",
            "event-driven wall s",
            "tick wall s",
            "tick/event-driven",
            "verdict",
        ];
        let rows: Vec<[String; 6]> = report
            .comparisons
            .iter()
            .map(|c| {
                [
                    c.workload.clone(),
                    c.form.clone(),
                    format!("{:.3}", c.event_driven_wall_secs),
                    format!("{:.3}", c.tick_wall_secs),
                    format!("{:.0}x", c.ratio),
                    if c.verdict_matched {
                        format!("same on both: {}", c.event_driven_outcome)
                    } else {
                        format!(
                            "DIFFERS: event-driven {}, tick {}",
                            c.event_driven_outcome, c.tick_outcome
                        )
                    },
                ]
            })
            .collect();
        out += &crate::matrix::columns(&header, &rows);
    }
    for s in &report.skipped {
        out += &format!(
            "\n{}: not run on the {} engine ({}{}).",
            s.workload,
            s.engine.as_str(),
            s.reason,
            s.estimated_wall_secs
                .map(|w| format!(": here about {w:.0} s"))
                .unwrap_or_default()
        );
    }
    if !report.skipped.is_empty() {
        out += "\n";
    }
    out
}
