//! A testbed that breaks must end the run as a testbed error, never as a
//! verdict about the strategy: a dead fake would otherwise make `legacy`
//! "fail as expected" on madrid.

use std::time::Duration;

use racksim_reconciler::{discovery::SwitchSlot, DPD_PORT};

use super::Sabotage;
use crate::{trace::Kind, Action, Plan, RackSpec, RunConfig, Strategy, Verdict};

/// Madrid's plan: switch1 hidden at boot, revealed between 5m30s and 8m.
fn madrid(strategy: Strategy, sabotage: Option<Sabotage>) -> RunConfig {
    let plan = Plan::new()
        .at(Duration::ZERO, Action::HideSwitch(SwitchSlot::Switch1))
        .between(
            Duration::from_secs(330),
            Duration::from_secs(480),
            Action::RevealSwitch(SwitchSlot::Switch1),
        );
    let mut cfg = RunConfig::new(RackSpec::madrid(), strategy, 7)
        .with_plan(plan)
        .with_ntp_return_switch(SwitchSlot::Switch1)
        .with_deadline(Duration::from_secs(3600));
    cfg.sabotage = sabotage;
    cfg
}

/// The failure a run ended on, which must be a testbed error.
fn testbed_error(outcome: &crate::RunOutcome) -> (Duration, &str, &str) {
    match &outcome.verdict {
        Verdict::TestbedError { at, host, error } => (*at, host, error),
        other => panic!("a broken testbed must end in a testbed error: {other:?}"),
    }
}

#[test]
fn a_fake_server_that_stops_is_a_testbed_error() {
    // Without sabotage, legacy fails on madrid by not converging: the
    // verdict that a broken fake must not be able to imitate.
    let honest = crate::run(&madrid(Strategy::Legacy, None));
    assert!(
        matches!(honest.verdict, Verdict::NotConverged { .. }),
        "{:?}",
        honest.verdict
    );

    let at = Duration::from_secs(120);
    let broken = crate::run(&madrid(
        Strategy::Legacy,
        Some(Sabotage::StopServer {
            host: "switch0".into(),
            port: DPD_PORT,
            at,
        }),
    ));
    let (failed_at, host, error) = testbed_error(&broken);
    assert_eq!((failed_at, host), (at, "switch0"));
    assert!(
        error.contains("server on port 12224 stopped") && error.contains("sabotaged"),
        "{error}"
    );
    assert!(broken.verdict.is_testbed_error());
    // The run stopped there: nothing after the failure is judged.
    assert!(
        broken.sim_time < at + Duration::from_secs(2),
        "{:?}",
        broken.sim_time
    );
    assert!(
        broken
            .trace
            .iter()
            .any(|l| l.kind == Kind::TestbedError && l.host == "switch0"),
        "the failure is a trace line of its own"
    );
    assert!(broken.verdict.lines()[0].starts_with("TESTBED ERROR at 00:02:00.000000 on switch0"));
}

#[test]
fn a_panicking_host_task_is_a_testbed_error_naming_its_host() {
    let at = Duration::from_secs(90);
    let broken = crate::run(&madrid(
        Strategy::SledTask,
        Some(Sabotage::Panic {
            host: "switch1".into(),
            port: DPD_PORT,
            at,
        }),
    ));
    let (failed_at, host, error) = testbed_error(&broken);
    assert_eq!((failed_at, host), (at, "switch1"));
    assert!(error.starts_with("panicked: sabotaged"), "{error}");
}

#[test]
fn sabotage_names_the_server_it_breaks() {
    let s = Sabotage::StopServer {
        host: "sled1".into(),
        port: 12345,
        at: Duration::ZERO,
    };
    assert_eq!(s.target(), ("sled1", 12345));
}
