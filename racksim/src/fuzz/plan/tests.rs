use racksim_nexus::instances::StartImpl;
use racksim_sim::ServiceNat;

use super::*;
use crate::file::Outcome;

fn opts(rack: &str, strategy: ServiceNat) -> Options {
    Options::new(rack, strategy, StartImpl::Saga).unwrap()
}

/// Every drawn plan is a valid scenario (`scenario` panics otherwise),
/// ends its chaos before its liveness window, and prints the same bytes
/// when parsed and written again.
#[test]
fn drawn_plans_are_valid_scenarios_and_round_trip() {
    for rack in ["madrid", "standard"] {
        let o = opts(rack, ServiceNat::SCRIMLET_LOCAL);
        for seed in 0..300 {
            let text = plan_text(&o, seed);
            let s = scenario(&o, seed);
            let exp = &s.expectations[&o.file_strategy()];
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
    let o = opts("madrid", ServiceNat::SLED_TASK);
    let kinds: std::collections::BTreeSet<String> =
        (0..40).map(|seed| scenario(&o, seed).description).collect();
    assert!(kinds.len() > 30, "{kinds:?}");
    let every: String = kinds.iter().cloned().collect();
    for kind in KINDS.iter().chain(&LATER_KINDS) {
        assert!(every.contains(kind), "no seed of 40 enables {kind}");
    }
}

#[test]
fn replacement_only_of_bare_scrimlets() {
    let madrid = RackSpec::madrid();
    assert!(!scrimlet_is_bare(&madrid, SwitchSlot::Switch0));
    assert!(scrimlet_is_bare(&RackSpec::standard(), SwitchSlot::Switch1));
    let o = opts("madrid", ServiceNat::SLED_TASK);
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

/// Every scrimlet reboot of `plan` as (switch, from, to): each
/// `reboot-scrimlet` with the `scrimlet-back` of its switch that follows.
fn reboots(plan: &Plan) -> Vec<(SwitchSlot, Duration, Duration)> {
    let steps = &plan.steps;
    steps
        .iter()
        .enumerate()
        .filter_map(|(i, st)| match st.action {
            Action::ScrimletReboot(sw) => {
                let back = steps[i + 1..]
                    .iter()
                    .find(|b| b.action == Action::ScrimletBack(sw))
                    .unwrap_or_else(|| panic!("{sw}'s reboot at {} never ends", st.at));
                Some((sw, st.at.latest(), back.at.latest()))
            }
            _ => None,
        })
        .collect()
}

/// The fuzzer draws the coupled scrimlet reboot: some seeds of 1..=100 on
/// madrid enable it, their plan text (what `racksim fuzz --plan` prints and
/// a replay runs) has both steps, and each reboot ends within the chaos.
#[test]
fn some_seeds_draw_scrimlet_reboots_and_their_plan_text_shows_them() {
    let o = opts("madrid", ServiceNat::SLED_TASK);
    let mut drawn = 0;
    for seed in 1..=100 {
        let s = scenario(&o, seed);
        let r = reboots(&s.plan);
        if r.is_empty() {
            continue;
        }
        drawn += 1;
        let text = plan_text(&o, seed);
        assert!(s.description.contains("reboot-scrimlet"), "seed {seed}");
        for (sw, from, to) in r {
            let step = |action: &str, at: Duration| {
                format!(
                    "at = \"{}\"\naction = \"{action}\"\nswitch = \"{sw}\"\n",
                    write::duration(at)
                )
            };
            assert!(
                text.contains(&step("reboot-scrimlet", from)),
                "seed {seed}:\n{text}"
            );
            assert!(
                text.contains(&step("scrimlet-back", to)),
                "seed {seed}:\n{text}"
            );
            let Outcome::ConvergesWithin(within) = s.expectations[&o.file_strategy()].outcome
            else {
                panic!("seed {seed}: fuzz plans expect convergence");
            };
            assert!(from < to && to + LIVENESS <= within, "seed {seed}");
        }
    }
    // Half of the seeds enable the kind; most of those keep a reboot.
    assert!(
        drawn >= 25,
        "only {drawn} of 100 seeds draw a scrimlet reboot"
    );
}

/// What overlaps a scrimlet reboot of `plan` on the same scrimlet: a crash
/// of its sled or of its switch zone, its sidecar's power cycle, its
/// replacement, a rack power cycle, or another reboot of it (each fault
/// from its step to the step that undoes it; a replacement is for good).
fn reboot_overlaps(plan: &Plan, spec: &RackSpec) -> Vec<String> {
    let steps = &plan.steps;
    let until = |i: usize, undo: &dyn Fn(&Action) -> bool| {
        steps[i + 1..]
            .iter()
            .find(|b| undo(&b.action))
            .map_or(Duration::MAX, |b| b.at.latest())
    };
    let mut found = Vec::new();
    for (sw, from, to) in reboots(plan) {
        let sled = spec.sleds[spec.switch(sw).unwrap().scrimlet].name.clone();
        let zone = sw.to_string();
        for (i, st) in steps.iter().enumerate() {
            let t = st.at.latest();
            let end = match &st.action {
                Action::Crash(h) if *h == sled || *h == zone => {
                    until(i, &|a| *a == Action::Restart(h.clone()))
                }
                Action::SidecarPowerOff(x) if *x == sw => {
                    until(i, &|a| *a == Action::SidecarPowerOn(sw))
                }
                Action::ScrimletReboot(x) if *x == sw && t != from => {
                    until(i, &|a| *a == Action::ScrimletBack(sw))
                }
                Action::PowerOff => until(i, &|a| *a == Action::ColdBoot),
                Action::ReplaceScrimlet(x) if *x == sw => Duration::MAX,
                _ => continue,
            };
            if !(end < from || t > to) {
                found.push(format!(
                    "{} at {} overlaps {sw}'s reboot {}..{}",
                    st.action,
                    st.at,
                    write::duration(from),
                    write::duration(to)
                ));
            }
        }
    }
    found
}

/// No plan draws a scrimlet reboot overlapping another fault on the same
/// scrimlet ([`reboot_overlaps`], which does find one in a plan that has
/// it).
#[test]
fn scrimlet_reboots_overlap_no_other_fault_on_their_scrimlet() {
    let madrid = RackSpec::madrid();
    let at = |s: u64, action: Action| Step {
        at: At::Fixed(Duration::from_secs(s)),
        action,
    };
    let overlapping = Plan {
        steps: vec![
            at(10, Action::Crash("sled1".into())),
            at(20, Action::ScrimletReboot(SwitchSlot::Switch1)),
            at(30, Action::Restart("sled1".into())),
            at(40, Action::ScrimletBack(SwitchSlot::Switch1)),
            at(50, Action::SidecarPowerOff(SwitchSlot::Switch0)),
            at(60, Action::SidecarPowerOn(SwitchSlot::Switch0)),
        ],
    };
    assert_eq!(reboot_overlaps(&overlapping, &madrid).len(), 1);
    let mut seen = 0;
    for rack in ["madrid", "standard"] {
        let o = opts(rack, ServiceNat::SCRIMLET_LOCAL);
        let spec = RackSpec::by_name(rack).unwrap();
        for seed in 0..300 {
            let plan = scenario(&o, seed).plan;
            seen += reboots(&plan).len();
            let found = reboot_overlaps(&plan, &spec);
            assert!(found.is_empty(), "{rack} seed {seed}: {found:?}");
        }
    }
    assert!(seen > 100, "only {seen} reboots drawn");
}

/// The kinds added later draw from a generator of their own: without
/// them, every seed's plan is the one it drew before they existed, and with
/// them it only gains their steps.
#[test]
fn later_kinds_only_add_their_own_steps() {
    for rack in ["madrid", "standard", "full"] {
        let o = opts(rack, ServiceNat::SLED_TASK);
        for seed in 0..200 {
            let with = draw(&o, seed);
            let without = draw_with(&o, seed, false);
            let mut stripped = with.plan.clone();
            stripped.steps.retain(|st| {
                !matches!(
                    st.action,
                    Action::ScrimletReboot(_)
                        | Action::ScrimletBack(_)
                        | Action::MgsErrors { .. }
                        | Action::MgsHang { .. }
                        | Action::DbStall { .. }
                        | Action::DbErrors { .. }
                )
            });
            assert_eq!(stripped, without.plan, "{rack} seed {seed}");
            assert_eq!(with.instances, without.instances, "{rack} seed {seed}");
            assert_eq!(
                with.ntp_return_switch, without.ntp_return_switch,
                "{rack} seed {seed}"
            );
        }
    }
}
