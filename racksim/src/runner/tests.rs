//! Judging: each outcome accepts what its doc says, and nothing else.

use std::time::Duration;

use racksim_sim::Verdict;

use super::*;
use crate::{catalogue, file};

/// The saga expectation of a small instances scenario whose table body is
/// `body` (the plan only creates an instance; the verdicts below are made
/// by hand).
fn expectation(body: &str) -> Expectation {
    let text = format!(
        "name = \"j\"\ndescription = \"d\"\nkind = \"instances\"\nrack = \"madrid\"\n\
         ntp_return_switch = \"switch0\"\n\n[[instance]]\nname = \"web1\"\n\n[[step]]\n\
         at = \"1m\"\naction = \"instance-create\"\ninstance = \"web1\"\nsled = \"sled2\"\n\n\
         [expect.saga]\n{body}"
    );
    let s = file::parse("j.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    s.expectations[&s.strategy("saga").unwrap()].clone()
}

fn not_converged(gaps: &[&str]) -> Verdict {
    Verdict::NotConverged {
        deadline: Duration::from_secs(600),
        gaps: gaps.iter().map(|g| g.to_string()).collect(),
    }
}

fn violated(invariant: &'static str, message: &str) -> Verdict {
    Verdict::InvariantViolated {
        at: Duration::from_secs(200),
        invariant,
        message: message.to_string(),
        event: None,
    }
}

const CONVERGED: Verdict = Verdict::Converged {
    at: Duration::from_secs(190),
};

/// `any` accepts a broken invariant only if `some_seeds_violate` names it.
#[test]
fn any_accepts_only_the_invariants_it_names() {
    let one =
        expectation("outcome = \"any\"\ndeadline = \"10m\"\nsome_seeds_violate = \"one-vmm\"\n");
    assert!(judge_verdict(&one, &violated("one-vmm", "two VMMs")).is_ok());
    let why = judge_verdict(&one, &violated("nat-follows-vmm", "NAT elsewhere")).unwrap_err();
    assert!(why.contains("broke nat-follows-vmm"), "{why}");
    assert!(why.contains("allows only one-vmm"), "{why}");

    let both = expectation(
        "outcome = \"any\"\ndeadline = \"10m\"\nsome_seeds_violate = [\"one-vmm\", \"nat-follows-vmm\"]\n",
    );
    assert!(judge_verdict(&both, &violated("nat-follows-vmm", "x")).is_ok());
    let why = judge_verdict(&both, &violated("no-state-after-delete", "x")).unwrap_err();
    assert!(
        why.contains("allows only one-vmm and nat-follows-vmm"),
        "{why}"
    );

    // Naming none allows none.
    let none = expectation(
        "outcome = \"any\"\ndeadline = \"10m\"\nverdict_mentions = [\"vmm\"]\nsome_seeds_fail = true\n",
    );
    let why = judge_verdict(&none, &violated("one-vmm", "two VMMs")).unwrap_err();
    assert!(why.contains("allows no invariant"), "{why}");
    assert!(judge_verdict(&none, &CONVERGED).is_ok());
}

/// `verdict_mentions`: every text; `verdict_mentions_any`: one of them.
/// The same rule for `fails`, `any` and `violates`.
#[test]
fn verdict_texts_mean_all_and_one_of() {
    let fails = expectation(
        "outcome = \"fails\"\ndeadline = \"10m\"\nverdict_mentions = [\"web1\", \"sled1\"]\n",
    );
    let why = judge_verdict(&fails, &not_converged(&["web1 lacks its VMM on sled2"])).unwrap_err();
    assert!(why.contains("does not mention [\"sled1\"]"), "{why}");
    assert!(judge_verdict(&fails, &not_converged(&["web1 lacks it", "on sled1"])).is_ok());

    let alternatives = expectation(
        "outcome = \"fails\"\ndeadline = \"10m\"\nverdict_mentions = [\"web1\"]\n\
         verdict_mentions_any = [\"sled1\", \"sled2\"]\n",
    );
    assert!(judge_verdict(&alternatives, &not_converged(&["web1 on sled2"])).is_ok());
    assert!(judge_verdict(&alternatives, &not_converged(&["web1 on sled1"])).is_ok());
    let why = judge_verdict(&alternatives, &not_converged(&["web1 on sled0"])).unwrap_err();
    assert!(why.contains("mentions none of"), "{why}");
    let why = judge_verdict(&alternatives, &not_converged(&["web2 on sled1"])).unwrap_err();
    assert!(why.contains("does not mention [\"web1\"]"), "{why}");

    // violates: against the violation's lines.
    let violates = expectation(
        "outcome = \"violates\"\ninvariant = \"one-vmm\"\ndeadline = \"10m\"\n\
         verdict_mentions = [\"VMM 2 on sled1\"]\n",
    );
    assert!(judge_verdict(
        &violates,
        &violated("one-vmm", "VMM 1 on sled0, VMM 2 on sled1")
    )
    .is_ok());
    let why = judge_verdict(
        &violates,
        &violated("one-vmm", "VMM 1 on sled0, VMM 3 on sled2"),
    )
    .unwrap_err();
    assert!(why.contains("broke one-vmm as expected, but"), "{why}");
    let why = judge_verdict(&violates, &violated("nat-follows-vmm", "x")).unwrap_err();
    assert!(why.contains("broke nat-follows-vmm first"), "{why}");
    assert!(judge_verdict(&violates, &CONVERGED).is_err());
}

/// A run of `any` that does not converge is judged on the reasons the file
/// lists, and counts for `some_seeds_fail` only when they hold.
#[test]
fn any_that_does_not_converge_needs_a_listed_reason() {
    let leak = not_converged(&["instance web1 is stopped but sled1 still runs a vmm for it"]);
    let other = not_converged(&["switch1 lacks the NAT entry of web1"]);

    let no_reason =
        expectation("outcome = \"any\"\ndeadline = \"10m\"\nsome_seeds_violate = \"one-vmm\"\n");
    let why = judge_verdict(&no_reason, &leak).unwrap_err();
    assert!(why.contains("names no reason"), "{why}");
    assert!(!failed_as_allowed(&no_reason, &leak));

    let must_fail = expectation(
        "outcome = \"any\"\ndeadline = \"10m\"\nverdict_mentions = [\"still runs a vmm for it\"]\n\
         some_seeds_fail = true\n",
    );
    assert!(judge_verdict(&must_fail, &leak).is_ok());
    assert!(failed_as_allowed(&must_fail, &leak));
    let why = judge_verdict(&must_fail, &other).unwrap_err();
    assert!(
        why.contains("did not converge, and the verdict does not mention"),
        "{why}"
    );
    assert!(!failed_as_allowed(&must_fail, &other));
    assert!(judge_verdict(&must_fail, &CONVERGED).is_ok());
    assert!(!failed_as_allowed(&must_fail, &CONVERGED));
}

/// `exp` does not hold for `outcome`, and says `why`.
fn misses(exp: &Expectation, outcome: &RunOutcome, why: &str) {
    let got = judge(exp, outcome).unwrap_err();
    assert!(got.contains(why), "{got}");
}

/// `exp` does not hold on `outcome` once `change` has changed it, and
/// says `why`.
fn misses_after(
    exp: &Expectation,
    outcome: &RunOutcome,
    change: impl FnOnce(&mut RunOutcome),
    why: &str,
) {
    let mut changed = outcome.clone();
    change(&mut changed);
    misses(exp, &changed, why);
}

/// `judged`'s expectation, once `change` has changed it, does not hold on
/// the run's outcome, and says `why`; the changed expectation.
fn misses_changed(
    judged: &Judged,
    change: impl FnOnce(&mut Expectation),
    why: &str,
) -> Expectation {
    let mut exp = judged.expectation.clone();
    change(&mut exp);
    misses(&exp, &judged.outcome, why);
    exp
}

/// Seed 1 of the catalogued `scenario` under `strategy`: its expectation
/// holds, and says `how`.
fn held(scenario: &str, strategy: &str, how: &str) -> Judged {
    let scenario = catalogue::get(scenario).expect("catalogued");
    let strategy = scenario.strategy(strategy).unwrap();
    let judged = run(&scenario, strategy, 1).expect("has an expectation");
    assert!(
        judged.judgement.as_ref().is_ok_and(|why| why.contains(how)),
        "{:?}",
        judged.judgement
    );
    judged
}

/// Zone-start bounds are judged on the run's zone starts, and a run in
/// which no zone started does not meet one.
#[test]
fn zone_start_bounds_are_judged_on_the_runs_starts() {
    let judged = held("zone-start-blocked", "legacy", "to start");
    let mut exp = judged.expectation.clone();
    exp.zone_start_at_least = Some(Duration::from_secs(3600));
    misses(&exp, &judged.outcome, "to block for at least 1h");
    exp.zone_start_at_least = None;
    exp.zone_start_at_most = Some(Duration::from_secs(60));
    misses(
        &exp,
        &judged.outcome,
        "expected every zone to start within 1m",
    );
    misses_after(
        &exp,
        &judged.outcome,
        |o| o.zone_starts.clear(),
        "no zone started",
    );
}

/// `repair_within` bounds the system's repair time: a run whose slowest
/// repair is longer fails it, and a run with no repair to measure fails it
/// too rather than holding for nothing.
#[test]
fn repair_within_is_judged_on_the_slowest_repair() {
    let judged = held("network-faults", "scrimlet-local", "slowest repair");
    let exp = misses_changed(
        &judged,
        |e| e.repair_within = Some(Duration::from_secs(10)),
        "expected every fault repaired within 10s, but",
    );
    misses_after(
        &exp,
        &judged.outcome,
        |o| o.timing.repairs.clear(),
        "measured no repair",
    );
}

/// `operations = "succeed"` and `operations_within` are judged on what
/// the instance API told its callers: the saga's start refused after the
/// delete converges the rack, but its caller heard a failure.
#[test]
fn operations_are_judged_on_what_their_callers_heard() {
    let judged = held(
        "instance-migrate-like-move",
        "saga",
        "all 3 operations succeeded; every operation answered within 6s",
    );
    misses_changed(
        &judged,
        |e| e.operations_within = Some(Duration::from_millis(1)),
        "expected every operation answered within 1ms, but",
    );

    let race = held("start-delete-race", "saga", "converged");
    let exp = misses_changed(
        &race,
        |e| e.operations_succeed = true,
        "expected every operation to succeed, but 00:03:00.042175  API: start instance web1 \
         on sled1: failed: instance 1 is deleted: start refused",
    );
    // A run whose plan made no request has nothing to show.
    misses(
        &exp,
        &RunOutcome {
            steps: Vec::new(),
            ..race.outcome.clone()
        },
        "the plan made no request",
    );
}

/// `operations = "some-fail"` holds only where a caller heard a failure,
/// and its mentions must be in a failed operation's line.
#[test]
fn some_failed_operation_is_judged_on_what_its_caller_heard() {
    let fatal = held(
        "instance-start-while-a-dpd-fails",
        "saga+dpd-notify=fatal",
        "1 of 3 operations answered failure",
    );
    misses_changed(
        &fatal,
        |e| e.failed_operations_mention = vec!["stop instance web1".into()],
        "expected a failed operation to mention \"stop instance web1\", but none does",
    );
    // The same plan under today's notify: every start succeeds.
    let fixed = held(
        "instance-start-while-a-dpd-fails",
        "saga",
        "all 3 operations succeeded",
    );
    misses_changed(
        &fixed,
        |e| {
            e.operations_succeed = false;
            e.operations_some_fail = true;
        },
        "expected some operation to answer failure, but all 3 succeeded",
    );
}
