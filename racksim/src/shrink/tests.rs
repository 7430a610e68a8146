use std::time::Duration;

use racksim_reconciler::discovery::SwitchSlot;

use super::*;

fn plan(steps: &[(u64, Action)]) -> Plan {
    Plan {
        steps: steps
            .iter()
            .map(|(s, a)| Step {
                at: At::Fixed(Duration::from_secs(*s)),
                action: a.clone(),
            })
            .collect(),
    }
}

#[test]
fn open_faults_pair_each_fault_with_its_undo() {
    let p = plan(&[
        (1, Action::HideSwitch(SwitchSlot::Switch1)),
        (2, Action::PowerOff),
        (3, Action::ColdBoot),
        (4, Action::Crash("sled2".into())),
        (5, Action::RevealSwitch(SwitchSlot::Switch1)),
    ]);
    assert_eq!(open_faults(&p), vec![Action::Crash("sled2".into())]);
    assert!(undoes(&Action::ControlPlaneCrash, &Action::ControlPlaneUp));
    assert!(!undoes(
        &Action::Crash("sled1".into()),
        &Action::Restart("sled2".into())
    ));
}

#[test]
fn candidates_are_smaller_or_earlier_and_in_a_fixed_order() {
    let p = plan(&[
        (60, Action::HideSwitch(SwitchSlot::Switch1)),
        (
            120,
            Action::DpdHang {
                switch: SwitchSlot::Switch0,
                window: Duration::from_secs(30),
            },
        ),
        (300, Action::RevealSwitch(SwitchSlot::Switch1)),
    ]);
    let c = candidates(&p);
    assert_eq!(c, candidates(&p));
    for cand in &c {
        let total = |p: &Plan| -> Duration { p.steps.iter().map(|s| s.at.latest()).sum() };
        let windows = |p: &Plan| -> Duration {
            p.steps
                .iter()
                .map(|s| match &s.action {
                    Action::DpdHang { window, .. } | Action::DpdErrors { window, .. } => *window,
                    Action::Latency { latency, .. } => *latency,
                    _ => Duration::ZERO,
                })
                .sum()
        };
        assert!(
            cand.steps.len() < p.steps.len()
                || total(cand) < total(&p)
                || windows(cand) < windows(&p),
            "{cand:?}"
        );
    }
    // The hide with its reveal, as one candidate.
    assert!(c.contains(&plan(&[(
        120,
        Action::DpdHang {
            switch: SwitchSlot::Switch0,
            window: Duration::from_secs(30)
        }
    )])));
    // The reveal halfway to the hide.
    assert!(c.iter().any(
        |cand| cand.steps.len() == 3 && cand.steps[2].at == At::Fixed(Duration::from_secs(180))
    ));
}

/// A scrimlet reboot shrinks like the other faults: it pairs with its
/// `scrimlet-back` (dropping the reboot alone would leave it open), the
/// pair is one candidate to drop, and the back moves halfway to the reboot.
#[test]
fn a_scrimlet_reboot_is_dropped_with_its_back_or_shortened() {
    let p = plan(&[
        (60, Action::ScrimletReboot(SwitchSlot::Switch1)),
        (120, Action::DpdRestart(SwitchSlot::Switch0)),
        (300, Action::ScrimletBack(SwitchSlot::Switch1)),
    ]);
    assert!(open_faults(&p).is_empty());
    assert_eq!(
        open_faults(&without(&p, &[2])),
        vec![Action::ScrimletReboot(SwitchSlot::Switch1)]
    );
    assert!(!undoes(
        &Action::ScrimletReboot(SwitchSlot::Switch0),
        &Action::ScrimletBack(SwitchSlot::Switch1)
    ));
    let c = candidates(&p);
    assert!(c.contains(&plan(&[(120, Action::DpdRestart(SwitchSlot::Switch0))])));
    assert!(c.contains(&plan(&[
        (60, Action::ScrimletReboot(SwitchSlot::Switch1)),
        (120, Action::DpdRestart(SwitchSlot::Switch0)),
        (180, Action::ScrimletBack(SwitchSlot::Switch1)),
    ])));
}
