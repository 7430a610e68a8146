//! The matrix: every catalogued scenario × every strategy × N seeds, run in
//! parallel, summarised per cell. Each run is independent and deterministic,
//! so the table depends only on the seeds, never on the thread count or the
//! order in which runs finish.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex,
    },
    time::Duration,
};

use racksim_sim::{trace::fmt_duration, Era, InstanceEra};
use serde::{Deserialize, Serialize};

use crate::{
    file::{Expectation, Preset, Scenario, Strategy},
    runner,
};

/// One run, summarised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSummary {
    pub seed: u64,
    /// Time to converge, if the rack converged.
    pub converged_at: Option<Duration>,
    /// How long after the last plan step it converged.
    pub settled_after: Option<Duration>,
    /// The system's repair time: the slowest of the run's repairs, each
    /// measured from its fault's end (`racksim_sim::timing`). `None` when
    /// the run has no fault to repair or one was never repaired.
    pub slowest_repair: Option<Duration>,
    /// `Err(why)` when the scenario's expectation did not hold.
    pub judgement: Result<(), String>,
    /// The invariant that broke, if one did.
    pub violated: Option<&'static str>,
    /// The run did not converge, for a reason the expectation allows (what
    /// `some_seeds_fail` counts; see [`runner::failed_as_allowed`]).
    pub failed_as_allowed: bool,
    /// Simulated time at the end of the run.
    pub sim_time: Duration,
    /// Simulation steps the driver took (the unit of simulation cost).
    pub events: u64,
    /// The run ended in a testbed error (never evidence about the strategy).
    pub testbed_error: bool,
}

/// What [`run_all_observed`] shows each judged run to, with its job
/// (scenario, strategy, seed).
pub type Observer<'a> = dyn Fn((&Scenario, Strategy, u64), &runner::Judged) + Sync + 'a;

/// Run `jobs` (scenario, strategy, seed) in parallel on `threads` threads.
/// `progress` is called after each run with the number done so far.
pub fn run_all(
    jobs: &[(&Scenario, Strategy, u64)],
    threads: usize,
    progress: &(dyn Fn(usize) + Sync),
) -> Vec<RunSummary> {
    run_all_observed(jobs, threads, progress, &|_, _| {})
}

/// [`run_all`], showing each judged run to `observe` (with its job) before
/// it is summarised: for a caller that wants more of a run than its
/// summary without making the run a second time.
pub fn run_all_observed(
    jobs: &[(&Scenario, Strategy, u64)],
    threads: usize,
    progress: &(dyn Fn(usize) + Sync),
    observe: &Observer<'_>,
) -> Vec<RunSummary> {
    parallel(jobs.len(), threads, progress, &|i| {
        let (scenario, strategy, seed) = jobs[i];
        let judged = runner::run(scenario, strategy, seed).expect("strategy has an expectation");
        observe(jobs[i], &judged);
        let converged_at = match judged.outcome.verdict {
            racksim_sim::Verdict::Converged { at } => Some(at),
            _ => None,
        };
        let last_step = judged
            .outcome
            .steps
            .last()
            .map(|s| s.at)
            .unwrap_or_default();
        RunSummary {
            seed,
            converged_at,
            settled_after: converged_at.map(|at| at.saturating_sub(last_step)),
            slowest_repair: slowest_repair(&judged.outcome.timing),
            violated: match judged.outcome.verdict {
                racksim_sim::Verdict::InvariantViolated { invariant, .. } => Some(invariant),
                _ => None,
            },
            failed_as_allowed: runner::failed_as_allowed(
                &judged.expectation,
                &judged.outcome.verdict,
            ),
            judgement: judged.judgement.map(|_| ()),
            sim_time: judged.outcome.sim_time,
            events: judged.outcome.events,
            testbed_error: judged.outcome.verdict.is_testbed_error(),
        }
    })
}

/// The slowest repair of a run whose every fault was repaired.
pub fn slowest_repair(timing: &racksim_sim::timing::Timing) -> Option<Duration> {
    timing
        .repairs
        .iter()
        .map(|r| r.took())
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .max()
}

/// `f(0..n)` on `threads` threads, results in index order whatever order
/// they finish in. `progress` is called after each with the number done.
pub fn parallel<T: Send>(
    n: usize,
    threads: usize,
    progress: &(dyn Fn(usize) + Sync),
    f: &(dyn Fn(usize) -> T + Sync),
) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return;
                }
                let result = f(i);
                results.lock().expect("no worker panics holding it")[i] = Some(result);
                progress(done.fetch_add(1, Ordering::Relaxed) + 1);
            });
        }
    });
    results
        .into_inner()
        .expect("no worker panicked")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// One cell of the matrix.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    pub scenario: String,
    pub strategy: String,
    /// The era of upstream's code the strategy stands for (`legacy`,
    /// `proposal`, `target`; for a start implementation `pre-rpw` or
    /// `current`), see `racksim_sim::era`.
    pub era: String,
    /// The control-plane tasks its runs had.
    pub control_plane: Era,
    /// `converges <= 10m` or `fails`.
    pub expected: String,
    pub runs: usize,
    pub converged: usize,
    pub failed: usize,
    /// Runs that ended on a broken safety invariant.
    pub violated: usize,
    /// Runs whose expectation held.
    pub as_expected: usize,
    /// Runs that ended in a testbed error: failures of racksim itself,
    /// counted apart (each is also among `unexpected`).
    pub testbed_errors: usize,
    /// The requirements on the seeds together (`some_seeds_violate`,
    /// `some_seeds_fail`), if the expectation has any. (The JSON key keeps
    /// its first name; it carries both.)
    pub some_seeds_violate: Option<SomeSeeds>,
    /// Every run met its expectation and the seeds together met theirs.
    pub met: bool,
    /// Each run's slowest repair (the system's repair time, measured from
    /// each fault's end), over runs that repaired every fault, in
    /// milliseconds. Not the time to converge from the start of the run:
    /// that is at least the last plan step's drawn time, whatever the
    /// strategy.
    pub repair_p50_ms: Option<u64>,
    pub repair_max_ms: Option<u64>,
    /// Time from the last plan step to convergence, in milliseconds.
    pub settle_p50_ms: Option<u64>,
    pub settle_max_ms: Option<u64>,
    /// Runs whose expectation did not hold, with their replay commands.
    pub unexpected: Vec<Unexpected>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Unexpected {
    pub seed: u64,
    pub why: String,
    pub replay: String,
}

/// The requirements an expectation puts on a set of seeds rather than on
/// one run (outcome `any`, whose every run may converge):
/// `some_seeds_violate = "INV"` says a race that only some timings expose,
/// so at least one of the seeds run must break INV; `some_seeds_fail =
/// true` says at least one must end without converging, for a reason the
/// verdict texts allow. The matrix, the sweep and the test suite all judge
/// them here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SomeSeeds {
    /// The seeds it was judged over, e.g. `seeds 1..=32`.
    pub seeds: String,
    /// `some_seeds_violate`: each invariant some seed must break, with how
    /// many of the runs broke it.
    pub violate: Vec<Violating>,
    /// `some_seeds_fail`: some seed must fail to converge as allowed.
    pub fail: bool,
    /// How many runs did not converge, for a reason the expectation allows.
    pub failing: usize,
    /// Whether every requirement held.
    pub met: bool,
}

/// One invariant of `some_seeds_violate`, judged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violating {
    pub invariant: String,
    /// How many runs broke it.
    pub violating: usize,
}

impl SomeSeeds {
    /// Why the requirements did not hold, or `None` when they did.
    pub fn failure(&self) -> Option<String> {
        let mut why: Vec<String> = self
            .violate
            .iter()
            .filter(|v| v.violating == 0)
            .map(|v| {
                format!(
                    "expected some of {} to violate {}, none did",
                    self.seeds, v.invariant
                )
            })
            .collect();
        if self.fail && self.failing == 0 {
            why.push(format!(
                "expected some of {} to fail to converge (as verdict_mentions allows), none did",
                self.seeds
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}

/// Judge `exp`'s sweep-level requirements (`some_seeds_violate`,
/// `some_seeds_fail`) over `runs` (`seeds` describes them, see
/// [`describe_seeds`]). `None` when the expectation has neither. Only a run
/// that broke that very invariant, or that failed for an allowed reason,
/// counts.
pub fn some_seeds(exp: &Expectation, runs: &[RunSummary], seeds: String) -> Option<SomeSeeds> {
    if exp.some_seeds_violate.is_empty() && !exp.some_seeds_fail {
        return None;
    }
    let violate = exp
        .some_seeds_violate
        .iter()
        .map(|&inv| Violating {
            invariant: inv.to_string(),
            violating: runs.iter().filter(|r| r.violated == Some(inv)).count(),
        })
        .collect();
    let failing = if exp.some_seeds_fail {
        runs.iter().filter(|r| r.failed_as_allowed).count()
    } else {
        0
    };
    let mut s = SomeSeeds {
        seeds,
        violate,
        fail: exp.some_seeds_fail,
        failing,
        met: false,
    };
    s.met = s.failure().is_none();
    Some(s)
}

/// `seeds 1..=32` for a contiguous run of seeds, `seed 7` for one, else
/// `N seeds`.
pub fn describe_seeds(seeds: &[u64]) -> String {
    match seeds {
        [] => "no seeds".to_string(),
        [one] => format!("seed {one}"),
        [first, .., last] if seeds.windows(2).all(|w| w[1] == w[0] + 1) => {
            format!("seeds {first}..={last}")
        }
        _ => format!("{} seeds", seeds.len()),
    }
}

/// Run the matrix over `seeds` for `scenarios`.
pub fn matrix(
    scenarios: &[Scenario],
    seeds: &[u64],
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Vec<Cell> {
    matrix_observed(scenarios, seeds, threads, progress, &|_, _| {})
}

/// [`matrix`], showing each judged run to `observe` ([`run_all_observed`]).
pub fn matrix_observed(
    scenarios: &[Scenario],
    seeds: &[u64],
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
    observe: &Observer<'_>,
) -> Vec<Cell> {
    let mut cells: Vec<(&Scenario, Strategy)> = Vec::new();
    for s in scenarios {
        for &strategy in s.expectations.keys() {
            cells.push((s, strategy));
        }
    }
    let jobs: Vec<(&Scenario, Strategy, u64)> = cells
        .iter()
        .flat_map(|&(s, st)| seeds.iter().map(move |&seed| (s, st, seed)))
        .collect();
    let total = jobs.len();
    let results = run_all_observed(&jobs, threads, &|done| progress(done, total), observe);
    // With no seeds every cell is there, with no runs: the columns that do
    // not depend on runs (scenario, strategy, era, expected) are still
    // filled in (`racksim/tests/docs.rs` checks those of the committed
    // table so).
    let n = seeds.len();
    cells
        .iter()
        .enumerate()
        .map(|(i, &(scenario, strategy))| {
            summarise(scenario, strategy, &results[i * n..(i + 1) * n], seeds)
        })
        .collect()
}

fn summarise(scenario: &Scenario, strategy: Strategy, runs: &[RunSummary], seeds: &[u64]) -> Cell {
    let mut ttc: Vec<Duration> = runs.iter().filter_map(|r| r.converged_at).collect();
    ttc.sort();
    let mut settle: Vec<Duration> = runs.iter().filter_map(|r| r.settled_after).collect();
    settle.sort();
    let mut repair: Vec<Duration> = runs.iter().filter_map(|r| r.slowest_repair).collect();
    repair.sort();
    // Nearest-rank median: the smallest value with at least half the runs
    // at or below it.
    let p50 = |v: &[Duration]| (!v.is_empty()).then(|| v[(v.len() - 1) / 2].as_millis() as u64);
    let exp = &scenario.expectations[&strategy];
    let seeds_met = some_seeds(exp, runs, describe_seeds(seeds));
    let as_expected = runs.iter().filter(|r| r.judgement.is_ok()).count();
    // The era does not depend on the seed.
    let control_plane = runner::config(scenario, strategy, 0)
        .expect("strategy has an expectation")
        .era;
    Cell {
        scenario: scenario.name.clone(),
        strategy: strategy.to_string(),
        era: match strategy.preset {
            Preset::Nat(s) => format!("{}{}", s.era(), strategy.eras),
            Preset::Start(i) => format!("{}{}", InstanceEra::of(i), strategy.eras),
        },
        control_plane,
        expected: exp.summary(),
        runs: runs.len(),
        converged: ttc.len(),
        failed: runs.len() - ttc.len(),
        violated: runs.iter().filter(|r| r.violated.is_some()).count(),
        as_expected,
        testbed_errors: runs.iter().filter(|r| r.testbed_error).count(),
        met: as_expected == runs.len() && seeds_met.as_ref().is_none_or(|s| s.met),
        some_seeds_violate: seeds_met,
        repair_p50_ms: p50(&repair),
        repair_max_ms: repair.last().map(|d| d.as_millis() as u64),
        settle_p50_ms: p50(&settle),
        settle_max_ms: settle.last().map(|d| d.as_millis() as u64),
        unexpected: runs
            .iter()
            .filter_map(|r| {
                r.judgement.as_ref().err().map(|why| Unexpected {
                    seed: r.seed,
                    why: why.clone(),
                    replay: runner::replay_command(&scenario.name, strategy, r.seed),
                })
            })
            .collect(),
    }
}

/// The table's columns.
const HEADER: [&str; 12] = [
    "scenario",
    "strategy",
    "era",
    "expected",
    "converged",
    "failed",
    "violated",
    "as expected",
    "repair p50",
    "repair max",
    "settle p50",
    "settle max",
];

/// One row per cell, in [`HEADER`]'s columns.
fn rows(cells: &[Cell]) -> Vec<[String; 12]> {
    let ms = |v: Option<u64>| {
        v.map(|ms| fmt_duration(Duration::from_millis(ms)))
            .unwrap_or_else(|| "-".into())
    };
    cells
        .iter()
        .map(|c| {
            [
                c.scenario.clone(),
                c.strategy.clone(),
                c.era.clone(),
                c.expected.clone(),
                format!("{}/{}", c.converged, c.runs),
                format!("{}/{}", c.failed, c.runs),
                format!("{}/{}", c.violated, c.runs),
                if c.met {
                    format!("yes {}/{}", c.as_expected, c.runs)
                } else {
                    format!("NO {}/{}", c.as_expected, c.runs)
                },
                ms(c.repair_p50_ms),
                ms(c.repair_max_ms),
                ms(c.settle_p50_ms),
                ms(c.settle_max_ms),
            ]
        })
        .collect()
}

/// What follows the rows, one note each: the testbed errors, what each
/// era's runs had (once per era and control plane seen), then every cell
/// and run not as expected, a run with its replay command.
fn notes(cells: &[Cell]) -> Vec<(String, Option<String>)> {
    let testbed: usize = cells.iter().map(|c| c.testbed_errors).sum();
    let mut notes = vec![(
        match testbed {
            0 => "testbed errors: none".to_string(),
            n => format!(
                "testbed errors: {n} runs (failures of racksim itself, not of any strategy; \
                 listed below)"
            ),
        },
        None,
    )];
    let mut eras: Vec<(&str, Era)> = Vec::new();
    for c in cells {
        if !eras.contains(&(c.era.as_str(), c.control_plane)) {
            eras.push((c.era.as_str(), c.control_plane));
        }
    }
    for (era, control_plane) in eras {
        notes.push((format!("era {era}: {control_plane}"), None));
    }
    for c in cells {
        if let Some(why) = c.some_seeds_violate.as_ref().and_then(SomeSeeds::failure) {
            notes.push((
                format!("unexpected: {} / {}: {why}", c.scenario, c.strategy),
                None,
            ));
        }
        for u in &c.unexpected {
            notes.push((
                format!(
                    "unexpected: {} / {} seed {}: {}",
                    c.scenario, c.strategy, u.seed, u.why
                ),
                Some(u.replay.clone()),
            ));
        }
    }
    notes
}

/// The matrix as a text table. `repair` is each run's slowest repair,
/// measured from the end of its fault; `settle` is time to converge after
/// the last plan step.
pub fn table(cells: &[Cell]) -> String {
    let mut out = columns(&HEADER, &rows(cells));
    for (note, replay) in notes(cells) {
        out += &note;
        out += "\n";
        if let Some(replay) = replay {
            out += &format!("  replay: {replay}\n");
        }
    }
    out
}

/// The table `docs/catalogue.md` commits: [`markdown`]'s output for
/// `racksim matrix --seeds 32 --jobs 2 --markdown`, pasted between these
/// markers, by which the suite finds it.
pub const COMMITTED_MARKERS: (&str, &str) = ("<!-- matrix: begin -->\n", "<!-- matrix: end -->");

/// The committed table in `page` (the text between
/// [`COMMITTED_MARKERS`]), if the page has both markers.
pub fn committed_table(page: &str) -> Option<&str> {
    let (begin, end) = COMMITTED_MARKERS;
    let (_, rest) = page.split_once(begin)?;
    rest.split_once(end).map(|(table, _)| table)
}

/// The same table as Markdown (`racksim matrix --markdown`), for the
/// documentation: the rows as a table, then the notes as a list.
/// `racksim/tests/docs.rs` checks the committed one against it.
pub fn markdown(cells: &[Cell]) -> String {
    let row = |cells: &mut dyn Iterator<Item = &str>| {
        let cells: Vec<String> = cells.map(|c| c.replace('|', "\\|")).collect();
        format!("| {} |\n", cells.join(" | "))
    };
    let mut out = row(&mut HEADER.iter().copied());
    out += &format!("|{}\n", "---|".repeat(HEADER.len()));
    for r in rows(cells) {
        out += &row(&mut r.iter().map(String::as_str));
    }
    out += "\n";
    for (note, replay) in notes(cells) {
        out += &match replay {
            None => format!("* {note}\n"),
            Some(replay) => format!("* {note}; replay: `{replay}`\n"),
        };
    }
    out
}

/// `header` and `rows` as left-aligned columns two spaces apart, one line
/// each (trailing spaces trimmed). Shared by the matrix and bench tables.
pub fn columns<R: AsRef<[String]>>(header: &[&str], rows: &[R]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r.as_ref()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = cells
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ");
        l.truncate(l.trim_end().len());
        l + "\n"
    };
    let mut out = line(&mut header.iter().copied());
    for r in rows {
        out += &line(&mut r.as_ref().iter().map(String::as_str));
    }
    out
}

#[cfg(test)]
mod tests;
