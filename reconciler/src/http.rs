//! A small HTTP/1.1 JSON client on hyper, generic over how sockets are made.
//!
//! ## Connections are kept, as reqwest keeps them
//!
//! Upstream's clients are progenitor clients on reqwest, and a reqwest
//! client is a handle to a pool of connections: a connection that has
//! answered goes back to the pool and carries the next request to the same
//! server, unless it has been idle longer than the pool's idle timeout or
//! the server closed it meanwhile. reqwest's pool is hyper-util's legacy
//! client, and so is this one's, built with reqwest's settings: an idle
//! timeout of [`DEFAULT_POOL_IDLE_TIMEOUT`] (the scrimlet reconcilers set
//! 10 s, [`HttpClient::with_pool_idle_timeout`]), no limit on idle
//! connections, the pool's sweep on tokio's clock, and hyper-util's retry
//! of a request whose kept connection closed before the request was
//! written. So what a kept connection does after a fault (an RST from a
//! peer that rebooted, a server's close racing a request,
//! hyper#2136) is the library's own behaviour, not a model of it.
//!
//! Clones of a client share its pool, as clones of a reqwest client do. A
//! client made for one call and dropped after it (Nexus makes its
//! sled-agent and dpd clients so) keeps its connections for that call only.
//!
//! A kept connection must notice its peer's close while nobody uses it, so
//! each connection is a task of its own. The [`Connector`] says how tasks
//! are spawned ([`Connector::spawn`]): this crate never picks a runtime.
//!
//! ## Why not an off-the-shelf client
//!
//! The generated clients used in production (progenitor + reqwest) own their
//! sockets. Here the socket factory is a [`Connector`] so that exactly the same
//! request code runs on tokio TCP in production and on simulated sockets in a
//! deterministic testbed. The client is deliberately small: JSON in, JSON out,
//! typed errors that are themselves serializable so that they can be carried
//! inside a reconciler's status.
//!
//! ## Timeouts
//!
//! Two, as reqwest's client has them, each set as upstream sets it for the
//! client in question (`docs/fidelity.md` cites each):
//!
//! * the **connect timeout** bounds making a new connection (the TCP
//!   handshake, with the SYN retransmissions of the kernel);
//! * the **request timeout** bounds the whole request — connecting or
//!   taking a kept connection, sending, and reading the whole body — under
//!   one [`tokio::time::timeout`].
//!
//! [`HttpClient::new`] has progenitor's: a generated `Client::new` builds
//! its reqwest client with a 15 s connect timeout and a 15 s timeout
//! ([`DEFAULT_CONNECT_TIMEOUT`], [`DEFAULT_REQUEST_TIMEOUT`]). A client
//! built by hand upstream gets its own ([`HttpClient::with_timeouts`]),
//! possibly none at all ([`HttpClient::without_timeouts`]): with no
//! request timeout, a peer that accepts the connection and never answers
//! holds the caller until it does (or until TCP keepalive finds the peer
//! gone, which the connector's sockets are responsible for, as reqwest's
//! are).

use std::{
    cell::RefCell,
    collections::HashMap,
    error::Error as _,
    fmt,
    future::Future,
    marker::PhantomData,
    net::SocketAddr,
    pin::Pin,
    sync::{Arc, OnceLock},
    time::Duration,
};

use bytes::Bytes;
use http::{
    header::{self, HeaderName, HeaderValue},
    uri::{Authority, Scheme},
    Method, Request, StatusCode, Uri,
};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy;
use serde::{de::DeserializeOwned, Serialize};

mod connect;
mod error;

use connect::{pool, Dial, DialError, ErasedConnector, POOL_KEY};
pub use connect::{BackgroundTask, Connector, TokioConnector};
pub use error::ClientError;
use error::{describe, error_message, DropshotError};

/// The header naming the version of the API a request is written against.
/// Every Oxide internal API is versioned this way (dropshot's
/// `ClientSpecifiesVersionInHeader`), and refuses a request without it
/// with a 400. The typed clients ([`crate::dpd`], [`crate::mgs`], and
/// racksim-nexus's sled-agent client) each send their API's version.
pub use racksim_wire::API_VERSION_HEADER;

/// Default timeout of one whole request (connect, send, read the body):
/// progenitor's generated `Client::new` sets `timeout(15 s)`
/// (progenitor-impl 0.14.0, `src/lib.rs`: `self.settings.timeout.unwrap_or(15)`).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Default connect timeout: progenitor's generated `Client::new` sets
/// `connect_timeout(15 s)` (the same line).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// How long an idle connection is kept for the next request: reqwest's
/// default `pool_idle_timeout` (reqwest 0.12.23 and 0.13.5,
/// `ClientBuilder::new`: `pool_idle_timeout: Some(Duration::from_secs(90))`),
/// which progenitor's `Client::new` keeps.
pub const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// A client of one HTTP server, with its pool of kept connections.
///
/// Generic over its connector only at the surface: the pool and the
/// request path (`Client`) take the connector with its types erased, so
/// that hyper's client is compiled once, in this crate, and not again for
/// every connector type in every crate that makes a client.
#[derive(Clone)]
pub struct HttpClient<C> {
    inner: Client,
    _connector: PhantomData<fn() -> C>,
}

/// The client's settings and its pool, whatever the connector.
struct Client {
    /// hyper-util's pooling client, as reqwest builds it from the settings
    /// below: built at the first request or clone ([`Client::pool`]), and
    /// built again (with a new, empty pool) when a setting changes. Built
    /// lazily because a client is often made and at once given other
    /// settings (Nexus's sled-agent clients, one per call, as upstream's
    /// are): building it in `new` built every such pool twice.
    pool: OnceLock<legacy::Client<Dial, Full<Bytes>>>,
    connector: Arc<dyn ErasedConnector>,
    addr: SocketAddr,
    /// `addr` as the `Host` header ([`host_header`]): formatting an IPv6
    /// address costs more than the rest of a request's head.
    host: HeaderValue,
    /// Bounds making a connection; `None`: as long as TCP tries.
    connect_timeout: Option<Duration>,
    /// Bounds the whole request; `None`: as long as the peer takes.
    timeout: Option<Duration>,
    /// How long an idle connection is kept; `None`: until the server
    /// closes it.
    pool_idle_timeout: Option<Duration>,
    /// Whether a connection is kept at all after its request.
    keep_connections: bool,
    /// Sent as [`API_VERSION_HEADER`] when set.
    api_version: Option<&'static str>,
}

/// A clone shares the pool (and so the kept connections), as a clone of
/// reqwest's client does; the pool is built first if it was not yet.
impl Clone for Client {
    fn clone(&self) -> Self {
        Client {
            pool: OnceLock::from(self.pool().clone()),
            connector: self.connector.clone(),
            addr: self.addr,
            host: self.host.clone(),
            connect_timeout: self.connect_timeout,
            timeout: self.timeout,
            pool_idle_timeout: self.pool_idle_timeout,
            keep_connections: self.keep_connections,
            api_version: self.api_version,
        }
    }
}

impl<C> fmt::Debug for HttpClient<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.inner;
        f.debug_struct("HttpClient")
            .field("addr", &c.addr)
            .field("connect_timeout", &c.connect_timeout)
            .field("timeout", &c.timeout)
            .field("pool_idle_timeout", &c.pool_idle_timeout)
            .field("keep_connections", &c.keep_connections)
            .field("api_version", &c.api_version)
            .finish_non_exhaustive()
    }
}

/// What a completed exchange produced, before interpretation.
struct RawResponse {
    status: StatusCode,
    body: Bytes,
}

impl<C: Connector> HttpClient<C> {
    pub fn new(connector: C, addr: SocketAddr) -> Self {
        let connector: Arc<dyn ErasedConnector> = Arc::new(connector);
        HttpClient {
            inner: Client {
                pool: OnceLock::new(),
                connector,
                addr,
                host: host_header(addr),
                connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
                timeout: Some(DEFAULT_REQUEST_TIMEOUT),
                pool_idle_timeout: Some(DEFAULT_POOL_IDLE_TIMEOUT),
                keep_connections: true,
                api_version: None,
            },
            _connector: PhantomData,
        }
    }

    /// The same client with its settings changed by `change` and, if
    /// `repool`, a new, empty pool that will be built from them.
    fn with(mut self, repool: bool, change: impl FnOnce(&mut Client)) -> Self {
        change(&mut self.inner);
        if repool {
            self.inner.pool = OnceLock::new();
        }
        self
    }

    /// Sends `api-version: <version>` with every request: the version of
    /// the server's API the caller's types are written against.
    pub fn with_api_version(self, version: &'static str) -> Self {
        self.with(false, |c| c.api_version = Some(version))
    }

    /// The API version this client announces, if any.
    pub fn api_version(&self) -> Option<&'static str> {
        self.inner.api_version
    }

    /// The whole request's timeout (the connect timeout is unchanged).
    pub fn with_timeout(self, timeout: Duration) -> Self {
        self.with(false, |c| c.timeout = Some(timeout))
    }

    /// Both timeouts, as a reqwest builder's `connect_timeout` and
    /// `timeout` set them; `None` leaves one unbounded.
    pub fn with_timeouts(self, connect: Option<Duration>, request: Option<Duration>) -> Self {
        self.with(true, |c| {
            c.connect_timeout = connect;
            c.timeout = request;
        })
    }

    /// How long an idle connection is kept for the next request, as
    /// reqwest's `pool_idle_timeout` sets it; `None` keeps it until the
    /// server closes it.
    pub fn with_pool_idle_timeout(self, idle: Option<Duration>) -> Self {
        self.with(true, |c| c.pool_idle_timeout = idle)
    }

    /// Keeps no connection: every request makes its own and closes it
    /// after the answer (reqwest's `pool_max_idle_per_host(0)`). For a
    /// query that upstream sends as a datagram (internal DNS), where a kept
    /// connection would add a state that the real query does not have.
    pub fn without_kept_connections(self) -> Self {
        self.with(true, |c| c.keep_connections = false)
    }

    /// No timeout at all: a reqwest client built with
    /// `ClientBuilder::new()` and no timeout set.
    pub fn without_timeouts(self) -> Self {
        self.with_timeouts(None, None)
    }

    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    pub async fn get<T: DeserializeOwned>(&self, path_and_query: &str) -> Result<T, ClientError> {
        let raw = self.inner.send(Method::GET, path_and_query, None).await?;
        self.decode(&Method::GET, path_and_query, &raw.body)
    }

    pub async fn put<B: Serialize>(&self, path: &str, body: &B) -> Result<(), ClientError> {
        let body = self.encode(&Method::PUT, path, body)?;
        self.inner.send(Method::PUT, path, Some(body)).await?;
        Ok(())
    }

    pub async fn delete(&self, path: &str) -> Result<(), ClientError> {
        self.inner.send(Method::DELETE, path, None).await?;
        Ok(())
    }

    /// `DELETE` with a JSON body.
    ///
    /// Unusual but legal HTTP, and exactly what sled-agent's `DELETE /v2p`
    /// takes: a V2P mapping has no natural path key, so the mapping itself
    /// is the body.
    pub async fn delete_with_body<B: Serialize>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<(), ClientError> {
        let body = self.encode(&Method::DELETE, path, body)?;
        self.inner.send(Method::DELETE, path, Some(body)).await?;
        Ok(())
    }

    fn encode<B: Serialize>(
        &self,
        method: &Method,
        path: &str,
        body: &B,
    ) -> Result<Bytes, ClientError> {
        serde_json::to_vec(body).map(Bytes::from).map_err(|e| {
            self.inner
                .protocol_error(method, path, format!("encoding request body: {e}"))
        })
    }

    pub async fn post<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let raw = self.inner.send(Method::POST, path, None).await?;
        self.decode(&Method::POST, path, &raw.body)
    }

    fn decode<T: DeserializeOwned>(
        &self,
        method: &Method,
        path: &str,
        body: &[u8],
    ) -> Result<T, ClientError> {
        serde_json::from_slice(body).map_err(|e| {
            self.inner
                .protocol_error(method, path, format!("decoding response body: {e}"))
        })
    }
}

impl Client {
    /// The pool, built from the settings if this is its first use.
    fn pool(&self) -> &legacy::Client<Dial, Full<Bytes>> {
        self.pool.get_or_init(|| {
            pool(
                &self.connector,
                self.addr,
                self.connect_timeout,
                self.pool_idle_timeout,
                self.keep_connections,
            )
        })
    }

    fn timed_out(&self, after: Duration) -> ClientError {
        ClientError::Timeout {
            addr: self.addr.to_string(),
            after_ms: u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
        }
    }

    fn protocol_error(&self, method: &Method, path: &str, message: String) -> ClientError {
        ClientError::Protocol {
            addr: self.addr.to_string(),
            method: method.to_string(),
            path: path.to_string(),
            message,
        }
    }

    /// One request, under the timeout; non-2xx answers
    /// become [`ClientError::Status`].
    ///
    /// Boxed, and made here, by a function generic over nothing: the
    /// future's code (hyper-util's pool, hyper's HTTP/1 and HTTP/2 client,
    /// which hyper-util compiles in either way) is then compiled once, in
    /// this crate, and every crate that calls [`HttpClient`]'s generic
    /// methods links it. An `async fn` here would be compiled in each of
    /// those crates instead, wherever it is first awaited: an async
    /// function's body is compiled where its future is polled (a tenth of
    /// the LLVM IR of `racksim-sim`, and a fifth of Nexus's unit tests', was
    /// a copy of it; docs/performance.md). One allocation per request.
    fn send<'a>(
        &'a self,
        method: Method,
        path: &'a str,
        body: Option<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<RawResponse, ClientError>> + Send + 'a>> {
        Box::pin(self.send_unboxed(method, path, body))
    }

    async fn send_unboxed(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<RawResponse, ClientError> {
        let exchange = self.exchange(method.clone(), path, body);
        let raw = match self.timeout {
            Some(timeout) => match tokio::time::timeout(timeout, exchange).await {
                Ok(result) => result?,
                Err(_elapsed) => return Err(self.timed_out(timeout)),
            },
            None => exchange.await?,
        };
        if raw.status.is_success() {
            Ok(raw)
        } else {
            Err(ClientError::Status {
                addr: self.addr.to_string(),
                method: method.to_string(),
                path: path.to_string(),
                status: raw.status.as_u16(),
                message: error_message(raw.status, &raw.body),
                error_code: serde_json::from_slice::<DropshotError>(&raw.body)
                    .ok()
                    .and_then(|e| e.error_code),
            })
        }
    }

    /// Send on a kept connection or a new one, and read the whole
    /// response. No timeout here: the caller wraps the whole exchange.
    async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<RawResponse, ClientError> {
        let uri = Uri::builder()
            .scheme(Scheme::HTTP)
            .authority(Authority::from_static(POOL_KEY))
            .path_and_query(path)
            .build()
            .map_err(|e| self.protocol_error(&method, path, format!("invalid path: {e}")))?;
        let mut builder = Request::builder()
            .method(method.clone())
            .uri(uri)
            .header(header::HOST, self.host.clone())
            .header(header::ACCEPT, "application/json");
        if body.is_some() {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
        }
        if let Some(version) = self.api_version {
            // A name made once (`HeaderName::from_static` checks it at
            // compile time): a `&str` name is parsed again per request.
            const NAME: HeaderName = HeaderName::from_static(API_VERSION_HEADER);
            builder = builder.header(NAME, version);
        }
        let request = builder
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|e| self.protocol_error(&method, path, format!("building request: {e}")))?;

        // Dropping this future (a timeout, a cancelled reconciler) drops
        // the request; hyper then closes the connection it was on, which
        // can carry nothing else until its answer has been read.
        let response = self
            .pool()
            .request(request)
            .await
            .map_err(|e| self.request_failed(&method, path, &e))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| self.protocol_error(&method, path, describe(&e)))?
            .to_bytes();
        Ok(RawResponse { status, body })
    }

    /// What a request that got no answer reports: a connect that failed or
    /// timed out as such, anything else (a reset, a close before the
    /// answer) as a protocol error naming the request.
    fn request_failed(&self, method: &Method, path: &str, e: &legacy::Error) -> ClientError {
        let mut source = e.source();
        while let Some(cause) = source {
            if let Some(dial) = cause.downcast_ref::<DialError>() {
                return match dial {
                    DialError::TimedOut(after) => self.timed_out(*after),
                    DialError::Io(io) => ClientError::Connect {
                        addr: self.addr.to_string(),
                        message: io.to_string(),
                    },
                };
            }
            source = cause.source();
        }
        if e.is_connect() {
            return ClientError::Connect {
                addr: self.addr.to_string(),
                message: describe(e),
            };
        }
        self.protocol_error(method, path, describe(e))
    }
}

/// `addr` as a `Host` header value, as reqwest writes it.
///
/// Formatting an IPv6 socket address takes some 2,500 instructions (the
/// longest run of zero groups, then each group through the formatter),
/// and Nexus makes a new sled-agent client for every call, as upstream's
/// `sled_client_from_address` does: the values are remembered, per thread,
/// by address (a pure function of it, so nothing a run does depends on
/// what was remembered; a thread making clients of many thousands of
/// addresses starts over when it has remembered `MAX_REMEMBERED`).
fn host_header(addr: SocketAddr) -> HeaderValue {
    const MAX_REMEMBERED: usize = 4096;
    thread_local! {
        static HOSTS: RefCell<HashMap<SocketAddr, HeaderValue>> = RefCell::default();
    }
    HOSTS.with_borrow_mut(|hosts| {
        if let Some(host) = hosts.get(&addr) {
            return host.clone();
        }
        if hosts.len() >= MAX_REMEMBERED {
            hosts.clear();
        }
        let host =
            HeaderValue::from_str(&addr.to_string()).expect("a socket address is a header value");
        hosts.insert(addr, host.clone());
        host
    })
}

#[cfg(test)]
mod tests;
