//! The instance API's callers: a request that reaches no Nexus is refused,
//! never kept for a Nexus that comes up later.

use std::time::Duration;

use racksim_sim::{run, Action, InstanceSpec, Plan, RackSpec, RunConfig, ServiceNat};

/// A create sent at the instant the control plane crashes reaches a Nexus
/// that is gone, whichever of the two steps the plan lists first. Its
/// caller is refused then, and when the control plane is back two minutes
/// later nothing creates the instance: the run does not converge, as a
/// real caller whose request failed has to send it again.
#[test]
fn a_request_sent_as_the_control_plane_crashes_is_refused_not_kept() {
    let at = Duration::from_secs(60);
    let create = || Action::InstanceCreate {
        instance: "web1".into(),
        sled: "sled2".into(),
    };
    for crash_first in [true, false] {
        let plan = if crash_first {
            Plan::new()
                .at(at, Action::ControlPlaneCrash)
                .at(at, create())
        } else {
            Plan::new()
                .at(at, create())
                .at(at, Action::ControlPlaneCrash)
        }
        .at(Duration::from_secs(180), Action::ControlPlaneUp);
        let mut config = RunConfig::new(RackSpec::madrid(), ServiceNat::SLED_TASK, 1)
            .with_plan(plan)
            .with_deadline(Duration::from_secs(600));
        config.instances = vec![InstanceSpec {
            name: "web1".into(),
        }];
        let outcome = run(&config);
        let lines: Vec<(Duration, &str)> = outcome
            .trace
            .iter()
            .filter(|l| l.host == "sled0" && l.text.contains("web1"))
            .map(|l| (l.at, l.text.as_str()))
            .collect();
        assert_eq!(
            lines,
            vec![(
                at,
                "nexus: request for web1 refused: the control plane is down"
            )],
            "crash first: {crash_first}\n{:#?}",
            outcome.trace
        );
        assert!(
            !matches!(outcome.verdict, racksim_sim::Verdict::Converged { .. }),
            "crash first: {crash_first}: {:?}",
            outcome.verdict
        );
    }
}
