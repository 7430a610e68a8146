//! The benchmark's report: repeated samples as a median and spread, the
//! machine they ran on, the engines side by side, and the table
//! `racksim bench` prints.

use serde::Serialize;

use racksim_sim::trace::fmt_duration;

use super::{EngineName, Engines, Planned, Sample, PEER_TICK};

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
    /// `as listed`, or the reduced form the tick engine runs ([`super::peer()`]).
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

/// Pair each tick measurement with the event-driven one of the same form.
pub(super) fn compare(workloads: &[WorkloadReport]) -> Vec<Comparison> {
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

pub(super) fn summarise(p: &Planned, samples: Vec<Sample>) -> Result<WorkloadReport, String> {
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
        seeds_per_minute: (name == "madrid-sweep" || name.starts_with("fuzz-"))
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
