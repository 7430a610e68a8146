//! Live mode on real sockets: the reconcilers converge a rack of dropshot
//! fakes on loopback, and repair a dpd restarted through the control API.
//! Periods are short here only; every wait is a bounded poll of the state.

use std::{
    future::Future,
    net::{Ipv4Addr, SocketAddr},
    time::Duration,
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use racksim::serve::{start, LiveOptions, LiveRack, LiveTrace};
use racksim_reconciler::{discovery::SwitchSlot, dpd::Ipv4Nat};
use racksim_sim::{RackSpec, Strategy};
use serde_json::{json, Value};

const PERIOD: Duration = Duration::from_millis(200);
const BOUND: Duration = Duration::from_secs(20);

/// Polls `done` until it holds, failing after [`BOUND`].
async fn until<F: Future<Output = bool>>(what: &str, mut done: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + BOUND;
    while !done().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {BOUND:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One raw HTTP/1.1 request: `(status, JSON body or Null)`.
async fn call(addr: SocketAddr, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .header("api-version", racksim_reconciler::dpd::API_VERSION)
        .body(Full::new(Bytes::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        )))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn rack() -> RackSpec {
    racksim::catalogue::get("sidecar-power-cycle")
        .expect("catalogued")
        .rack
}

fn desired(rack: &RackSpec) -> Vec<Ipv4Nat> {
    let mut all: Vec<Ipv4Nat> = rack.desired_nat().iter().map(|e| e.to_dpd()).collect();
    all.sort();
    all
}

fn converged(live: &LiveRack, want: &[Ipv4Nat]) -> bool {
    live.switches
        .iter()
        .all(|s| s.dpd_state.lock().ipv4_entries() == want)
}

async fn converges_and_repairs_a_dpd_restart(strategy: Strategy) {
    let rack = rack();
    let want = desired(&rack);
    assert!(!want.is_empty() && rack.switches.len() == 2);
    let opts = LiveOptions {
        strategy,
        control: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0),
        period: PERIOD,
    };
    let live = start(&rack, &opts, LiveTrace::new(false)).unwrap();
    until("every switch holds the desired NAT entries", || {
        std::future::ready(converged(&live, &want))
    })
    .await;

    // The dpd API answers as dendrite's does: the entries, and a 409 for a
    // conflicting entry that leaves the table as it was.
    let switch0 = live.switch(SwitchSlot::Switch0).unwrap();
    let e = want[0];
    let (status, body) = call(
        switch0.dpd,
        "GET",
        &format!("/nat/ipv4/{}", e.external),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let of_ip: Vec<&Ipv4Nat> = want.iter().filter(|w| w.external == e.external).collect();
    assert_eq!(body["items"], serde_json::to_value(&of_ip).unwrap());
    let mut other = e.target;
    other.inner_mac.a[5] ^= 0xff;
    let (status, body) = call(
        switch0.dpd,
        "PUT",
        &format!("/nat/ipv4/{}/{}/{}", e.external, e.low, e.high),
        Some(serde_json::to_value(other).unwrap()),
    )
    .await;
    assert_eq!(
        (status, &body["error_code"]),
        (409, &json!("conflicting mapping"))
    );
    assert_eq!(switch0.dpd_state.lock().ipv4_entries(), want);

    // Restart switch1's dpd through the control API: its table is lost,
    // and the reconcilers put it back.
    let (status, body) = call(
        live.control,
        "POST",
        "/actions",
        Some(json!({"action": "dpd-restart", "switch": "switch1"})),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    until("switch1's table is restored", || {
        std::future::ready(converged(&live, &want))
    })
    .await;

    // dpd answering errors for a while: its API says 500 meanwhile.
    let (status, _) = call(
        live.control,
        "POST",
        "/actions",
        Some(json!({"action": "dpd-errors", "switch": "switch0", "for": "10m"})),
    )
    .await;
    assert_eq!(status, 204);
    let (status, _) = call(switch0.dpd, "GET", "/nat/ipv4", None).await;
    assert_eq!(status, 500);
    let (status, body) = call(
        live.control,
        "POST",
        "/actions",
        Some(json!({"action": "dpd-hang", "switch": "switch1", "for": "soon"})),
    )
    .await;
    assert_eq!(status, 400, "{body}");

    // The control API: an action it does not apply is a 400 naming it; the
    // state and the trace are there.
    let (status, body) = call(
        live.control,
        "POST",
        "/actions",
        Some(json!({"action": "partition"})),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body["message"].as_str().unwrap().contains("partition"),
        "{body}"
    );
    let (status, state) = call(live.control, "GET", "/state", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        state["switches"][1]["nat"],
        serde_json::to_value(&want).unwrap()
    );
    let (_, trace) = call(live.control, "GET", "/trace", None).await;
    let texts: Vec<String> = trace
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            format!(
                "{} {}",
                l["host"].as_str().unwrap(),
                l["text"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t == "switch1 dpd restarted: NAT table empty"),
        "{texts:#?}"
    );
    let restart = texts
        .iter()
        .position(|t| t.contains("dpd restarted"))
        .unwrap();
    assert!(
        texts[restart..]
            .iter()
            .any(|t| t.starts_with("switch1 dpd: NAT + ")),
        "no NAT entry re-created after the restart: {texts:#?}"
    );
    live.stop().await;
}

#[tokio::test]
async fn scrimlet_local_converges_and_repairs_a_dpd_restart() {
    converges_and_repairs_a_dpd_restart(Strategy::ScrimletLocal).await;
}

#[tokio::test]
async fn sled_task_converges_and_repairs_a_dpd_restart() {
    converges_and_repairs_a_dpd_restart(Strategy::SledTask).await;
}

#[test]
fn legacy_is_refused() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = rt
        .block_on(async {
            start(
                &rack(),
                &LiveOptions {
                    strategy: Strategy::Legacy,
                    control: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0),
                    period: PERIOD,
                },
                LiveTrace::new(false),
            )
            .map(|_| ())
        })
        .unwrap_err();
    assert!(err.contains("legacy"), "{err}");
}
