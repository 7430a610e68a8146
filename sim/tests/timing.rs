//! Convergence timing: when the rack first converged, and how long each
//! plan step took to repair, from sampled timelines.

use std::time::Duration;

use racksim_reconciler::discovery::SwitchSlot;
use racksim_sim::{plan::ResolvedStep, timing::*, Action};

fn s(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

/// A timeline sampled at these instants: `(seconds, converged)`.
fn timeline(samples: &[(u64, bool)]) -> Timeline {
    let mut t = Timeline::default();
    for &(at, converged) in samples {
        t.sample(s(at), converged);
    }
    t
}

fn step(at: u64, action: Action) -> ResolvedStep {
    ResolvedStep {
        at: s(at),
        action,
        drawn_from: None,
    }
}

#[test]
fn first_converged_needs_the_stability_window() {
    let t = timeline(&[
        (0, false),
        (10, true), // a blip: 5 s only
        (15, false),
        (40, true),
        (200, false),
    ]);
    let timing = t.timing(&[], s(60), s(300));
    assert_eq!(timing.first_converged, Some(s(40)));
    // A run that ends converged counts its last stretch, however short.
    let t = timeline(&[(0, false), (90, true)]);
    assert_eq!(t.timing(&[], s(60), s(100)).first_converged, Some(s(90)));
    let never = timeline(&[(0, false)]);
    assert_eq!(never.timing(&[], s(60), s(100)).first_converged, None);
}

#[test]
fn repairs_are_measured_from_the_end_of_each_fault() {
    let t = timeline(&[
        (0, false),
        (30, true),
        // dpd restart at 100: broken at once, repaired at 103.
        (100, false),
        (103, true),
        // hidden at 200 (no effect), errors 300..310, repaired at 340.
        (305, false),
        (340, true),
    ]);
    let steps = [
        step(100, Action::DpdRestart(SwitchSlot::Switch1)),
        step(200, Action::HideSwitch(SwitchSlot::Switch1)),
        step(
            300,
            Action::DpdErrors {
                switch: SwitchSlot::Switch0,
                window: s(10),
            },
        ),
        step(400, Action::RevealSwitch(SwitchSlot::Switch1)),
    ];
    let timing = t.timing(&steps, s(60), s(500));
    let took: Vec<(String, Option<Duration>)> = timing
        .repairs
        .iter()
        .map(|r| (r.step.clone(), r.took()))
        .collect();
    assert_eq!(
        took,
        vec![
            (steps[0].action.to_string(), Some(s(3))),
            (steps[2].action.to_string(), Some(s(30))),
            (steps[3].action.to_string(), Some(s(0))),
        ]
    );
    assert_eq!(timing.slowest_repair().unwrap().took(), Some(s(30)));
}

#[test]
fn a_fault_never_repaired_says_so() {
    let t = timeline(&[(0, true), (50, false)]);
    let timing = t.timing(
        &[step(50, Action::DpdRestart(SwitchSlot::Switch0))],
        s(10),
        s(100),
    );
    assert_eq!(timing.repairs[0].converged_at, None);
    assert!(
        timing.lines()[1].ends_with("not repaired"),
        "{:?}",
        timing.lines()
    );
    assert_eq!(timing.first_converged, Some(s(0)));
}

/// A rack that looks converged for an instant after the fault ends (the
/// switch zone not up yet) is not repaired until it is converged for good.
#[test]
fn a_momentary_convergence_is_not_a_repair() {
    let t = timeline(&[
        (0, true),
        (100, true),  // sidecar back on at 100: nothing missing yet
        (101, false), // its zone is up, with an empty table
        (104, true),
    ]);
    let timing = t.timing(
        &[
            step(50, Action::SidecarPowerOff(SwitchSlot::Switch1)),
            step(100, Action::SidecarPowerOn(SwitchSlot::Switch1)),
        ],
        s(60),
        s(300),
    );
    assert_eq!(timing.repairs.len(), 1, "power-off starts a fault");
    assert_eq!(timing.repairs[0].took(), Some(s(4)));
}

/// A dpd restarted inside its own error window cannot be repaired before
/// the window ends, by any strategy: its repair is measured from there.
/// An outage of another host, or a partition, does not move it.
#[test]
fn a_repair_waits_for_an_outage_of_its_own_host_only() {
    let t = timeline(&[
        (0, false),
        (30, true),
        // switch0 answers 500s from 100 to 220; restarted at 130; repaired at
        // 221. switch1 restarted at 300 while sled1 is crashed (300..400) and
        // repaired at 302.
        (130, false),
        (221, true),
        (300, false),
        (302, true),
    ]);
    let steps = [
        step(
            100,
            Action::DpdErrors {
                switch: SwitchSlot::Switch0,
                window: s(120),
            },
        ),
        step(130, Action::DpdRestart(SwitchSlot::Switch0)),
        step(290, Action::Crash("sled1".into())),
        step(300, Action::DpdRestart(SwitchSlot::Switch1)),
        step(400, Action::Restart("sled1".into())),
    ];
    let timing = t.timing(&steps, s(60), s(600));
    let r: Vec<_> = timing
        .repairs
        .iter()
        .map(|r| (r.step.as_str(), r.from, r.delayed_from, r.took()))
        .collect();
    assert_eq!(
        r,
        [
            (
                "dpd on switch0 answers 500s for 2m",
                s(220),
                None,
                Some(s(1))
            ),
            (
                "restart dpd on switch0 (NAT table lost)",
                s(220),
                Some(s(130)),
                Some(s(1))
            ),
            // No outage of switch1: measured from the restart itself.
            (
                "restart dpd on switch1 (NAT table lost)",
                s(300),
                None,
                Some(s(2))
            ),
            // A crash is measured at its restart, not as a repair of its own.
            ("restart sled1", s(400), None, Some(s(0))),
        ]
    );
    assert!(timing.lines()[2].contains("measured from the end of an outage of its host"));
}
