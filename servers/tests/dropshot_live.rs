//! The dropshot servers of the fakes on real loopback sockets: the wire
//! details as a client other than racksim's sees them (raw HTTP/1.1 here).
//! racksim's own clients are run against them in `reconciler_clients.rs`
//! and `sled_agent_client.rs`.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use racksim_fakes::{
    dpd::DpdState, memnet::service_target, mgs::MgsState, sled_agent::SledAgentState,
};
use racksim_servers::{
    serve_dpd, serve_mgs, serve_sled_agent, DpdContext, Fault, Shared, SledAgentContext,
};
use racksim_wire::dpd::API_VERSION;
use serde_json::{json, Value};

fn loopback() -> SocketAddr {
    SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0)
}

/// One request; `(status, JSON body or Null)`.
async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    version: Option<&str>,
    body: Option<&str>,
) -> (u16, Value) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json");
    if let Some(v) = version {
        req = req.header("api-version", v);
    }
    let req = req
        .body(Full::new(Bytes::from(body.unwrap_or("").to_string())))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, value)
}

fn target_json(sled: u16) -> String {
    serde_json::to_string(&service_target(sled)).unwrap()
}

async fn dpd() -> (SocketAddr, DpdContext, dropshot::HttpServer<DpdContext>) {
    let ctx = DpdContext::new(DpdState::new(0));
    let server = serve_dpd(loopback(), ctx.clone()).unwrap();
    (server.local_addr(), ctx, server)
}

const V: Option<&str> = Some(API_VERSION);

#[tokio::test]
async fn dpd_answers_as_dendrite_does() {
    let (addr, ctx, server) = dpd().await;
    let t1 = target_json(1);
    let (s, _) = call(addr, "PUT", "/nat/ipv4/198.51.100.1/0/16383", V, Some(&t1)).await;
    assert_eq!(s, 204);
    // Idempotent.
    let (s, _) = call(addr, "PUT", "/nat/ipv4/198.51.100.1/0/16383", V, Some(&t1)).await;
    assert_eq!(s, 204);
    let before = ctx.lock().ipv4_entries();
    assert_eq!(before.len(), 1);

    // No api-version header: 400, and nothing changes.
    let (s, body) = call(
        addr,
        "PUT",
        "/nat/ipv4/198.51.100.1/20000/20001",
        None,
        Some(&t1),
    )
    .await;
    assert_eq!(s, 400);
    assert!(
        body["message"].as_str().unwrap().contains("api-version"),
        "{body}"
    );
    let (s, _) = call(addr, "GET", "/nat/ipv4", None, None).await;
    assert_eq!(s, 400);

    // A conflicting create: 409 with dendrite's error body.
    let t2 = target_json(2);
    let (s, body) = call(addr, "PUT", "/nat/ipv4/198.51.100.1/100/200", V, Some(&t2)).await;
    assert_eq!(s, 409);
    assert_eq!(body["error_code"], "conflicting mapping");
    assert_eq!(body["message"], "Conflict");
    assert!(body["request_id"].is_string());

    // Malformed input: 400.
    let mut big_vni: Value = serde_json::from_str(&t1).unwrap();
    big_vni["vni"] = json!(1u32 << 24);
    let big_vni = big_vni.to_string();
    for (method, path, body) in [
        ("PUT", "/nat/ipv4/198.51.100.300/0/1", Some(t1.as_str())),
        ("PUT", "/nat/ipv4/198.51.100.2/10/5", Some(t1.as_str())),
        ("PUT", "/nat/ipv4/198.51.100.2/0/70000", Some(t1.as_str())),
        (
            "PUT",
            "/nat/ipv4/198.51.100.2/0/1",
            Some("{\"internal_ip\": 1}"),
        ),
        ("PUT", "/nat/ipv4/198.51.100.2/0/1", Some("not json")),
        ("PUT", "/nat/ipv4/198.51.100.2/0/1", Some(big_vni.as_str())),
        ("GET", "/nat/ipv4?limit=0", None),
        ("GET", "/nat/ipv4/198.51.100.1?page_token=garbage", None),
        ("DELETE", "/nat/ipv4/198.51.100.1/x", None),
    ] {
        let (s, body) = call(addr, method, path, V, body).await;
        assert_eq!(s, 400, "{method} {path}: {body}");
    }
    // Unknown: 404. Absent delete: 204.
    let (s, body) = call(addr, "GET", "/nat/ipv4/198.51.100.1/20000", V, None).await;
    assert_eq!((s, &body["error_code"]), (404, &json!("no mapping")));
    let (s, _) = call(addr, "DELETE", "/nat/ipv4/198.51.100.9/0", V, None).await;
    assert_eq!(s, 204);
    assert_eq!(
        ctx.lock().ipv4_entries(),
        before,
        "refused requests changed nothing"
    );

    let (s, body) = call(addr, "GET", "/rpw/nat/gen", V, None).await;
    assert_eq!((s, body), (200, json!(0)));
    let (s, body) = call(addr, "POST", "/rpw/nat/trigger", V, None).await;
    assert_eq!((s, body), (200, Value::Null));
    let (s, body) = call(addr, "GET", "/switch/identifiers", V, None).await;
    assert_eq!((s, &body["slot"]), (200, &json!(0)));
    server.close().await.unwrap();
}

#[tokio::test]
async fn dpd_pages_hold_64_and_ipv6_tokens_round_trip() {
    let (addr, ctx, server) = dpd().await;
    let addrs: Vec<Ipv6Addr> = (1..=70u16)
        .map(|i| Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i))
        .collect();
    for a in &addrs {
        let (s, _) = call(
            addr,
            "PUT",
            &format!("/nat/ipv6/{a}/0/65535"),
            V,
            Some(&target_json(1)),
        )
        .await;
        assert_eq!(s, 204);
    }
    let mut seen = Vec::new();
    let mut path = "/nat/ipv6?limit=1000".to_string();
    let mut pages = Vec::new();
    loop {
        let (s, body) = call(addr, "GET", &path, V, None).await;
        assert_eq!(s, 200, "{path}: {body}");
        let items: Vec<Ipv6Addr> = serde_json::from_value(body["items"].clone()).unwrap();
        pages.push(items.len());
        seen.extend(items);
        match body["next_page"].as_str() {
            Some(token) => {
                // dropshot's tokens are opaque: encode them as a query value.
                let encoded: String = token
                    .bytes()
                    .map(|b| {
                        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                            char::from(b).to_string()
                        } else {
                            format!("%{b:02X}")
                        }
                    })
                    .collect();
                path = format!("/nat/ipv6?limit=1000&page_token={encoded}");
            }
            None => break,
        }
    }
    // At most 64 a page, a token after every non-empty page.
    assert_eq!(pages, [64, 6, 0]);
    assert_eq!(seen, addrs);
    // And one address's entries, percent-encoded in the path.
    let (s, body) = call(addr, "GET", "/nat/ipv6/fd00%3A%3A7", V, None).await;
    assert_eq!((s, body["items"].as_array().unwrap().len()), (200, 1));
    assert_eq!(ctx.lock().entries::<Ipv6Addr>().len(), 70);
    server.close().await.unwrap();
}

#[tokio::test]
async fn injected_faults_last_their_window() {
    let (addr, ctx, server) = dpd().await;
    // The same create, during the faults and after them.
    let target = target_json(1);
    let create = || call(addr, "PUT", "/nat/ipv4/198.51.100.1/0/9", V, Some(&target));
    ctx.inject(Fault::Errors, std::time::Duration::from_secs(60));
    let (s, body) = create().await;
    assert_eq!(s, 500, "{body}");
    // What the simulation's faulted dpd answers too (one `Fault::error`).
    assert_eq!(body["message"], "injected fault: dpd is answering errors");
    assert!(ctx.lock().ipv4_entries().is_empty());
    // A hang holds the request for the window, then answers 503.
    let hang = std::time::Duration::from_millis(150);
    ctx.inject(Fault::Hang, hang);
    let started = std::time::Instant::now();
    let (s, _) = call(addr, "GET", "/rpw/nat/gen", V, None).await;
    assert_eq!(s, 503);
    assert!(started.elapsed() >= hang, "{:?}", started.elapsed());
    // The window is over: served again.
    let (s, _) = create().await;
    assert_eq!(s, 204);
    assert_eq!(ctx.lock().ipv4_entries().len(), 1);
    server.close().await.unwrap();
}

/// A request's answer without its `request_id`: `(status, body)`.
fn comparable(status: u16, mut body: Value) -> (u16, Value) {
    if let Some(o) = body.as_object_mut() {
        o.remove("request_id");
    }
    (status, body)
}

/// The same requests to the dropshot servers and to the state machines'
/// own routers (what the simulation and memnet serve with): both route by
/// `api-version` as dpd-api does, answer an upstream operation they do not
/// serve with the 501 that names it, and answer alike, byte for byte apart
/// from the request id.
#[tokio::test]
async fn both_servers_route_by_version_and_refuse_unserved_operations_alike() {
    use racksim_fakes::http::ApiRequest;

    let (dpd_addr, _ctx, _dpd_server) = dpd().await;
    let mgs_server = serve_mgs(loopback(), Shared::new(MgsState::new(1))).unwrap();
    let agent_server =
        serve_sled_agent(loopback(), SledAgentContext::new(SledAgentState::default())).unwrap();
    #[derive(Clone, Copy, Debug)]
    enum S {
        Dpd,
        Mgs,
        Agent,
    }
    // (service, method, path, api-version, expected status)
    let cases: &[(S, &str, &str, &str, u16)] = &[
        (S::Dpd, "GET", "/rpw/nat/gen", "13.0.0", 200),
        (S::Dpd, "GET", "/rpw/nat/gen", "2.0.0", 200),
        (S::Dpd, "GET", "/rpw/nat/gen", "1.0.0", 404),
        (S::Dpd, "POST", "/rpw/nat/trigger", "1.0.0", 404),
        (S::Dpd, "GET", "/rpw/nat/ipv4/gen", "1.0.0", 200),
        (S::Dpd, "POST", "/rpw/nat/ipv4/trigger", "1.9.9", 200),
        (S::Dpd, "GET", "/rpw/nat/ipv4/gen", "2.0.0", 404),
        (S::Dpd, "POST", "/rpw/nat/ipv4/trigger", "13.0.0", 404),
        (S::Dpd, "GET", "/switch/identifiers", "13.0.0", 200),
        (S::Dpd, "GET", "/switch/identifiers", "9.0.0", 200),
        (S::Dpd, "GET", "/ports", "13.0.0", 501),
        (S::Dpd, "GET", "/arp/10.0.0.1", "13.0.0", 501),
        (S::Dpd, "GET", "/no/such/path", "13.0.0", 404),
        (S::Dpd, "POST", "/nat/ipv4", "13.0.0", 405),
        (S::Mgs, "GET", "/ignition", "3.0.0", 501),
        (S::Mgs, "GET", "/local/all-sp-ids", "3.0.0", 501),
        (S::Mgs, "GET", "/local/switch-id", "3.0.0", 200),
        (S::Agent, "GET", "/inventory", "48.0.0", 501),
        (S::Agent, "POST", "/v2p", "48.0.0", 405),
        (S::Agent, "GET", "/v2p", "48.0.0", 200),
    ];
    for &(service, method, path, version, want) in cases {
        let addr = match service {
            S::Dpd => dpd_addr,
            S::Mgs => mgs_server.local_addr(),
            S::Agent => agent_server.local_addr(),
        };
        let (status, body) = call(addr, method, path, Some(version), None).await;
        let live = comparable(status, body);
        let req = ApiRequest::new(method.parse().unwrap(), path, "").versioned(version);
        let r = match service {
            S::Dpd => DpdState::new(0).handle(&req).0,
            S::Mgs => MgsState::new(1).handle(&req),
            S::Agent => SledAgentState::default().handle(&req).0,
        };
        let routed = comparable(r.status.as_u16(), r.json_value().unwrap_or(Value::Null));
        assert_eq!(
            live.0, want,
            "{service:?} {method} {path} @{version}: {live:?}"
        );
        assert_eq!(routed, live, "{service:?} {method} {path} @{version}");
        if want == 501 {
            assert_eq!(live.1["error_code"], racksim_fakes::upstream::ERROR_CODE);
            let message = live.1["message"].as_str().unwrap();
            assert!(
                message.contains(path.split('/').nth(1).unwrap()),
                "{message}"
            );
        }
    }
    // Before dpd 10.0.0 the identifiers have no lotnum and no fuse; from it
    // they have both, as null for a fake ASIC.
    let (_, old) = call(dpd_addr, "GET", "/switch/identifiers", Some("9.0.0"), None).await;
    let (_, new) = call(dpd_addr, "GET", "/switch/identifiers", Some("10.0.0"), None).await;
    for key in ["lotnum", "fuse"] {
        assert!(old.get(key).is_none(), "{key} before 10.0.0: {old}");
        assert_eq!(new.get(key), Some(&Value::Null), "{key} from 10.0.0: {new}");
    }
    assert_eq!(old["slot"], new["slot"]);
}
