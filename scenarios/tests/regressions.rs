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
