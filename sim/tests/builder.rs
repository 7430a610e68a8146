//! The testbed from Rust, without a scenario file: the madrid case built
//! with the builder API, run under both strategies of seed 000.

use std::time::Duration;

use racksim_reconciler::discovery::SwitchSlot;
use racksim_sim::{
    rack::{RackBuilder, ZoneKind},
    run, Action, Plan, RackSpec, RunConfig, Strategy, Verdict,
};

fn madrid_plan() -> Plan {
    Plan::new()
        .at(Duration::ZERO, Action::HideSwitch(SwitchSlot::Switch1))
        .between(
            Duration::from_secs(330),
            Duration::from_secs(480),
            Action::RevealSwitch(SwitchSlot::Switch1),
        )
}

#[test]
fn sled_task_converges_and_legacy_does_not() {
    let config = |strategy| {
        RunConfig::new(RackSpec::madrid(), strategy, 3)
            .with_plan(madrid_plan())
            .with_ntp_return_switch(SwitchSlot::Switch1)
            .with_deadline(Duration::from_secs(3600))
    };
    let sled_task = run(&config(Strategy::SledTask));
    match sled_task.verdict {
        Verdict::Converged { at } => assert!(at <= Duration::from_secs(600), "{at:?}"),
        other => panic!("sled-task did not converge: {other:?}"),
    }
    let legacy = run(&config(Strategy::Legacy));
    let Verdict::NotConverged { gaps, .. } = legacy.verdict else {
        panic!("legacy converged on madrid: {:?}", legacy.verdict);
    };
    assert!(
        gaps.iter()
            .any(|g| g.starts_with("switch1 lacks the NAT entry of boundary-ntp")),
        "{gaps:?}"
    );
    // The real 5-minute wait is in the trace.
    let waited = legacy
        .zone_starts
        .iter()
        .find(|(_, zone, _)| *zone == ZoneKind::BoundaryNtp)
        .map(|(_, _, took)| *took)
        .expect("boundary NTP's zone started");
    assert!(waited >= Duration::from_secs(300), "{waited:?}");
}

#[test]
fn a_custom_rack_without_uplink_on_switch1_needs_no_entries_there() {
    // switch1 has no uplink: nothing is required of it, even while hidden.
    let rack = RackBuilder::new("one-uplink")
        .scrimlet(SwitchSlot::Switch0)
        .scrimlet(SwitchSlot::Switch1)
        .without_uplink(SwitchSlot::Switch1)
        .sled()
        .zone(
            ZoneKind::BoundaryNtp,
            2,
            "198.51.100.1".parse().unwrap(),
            16384,
            32767,
        )
        .zone(
            ZoneKind::Nexus,
            0,
            "198.51.100.2".parse().unwrap(),
            0,
            65535,
        )
        .internal_dns_on(1)
        .build();
    let plan = Plan::new().at(Duration::ZERO, Action::HideSwitch(SwitchSlot::Switch1));
    for strategy in [Strategy::SledTask, Strategy::ScrimletLocal] {
        let outcome = run(&RunConfig::new(rack.clone(), strategy, 1)
            .with_plan(plan.clone())
            .with_deadline(Duration::from_secs(1200)));
        assert!(
            outcome.verdict.converged(),
            "{strategy}: {:?}",
            outcome.verdict
        );
        // The trace names hosts, never addresses that depend on registration order.
        assert!(outcome.trace.iter().all(|l| !l.host.contains(':')));
    }
}
