//! A sweep's summary: one scenario and strategy over a range of seeds
//! (`racksim sweep`), its counts and percentiles, and the runs worth a
//! second look.

use std::{collections::BTreeMap, fmt::Write, path::Path, time::Duration};

use racksim_sim::{run::TESTBED_ERROR_EXIT, trace::fmt_duration};
use serde::{Deserialize, Serialize};

use super::{shard_seeds, Campaign};
use crate::{
    file::{Scenario, Strategy},
    html,
    matrix::{self, RunSummary, SomeSeeds},
    runner,
};

/// One seed's times in a sweep, in milliseconds (what the percentiles of
/// merged shards are computed from).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedTimes {
    pub seed: u64,
    /// Time to converge, from the start; `None` when it did not converge.
    pub ttc_ms: Option<u64>,
    /// The run's slowest repair, from its fault's end; `None` when the run
    /// had no fault or one was never repaired.
    pub repair_ms: Option<u64>,
}

/// Summary of a sweep, for text and `--json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepSummary {
    /// Which run this is (what `racksim merge` checks its shards share).
    pub campaign: Campaign,
    pub scenario: String,
    pub strategy: String,
    pub seeds: (u64, u64),
    /// `(I, N)`: this sweep ran shard I of N of the seed range.
    pub shard: (u64, u64),
    pub runs: usize,
    pub converged: usize,
    pub violated: BTreeMap<String, usize>,
    pub as_expected: usize,
    /// Runs that ended in a testbed error (racksim failed, not the strategy).
    pub testbed_errors: usize,
    pub ttc_p50_ms: Option<u64>,
    pub ttc_p99_ms: Option<u64>,
    pub ttc_max_ms: Option<u64>,
    /// Each run's slowest repair, measured from its fault's end (the
    /// system's repair time; `ttc` counts from the start of the run).
    pub repair_p50_ms: Option<u64>,
    pub repair_p99_ms: Option<u64>,
    pub repair_max_ms: Option<u64>,
    /// The expectation's `some_seeds_violate`, judged over the seeds this
    /// sweep ran (with `--shard`, this shard's seeds only).
    pub some_seeds_violate: Option<SomeSeeds>,
    /// Seeds that broke an invariant or missed the expectation, with replay.
    pub notable: Vec<(u64, String, String)>,
    /// Every seed's times, in seed order.
    pub per_seed: Vec<SeedTimes>,
}

/// The value at percentile `p` of sorted `values` (nearest rank below).
fn percentile(values: &[u64], p: usize) -> Option<u64> {
    (!values.is_empty()).then(|| values[((values.len() - 1) * p) / 100])
}

/// The `some_seeds_violate` description of a sweep's seeds.
pub(super) fn seeds_desc((a, b): (u64, u64), shard: Option<(u64, u64)>) -> String {
    match shard {
        None => format!("seeds {a}..={b}"),
        Some((i, n)) => format!("seeds {a}..={b} of shard {i}/{n}"),
    }
}

impl SweepSummary {
    /// Summarise `runs`, the runs of `sweep`.
    pub fn of(sweep: &Sweep, runs: &[RunSummary]) -> SweepSummary {
        let Sweep {
            scenario,
            arg,
            strategy,
            seeds: range,
            shard,
        } = *sweep;
        let mut violated = BTreeMap::new();
        for r in runs {
            if let Some(inv) = r.violated {
                *violated.entry(inv.to_string()).or_insert(0) += 1;
            }
        }
        let notable = runs
            .iter()
            .filter_map(|r| {
                let why = match (&r.judgement, r.violated) {
                    (Err(why), _) => why.clone(),
                    (Ok(()), Some(inv)) => format!("broke {inv}"),
                    (Ok(()), None) => return None,
                };
                Some((r.seed, why, runner::replay_command(arg, strategy, r.seed)))
            })
            .collect();
        let ms = |d: Duration| d.as_millis() as u64;
        let per_seed = runs
            .iter()
            .map(|r| SeedTimes {
                seed: r.seed,
                ttc_ms: r.converged_at.map(ms),
                repair_ms: r.slowest_repair.map(ms),
            })
            .collect();
        let mut s = SweepSummary {
            campaign: Campaign::sweep(arg, strategy, range),
            scenario: scenario.name.clone(),
            strategy: strategy.to_string(),
            seeds: range,
            shard: shard.unwrap_or((0, 1)),
            runs: runs.len(),
            converged: 0,
            violated,
            as_expected: runs.iter().filter(|r| r.judgement.is_ok()).count(),
            testbed_errors: runs.iter().filter(|r| r.testbed_error).count(),
            ttc_p50_ms: None,
            ttc_p99_ms: None,
            ttc_max_ms: None,
            repair_p50_ms: None,
            repair_p99_ms: None,
            repair_max_ms: None,
            some_seeds_violate: matrix::some_seeds(
                &scenario.expectations[&strategy],
                runs,
                seeds_desc(range, shard),
            ),
            notable,
            per_seed,
        };
        s.set_figures();
        s
    }

    /// `converged` and the percentiles, from `per_seed`.
    pub(super) fn set_figures(&mut self) {
        let sorted = |f: fn(&SeedTimes) -> Option<u64>| {
            let mut v: Vec<u64> = self.per_seed.iter().filter_map(f).collect();
            v.sort_unstable();
            v
        };
        let ttc = sorted(|t| t.ttc_ms);
        let repair = sorted(|t| t.repair_ms);
        self.converged = ttc.len();
        self.ttc_p50_ms = percentile(&ttc, 50);
        self.ttc_p99_ms = percentile(&ttc, 99);
        self.ttc_max_ms = ttc.last().copied();
        self.repair_p50_ms = percentile(&repair, 50);
        self.repair_p99_ms = percentile(&repair, 99);
        self.repair_max_ms = repair.last().copied();
    }

    /// Why the seeds together missed `some_seeds_violate`, if they did.
    pub fn some_seeds_failure(&self) -> Option<String> {
        self.some_seeds_violate
            .as_ref()
            .and_then(SomeSeeds::failure)
    }

    /// Whether the sweep passed: every run met the expectation and, unless
    /// `sharded` (run with `--shard`: one shard is not judged on it), the
    /// seeds together met `some_seeds_violate`.
    pub fn passed(&self, sharded: bool) -> bool {
        self.as_expected == self.runs && (sharded || self.some_seeds_failure().is_none())
    }

    /// The summary as `racksim sweep` prints it (`sharded`: run with
    /// `--shard`).
    pub fn text(&self, sharded: bool) -> String {
        let mut out = String::new();
        let ms = |v: Option<u64>| {
            v.map(|ms| fmt_duration(Duration::from_millis(ms)))
                .unwrap_or_else(|| "-".into())
        };
        let (a, b) = self.seeds;
        let shard = if sharded {
            format!(", shard {}/{}", self.shard.0, self.shard.1)
        } else {
            String::new()
        };
        let runs = self.runs;
        let _ = writeln!(
            out,
            "sweep: {} --strategy {}, seeds {a}..{b}{shard}",
            self.scenario, self.strategy
        );
        let _ = writeln!(out, "runs: {runs}");
        let _ = writeln!(out, "converged: {}", self.converged);
        if self.violated.is_empty() {
            out += "invariant violations: none\n";
        }
        for (inv, n) in &self.violated {
            let _ = writeln!(
                out,
                "invariant violations: {inv}: {n} of {runs} ({:.1}%)",
                100.0 * *n as f64 / runs as f64
            );
        }
        let _ = writeln!(out, "expectation held: {} of {runs}", self.as_expected);
        match self.testbed_errors {
            0 => out += "testbed errors: none\n",
            n => {
                let _ = writeln!(
                    out,
                    "testbed errors: {n} of {runs} (failures of racksim itself, not of the strategy; exit status {TESTBED_ERROR_EXIT})"
                );
            }
        }
        let _ = writeln!(
            out,
            "slowest repair: p50 {}, p99 {}, max {} (each fault from its end)",
            ms(self.repair_p50_ms),
            ms(self.repair_p99_ms),
            ms(self.repair_max_ms)
        );
        let _ = writeln!(
            out,
            "time to converge: p50 {}, p99 {}, max {} (from the start; at least the last plan step)",
            ms(self.ttc_p50_ms),
            ms(self.ttc_p99_ms),
            ms(self.ttc_max_ms)
        );
        for (seed, why, replay) in self.notable.iter().take(20) {
            let _ = writeln!(out, "seed {seed}: {why}\n  replay: {replay}");
        }
        if self.notable.len() > 20 {
            let _ = writeln!(
                out,
                "... and {} more (--json lists them all)",
                self.notable.len() - 20
            );
        }
        if let Some(why) = self.some_seeds_failure() {
            if sharded {
                let _ = writeln!(
                    out,
                    "note: {why} (a shard is not judged on this; merge the shards' JSON)"
                );
            } else {
                let _ = writeln!(
                    out,
                    "unexpected: {} / {}: {why}",
                    self.scenario, self.strategy
                );
            }
        }
        out
    }
}

/// A sweep: one scenario and strategy over a range of seeds, or one shard
/// of it.
#[derive(Clone, Copy)]
pub struct Sweep<'a> {
    pub scenario: &'a Scenario,
    /// The scenario as the command line names it (in replay commands).
    pub arg: &'a str,
    pub strategy: Strategy,
    /// `A..=B`.
    pub seeds: (u64, u64),
    /// `(I, N)`: only shard I of N of the seeds.
    pub shard: Option<(u64, u64)>,
}

impl Sweep<'_> {
    /// Run the sweep's seeds on `threads` threads, reporting `(done,
    /// total)` to `progress`: the summary, and each run's own figures in
    /// seed order.
    pub fn run(
        &self,
        threads: usize,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> (SweepSummary, Vec<RunSummary>) {
        let jobs: Vec<_> = shard_seeds(self.seeds, self.shard.unwrap_or((0, 1)))
            .into_iter()
            .map(|seed| (self.scenario, self.strategy, seed))
            .collect();
        let total = jobs.len();
        progress(0, total);
        let runs = matrix::run_all(&jobs, threads, &|done| progress(done, total));
        (SweepSummary::of(self, &runs), runs)
    }

    /// Write an HTML timeline of every run of `runs` that did not converge
    /// or missed its expectation into `dir`, named by [`html::file_name`];
    /// how many it wrote. Runs are deterministic: the notable seeds run
    /// again for their traces rather than the sweep keeping every trace.
    pub fn write_reports(&self, dir: &Path, runs: &[RunSummary]) -> Result<usize, String> {
        let (scenario, strategy) = (self.scenario, self.strategy);
        let mut written = 0;
        for r in runs
            .iter()
            .filter(|r| r.converged_at.is_none() || r.judgement.is_err())
        {
            let judged =
                runner::run(scenario, strategy, r.seed).expect("strategy has an expectation");
            let path = dir.join(html::file_name(scenario, strategy, r.seed));
            html::write_runs(
                html::create(&path)?,
                scenario,
                self.arg,
                &[(strategy, r.seed, &judged)],
            )?;
            written += 1;
        }
        Ok(written)
    }
}
