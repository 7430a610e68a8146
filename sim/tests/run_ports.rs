//! A long run exhausts nothing: every connection the rack's clients make
//! gives its port back when it ends.

use std::time::Duration;

use racksim_reconciler::discovery::SwitchSlot;

use racksim_sim::{Action, Plan, RackSpec, RunConfig, ServiceNat, Verdict};

/// Madrid under `legacy` never converges (switch1 never gets the NAT
/// entries), so the run goes on to its deadline making connections all the
/// while: dpd's NAT pull every 30 s against a Nexus that never starts, the
/// reconcilers' polls, NTP. With 16 local ports per host, a connection
/// that kept its port after it ended would exhaust a host (a panic, which
/// ends the run as a testbed error) within minutes; turmoil 0.7.2's TCP
/// did, for a refused connect, at 136h32m on its 16,384 ports.
#[test]
fn twelve_hours_on_sixteen_ports_exhaust_nothing() {
    let plan = Plan::new().at(Duration::ZERO, Action::HideSwitch(SwitchSlot::Switch1));
    let mut cfg = RunConfig::new(RackSpec::madrid(), ServiceNat::LEGACY, 7)
        .with_plan(plan)
        .with_ntp_return_switch(SwitchSlot::Switch1)
        .with_deadline(Duration::from_secs(12 * 3600));
    cfg.ephemeral_ports = 49152..=49167;
    let outcome = racksim_sim::run(&cfg);
    match &outcome.verdict {
        Verdict::NotConverged { .. } => {}
        other => panic!("madrid under legacy runs to its deadline unconverged: {other:?}"),
    }
    assert_eq!(outcome.sim_time, Duration::from_secs(12 * 3600));
}
