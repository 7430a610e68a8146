//! Hyper on turmoil sockets: a fake's router served on a simulated port.
//!
//! Each fake is a state machine of `racksim-fakes` with a
//! `handle(&ApiRequest) -> ApiResponse` router. [`serve`] puts such a
//! handler on a simulated TCP port with hyper (dropshot needs real sockets,
//! so live mode serves the same state machines with dropshot instead).
//! Errors use dropshot's body shape (`request_id`, `error_code`, `message`),
//! and the `api-version` header reaches the handler, which refuses a request
//! without it as dropshot does.

use std::{
    convert::Infallible,
    future::Future,
    net::{Ipv6Addr, SocketAddr},
    rc::Rc,
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use racksim_fakes::http::{ApiError, ApiRequest, ApiResponse, API_VERSION_HEADER};

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
        crate::task::spawn(async move {
            let service = service_fn(move |req: hyper::Request<Incoming>| {
                let handler = handler.clone();
                let id = next_id.get();
                next_id.set(id + 1);
                async move { Ok::<_, Infallible>(dispatch(&*handler, req, id).await) }
            });
            // A peer that goes away mid-request is normal in a faulty rack;
            // the error is the client's to report.
            //
            // dropshot (0.16.7, `server.rs`) serves with a tokio timer, and
            // with a timer hyper enforces its default `header_read_timeout`
            // of 30 s, counted from when the connection starts waiting for
            // a request: a kept connection idle for 30 s is closed by the
            // server. The clients' pools see that close (omicron's scrimlet
            // reconcilers keep theirs 10 s to stay clear of it).
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
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
            let mut req = ApiRequest::new(parts.method, &path_and_query, body.to_bytes());
            req.api_version = parts
                .headers
                .get(API_VERSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            handler.call(req).await
        }
        Err(e) => ApiError::bad_request(format!("reading request body: {e}")).into_response(),
    };
    let mut builder = hyper::Response::builder().status(response.status);
    let body = match response.body {
        Some(body) => {
            builder = builder.header(http::header::CONTENT_TYPE, "application/json");
            body.to_bytes(request_id)
        }
        None => Bytes::new(),
    };
    builder.body(Full::new(body)).expect("valid response")
}
