//! Framework-neutral HTTP plumbing for the fakes.
//!
//! Each fake is a state machine with a `handle(&ApiRequest) -> ApiResponse`
//! method. [`serve`] puts such a handler on a simulated (turmoil) TCP port with
//! hyper; a live server can call the same handler. Errors use dropshot's body
//! shape (`request_id`, `error_code`, `message`) because that is what the real
//! services send and what real clients parse.

use std::{
    collections::BTreeMap,
    convert::Infallible,
    future::Future,
    net::{Ipv6Addr, SocketAddr},
    rc::Rc,
};

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use serde::Serialize;

/// A parsed request.
#[derive(Clone, Debug)]
pub struct ApiRequest {
    pub method: Method,
    pub path: String,
    pub query: BTreeMap<String, String>,
    pub body: Bytes,
}

impl ApiRequest {
    pub fn new(method: Method, path_and_query: &str, body: impl Into<Bytes>) -> Self {
        let (path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p, q),
            None => (path_and_query, ""),
        };
        let query = query
            .split('&')
            .filter(|kv| !kv.is_empty())
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (kv.to_string(), String::new()),
            })
            .collect();
        ApiRequest {
            method,
            path: path.to_string(),
            query,
            body: body.into(),
        }
    }

    /// Path segments without the empty ones (`/nat/ipv4/` == `/nat/ipv4`).
    pub fn segments(&self) -> Vec<&str> {
        self.path.split('/').filter(|s| !s.is_empty()).collect()
    }

    pub fn query(&self, key: &str) -> Option<&str> {
        self.query.get(key).map(String::as_str)
    }
}

/// A response: a status and an optional JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiResponse {
    pub status: StatusCode,
    pub body: Option<serde_json::Value>,
}

impl ApiResponse {
    pub fn json<T: Serialize>(value: &T) -> Self {
        ApiResponse {
            status: StatusCode::OK,
            body: Some(serde_json::to_value(value).expect("fake responses serialize")),
        }
    }

    pub fn no_content() -> Self {
        ApiResponse {
            status: StatusCode::NO_CONTENT,
            body: None,
        }
    }
}

/// An error response in dropshot's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub error_code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, error_code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            error_code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "InvalidRequest", message)
    }

    pub fn not_found_route(req: &ApiRequest) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("no route for {} {}", req.method, req.path),
        )
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            message,
        )
    }

    pub fn into_response(self) -> ApiResponse {
        ApiResponse {
            status: self.status,
            body: Some(serde_json::json!({
                // Filled in by the server that sends it; a fixed value keeps
                // the state machine pure.
                "request_id": "",
                "error_code": self.error_code,
                "message": self.message,
            })),
        }
    }
}

/// Something that answers requests. Async so a fake can hang or delay.
pub trait Handler: 'static {
    fn call(&self, req: ApiRequest) -> impl Future<Output = ApiResponse>;
}

/// Serve `handler` on `port` of the current simulated host until the host
/// stops. One task per connection; request ids count up per server so they
/// are deterministic.
pub async fn serve<H: Handler>(port: u16, handler: H) -> std::io::Result<()> {
    let listener = turmoil::net::TcpListener::bind((Ipv6Addr::UNSPECIFIED, port)).await?;
    let handler = Rc::new(handler);
    let next_id = Rc::new(std::cell::Cell::new(0u64));
    loop {
        let (stream, _peer): (_, SocketAddr) = listener.accept().await?;
        let handler = handler.clone();
        let next_id = next_id.clone();
        tokio::task::spawn_local(async move {
            let service = service_fn(move |req: hyper::Request<Incoming>| {
                let handler = handler.clone();
                let id = next_id.get();
                next_id.set(id + 1);
                async move { Ok::<_, Infallible>(dispatch(&*handler, req, id).await) }
            });
            // A peer that goes away mid-request is normal in a faulty rack;
            // the error is the client's to report.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn dispatch<H: Handler>(
    handler: &H,
    req: hyper::Request<Incoming>,
    request_id: u64,
) -> hyper::Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let path_and_query = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .to_string();
    let response = match body.collect().await {
        Ok(body) => {
            handler
                .call(ApiRequest::new(
                    parts.method,
                    &path_and_query,
                    body.to_bytes(),
                ))
                .await
        }
        Err(e) => ApiError::bad_request(format!("reading request body: {e}")).into_response(),
    };
    let mut builder = hyper::Response::builder().status(response.status);
    let body = match response.body {
        Some(mut value) => {
            if let Some(obj) = value.as_object_mut() {
                if obj.contains_key("request_id") && obj.contains_key("error_code") {
                    obj.insert("request_id".into(), request_id.to_string().into());
                }
            }
            builder = builder.header(http::header::CONTENT_TYPE, "application/json");
            Bytes::from(serde_json::to_vec(&value).expect("JSON value serializes"))
        }
        None => Bytes::new(),
    };
    builder.body(Full::new(body)).expect("valid response")
}
