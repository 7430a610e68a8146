//! The generated control client drives a live rack as another team's test
//! would: typed plan actions, the rack's state, the trace, and the API's
//! refusals as typed errors.
//!
//! The reconcilers run with a period of an hour: every assertion here is
//! about what an action does at once (a crashed switch zone is down in the
//! very next state dump), not about convergence, so nothing waits.

use std::{
    net::{Ipv4Addr, SocketAddr},
    time::Duration,
};

use racksim::live::{start, LiveOptions, LiveRack, LiveTrace, Reconcilers};
use racksim_control_client::{types, Client};
use racksim_reconciler::instances::StartImpl;
use racksim_sim::{InstanceSpec, Strategy};

async fn start_live() -> LiveRack {
    let rack = racksim::catalogue::get("sidecar-power-cycle")
        .expect("catalogued")
        .rack;
    let opts = LiveOptions {
        strategy: Strategy::ScrimletLocal,
        reconcilers: Reconcilers::Racksim,
        control: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0),
        period: Duration::from_secs(3600),
        start: StartImpl::Saga,
        instances: vec![InstanceSpec { name: "web".into() }],
    };
    start(&rack, &opts, LiveTrace::new(false))
        .await
        .expect("the live rack starts")
}

fn switch<'a>(state: &'a types::StateDump, name: &str) -> &'a types::SwitchDump {
    state
        .switches
        .iter()
        .find(|s| s.switch == name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", state.switches))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_actions_state_and_trace() {
    let live = start_live().await;
    let client = Client::new(&format!("http://{}", live.control));

    let state = client.state_get().send().await.unwrap().into_inner();
    assert_eq!(state.switches.len(), 2);
    assert!(switch(&state, "switch1").up, "{state:?}");

    // A crash is a typed call; its effect is in the next dump.
    client
        .action_apply()
        .body(
            types::ActionRequest::builder()
                .action("crash")
                .host(Some("switch1".to_string())),
        )
        .send()
        .await
        .unwrap();
    let state = client.state_get().send().await.unwrap().into_inner();
    assert!(!switch(&state, "switch1").up, "{state:?}");
    assert!(switch(&state, "switch0").up, "{state:?}");

    client
        .action_apply()
        .body(
            types::ActionRequest::builder()
                .action("restart")
                .host(Some("switch1".to_string())),
        )
        .send()
        .await
        .unwrap();
    let state = client.state_get().send().await.unwrap().into_inner();
    assert!(switch(&state, "switch1").up, "{state:?}");

    // The trace records both actions, in order, as the control host.
    let trace = client.trace_get().send().await.unwrap().into_inner();
    let actions: Vec<&str> = trace
        .iter()
        .filter(|l| l.host == "control" && !l.text.starts_with(' '))
        .map(|l| l.text.as_str())
        .collect();
    assert_eq!(actions.len(), 2, "{trace:?}");
    assert!(actions[0].contains("crash") && actions[0].contains("switch1"));
    assert!(actions[1].contains("restart") && actions[1].contains("switch1"));

    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_action_is_a_typed_error_and_changes_nothing() {
    let live = start_live().await;
    let client = Client::new(&format!("http://{}", live.control));
    let before = client.state_get().send().await.unwrap().into_inner();

    let err = client
        .action_apply()
        .body(
            types::ActionRequest::builder()
                .action("crash")
                .host(Some("sled99".to_string())),
        )
        .send()
        .await
        .expect_err("no such host");
    let status = err.status().expect("an HTTP answer");
    assert_eq!(status.as_u16(), 400, "{err:?}");
    match err {
        racksim_control_client::Error::ErrorResponse(body) => {
            assert!(body.message.contains("sled99"), "{}", body.message)
        }
        other => panic!("expected the API's error body, got {other:?}"),
    }

    let unknown = client
        .action_apply()
        .body(types::ActionRequest::builder().action("reboot-the-moon"))
        .send()
        .await
        .expect_err("no such action");
    assert_eq!(unknown.status().map(|s| s.as_u16()), Some(400));

    let after = client.state_get().send().await.unwrap().into_inner();
    let ups = |s: &types::StateDump| s.switches.iter().map(|w| w.up).collect::<Vec<_>>();
    assert_eq!(ups(&before), ups(&after));
    live.stop().await;
}
