//! No expectation accepts a testbed error: whatever a scenario expects of a
//! strategy (`fails`, `any`, `violates`, `converges`), a run whose testbed
//! broke is judged as not meeting it, and every summary counts it apart.

use std::time::Duration;

use racksim::{
    catalogue,
    file::{Expectation, Outcome},
    runner,
};
use racksim_sim::testbed::Sabotage;

fn broken_dpd() -> Sabotage {
    Sabotage::StopServer {
        host: "switch0".into(),
        port: racksim_reconciler::DPD_PORT,
        at: Duration::from_secs(120),
    }
}

#[test]
fn no_outcome_accepts_a_testbed_error() {
    let scenario = catalogue::get("madrid-one-switch").unwrap();
    let legacy = scenario.strategy("legacy").unwrap();
    let judged = runner::run_with(&scenario, legacy, 7, Some(broken_dpd()), None).unwrap();
    assert!(judged.outcome.verdict.is_testbed_error());
    let base = judged.expectation.clone();
    let outcomes = [
        Outcome::Fails,
        Outcome::Any,
        Outcome::Violates("one-vmm"),
        Outcome::ConvergesWithin(Duration::from_secs(7200)),
    ];
    for outcome in outcomes {
        let exp = Expectation {
            outcome,
            verdict_mentions: Vec::new(),
            ..base.clone()
        };
        let why = runner::judge(&exp, &judged.outcome).expect_err("a testbed error is accepted");
        assert!(
            why.contains("the testbed failed on switch0"),
            "{outcome:?}: {why}"
        );
    }
    // The same run without the sabotage meets the expectation: the
    // judgement above is the testbed error's doing.
    assert!(runner::run(&scenario, legacy, 7).unwrap().judgement.is_ok());
}

#[test]
fn the_fuzz_summary_counts_testbed_errors_apart() {
    use racksim::{
        campaign,
        fuzz::{self, Failure, SeedResult},
    };
    let opts = fuzz::Options::new(
        "madrid",
        racksim_sim::ServiceNat::SCRIMLET_LOCAL,
        racksim_nexus::instances::StartImpl::Saga,
    )
    .unwrap();
    let result = |seed, failure| SeedResult {
        seed,
        failure,
        ..SeedResult::default()
    };
    let results = [
        result(1, None),
        result(2, Some(Failure::TestbedError)),
        result(3, Some(Failure::TooSlow)),
    ];
    // The committed known defects: a testbed error is never one of them.
    let known = fuzz::known::load(std::path::Path::new(fuzz::known::KNOWN_DEFECTS)).unwrap();
    let summary = campaign::fuzz::summarise(&opts, (1, 3), (0, 1), None, &known, &results);
    assert_eq!((summary.failed, summary.testbed_errors), (2, 1));
    assert_eq!((summary.listed, summary.unlisted), (0, 1));
    assert_eq!(summary.failures[0].label(), "TESTBED ERROR");
    assert!(
        campaign::fuzz::text(&summary).contains("testbed errors: 1 (failures of racksim itself")
    );
}
