use super::*;

fn run(seed: u64, violated: Option<&'static str>, failed_as_allowed: bool) -> RunSummary {
    RunSummary {
        seed,
        converged_at: None,
        settled_after: None,
        slowest_repair: None,
        judgement: Ok(()),
        violated,
        failed_as_allowed,
        testbed_error: false,
        sim_time: Duration::ZERO,
        events: 0,
    }
}

fn any(body: &str) -> Expectation {
    let text = format!(
        "name = \"m\"\ndescription = \"d\"\nkind = \"instances\"\nrack = \"madrid\"\n\
         ntp_return_switch = \"switch0\"\n\n[expect.naive]\noutcome = \"any\"\n\
         deadline = \"5m\"\n{body}"
    );
    let s = crate::file::parse("m.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    s.expectations[&s.strategy("naive").unwrap()].clone()
}

/// Each listed invariant must be broken by some run, and only a run
/// that broke that very one counts.
#[test]
fn some_seeds_violate_needs_each_listed_invariant() {
    let exp = any("some_seeds_violate = [\"one-vmm\", \"nat-follows-vmm\"]\n");
    let runs = [run(1, Some("one-vmm"), false), run(2, None, false)];
    let s = some_seeds(&exp, &runs, describe_seeds(&[1, 2])).unwrap();
    assert!(!s.met);
    assert_eq!(
        s.failure().unwrap(),
        "expected some of seeds 1..=2 to violate nat-follows-vmm, none did"
    );
    let runs = [
        run(1, Some("one-vmm"), false),
        run(2, Some("nat-follows-vmm"), false),
        run(3, Some("nat-follows-vmm"), false),
    ];
    let s = some_seeds(&exp, &runs, describe_seeds(&[1, 2, 3])).unwrap();
    assert!(s.met, "{s:?}");
    assert_eq!(
        s.violate.iter().map(|v| v.violating).collect::<Vec<_>>(),
        [1, 2]
    );
}

/// `some_seeds_fail` counts runs that failed for an allowed reason,
/// not runs that broke an invariant or converged.
#[test]
fn some_seeds_fail_needs_a_run_that_failed_as_allowed() {
    let exp = any("verdict_mentions = [\"vmm\"]\nsome_seeds_fail = true\n");
    let runs = [run(1, None, false), run(2, Some("one-vmm"), false)];
    let s = some_seeds(&exp, &runs, describe_seeds(&[1, 2])).unwrap();
    assert!(!s.met);
    assert!(
        s.failure().unwrap().contains("to fail to converge"),
        "{s:?}"
    );
    let runs = [run(1, None, false), run(2, None, true)];
    let s = some_seeds(&exp, &runs, describe_seeds(&[1, 2])).unwrap();
    assert!(s.met && s.failing == 1, "{s:?}");
    // Both requirements at once: both must hold.
    let exp = any(
        "some_seeds_violate = \"one-vmm\"\nverdict_mentions = [\"vmm\"]\nsome_seeds_fail = true\n",
    );
    let s = some_seeds(&exp, &runs, describe_seeds(&[1, 2])).unwrap();
    assert!(!s.met);
    assert!(s.failure().unwrap().contains("to violate one-vmm"), "{s:?}");
    // A converges expectation has no sweep-level requirement.
    let text =
        "name = \"m\"\ndescription = \"d\"\nrack = \"madrid\"\nntp_return_switch = \"switch0\"\n\n\
                [expect.sled-task]\noutcome = \"converges\"\nwithin = \"5m\"\n";
    let s = crate::file::parse("m.toml", text).unwrap();
    let exp = &s.expectations[&s.strategy("sled-task").unwrap()];
    assert!(some_seeds(exp, &runs, "x".into()).is_none());
}
