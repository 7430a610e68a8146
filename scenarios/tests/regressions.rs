//! Every file in `scenarios/regressions/` (written by `racksim shrink`, or
//! by hand) runs at the seed and strategy its `# Replay:` comment names, and
//! must meet its expectation: a regression guarded against stays guarded,
//! and a defect a file records (until it is fixed) is still reproduced.

use racksim::{runner, shrink};

#[test]
fn every_regression_file_meets_its_expectation() {
    let files = shrink::regressions(std::path::Path::new(shrink::REGRESSIONS_DIR))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        files.len() >= 3,
        "scenarios/regressions/ holds {} files",
        files.len()
    );
    for r in files {
        let judged = runner::run(&r.scenario, r.variant, r.seed)
            .unwrap_or_else(|| panic!("{}: no expectation for {}", r.path.display(), r.variant));
        assert!(
            judged.judgement.is_ok(),
            "{} --seed {} --strategy {}: {:?}\n{}",
            r.path.display(),
            r.seed,
            r.variant,
            judged.judgement,
            judged.outcome.verdict.lines().join("\n")
        );
    }
}

#[test]
fn replay_comments_are_read() {
    assert_eq!(
        shrink::replay_of(
            "# a\n# Replay: racksim run x.toml --seed 18 --strategy saga\nname = \"x\"\n"
        ),
        Some((18, "saga".to_string()))
    );
    // Only in the comment block at the top.
    assert_eq!(
        shrink::replay_of("name = \"x\"\n# Replay: racksim run x --seed 1 --strategy saga\n"),
        None
    );
}

/// The NAT-sequence finding is the window's: the same file and seed with
/// no window (every statement visible at once) converges. With it, the
/// run is deterministic: the same seed gives the same trace, windows and
/// versions included.
#[test]
fn nat_row_missed_only_with_the_window_and_deterministically() {
    let path = std::path::Path::new(shrink::REGRESSIONS_DIR)
        .join("nat-row-missed-when-its-version-commits-late.toml");
    let r = shrink::regression(path).unwrap_or_else(|e| panic!("{e}"));
    assert!(!r.scenario.nat_window.is_zero());
    let a = runner::run(&r.scenario, r.variant, r.seed).expect("has saga");
    let b = runner::run(&r.scenario, r.variant, r.seed).expect("has saga");
    assert_eq!(
        a.outcome.trace, b.outcome.trace,
        "same seed, different trace"
    );
    let drawn = |t: &[racksim_sim::trace::TraceLine]| {
        t.iter()
            .filter(|l| l.text.contains("drew NAT version"))
            .map(|l| l.text.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        drawn(&a.outcome.trace).len(),
        2,
        "one statement per instance"
    );
    match &a.outcome.verdict {
        racksim_sim::run::Verdict::NotConverged { gaps, .. } => {
            assert!(
                gaps.iter()
                    .all(|g| g.contains("lacks the NAT entry of instance web1")),
                "{gaps:?}"
            )
        }
        v => panic!("expected not converged, got {v:?}"),
    }

    let mut none = r.scenario.clone();
    none.nat_window = std::time::Duration::ZERO;
    let c = runner::run(&none, r.variant, r.seed).expect("has saga");
    assert!(
        matches!(
            c.outcome.verdict,
            racksim_sim::run::Verdict::Converged { .. }
        ),
        "without the window: {:?}",
        c.outcome.verdict
    );
    assert!(drawn(&c.outcome.trace).is_empty());
}
