//! Finding new bugs: the fuzzer, the shrinker and mutants, end to end.
//! Sizes are bounded so the suite stays fast (a few hundred short runs).

use crate::common;
use common::{racksim, scratch};

use racksim::{
    file, fuzz,
    fuzz::{Failure, Options},
    report, runner, shrink,
};
use racksim_mutants::Mutant;
use racksim_nexus::instances::StartImpl;
use racksim_sim::ServiceNat;

fn scrimlet_local() -> Options {
    Options::new("madrid", ServiceNat::SCRIMLET_LOCAL, StartImpl::Saga).unwrap()
}

/// The fuzzer finds a seeded bug (the per-scrimlet task without its
/// periodic timer: nobody restores a table a dpd restart emptied) within
/// 200 seeds, on a seed the real reconciler passes; the shrinker reduces
/// that plan to at most three steps that still fail the same way, and the
/// real reconciler meets the reduced plan's expectation.
#[test]
fn fuzz_finds_a_mutant_and_shrink_reduces_its_plan() {
    let opts = scrimlet_local();
    let mutant = Some(Mutant::NoPeriodicTimer);
    let (seed, failure) = (1..=200)
        .find_map(|seed| {
            let f = fuzz::run_seed(&opts, seed, mutant).failure?;
            fuzz::run_seed(&opts, seed, None)
                .failure
                .is_none()
                .then_some((seed, f))
        })
        .expect("a seed of 1..=200 that fails only with the mutant");
    let scenario = fuzz::scenario(&opts, seed);
    let shrunk = shrink::shrink(&scenario, opts.file_strategy(), seed, mutant, &|_, _| {}).unwrap();
    assert_eq!(shrunk.failure, failure);
    assert!(
        shrunk.scenario.plan.steps.len() <= 3,
        "seed {seed}: shrunk to {} steps:\n{:#?}",
        shrunk.scenario.plan.steps.len(),
        shrunk.scenario.plan
    );
    // Still fails the same way under the mutant; the real code meets it.
    let exp = &shrunk.scenario.expectations[&opts.file_strategy()];
    let mut cfg = runner::config(&shrunk.scenario, opts.file_strategy(), seed).unwrap();
    cfg.mutant = mutant;
    assert!(failure.matches(exp, &racksim_sim::run(&cfg)));
    let real = runner::run(&shrunk.scenario, opts.file_strategy(), seed).unwrap();
    assert!(real.judgement.is_ok(), "{:?}", real.judgement);
    // Deterministic: the same input shrinks to the same plan.
    let again = shrink::shrink(&scenario, opts.file_strategy(), seed, mutant, &|_, _| {}).unwrap();
    assert_eq!(again.scenario.plan, shrunk.scenario.plan);
    // The regression file parses back to the same plan, expecting what the
    // real reconciler does.
    let text = shrink::regression_toml(&shrunk, "fuzz.toml", &[], "reg", "reg.toml");
    let parsed = file::parse("reg.toml", &text).unwrap();
    assert_eq!(parsed.plan, shrunk.scenario.plan);
    assert!(text.contains(&format!(
        "--seed {seed} --strategy saga --mutant no-periodic-timer"
    )));
}

/// The shrinker drops a scrimlet reboot with its `scrimlet-back` and
/// shortens the one it keeps: the catalogue's `scrimlet-reboot` fails
/// under `legacy+nexus-service-nat=off` (the rebooted switch gets back
/// only the rebooted sled's zones' entries); with a second reboot of the
/// other switch added, it shrinks to one reboot and its return, closer
/// together than drawn.
#[test]
fn shrink_drops_and_shortens_scrimlet_reboots() {
    use racksim_reconciler::discovery::SwitchSlot;
    use racksim_sim::{Action, At, Step};
    use std::time::Duration;
    let mut s = racksim::catalogue::get("scrimlet-reboot").unwrap();
    let v = s.strategy("legacy+nexus-service-nat=off").unwrap();
    let min = |m: u64| Duration::from_secs(60 * m);
    s.plan.steps.splice(
        0..0,
        [
            Step {
                at: At::Fixed(min(2)),
                action: Action::ScrimletReboot(SwitchSlot::Switch0),
            },
            Step {
                at: At::Fixed(min(4)),
                action: Action::ScrimletBack(SwitchSlot::Switch0),
            },
        ],
    );
    let shrunk = shrink::shrink(&s, v, 1, None, &|_, _| {}).unwrap();
    let steps = &shrunk.scenario.plan.steps;
    let [reboot, back] = &steps[..] else {
        panic!("shrunk to {} steps: {steps:#?}", steps.len());
    };
    let Action::ScrimletReboot(sw) = reboot.action else {
        panic!("{steps:#?}");
    };
    assert_eq!(back.action, Action::ScrimletBack(sw), "{steps:#?}");
    // Both reboots last at least 2m as written (switch1's 10m..12m-13m).
    assert!(
        back.at.latest() - reboot.at.latest() < min(2),
        "{sw}'s reboot not shortened: {steps:#?}"
    );
    assert!(
        matches!(&shrunk.failure, Failure::NotConverged(gap) if gap.contains(&format!("{sw} lacks"))),
        "{}",
        shrunk.failure
    );
}

/// A plan that does not fail is refused, not "shrunk".
#[test]
fn shrink_refuses_a_passing_plan() {
    let s = racksim::catalogue::get("stale-entry").unwrap();
    let v = s.strategy("sled-task").unwrap();
    let err = shrink::shrink(&s, v, 1, None, &|_, _| {}).unwrap_err();
    assert!(err.contains("does not fail"), "{err}");
}

/// The printed plan is a scenario file, and running that file prints the
/// same bytes as running the drawn plan.
#[test]
fn a_fuzz_plan_file_replays_the_fuzz_run() {
    let dir = scratch("fuzz-plan");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.toml");
    for seed in [3, 18] {
        let (code, text, err) = racksim(&[
            "fuzz",
            "--plan",
            &seed.to_string(),
            "--strategy",
            "scrimlet-local",
        ]);
        assert_eq!(code, Some(0), "{err}");
        std::fs::write(&path, &text).unwrap();
        let arg = path.display().to_string();
        let (_, from_file, _) = racksim(&[
            "run",
            &arg,
            "--seed",
            &seed.to_string(),
            "--strategy",
            "saga",
        ]);
        let mut drawn = fuzz::scenario(&scrimlet_local(), seed);
        drawn.origin = arg.clone();
        let v = drawn.strategy("saga").unwrap();
        let judged = runner::run(&drawn, v, seed).unwrap();
        assert_eq!(
            from_file,
            report::render(&drawn, &arg, v, seed, false, &judged)
        );
    }
}

fn fuzz_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["fuzz", "--json", "--strategy", "sled-task"];
    all.extend_from_slice(args);
    let (code, out, err) = racksim(&all);
    assert!(matches!(code, Some(0 | 1)), "{err}");
    serde_json::from_str(&out).unwrap()
}

/// The same seeds give the same output whatever the thread count, and
/// shards 0/3, 1/3, 2/3 together run every seed once.
#[test]
fn fuzz_output_is_independent_of_threads_and_shards_add_up() {
    let (_, one, _) = racksim(&["fuzz", "--seeds", "1..24", "--jobs", "1"]);
    let (_, two, _) = racksim(&["fuzz", "--seeds", "1..24", "--jobs", "2"]);
    assert_eq!(one, two);
    assert!(one.contains("runs: 24"), "{one}");
    let whole = fuzz_json(&["--seeds", "1..24", "--jobs", "2"]);
    let shards: Vec<serde_json::Value> = (0..3)
        .map(|i| fuzz_json(&["--seeds", "1..24", "--shard", &format!("{i}/3")]))
        .collect();
    for key in ["runs", "passed", "failed"] {
        let sum: u64 = shards.iter().map(|s| s[key].as_u64().unwrap()).sum();
        assert_eq!(sum, whole[key].as_u64().unwrap(), "{key}");
    }
    let mut failing: Vec<u64> = shards
        .iter()
        .flat_map(|s| s["failures"].as_array().unwrap().clone())
        .map(|f| f["seed"].as_u64().unwrap())
        .collect();
    failing.sort();
    let whole_failing: Vec<u64> = whole["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["seed"].as_u64().unwrap())
        .collect();
    assert_eq!(failing, whole_failing);
}

#[test]
fn fuzz_rejects_bad_input() {
    for (args, want) in [
        (vec!["fuzz", "--seeds", "5..1"], "invalid seed range"),
        (
            vec!["fuzz", "--seeds", "1..2", "--rack", "nope"],
            "unknown rack",
        ),
        (
            vec!["fuzz", "--seeds", "1..2", "--strategy", "sagas"],
            "unknown strategy",
        ),
        (
            vec!["fuzz", "--seeds", "1..2", "--start", "fast"],
            "unknown start",
        ),
        (
            vec!["fuzz", "--seeds", "1..2", "--mutant", "nope"],
            "unknown mutant",
        ),
        (vec!["fuzz"], "--seeds"),
    ] {
        let (code, _, err) = racksim(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// How failures are told apart, which is what shrinking preserves.
#[test]
fn failures_name_the_invariant_or_the_missing_item() {
    let f = Failure::NotConverged("switch1 lacks x".into());
    assert_eq!(f.to_string(), "not converged: switch1 lacks x");
    assert_eq!(
        Failure::Invariant("one-vmm").to_string(),
        "invariant one-vmm violated"
    );
}

/// Fuzzing upstream's code before a fix finds the bug: under
/// `saga+nat-ensure=matches-removed` (the ensure before omicron #4610)
/// seeds 1..40 of madrid lose instances' NAT, unlisted, while today's
/// `saga` passes every one of them; a failing seed's plan file replays
/// under the same strategy. A choice no run could tell apart is refused.
#[test]
fn fuzzing_an_era_before_a_fix_finds_its_bug() {
    let before = fuzz_json(&[
        "--seeds",
        "1..40",
        "--start",
        "saga+nat-ensure=matches-removed",
    ]);
    assert_eq!(before["start"], "saga+nat-ensure=matches-removed");
    assert!(before["unlisted"].as_u64().unwrap() > 0, "{before}");
    let first = &before["failures"][0];
    assert!(
        first["failure"]
            .as_str()
            .is_some_and(|r| r.contains("lacks the NAT entry of instance")),
        "{first}"
    );
    let today = fuzz_json(&["--seeds", "1..40", "--start", "saga"]);
    assert_eq!(today["failed"], 0, "{today}");

    let seed = first["seed"].as_u64().unwrap().to_string();
    let (code, text, err) = racksim(&[
        "fuzz",
        "--plan",
        &seed,
        "--strategy",
        "sled-task",
        "--start",
        "saga+nat-ensure=matches-removed",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let dir = scratch("fuzz-era");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.toml");
    std::fs::write(&path, &text).unwrap();
    let (code, _, _) = racksim(&[
        "run",
        &path.display().to_string(),
        "--seed",
        &seed,
        "--strategy",
        "saga+nat-ensure=matches-removed",
        "--expect",
    ]);
    assert_eq!(code, Some(1), "the plan replays its failure");

    let (code, _, err) = racksim(&[
        "fuzz",
        "--seeds",
        "1..2",
        "--start",
        "saga+dpd-notify=logged",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("already that era"), "{err}");
}
