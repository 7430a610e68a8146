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
//!
//! Its parts: `workload.rs` runs and measures one workload in this process
//! (what `bench-one` does); `peer.rs` says what the tick engine runs of
//! each; `report.rs` turns repeated samples into medians and spreads and
//! prints the table. This module plans the measurements and runs each in
//! its child process.

mod peer;
mod report;
mod workload;

use std::{io::IsTerminal, process::Command, time::Duration};

use serde::{Deserialize, Serialize};

use racksim_sim::Engine;

pub use peer::{
    peer, Peer, PEER_LEGACY_DEADLINE, PEER_RACK_SIM_TIME, PEER_SWEEP_SEEDS,
    QUICK_PEER_RACK_SIM_TIME, QUICK_PEER_SWEEP_SEEDS,
};
pub use report::{table, Comparison, Machine, Report, Skip, Spread, WorkloadReport};
pub use workload::{measure, peak_rss_kib, rack_of, Form, Sample};

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
pub const WORKLOADS: [(&str, &str); 14] = [
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
        "soak-1000h",
        "madrid-one-switch --strategy legacy --seed 7 for 1000h simulated: the soak \
         (120,000 NAT pulls against a Nexus that never starts; nothing may run out)",
    ),
    (
        "madrid-sweep",
        "sweep madrid-one-switch --strategy sled-task, seeds 1..=1000 (--quick: 100), 2 threads",
    ),
    (
        "fuzz-madrid",
        "fuzz --rack madrid of what ships (scrimlet-local-with-zone-start, saga), \
         seeds 1..=300 (--quick: 30), 2 threads",
    ),
    (
        "fuzz-standard",
        "fuzz --rack standard of what ships, seeds 1..=300 (--quick: 30), 2 threads",
    ),
    (
        "fuzz-full",
        "fuzz --rack full of what ships, seeds 1..=100 (--quick: 10), 2 threads",
    ),
];

/// Names of the workloads.
pub fn names() -> Vec<&'static str> {
    WORKLOADS.iter().map(|(n, _)| *n).collect()
}

fn unknown(name: &str) -> String {
    format!(
        "error: no benchmark workload {name:?} (known: {})",
        names().join(", ")
    )
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

impl Options {
    /// The options of `racksim bench`: `reps` repetitions of every
    /// measurement if given, else the defaults (fewer with `quick`).
    pub fn new(reps: Option<u64>, quick: bool, only: Vec<String>, engines: Engines) -> Options {
        let default_reps = if quick { QUICK_REPS } else { DEFAULT_REPS };
        Options {
            reps: reps.map(|r| r as usize).unwrap_or(default_reps),
            tick_reps: reps.map(|r| r as usize).unwrap_or(TICK_REPS),
            quick,
            only,
            engines,
        }
    }
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
        workloads.push(report::summarise(p, samples)?);
    }
    bar.finish_and_clear();
    let comparisons = if opts.engines == Engines::Both {
        report::compare(&workloads)
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
