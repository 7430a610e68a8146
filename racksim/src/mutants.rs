//! The kill table: does the suite notice a broken reconciler?
//!
//! Each mutant (named in `racksim_mutants`, compiled into the reconciler
//! only with its `mutants` feature) runs against every catalogued scenario × strategy
//! over a few seeds, and against a bounded fuzz. A mutant is *killed* by the
//! first run, in a fixed order (catalogue order, strategy, seed; then fuzz
//! configurations and seeds), that misses an expectation the real
//! reconciler meets on the same run. Fuzz seeds count only when the real
//! reconciler passes them, so a kill never rests on a plan the real code
//! fails too (or on a simulation artefact it would share).

use racksim_mutants::Mutant;
use racksim_nexus::instances::StartImpl;
use racksim_sim::ServiceNat;
use serde::Serialize;

use crate::{
    catalogue,
    file::{Scenario, Strategy},
    fuzz, invocation, matrix, runner, shrink,
};

/// The fuzz configurations of the kill table: every service-NAT strategy
/// the catalogue expects to converge (with saga starts), and the saga start.
pub fn fuzz_configs() -> Vec<fuzz::Options> {
    [
        ("madrid", ServiceNat::SLED_TASK),
        ("madrid", ServiceNat::SCRIMLET_LOCAL),
        ("standard", ServiceNat::SLED_TASK),
        ("standard", ServiceNat::SCRIMLET_LOCAL),
    ]
    .into_iter()
    .map(|(rack, s)| fuzz::Options::new(rack, s, StartImpl::Saga).expect("known rack"))
    .collect()
}

/// What killed a mutant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Kill {
    /// `catalogue` or `fuzz`.
    pub by: String,
    /// The scenario (catalogue name, or the fuzz flags).
    pub scenario: String,
    pub strategy: String,
    pub seed: u64,
    /// What went wrong: the judgement's reason, or the fuzz failure.
    pub how: String,
    /// How to see it again.
    pub replay: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub mutant: String,
    pub killed: Option<Kill>,
}

enum Job<'a> {
    /// A catalogued scenario: the suite proves the real reconciler meets
    /// these expectations on every seed it runs.
    Catalogue(&'a Scenario, Strategy, u64),
    /// A regression file at a seed (counts only where the real code meets
    /// its expectation at that seed).
    Regression(&'a Scenario, Strategy, u64),
    Fuzz(&'a fuzz::Options, u64),
}

/// The kill table of `mutants`: catalogue seeds `1..=seeds`, fuzz seeds
/// `1..=fuzz_seeds` per [`fuzz_configs`] entry. Deterministic whatever the
/// thread count.
pub fn kill_table(
    mutants: &[Mutant],
    seeds: u64,
    fuzz_seeds: u64,
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Vec<Row> {
    let scenarios = catalogue::all();
    // A regressions directory that cannot be read leaves the table to the
    // catalogue and the fuzz; the suite's own test fails on it anyway.
    let regressions: Vec<Scenario> =
        shrink::regressions(std::path::Path::new(shrink::REGRESSIONS_DIR))
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.scenario)
            .collect();
    let configs = fuzz_configs();
    let mut jobs: Vec<Job> = Vec::new();
    for s in &scenarios {
        for &v in s.expectations.keys() {
            for seed in 1..=seeds {
                jobs.push(Job::Catalogue(s, v, seed));
            }
        }
    }
    for s in &regressions {
        for &v in s.expectations.keys() {
            for seed in 1..=seeds {
                jobs.push(Job::Regression(s, v, seed));
            }
        }
    }
    for c in &configs {
        for seed in 1..=fuzz_seeds {
            jobs.push(Job::Fuzz(c, seed));
        }
    }
    // The real reconciler first: runs it fails are not evidence.
    let fuzz_jobs: Vec<usize> = jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| !matches!(j, Job::Catalogue(..)))
        .map(|(i, _)| i)
        .collect();
    let total = fuzz_jobs.len() + mutants.len() * jobs.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let tick = |_: usize| {
        progress(
            done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
            total,
        )
    };
    let real = matrix::parallel(fuzz_jobs.len(), threads, &tick, &|k| {
        run(&jobs[fuzz_jobs[k]], None).is_none()
    });
    let evidence = |i: usize| -> bool {
        fuzz_jobs
            .iter()
            .zip(&real)
            .find(|(j, _)| **j == i)
            .is_none_or(|(_, ok)| *ok)
    };
    let all: Vec<(Mutant, usize)> = mutants
        .iter()
        .flat_map(|&m| (0..jobs.len()).map(move |i| (m, i)))
        .collect();
    // The first kill (lowest job index) per mutant is what the table
    // shows; a job after a kill already found cannot change that, so it is
    // skipped. Which jobs get skipped depends on timing; the lowest kill
    // index does not.
    let first_kill: Vec<std::sync::atomic::AtomicUsize> = mutants
        .iter()
        .map(|_| std::sync::atomic::AtomicUsize::new(usize::MAX))
        .collect();
    let outcomes = matrix::parallel(all.len(), threads, &tick, &|k| {
        let (m, i) = all[k];
        let mi = k / jobs.len();
        if !evidence(i) || first_kill[mi].load(std::sync::atomic::Ordering::Relaxed) < i {
            return None;
        }
        let kill = run(&jobs[i], Some(m));
        if kill.is_some() {
            first_kill[mi].fetch_min(i, std::sync::atomic::Ordering::Relaxed);
        }
        kill
    });
    mutants
        .iter()
        .enumerate()
        .map(|(mi, &m)| {
            let killed = outcomes[mi * jobs.len()..(mi + 1) * jobs.len()]
                .iter()
                .find_map(|k| k.clone());
            Row {
                mutant: m.to_string(),
                killed,
            }
        })
        .collect()
}

/// Run one job (with `mutant`): how it missed its expectation, if it did.
fn run(job: &Job, mutant: Option<Mutant>) -> Option<Kill> {
    match job {
        Job::Catalogue(s, v, seed) | Job::Regression(s, v, seed) => {
            // One run replays the kill (`racksim run --mutant`).
            let arg = match job {
                Job::Catalogue(..) => s.name.clone(),
                _ => crate::regression::shown(&s.origin),
            };
            let replay = mutant
                .map(|m| format!("{} --mutant {m}", runner::replay_command(&arg, *v, *seed)))
                .unwrap_or_default();
            let mut cfg = runner::config(s, *v, *seed).expect("has the expectation");
            cfg.mutant = mutant;
            let outcome = racksim_sim::run(&cfg);
            runner::judge(&s.expectations[v], &outcome)
                .err()
                .map(|why| Kill {
                    by: if matches!(job, Job::Catalogue(..)) {
                        "catalogue".into()
                    } else {
                        "regression".into()
                    },
                    scenario: s.name.clone(),
                    strategy: v.to_string(),
                    seed: *seed,
                    how: why,
                    replay,
                })
        }
        Job::Fuzz(c, seed) => fuzz::run_seed(c, *seed, mutant).failure.map(|f| Kill {
            by: "fuzz".into(),
            scenario: format!("fuzz {}", c.flags()),
            strategy: c.file_strategy().to_string(),
            seed: *seed,
            how: f.to_string(),
            replay: format!(
                "{} fuzz --seeds {seed}..{seed} {}{}",
                invocation::program(),
                c.flags(),
                mutant.map(|m| format!(" --mutant {m}")).unwrap_or_default()
            ),
        }),
    }
}

/// The kill table as text.
pub fn text(rows: &[Row]) -> String {
    let header = ["mutant", "killed by", "seed", "how"];
    let table: Vec<[String; 4]> = rows
        .iter()
        .map(|r| match &r.killed {
            Some(k) => [
                r.mutant.clone(),
                format!("{} / {}", k.scenario, k.strategy),
                k.seed.to_string(),
                k.how.clone(),
            ],
            None => [
                r.mutant.clone(),
                "SURVIVED".into(),
                "-".into(),
                "no run caught it".into(),
            ],
        })
        .collect();
    let mut out = matrix::columns(&header, &table);
    for r in rows {
        if let Some(k) = &r.killed {
            out += &format!("{}: replay: {}\n", r.mutant, k.replay);
        }
    }
    out
}
