//! The generated control client drives a live rack as another team's test
//! would: typed plan actions, the rack's state, the trace, and the API's
//! refusals as typed errors.
//!
//! The reconcilers run with a period of an hour: every assertion here is
//! about what an action does at once (a crashed switch zone is down in the
//! very next state dump, a restarted dpd's switch lacks its entries) or
//! about the first activation at start, so no test depends on a timer.

use std::time::Duration;

use racksim_control_client::{types, Client};
use racksim_live::{LiveOptions, LiveRack};

async fn start_live() -> LiveRack {
    let scenario =
        racksim_live::scenario::catalogue::get("sidecar-power-cycle").expect("catalogued");
    let opts = LiveOptions {
        period: Duration::from_secs(3600),
        ..LiveOptions::default()
    };
    LiveRack::start(&scenario, opts)
        .await
        .expect("the live rack starts")
}

/// A plan action on one host (`crash`, `restart`), as a typed call.
async fn host_action(
    client: &Client,
    action: &str,
    host: &str,
) -> Result<(), racksim_control_client::Error<types::Error>> {
    client
        .action_apply()
        .body(
            types::ActionRequest::builder()
                .action(action)
                .host(Some(host.to_string())),
        )
        .send()
        .await
        .map(|_| ())
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
    host_action(&client, "crash", "switch1").await.unwrap();
    let state = client.state_get().send().await.unwrap().into_inner();
    assert!(!switch(&state, "switch1").up, "{state:?}");
    assert!(switch(&state, "switch0").up, "{state:?}");

    host_action(&client, "restart", "switch1").await.unwrap();
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

    let err = host_action(&client, "crash", "sled99")
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

/// Waiting for convergence is a typed call too. At start the reconcilers'
/// first activation converges the rack; after a dpd restart, that switch
/// lacks its entries until their next activation (an hour away here), so
/// the gaps name it and only it, and a wait returns at its timeout with
/// them. A timeout that is not a duration is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_convergence_returns_the_gaps_that_remain() {
    let live = start_live().await;
    let client = Client::new(&format!("http://{}", live.control));
    let wait = |timeout: &str| {
        client
            .wait_post()
            .body(types::WaitRequest::builder().timeout(timeout))
            .send()
    };
    let done = wait("20s").await.unwrap().into_inner();
    assert!(done.converged, "{:?}", done.gaps);
    assert!(done.gaps.is_empty());

    client
        .action_apply()
        .body(
            types::ActionRequest::builder()
                .action("dpd-restart")
                .switch(Some("switch1".to_string())),
        )
        .send()
        .await
        .unwrap();
    let now = client.gaps_get().send().await.unwrap().into_inner();
    assert!(!now.converged);
    assert!(
        !now.gaps.is_empty() && now.gaps.iter().all(|g| g.at == "switch1"),
        "only the restarted switch lacks anything: {:?}",
        now.gaps
    );
    let timed_out = wait("300ms").await.unwrap().into_inner();
    assert!(!timed_out.converged);
    assert!(timed_out.waited_ms >= 300, "{timed_out:?}");
    let messages =
        |c: &types::Convergence| c.gaps.iter().map(|g| g.message.clone()).collect::<Vec<_>>();
    assert_eq!(messages(&timed_out), messages(&now));

    let bad = wait("forever").await.expect_err("not a duration");
    assert_eq!(bad.status().map(|s| s.as_u16()), Some(400));
    live.stop().await;
}
