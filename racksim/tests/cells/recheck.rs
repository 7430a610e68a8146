//! The checker cannot miss a change: the driver judges the world again only
//! when its version moves (`World::version`), so every catalogued scenario,
//! under every strategy and a few seeds, must come out exactly the same
//! when the gaps and invariants are judged after every driver step
//! (`RunConfig::recheck_every_event`). A difference is a change of what the
//! checks read that the world did not count: the run without the knob saw
//! it late.
//!
//! Each cell makes this check for its first seeds (`SEEDS`), against the
//! very runs the cell judges: the run without the knob is not made twice.
//!
//! After every step the knob reads the rack afresh (`check::observe`), and
//! judges it afresh wherever the checks would read it differently from the
//! judged snapshot (`Snapshot::same_as`): the checks are a function of the
//! snapshot and the instant, so an equal one is judged the same. Every
//! change the checks read, counted or not, makes the snapshot differ
//! (`racksim-sim`'s `check::a_snapshot_tells_every_change_the_checks_read`).

use racksim::{file::Scenario, runner, runner::Judged};
use racksim_sim::RunOutcome;

/// The seeds a cell runs again, judged after every event.
const SEEDS: u64 = 2;
/// The 32-sled rack's runs cost several times more (and more again with
/// the knob): one seed there.
const FULL_RACK_SEEDS: u64 = 1;

/// Whether the cell's run at `seed` is run again, judged after every event.
pub fn rechecks(scenario: &Scenario, seed: u64) -> bool {
    let n = if scenario.rack_name == "full" {
        FULL_RACK_SEEDS
    } else {
        SEEDS
    };
    (1..=n).contains(&seed)
}

/// The run `normal` (the cell's run of `scenario` under `strategy` at
/// `seed`) made again with the knob: where the two part, if they do.
pub fn recheck(
    scenario: &Scenario,
    strategy: racksim::file::Strategy,
    seed: u64,
    normal: &Judged,
) -> Option<String> {
    let mut every = runner::config(scenario, strategy, seed).expect("has an expectation");
    every.recheck_every_event = true;
    difference(&normal.outcome, &racksim_sim::run(&every))
        .map(|d| format!("seed {seed}, judged after every event: {d}"))
}

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
