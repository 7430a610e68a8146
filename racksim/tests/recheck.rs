//! The checker cannot miss a change: the driver judges the world again only
//! when its version moves (`World::version`), so every catalogued scenario,
//! under every strategy and a few seeds, must come out exactly the same
//! when the gaps and invariants are judged after every driver step
//! (`RunConfig::recheck_every_event`). A difference is a change of what the
//! checks read that the world did not count: the run without the knob saw
//! it late.

use racksim::{catalogue, runner};
use racksim_sim::RunOutcome;

const SEEDS: &[u64] = &[1, 2];
/// The 32-sled rack's runs cost several times more (and more again with
/// the knob): one seed there keeps the test near 20 s on 2 cores.
const FULL_RACK_SEEDS: &[u64] = &[1];

/// Where two runs of one configuration part: the first differing item.
fn difference(normal: &RunOutcome, every: &RunOutcome) -> Option<String> {
    // Seen directly: an extra look found other gaps than the last one.
    if let Some(first) = every.uncounted_changes.first() {
        return Some(format!(
            "{} uncounted change(s), the first at {first}",
            every.uncounted_changes.len()
        ));
    }
    if normal.verdict != every.verdict {
        return Some(format!(
            "verdict: {:?}\n  with recheck_every_event: {:?}",
            normal.verdict, every.verdict
        ));
    }
    if normal.timing != every.timing {
        return Some(format!(
            "timing: {:?}\n  with recheck_every_event: {:?}",
            normal.timing, every.timing
        ));
    }
    let (a, b) = (&normal.trace, &every.trace);
    if let Some(i) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
        return Some(format!(
            "trace line {}: {}\n  with recheck_every_event: {}",
            i + 1,
            a[i],
            b[i]
        ));
    }
    if a.len() != b.len() {
        return Some(format!(
            "trace length: {} lines, with recheck_every_event {}",
            a.len(),
            b.len()
        ));
    }
    // The extra looks must leave the stepping alone (same stops, same end).
    if (normal.events, normal.sim_time) != (every.events, every.sim_time) {
        return Some(format!(
            "steps/end: {} at {:?}, with recheck_every_event {} at {:?}",
            normal.events, normal.sim_time, every.events, every.sim_time
        ));
    }
    None
}

#[test]
fn judging_after_every_event_changes_nothing() {
    let mut jobs = Vec::new();
    for scenario in catalogue::all() {
        let seeds = if scenario.rack_name == "full" {
            FULL_RACK_SEEDS
        } else {
            SEEDS
        };
        for &strategy in scenario.expectations.keys() {
            for &seed in seeds {
                let cfg = runner::config(&scenario, strategy, seed).expect("has an expectation");
                jobs.push((format!("{} / {strategy} / seed {seed}", scenario.name), cfg));
            }
        }
    }
    assert!(
        jobs.len() >= 90,
        "the catalogue shrank: {} runs",
        jobs.len()
    );
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let next = std::sync::atomic::AtomicUsize::new(0);
    // Each run is deterministic and on one thread; threads only share the
    // list of jobs.
    let found: Vec<String> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut found = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((name, cfg)) = jobs.get(i) else {
                            return found;
                        };
                        let normal = racksim_sim::run(cfg);
                        let mut every = cfg.clone();
                        every.recheck_every_event = true;
                        let every = racksim_sim::run(&every);
                        if let Some(d) = difference(&normal, &every) {
                            found.push(format!("{name}: {d}"));
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("no run panics"))
            .collect()
    });
    assert!(
        found.is_empty(),
        "{} of {} runs differ when judged after every event (a change the world did not count):\n{}",
        found.len(),
        jobs.len(),
        found.join("\n")
    );
}
