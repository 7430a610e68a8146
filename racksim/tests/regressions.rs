//! How regression files are read, and what the NAT-sequence regression
//! owes to its database stall. Each file in `scenarios/regressions/` is run at the
//! seed and strategy its `# Replay:` comment names, as a test of its own,
//! by `tests/cells.rs` (`regression::NAME`).

use racksim::{runner, shrink};

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

/// The NAT-sequence finding is the stall's: the same file and seed without
/// its `db-stall` step (every statement visible at once) converges. With
/// it, the run is deterministic: the same seed gives the same trace, the
/// order in which the stalled statements go on included.
#[test]
fn nat_row_missed_only_with_the_stall_and_deterministically() {
    let path = std::path::Path::new(shrink::REGRESSIONS_DIR)
        .join("nat-row-missed-when-its-version-commits-late.toml");
    let r = shrink::regression(path).unwrap_or_else(|e| panic!("{e}"));
    let stalls = |s: &racksim::file::Scenario| {
        s.plan
            .steps
            .iter()
            .filter(|st| matches!(st.action, racksim_sim::Action::DbStall { .. }))
            .count()
    };
    assert_eq!(stalls(&r.scenario), 1);
    let a = runner::run(&r.scenario, r.strategy, r.seed).expect("has saga");
    let b = runner::run(&r.scenario, r.strategy, r.seed).expect("has saga");
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
    none.plan
        .steps
        .retain(|st| !matches!(st.action, racksim_sim::Action::DbStall { .. }));
    assert_eq!(stalls(&none), 0);
    let c = runner::run(&none, r.strategy, r.seed).expect("has saga");
    assert!(
        matches!(
            c.outcome.verdict,
            racksim_sim::run::Verdict::Converged { .. }
        ),
        "without the stall: {:?}",
        c.outcome.verdict
    );
    assert!(drawn(&c.outcome.trace).is_empty());
}
