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
//! Timings are for people and machines to read, never for tests to assert.

use std::{
    io::IsTerminal,
    process::Command,
    time::{Duration, Instant},
};

use racksim_reconciler::discovery::SwitchSlot;
use racksim_sim::{rack::RackBuilder, run::RunConfig, RackSpec, Strategy, Verdict};
use serde::{Deserialize, Serialize};

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

/// Run one workload in this process and measure it.
pub fn measure(workload: &str, sweep_seeds: u64) -> Result<Sample, String> {
    let catalogued = |name: &str| {
        catalogue::get(name).ok_or_else(|| format!("error: no catalogued scenario {name:?}"))
    };
    let sample = match workload {
        "madrid-legacy" => one(workload, &catalogued("madrid-one-switch")?, "legacy")?,
        "madrid-sled-task" => one(workload, &catalogued("madrid-one-switch")?, "sled-task")?,
        "race-naive" => one(workload, &catalogued("start-delete-race")?, "naive")?,
        "race-saga" => one(workload, &catalogued("start-delete-race")?, "saga")?,
        "rack-8" => rack(workload, 8, RACK_SIM_TIME),
        "rack-16" => rack(workload, 16, RACK_SIM_TIME),
        "rack-32" => rack(workload, 32, RACK_SIM_TIME),
        // The same rack for longer: how cost grows with simulated time.
        "rack-32-2h" => rack(workload, 32, RACK_SIM_TIME * 4),
        "rack-32-8h" => rack(workload, 32, RACK_SIM_TIME * 16),
        "madrid-sweep" => sweep(workload, &catalogued("madrid-one-switch")?, sweep_seeds)?,
        other => return Err(unknown(other)),
    };
    Ok(Sample {
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

fn one(workload: &str, scenario: &Scenario, strategy: &str) -> Result<Sample, String> {
    let variant = scenario.variant(strategy)?;
    let started = Instant::now();
    let judged = runner::run(scenario, variant, SEED)
        .ok_or_else(|| format!("error: {} has no strategy {strategy}", scenario.name))?;
    let wall = started.elapsed();
    Ok(Sample {
        workload: workload.to_string(),
        hosts: hosts(&scenario.rack),
        runs: 1,
        sim_secs: judged.outcome.sim_time.as_secs_f64(),
        wall_secs: wall.as_secs_f64(),
        events: judged.outcome.events,
        outcome: outcome(&judged.outcome.verdict),
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

fn rack(workload: &str, sleds: usize, sim_time: Duration) -> Sample {
    let rack = rack_of(sleds);
    let hosts = hosts(&rack);
    // The stability window equals the deadline, so the run never ends
    // early as converged: it simulates exactly `sim_time`, whatever N.
    let mut cfg = RunConfig::new(rack, Strategy::SledTask, SEED).with_deadline(sim_time);
    cfg.stability = sim_time;
    let started = Instant::now();
    let out = racksim_sim::run(&cfg);
    let wall = started.elapsed();
    Sample {
        workload: workload.to_string(),
        hosts,
        runs: 1,
        sim_secs: out.sim_time.as_secs_f64(),
        wall_secs: wall.as_secs_f64(),
        events: out.events,
        outcome: outcome(&out.verdict),
        peak_rss_kib: None,
    }
}

fn sweep(workload: &str, scenario: &Scenario, seeds: u64) -> Result<Sample, String> {
    let variant = scenario.variant("sled-task")?;
    let jobs: Vec<_> = (1..=seeds).map(|seed| (scenario, variant, seed)).collect();
    let started = Instant::now();
    let runs = matrix::run_all(&jobs, SWEEP_THREADS, &|_| {});
    let wall = started.elapsed();
    let converged = runs.iter().filter(|r| r.converged_at.is_some()).count();
    Ok(Sample {
        workload: workload.to_string(),
        hosts: hosts(&scenario.rack),
        runs: seeds,
        sim_secs: runs.iter().map(|r| r.sim_time.as_secs_f64()).sum(),
        wall_secs: wall.as_secs_f64(),
        events: runs.iter().map(|r| r.events).sum(),
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
    pub reps: usize,
    pub quick: bool,
    /// Only these workloads (all when empty).
    pub only: Vec<String>,
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
    /// How simulated time advances (see docs/decisions/0001-time-model.md).
    pub time_model: &'static str,
    /// The 1-minute load average when the benchmark started: other work on
    /// the machine skews wall times.
    pub load_avg_at_start: Option<f64>,
}

impl Machine {
    pub fn this() -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        });
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
            time_model: "event-driven",
            load_avg_at_start: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok()),
        }
    }
}

/// One workload's figures over the repetitions.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadReport {
    pub name: String,
    pub description: String,
    pub hosts: usize,
    pub runs: u64,
    /// Simulated seconds (deterministic: the same in every repetition).
    pub sim_secs: f64,
    /// Driver steps (deterministic).
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

/// Everything `racksim bench --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub machine: Machine,
    pub reps: usize,
    pub quick: bool,
    pub workloads: Vec<WorkloadReport>,
}

/// Run the benchmark: every selected workload `reps` times, each in a child
/// process (`exe bench-one WORKLOAD`).
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
    let seeds = if opts.quick {
        QUICK_SWEEP_SEEDS
    } else {
        SWEEP_SEEDS
    };
    let bar = if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new((selected.len() * reps) as u64);
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
    let machine = Machine::this();
    let mut workloads = Vec::new();
    for (name, description) in selected {
        let mut samples = Vec::new();
        for rep in 1..=reps {
            bar.set_message(format!("{name} ({rep}/{reps})"));
            samples.push(child(exe, name, seeds)?);
            bar.inc(1);
        }
        workloads.push(summarise(name, description, samples)?);
    }
    bar.finish_and_clear();
    Ok(Report {
        machine,
        reps,
        quick: opts.quick,
        workloads,
    })
}

fn child(exe: &std::path::Path, workload: &str, seeds: u64) -> Result<Sample, String> {
    let out = Command::new(exe)
        .args(["bench-one", workload, "--seeds", &seeds.to_string()])
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

fn summarise(
    name: &str,
    description: &str,
    samples: Vec<Sample>,
) -> Result<WorkloadReport, String> {
    let first = samples[0].clone();
    // The simulation is deterministic: a repetition that simulated something
    // else is a bug worth hearing about, not noise to average.
    if let Some(odd) = samples
        .iter()
        .find(|s| s.events != first.events || s.sim_secs != first.sim_secs)
    {
        return Err(format!(
            "error: {name} is not deterministic: {} events in {} s, then {} events in {} s",
            first.events, first.sim_secs, odd.events, odd.sim_secs
        ));
    }
    let spread = |f: &dyn Fn(&Sample) -> f64| Spread::of(samples.iter().map(f).collect());
    let rss: Option<Vec<f64>> = samples
        .iter()
        .map(|s| s.peak_rss_kib.map(|k| k as f64 / 1024.0))
        .collect();
    Ok(WorkloadReport {
        name: name.to_string(),
        description: description.to_string(),
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

/// The report as text: the machine, then one row per workload.
pub fn table(report: &Report) -> String {
    let m = &report.machine;
    let mut out = format!(
        "racksim {} ({} build), {} cores{}, {}/{}, load {} at start; {} time; {} rep{} per workload{}\n\n",
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
        report.reps,
        if report.reps == 1 { "" } else { "s" },
        if report.quick { ", --quick" } else { "" },
    );
    let spread = |s: &Spread, prec: usize| {
        format!("{:.prec$} ({:.prec$}..{:.prec$})", s.median, s.min, s.max)
    };
    let header = [
        "workload",
        "hosts",
        "runs",
        "sim s",
        "wall s (min..max)",
        "sim/wall (min..max)",
        "events",
        "peak RSS MiB",
        "seeds/min",
        "outcome",
    ];
    let rows: Vec<[String; 10]> = report
        .workloads
        .iter()
        .map(|w| {
            [
                w.name.clone(),
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
            ]
        })
        .collect();
    out += &crate::matrix::columns(&header, &rows);
    out += "\nwall and sim/wall: median (min..max) over the repetitions; peak RSS: the largest; \
            sim s and events are deterministic.\n";
    out
}
