//! The HTTP client against real loopback servers: the wire (request line,
//! headers), kept connections and their pools, errors and timeouts.

use std::{
    net::{Ipv4Addr, Ipv6Addr},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
};

use http_body_util::BodyExt;
use hyper::{body::Incoming, service::service_fn, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;

use super::*;
use crate::testing::{FakeNet, FakeResponse};

/// Serves `handler` on a real loopback socket, a task per accepted
/// stream; returns the address.
async fn loopback_server<F>(handler: F) -> SocketAddr
where
    F: Fn(http::request::Parts, Bytes) -> Response<Full<Bytes>> + Clone + Send + Sync + 'static,
{
    counting_loopback_server(handler).await.0
}

/// [`loopback_server`], and the number of connections it accepted.
async fn counting_loopback_server<F>(handler: F) -> (SocketAddr, Arc<AtomicUsize>)
where
    F: Fn(http::request::Parts, Bytes) -> Response<Full<Bytes>> + Clone + Send + Sync + 'static,
{
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            let handler = handler.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let handler = handler.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body.collect().await?.to_bytes();
                        Ok::<_, hyper::Error>(handler(parts, body))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, accepted)
}

/// Requests to one server share a kept connection, as a reqwest
/// client's do; a client that keeps none connects for each.
#[tokio::test]
async fn a_client_keeps_its_connection_between_requests() {
    let (addr, accepted) =
        counting_loopback_server(|_parts, _body| json_response(200, json!(1))).await;
    let client = HttpClient::new(TokioConnector, addr);
    for _ in 0..3 {
        let one: u32 = client.get("/").await.unwrap();
        assert_eq!(one, 1);
    }
    // A clone shares the pool.
    let _: u32 = client.clone().get("/").await.unwrap();
    assert_eq!(accepted.load(Ordering::SeqCst), 1);

    let fresh = HttpClient::new(TokioConnector, addr).without_kept_connections();
    for _ in 0..3 {
        let _: u32 = fresh.get("/").await.unwrap();
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 4);
}

fn json_response(status: u16, body: serde_json::Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

/// The value of header `name` of a request the server got, as text.
fn header_text(parts: &http::request::Parts, name: impl header::AsHeaderName) -> Option<String> {
    parts
        .headers
        .get(name)
        .map(|h| h.to_str().unwrap().to_string())
}

/// Asserts that a request carried `expected` as its JSON body, then
/// answers 204 with no body.
fn json_body_then_no_content(
    body: &[u8],
    content_type: Option<&str>,
    expected: serde_json::Value,
) -> Response<Full<Bytes>> {
    let value: serde_json::Value = serde_json::from_slice(body).unwrap();
    assert_eq!(value, expected);
    assert_eq!(content_type, Some("application/json"));
    Response::builder()
        .status(204)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

#[tokio::test]
async fn the_api_version_header_is_sent_when_set() {
    let addr = loopback_server(|parts, _body| {
        let version = header_text(&parts, API_VERSION_HEADER);
        json_response(200, json!({ "version": version }))
    })
    .await;
    let plain = HttpClient::new(TokioConnector, addr);
    let seen: serde_json::Value = plain.get("/").await.unwrap();
    assert_eq!(seen, json!({"version": null}));
    let versioned = plain.with_api_version("13.0.0");
    assert_eq!(versioned.api_version(), Some("13.0.0"));
    let seen: serde_json::Value = versioned.get("/").await.unwrap();
    assert_eq!(seen, json!({"version": "13.0.0"}));
}

/// Every client's requests carry the same pool key (`POOL_KEY`), so
/// two clients of one connector must never share a pool: each request
/// reaches its own client's server, on that client's kept connection.
#[tokio::test]
async fn clients_of_one_connector_keep_to_their_own_servers() {
    let (a, a_accepted) = counting_loopback_server(|_, _| json_response(200, json!("a"))).await;
    let (b, b_accepted) = counting_loopback_server(|_, _| json_response(200, json!("b"))).await;
    let to_a = HttpClient::new(TokioConnector, a);
    let to_b = HttpClient::new(TokioConnector, b);
    for _ in 0..3 {
        let from_a: String = to_a.get("/").await.unwrap();
        let from_b: String = to_b.get("/").await.unwrap();
        assert_eq!((from_a.as_str(), from_b.as_str()), ("a", "b"));
    }
    assert_eq!(a_accepted.load(Ordering::SeqCst), 1);
    assert_eq!(b_accepted.load(Ordering::SeqCst), 1);
}

/// The pool is built at the first request or clone: a clone made
/// before any request still shares the original's kept connection (as
/// a clone of reqwest's client does), and a client whose settings
/// change after the clone gets a pool of its own.
#[tokio::test]
async fn a_clone_made_before_any_request_shares_the_pool() {
    let (addr, accepted) = counting_loopback_server(|_, _| json_response(200, json!(1))).await;
    let original = HttpClient::new(TokioConnector, addr);
    let clone = original.clone();
    for client in [&original, &clone, &original, &clone] {
        let one: u32 = client.get("/").await.unwrap();
        assert_eq!(one, 1);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);

    let changed = clone.clone().with_pool_idle_timeout(None);
    let one: u32 = changed.get("/").await.unwrap();
    assert_eq!(one, 1);
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

/// The remembered `Host` values are the addresses as written, for
/// IPv6 (bracketed) and IPv4 alike, whichever was asked first.
#[test]
fn host_header_is_the_address_as_written() {
    let v6: SocketAddr = "[fd00:1122:3344:101::1]:12345".parse().unwrap();
    let v4: SocketAddr = "192.0.2.7:80".parse().unwrap();
    for _ in 0..2 {
        assert_eq!(host_header(v6), "[fd00:1122:3344:101::1]:12345");
        assert_eq!(host_header(v4), "192.0.2.7:80");
    }
}

#[tokio::test]
async fn tokio_connector_get_put_and_headers() {
    let addr = loopback_server(|parts, body| {
        let host = header_text(&parts, header::HOST);
        let content_type = header_text(&parts, header::CONTENT_TYPE);
        match (parts.method.as_str(), parts.uri.path()) {
            ("GET", "/echo") => json_response(
                200,
                json!({
                    "host": host,
                    // The request line's target: the path alone
                    // (origin form), never the URI's authority, which
                    // is only the pool's key (`POOL_KEY`).
                    "authority": parts.uri.authority().map(|a| a.as_str()),
                    "query": parts.uri.query(),
                    "content_type": content_type,
                }),
            ),
            ("PUT", "/thing") => {
                json_body_then_no_content(&body, content_type.as_deref(), json!({"x": 1}))
            }
            ("DELETE", "/thing") => {
                json_body_then_no_content(&body, content_type.as_deref(), json!({"x": 2}))
            }
            _ => json_response(404, json!({"request_id": "r", "message": "Not Found"})),
        }
    })
    .await;
    let client = HttpClient::new(TokioConnector, addr);
    let echo: serde_json::Value = client.get("/echo?limit=3").await.unwrap();
    assert_eq!(
        echo,
        json!({"host": addr.to_string(), "authority": null, "query": "limit=3", "content_type": null})
    );
    client.put("/thing", &json!({"x": 1})).await.unwrap();
    client
        .delete_with_body("/thing", &json!({"x": 2}))
        .await
        .unwrap();
    let err = client.delete("/nope").await.unwrap_err();
    assert_eq!(err.status(), Some(404));
    assert_eq!(
        err.to_string(),
        format!("DELETE /nope on {addr}: HTTP 404: Not Found"),
    );
}

#[tokio::test]
async fn tokio_connector_connect_error_names_the_address() {
    // Bind then drop a listener so that the port is (almost certainly)
    // closed.
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let err = HttpClient::new(TokioConnector, addr)
        .get::<()>("/")
        .await
        .unwrap_err();
    match &err {
        ClientError::Connect { addr: a, .. } => assert_eq!(a, &addr.to_string()),
        other => panic!("expected a connect error, got {other:?}"),
    }
    assert_eq!(err.status(), None);
}

fn fake_addr() -> SocketAddr {
    SocketAddr::new(
        Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x101, 0, 0, 0, 2).into(),
        8080,
    )
}

/// A client of a fake server at [`fake_addr`] that answers every request
/// with `handler`; the net is returned to change the answer.
fn fake_server(
    handler: impl Fn(&str, &str, &[u8]) -> FakeResponse + Send + Sync + 'static,
) -> (FakeNet, HttpClient<crate::testing::FakeConnector>) {
    let net = FakeNet::new();
    net.set_custom(fake_addr(), handler);
    let client = HttpClient::new(net.connector(), fake_addr());
    (net, client)
}

#[tokio::test(start_paused = true)]
async fn dropshot_error_message_is_extracted() {
    let (_net, client) = fake_server(|_method, _path, _body| {
        FakeResponse::json(
            409,
            json!({"request_id": "abc", "error_code": "Conflict", "message": "overlaps"}),
        )
    });
    let err = client.put("/x", &json!(null)).await.unwrap_err();
    assert_eq!(
        err,
        ClientError::Status {
            addr: "[fd00:1122:3344:101::2]:8080".to_string(),
            method: "PUT".to_string(),
            path: "/x".to_string(),
            status: 409,
            message: "overlaps".to_string(),
            error_code: Some("Conflict".to_string()),
        }
    );
}

#[tokio::test(start_paused = true)]
async fn non_dropshot_error_body_is_reported_as_text() {
    let (net, client) = fake_server(|_method, _path, _body| {
        FakeResponse::text(503, "  switch zone is restarting\n")
    });
    let err = client.get::<serde_json::Value>("/x").await.unwrap_err();
    assert_eq!(err.status(), Some(503));
    match err {
        ClientError::Status { message, .. } => {
            assert_eq!(message, "switch zone is restarting")
        }
        other => panic!("unexpected {other:?}"),
    }
    // An empty body falls back to the reason phrase.
    net.set_custom(fake_addr(), |_method, _path, _body| {
        FakeResponse::text(500, "")
    });
    match client.get::<serde_json::Value>("/x").await.unwrap_err() {
        ClientError::Status { message, .. } => assert_eq!(message, "Internal Server Error"),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn undecodable_body_is_a_protocol_error() {
    let (_net, client) = fake_server(|_method, _path, _body| FakeResponse::text(200, "not json"));
    match client.get::<Vec<u32>>("/x").await.unwrap_err() {
        ClientError::Protocol {
            method,
            path,
            message,
            ..
        } => {
            assert_eq!(method, "GET");
            assert_eq!(path, "/x");
            assert!(message.starts_with("decoding response body"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn post_decodes_null() {
    let (_net, client) = fake_server(|method, path, _body| {
        assert_eq!(method, "POST");
        assert_eq!(path, "/rpw/nat/trigger");
        FakeResponse::json(200, json!(null))
    });
    let () = client.post("/rpw/nat/trigger").await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_hanging_server_times_out_after_the_whole_request_timeout() {
    let net = FakeNet::new();
    net.set_hang(fake_addr());
    let client = HttpClient::new(net.connector(), fake_addr());
    let start = tokio::time::Instant::now();
    let err = client.get::<serde_json::Value>("/x").await.unwrap_err();
    assert_eq!(start.elapsed(), DEFAULT_REQUEST_TIMEOUT);
    assert_eq!(
        err,
        ClientError::Timeout {
            addr: fake_addr().to_string(),
            after_ms: 15_000
        }
    );

    let short = client.clone().with_timeout(Duration::from_millis(250));
    let start = tokio::time::Instant::now();
    let err = short.get::<serde_json::Value>("/x").await.unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_millis(250));
    assert_eq!(
        err,
        ClientError::Timeout {
            addr: fake_addr().to_string(),
            after_ms: 250
        }
    );
}

#[test]
fn client_error_serializes_with_kind_tag() {
    let err = ClientError::Timeout {
        addr: "[::1]:1".to_string(),
        after_ms: 5,
    };
    assert_eq!(
        serde_json::to_value(&err).unwrap(),
        json!({"kind": "timeout", "addr": "[::1]:1", "after_ms": 5})
    );
    let back: ClientError = serde_json::from_value(serde_json::to_value(&err).unwrap()).unwrap();
    assert_eq!(back, err);
}
