//! The checker: what a stuck saga reports, and that every invariant it
//! can report is listed.

use std::collections::BTreeSet;

use racksim_nexus::instances::{NodeFailure, SagaNode, SagaRecord, SagaState};
use racksim_sim::check::*;

/// A stuck saga is a gap naming the saga, its instance and sled, the
/// undo that failed and the failure that started the unwind; no other
/// state of a saga is.
#[test]
fn a_stuck_saga_is_a_gap_and_no_other_saga_state_is() {
    let failed = NodeFailure {
        node: SagaNode::Run,
        error: "sled1 went away".into(),
    };
    let mut saga = SagaRecord {
        done: vec![SagaNode::MarkAsStarting, SagaNode::DpdEnsure],
        state: SagaState::Stuck {
            failed: failed.clone(),
            undo: NodeFailure {
                node: SagaNode::DpdEnsure,
                error: "database unavailable".into(),
            },
        },
        ..SagaRecord::new(3, 1, 1)
    };
    assert_eq!(
        stuck_saga_gap(&saga, "web1", "sled1").as_deref(),
        Some(
            "saga 3 (start of web1 on sled1) is stuck: undo of DPD_ENSURE failed: \
             database unavailable (after RUN failed: sled1 went away)"
        )
    );
    for state in [
        SagaState::Running,
        SagaState::Unwinding {
            failed: failed.clone(),
        },
        SagaState::Unwound { failed },
        SagaState::Done,
    ] {
        saga.state = state;
        assert_eq!(
            stuck_saga_gap(&saga, "web1", "sled1"),
            None,
            "{:?}",
            saga.state
        );
    }
}

/// The name a `Violation { invariant: X, .. }` of this module's code
/// reports: a string literal, or a `pub const X: &str` declared here.
fn reported_name(code: &str, value: &str) -> Option<String> {
    if let Some(lit) = value.strip_prefix('"') {
        return Some(lit.trim_end_matches('"').to_string());
    }
    let decl = format!("pub const {value}: &str = \"");
    let at = code.find(&decl)? + decl.len();
    Some(code[at..].split('"').next()?.to_string())
}

/// Every invariant the checker can report is in [`INVARIANTS`] (the
/// list scenario files are checked against), and every listed one is
/// reported somewhere: read from this module's own source, so a new
/// `Violation` with an unlisted name fails here rather than in a
/// scenario file that names it.
#[test]
fn every_reported_invariant_is_listed_and_every_listed_one_reported() {
    let code = include_str!("../src/check.rs");
    let mut reported = BTreeSet::new();
    for line in code.lines().map(str::trim) {
        if line.starts_with("//") {
            continue;
        }
        let Some(value) = line.strip_prefix("invariant: ") else {
            continue;
        };
        let value = value.trim_end_matches(',');
        let name = reported_name(code, value)
            .unwrap_or_else(|| panic!("cannot tell which invariant `{line}` reports"));
        assert!(
            INVARIANTS.contains(&name.as_str()),
            "check.rs reports {name:?}, which INVARIANTS does not list"
        );
        reported.insert(name);
    }
    let listed: BTreeSet<String> = INVARIANTS.iter().map(|s| s.to_string()).collect();
    assert_eq!(reported, listed, "listed invariants nothing reports");
}
