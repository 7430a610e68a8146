//! Services take their time (issue 38): a RUN slower than Nexus's 60 s
//! sled-agent timeout decides a start.

use std::time::Duration;

use racksim_reconciler::discovery::SwitchSlot;

use racksim_nexus::instances::StartImpl;
use racksim_sim::{
    run, services::ServiceTime, Action, InstanceSpec, Plan, RackSpec, RunConfig, RunOutcome,
    RunReply, ServiceNat,
};

/// web2 created on sled2 at 20 s on the standard rack, saga starts, RUN
/// taking `run_time`, sled-agent answering RUN as `reply` says.
fn start_with(run_time: Duration, reply: RunReply) -> RunOutcome {
    let plan = Plan::new().at(
        Duration::from_secs(20),
        Action::InstanceCreate {
            instance: "web2".into(),
            sled: "sled2".into(),
        },
    );
    let mut config = RunConfig::new(RackSpec::standard(), ServiceNat::SCRIMLET_LOCAL, 1)
        .with_start(StartImpl::Saga)
        .with_ntp_return_switch(SwitchSlot::Switch1)
        .with_plan(plan)
        .with_deadline(Duration::from_secs(11 * 60));
    config.era.run_reply = reply;
    config.instances = vec![InstanceSpec {
        name: "web2".into(),
    }];
    config.service_times.run = ServiceTime::Fixed(run_time);
    run(&config)
}

fn lines(outcome: &RunOutcome, has: &str) -> Vec<(Duration, String)> {
    outcome
        .trace
        .iter()
        .filter(|l| l.text.contains(has))
        .map(|l| (l.at, format!("{} {}", l.host, l.text)))
        .collect()
}

/// Before omicron #4691 sled-agent held RUN until the Propolis zone was
/// installed and booted: a 90 s boot (omicron #3927: 81 s) outlasts Nexus's
/// 60 s timeout, the start saga unwinds, and REGISTER's undo unregisters
/// the VMM (`vmm_unregister`).
/// The start fails; nothing leaks. Since #4691 RUN is answered at once and
/// the same boot starts the instance.
#[test]
fn a_run_slower_than_nexuss_timeout_fails_the_start_only_where_sled_agent_holds_it() {
    let held = start_with(Duration::from_secs(90), RunReply::AfterBoot);
    assert_eq!(
        lines(&held, "nexus: create web2"),
        vec![(
            Duration::from_micros(80_294_000),
            "sled3 nexus: create web2 on sled2: failed: saga unwound: RUN failed: \
             request to sled2:12345 timed out after 60000 ms"
                .to_string()
        )],
        "{:#?}",
        held.trace
    );
    // The undo's unregister takes its own time; the boot's end, 90 s after RUN
    // arrived, finds no VMM and changes nothing.
    let vmm = lines(&held, "VMM 2 of web2");
    assert_eq!(vmm.len(), 2, "{vmm:?}");
    assert!(vmm[1].1.ends_with("destroyed"), "{vmm:?}");
    assert!(
        matches!(held.verdict, racksim_sim::Verdict::Converged { .. }),
        "{:?}",
        held.verdict
    );

    let at_once = start_with(Duration::from_secs(90), RunReply::AtOnce);
    let created = lines(&at_once, "nexus: create web2");
    assert_eq!(created.len(), 1, "{created:?}");
    assert!(created[0].1.ends_with("ok, running"), "{created:?}");
    assert!(created[0].0 < Duration::from_secs(21), "{created:?}");
}

/// The work of a held RUN is detached from its connection: when Nexus gives
/// up on it the boot still finishes — here with the sled cut off from
/// Nexus from 50 s (inside the boot) to 4 m, so the undo cannot reach it
/// and takes the failure for "already unregistered" (omicron#3238): the
/// VMM runs, leaked, when the boot ends at 1m50s.
#[test]
fn a_held_runs_boot_finishes_after_its_caller_gave_up() {
    let plan = Plan::new()
        .at(
            Duration::from_secs(20),
            Action::InstanceCreate {
                instance: "web2".into(),
                sled: "sled2".into(),
            },
        )
        .at(
            Duration::from_secs(50),
            Action::Partition {
                a: vec!["sled2".into()],
                b: vec!["sled3".into()],
                oneway: false,
            },
        )
        .at(
            Duration::from_secs(240),
            Action::Heal {
                a: vec!["sled2".into()],
                b: vec!["sled3".into()],
                oneway: false,
            },
        );
    let mut config = RunConfig::new(RackSpec::standard(), ServiceNat::SCRIMLET_LOCAL, 1)
        .with_start(StartImpl::Saga)
        .with_ntp_return_switch(SwitchSlot::Switch1)
        .with_plan(plan)
        .with_deadline(Duration::from_secs(11 * 60));
    config.era.run_reply = RunReply::AfterBoot;
    config.instances = vec![InstanceSpec {
        name: "web2".into(),
    }];
    config.service_times.run = ServiceTime::Fixed(Duration::from_secs(90));
    let outcome = run(&config);
    let running = lines(&outcome, "VMM 2 of web2 running");
    assert_eq!(running.len(), 1, "{:#?}", outcome.trace);
    assert!(
        running[0].0 > Duration::from_secs(110) && running[0].0 < Duration::from_secs(111),
        "{running:?}"
    );
    assert!(
        matches!(outcome.verdict, racksim_sim::Verdict::NotConverged { .. }),
        "{:?}",
        outcome.verdict
    );
}
