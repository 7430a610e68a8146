//! The era's control plane is what runs: a run configured with another
//! control plane than its era's default behaves differently, so the field
//! is not decorative.

use std::time::Duration;

use racksim_reconciler::discovery::SwitchSlot;

use racksim_nexus::instances::StartImpl;
use racksim_sim::{
    era::{NexusServiceNat, PeriodicTask},
    run, Action, Era, InstanceSpec, Plan, RackSpec, RunConfig, RunOutcome, ServiceNat, Verdict,
};

fn task_lines(outcome: &RunOutcome, text: &str) -> usize {
    outcome
        .trace
        .iter()
        .filter(|l| l.text.contains(text))
        .count()
}

/// The gaps of a run with a task switched off: no trace line of the task
/// (`task`), and no convergence (`what` says what should have repaired it).
fn gaps_without<'a>(outcome: &'a RunOutcome, task: &str, what: &str) -> &'a [String] {
    assert_eq!(task_lines(outcome, task), 0, "{task} ran");
    let Verdict::NotConverged { gaps, .. } = &outcome.verdict else {
        panic!("converged without {what}: {:?}", outcome.verdict);
    };
    gaps
}

/// `legacy` repairs a dpd restart with Nexus up only through Nexus's
/// service-zone NAT task: its rows are in the database, and the restarted
/// dpd pulls them from generation 0. With the task off, nobody restores
/// switch1.
#[test]
fn legacy_without_nexus_service_nat_leaves_a_restarted_dpd_empty() {
    let cfg = RunConfig::new(RackSpec::madrid(), ServiceNat::LEGACY, 5)
        .with_plan(Plan::new().at(
            Duration::from_secs(20 * 60),
            Action::DpdRestart(SwitchSlot::Switch1),
        ))
        .with_deadline(Duration::from_secs(40 * 60));
    assert_eq!(
        cfg.era.nexus_service_nat,
        NexusServiceNat::InventoryTracker,
        "the legacy era's default"
    );
    let default = run(&cfg);
    assert!(default.verdict.converged(), "{:?}", default.verdict);
    assert!(task_lines(&default, "nexus service-zone NAT tracker #") > 0);
    // The repair is switch1's own pull, right after its restart.
    assert!(
        default
            .trace
            .iter()
            .any(|l| l.at >= Duration::from_secs(20 * 60)
                && l.host == "switch1"
                && l.text
                    .starts_with("dpd NAT RPW: applied 3 change(s) from generation 0")),
        "switch1 did not pull the tracker's rows after its restart"
    );

    let era = Era {
        nexus_service_nat: NexusServiceNat::Off,
        ..cfg.era
    };
    let without = run(&cfg.clone().with_era(era));
    let gaps = gaps_without(
        &without,
        "nexus service-zone NAT tracker",
        "anyone to restore switch1",
    );
    assert!(
        gaps.iter()
            .any(|g| g.starts_with("switch1 lacks the NAT entry")),
        "{gaps:?}"
    );
}

fn instance_run(era: impl FnOnce(Era) -> Era) -> RunOutcome {
    let instance = |s: &str| s.to_string();
    let mut cfg = RunConfig::new(RackSpec::madrid(), ServiceNat::SCRIMLET_LOCAL, 3)
        .with_start(StartImpl::Saga)
        .with_plan(
            Plan::new()
                .at(
                    Duration::from_secs(60),
                    Action::InstanceCreate {
                        instance: instance("web1"),
                        sled: instance("sled2"),
                    },
                )
                .at(
                    Duration::from_secs(120),
                    Action::InstanceStop {
                        instance: instance("web1"),
                    },
                )
                .at(
                    Duration::from_secs(180),
                    Action::InstanceStart {
                        instance: instance("web1"),
                        sled: instance("sled1"),
                    },
                ),
        )
        .with_deadline(Duration::from_secs(15 * 60));
    cfg.instances = vec![InstanceSpec {
        name: "web1".into(),
    }];
    cfg.era = era(cfg.era);
    run(&cfg)
}

/// Instance NAT reaches the switches through dpd's RPW, and V2P the
/// sleds through Nexus's V2P task, in the current era. Switched off (the
/// eras before omicron #3804 and #5568), the operations push each inline
/// instead: the same networking, with no task line in the trace.
#[test]
fn the_current_eras_instance_tasks_switched_off_push_inline_instead() {
    let default = instance_run(|era| {
        assert_eq!(
            (era.dpd_nat_rpw, era.nexus_v2p),
            (PeriodicTask::On, PeriodicTask::On)
        );
        era
    });
    assert!(default.verdict.converged(), "{:?}", default.verdict);
    assert!(task_lines(&default, "dpd NAT RPW: applied") > 0);
    assert!(task_lines(&default, "nexus V2P RPW") > 0);

    for (era, task) in [
        (
            (|era| Era {
                dpd_nat_rpw: PeriodicTask::Off,
                ..era
            }) as fn(Era) -> Era,
            "dpd NAT RPW",
        ),
        (
            |era| Era {
                nexus_v2p: PeriodicTask::Off,
                ..era
            },
            "nexus V2P RPW",
        ),
    ] {
        let inline = instance_run(era);
        assert_eq!(task_lines(&inline, task), 0, "{task} ran");
        assert!(
            inline.verdict.converged(),
            "without {task}: {:?}",
            inline.verdict
        );
    }
}
