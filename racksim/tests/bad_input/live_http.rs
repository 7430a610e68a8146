//! Live mode's HTTP APIs (issue 39): bad requests to the control API and
//! to the fakes get a 4xx with a message that says what is wrong, and
//! change nothing — the live analogue of a file left byte-identical is
//! `GET /state` answering the same JSON before and after each case. The
//! rack runs fakes-only (no reconciler of racksim's), so nothing but the
//! requests here could change it.

use std::net::{Ipv4Addr, SocketAddr};

use racksim::live::{LiveOptions, LiveRack, Reconcilers};
use racksim_nexus::instances::StartImpl;
use racksim_reconciler::discovery::SwitchSlot;
use racksim_sim::{InstanceSpec, ServiceNat};

use super::common::http::request;

/// Which server a case talks to.
#[derive(Clone, Copy)]
enum To {
    Control,
    Dpd,
    SledAgent,
}

struct Case {
    to: To,
    method: &'static str,
    path: &'static str,
    body: Body,
    status: u16,
    /// Every fragment must be in the answer's body.
    message: &'static [&'static str],
}

enum Body {
    Text(&'static str),
    /// This many bytes of JSON: one string.
    Huge(usize),
}

fn cases() -> Vec<Case> {
    use Body::Text;
    use To::*;
    let action = |body, status, message| Case {
        to: Control,
        method: "POST",
        path: "/actions",
        body: Text(body),
        status,
        message,
    };
    vec![
        action("{\"action\": ", 400, &["unable to parse JSON body"]),
        action("[1, 2]", 400, &["unable to parse JSON body"]),
        action("{\"action\": \"explode\"}", 400, &["unknown action \"explode\"", "known actions:"]),
        action("{\"action\": \"crash\", \"host\": \"sled99\"}", 400, &["unknown host \"sled99\""]),
        action("{\"action\": \"crash\", \"hots\": \"sled1\"}", 400, &["unknown field `hots`"]),
        action("{\"action\": \"crash\"}", 400, &["action \"crash\" needs `host`"]),
        action(
            "{\"action\": \"partition\", \"a\": \"sled0\", \"b\": \"sled0\"}",
            400,
            &["sled0 is named in both `a` and `b`"],
        ),
        action(
            "{\"action\": \"partition\", \"a\": [\"sled0\", \"sled1\"], \"b\": [\"sled1\"]}",
            400,
            &["sled1 is named in both `a` and `b`"],
        ),
        action("{\"action\": \"heal\", \"a\": \"sled0\", \"b\": \"sled1\"}", 400, &["heal of a partition that was never made"]),
        action("{\"action\": \"db-stall\", \"for\": \"ten seconds\"}", 400, &["invalid duration \"ten seconds\""]),
        action(
            "{\"action\": \"db-stall\", \"for\": \"99999999999999999999h\"}",
            400,
            &["longer than the longest racksim simulates, 10000h"],
        ),
        action("{\"action\": \"db-stall\", \"for\": \"0s\"}", 400, &["db-stall for 0s does nothing"]),
        action("{\"action\": \"sidecar-power-on\", \"switch\": \"switch0\"}", 400, &["switch0"]),
        Case { to: Control, method: "POST", path: "/actions", body: Body::Huge(2 << 20), status: 400, message: &["request body exceeded maximum size"] },
        Case { to: Control, method: "DELETE", path: "/state", body: Text(""), status: 405, message: &["Method Not Allowed"] },
        Case { to: Control, method: "GET", path: "/no-such-path", body: Text(""), status: 404, message: &["Not Found"] },
        Case { to: Control, method: "POST", path: "/wait", body: Text("{\"timeout\": \"soon\"}"), status: 400, message: &["timeout: invalid duration \"soon\""] },
        Case { to: Control, method: "POST", path: "/wait", body: Text("{\"timeout\": \"2h\"}"), status: 400, message: &["longer than the longest wait"] },
        Case { to: Control, method: "POST", path: "/wait", body: Text("{\"timeout\": \"5124095577h\"}"), status: 400, message: &["longer than the longest racksim simulates"] },
        Case { to: Dpd, method: "PUT", path: "/nat/ipv4/not-an-ip/0/16383", body: Text("{}"), status: 400, message: &["invalid IPv4 address syntax"] },
        Case { to: Dpd, method: "PUT", path: "/nat/ipv4/203.0.113.1/0/16383", body: Text("{\"internal_ip\": 7}"), status: 400, message: &["unable to parse JSON body"] },
        Case { to: Dpd, method: "PUT", path: "/nat/ipv4/203.0.113.1/200/100", body: Text("{\"internal_ip\": \"fd00::1\", \"inner_mac\": {\"a\": [168, 64, 37, 0, 0, 1]}, \"vni\": 1007}"), status: 400, message: &["invalid port range"] },
        Case { to: SledAgent, method: "PUT", path: "/v2p", body: Text("{\"virtual_ip\": \"x\"}"), status: 400, message: &["unable to parse JSON body"] },
        Case { to: SledAgent, method: "PUT", path: "/vmms/abc", body: Text("{\"instance_id\": 1}"), status: 400, message: &["abc"] },
    ]
}

#[tokio::test]
async fn live_http_requests() {
    let scenario = racksim::catalogue::get("sidecar-power-cycle").expect("catalogued");
    let live = LiveRack::start(
        &scenario,
        LiveOptions {
            // An era with no background writer of its own: each case
            // compares `/state` before and after its request, and the
            // service-zone NAT task of `sled-task`'s era (the proposal's,
            // with Nexus's tracker) writes NAT rows on the wall clock,
            // racing the comparison (seen once in CI: nat_version 0 -> 3).
            // Without reconcilers nothing else writes.
            strategy: ServiceNat::SCRIMLET_LOCAL,
            reconcilers: Reconcilers::None,
            control: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0),
            period: std::time::Duration::from_millis(200),
            start: StartImpl::Saga,
            instances: vec![InstanceSpec { name: "web".into() }],
        },
    )
    .await
    .unwrap();
    let services = live.services().await;
    let addr = |to: To| match to {
        To::Control => live.control,
        To::Dpd => services.switches[&SwitchSlot::Switch0].dpd,
        To::SledAgent => services.sled_agents["sled0"],
    };
    let state = || async {
        let (status, text) = request(live.control, "GET", "/state", Vec::new())
            .await
            .unwrap();
        assert_eq!(status, 200, "{text}");
        text
    };
    let cases = cases();
    assert_eq!(cases.len(), 24, "a case was lost");
    for case in &cases {
        let body = match case.body {
            Body::Text(t) => t.as_bytes().to_vec(),
            Body::Huge(n) => {
                let mut b = b"{\"action\": \"".to_vec();
                b.resize(n, b'x');
                b.extend_from_slice(b"\"}");
                b
            }
        };
        let what = format!("{} {}", case.method, case.path);
        let before = state().await;
        let (status, text) = request(addr(case.to), case.method, case.path, body)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(status, case.status, "{what}: {text}");
        // Dropshot's error body: `{"request_id", "message", ...}`.
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| text.clone());
        for fragment in case.message {
            assert!(
                message.contains(fragment),
                "{what}: says {fragment:?}: {message}"
            );
        }
        assert!(
            !text.contains('\u{1b}'),
            "{what}: no terminal escapes echoed: {text:?}"
        );
        assert_eq!(state().await, before, "{what}: the rack changed");
    }
    live.stop().await;
}
