use racksim_reconciler::instances::StartImpl;
use racksim_sim::Strategy;

use super::*;
use crate::file::Outcome;

fn opts(rack: &str, strategy: Strategy) -> Options {
    Options::new(rack, strategy, StartImpl::Saga).unwrap()
}

/// Every drawn plan is a valid scenario (`scenario` panics otherwise),
/// ends its chaos before its liveness window, and prints the same bytes
/// when parsed and written again.
#[test]
fn drawn_plans_are_valid_scenarios_and_round_trip() {
    for rack in ["madrid", "standard"] {
        let o = opts(rack, Strategy::SCRIMLET_LOCAL);
        for seed in 0..300 {
            let text = plan_text(&o, seed);
            let s = scenario(&o, seed);
            let exp = &s.expectations[&o.variant()];
            let Outcome::ConvergesWithin(within) = exp.outcome else {
                panic!("seed {seed}: fuzz plans expect convergence");
            };
            let last = s.plan.steps.iter().map(|st| st.at.latest()).max();
            assert!(
                last.is_none_or(|t| t + LIVENESS <= within + CREATE_RETRY),
                "seed {seed}"
            );
            // The text is the scenario: written again, the same bytes.
            let header: Vec<String> = text
                .lines()
                .take_while(|l| l.starts_with('#'))
                .map(|l| l.trim_start_matches("# ").to_string())
                .collect();
            assert_eq!(write::scenario_toml(&s, &header), text, "seed {seed}");
        }
    }
}

/// Swarm: seeds differ in which kinds of fault they enable at all.
#[test]
fn seeds_enable_different_kinds() {
    let o = opts("madrid", Strategy::SLED_TASK);
    let kinds: std::collections::BTreeSet<String> =
        (0..40).map(|seed| scenario(&o, seed).description).collect();
    assert!(kinds.len() > 30, "{kinds:?}");
    let every: String = kinds.iter().cloned().collect();
    for kind in KINDS {
        assert!(every.contains(kind), "no seed of 40 enables {kind}");
    }
}

#[test]
fn replacement_only_of_bare_scrimlets() {
    let madrid = RackSpec::madrid();
    assert!(!scrimlet_is_bare(&madrid, SwitchSlot::Switch0));
    assert!(scrimlet_is_bare(&RackSpec::standard(), SwitchSlot::Switch1));
    let o = opts("madrid", Strategy::SLED_TASK);
    for seed in 0..200 {
        let s = scenario(&o, seed);
        assert!(
            !s.plan
                .steps
                .iter()
                .any(|st| matches!(st.action, Action::ReplaceScrimlet(_))),
            "seed {seed}"
        );
    }
}
