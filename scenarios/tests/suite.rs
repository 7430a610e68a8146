//! The scenario suite: every catalogued scenario × every strategy it has an
//! expectation for × 32 seeds, each meeting its expectation.

use std::sync::atomic::{AtomicU64, Ordering};

use racksim::{catalogue, runner};
use racksim_sim::Strategy;

const SEEDS: u64 = 32;

/// Run `seeds` of one scenario and strategy on every core, and return the
/// failures with their replay commands.
fn failures(name: &str, strategy: Strategy) -> Vec<String> {
    let scenario = catalogue::get(name).expect("catalogued");
    let next = AtomicU64::new(1);
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let mut failed: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut failed = Vec::new();
                    loop {
                        let seed = next.fetch_add(1, Ordering::Relaxed);
                        if seed > SEEDS {
                            return failed;
                        }
                        let judged =
                            runner::run(&scenario, strategy, seed).expect("has an expectation");
                        if let Err(why) = judged.judgement {
                            failed.push(format!(
                                "seed {seed}: {why}\n  verdict: {}\n  replay: {}",
                                judged.outcome.verdict.lines().join("\n  "),
                                runner::replay_command(name, strategy, seed)
                            ));
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    failed.sort();
    failed
}

fn check(name: &str, strategy: Strategy) {
    let failed = failures(name, strategy);
    assert!(
        failed.is_empty(),
        "{name} / {strategy}: {} of {SEEDS} seeds failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn madrid_one_switch_sled_task() {
    check("madrid-one-switch", Strategy::SledTask);
}

#[test]
fn madrid_one_switch_legacy() {
    check("madrid-one-switch", Strategy::Legacy);
}

/// Every catalogued file parses, and every strategy has an expectation in
/// every scenario, so the matrix has no holes.
#[test]
fn catalogue_is_valid_and_complete() {
    let all = catalogue::all();
    assert_eq!(all.len(), catalogue::CATALOGUE.len());
    for s in all {
        for strategy in Strategy::ALL {
            assert!(
                s.expectations.contains_key(&strategy),
                "{} has no expectation for {strategy}",
                s.name
            );
        }
    }
}
