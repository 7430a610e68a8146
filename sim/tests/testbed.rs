//! A testbed that breaks must end the run as a testbed error, never as a
//! verdict about the strategy: a dead fake would otherwise make `legacy`
//! "fail as expected" on madrid.

use std::time::Duration;

use racksim_reconciler::{discovery::SwitchSlot, DPD_PORT};

use racksim_sim::testbed::Sabotage;
use racksim_sim::{
    trace::Kind, Action, Plan, RackSpec, RunConfig, RunOutcome, ServiceNat, Verdict,
};

/// Madrid's plan: switch1 hidden at boot, revealed between 5m30s and 8m.
fn madrid(strategy: ServiceNat, sabotage: Option<Sabotage>) -> RunConfig {
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

/// A madrid run under `strategy` broken by `sabotage`: it must end in a
/// testbed error at the sabotage's instant, on its host. Returns the run
/// and the error.
fn broken_run(strategy: ServiceNat, sabotage: Sabotage) -> (RunOutcome, String) {
    let expected = (sabotage.at(), sabotage.target().0.to_string());
    let outcome = racksim_sim::run(&madrid(strategy, Some(sabotage)));
    let error = match &outcome.verdict {
        Verdict::TestbedError { at, host, error } => {
            assert_eq!((*at, host.clone()), expected);
            error.clone()
        }
        other => panic!("a broken testbed must end in a testbed error: {other:?}"),
    };
    (outcome, error)
}

#[test]
fn a_fake_server_that_stops_is_a_testbed_error() {
    // Without sabotage, legacy fails on madrid by not converging: the
    // verdict that a broken fake must not be able to imitate.
    let honest = racksim_sim::run(&madrid(ServiceNat::LEGACY, None));
    assert!(
        matches!(honest.verdict, Verdict::NotConverged { .. }),
        "{:?}",
        honest.verdict
    );

    let at = Duration::from_secs(120);
    let (broken, error) = broken_run(
        ServiceNat::LEGACY,
        Sabotage::stop_server("switch0", DPD_PORT, at),
    );
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
    let (_, error) = broken_run(
        ServiceNat::SLED_TASK,
        Sabotage::panic("switch1", DPD_PORT, at),
    );
    assert!(error.starts_with("panicked: sabotaged"), "{error}");
}

#[test]
fn sabotage_names_the_server_it_breaks() {
    let s = Sabotage::stop_server("sled1", 12345, Duration::from_secs(7));
    assert_eq!(s.target(), ("sled1", 12345));
    assert_eq!(s.at(), Duration::from_secs(7));
    let s = Sabotage::panic("sled2", 80, Duration::ZERO);
    assert_eq!((s.target(), s.at()), (("sled2", 80), Duration::ZERO));
}
