//! How the client's connections are made: the [`Connector`] a user gives
//! (its types erased below the client, so that hyper's pool is compiled
//! once), the pool's dialler with its connect timeout, and hyper-util's
//! pool as reqwest builds it.

use std::{
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use http::Uri;
use http_body_util::Full;
use hyper_util::{
    client::legacy::{
        self,
        connect::{Connected, Connection},
    },
    rt::{TokioIo, TokioTimer},
};
use tokio::io::{AsyncRead, AsyncWrite};

/// A task a client runs in the background: one connection, or its pool's
/// sweep of idle connections.
pub type BackgroundTask = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Makes byte streams to a socket address, and runs the tasks that keep
/// them.
///
/// Production uses [`TokioConnector`]; a simulation supplies its own sockets.
/// Implementations must be cheap to clone: a client keeps one per pool.
pub trait Connector: Clone + Send + Sync + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn connect(&self, addr: SocketAddr) -> impl Future<Output = io::Result<Self::Io>> + Send;

    /// Runs a connection (or the pool's sweep) until it ends. By default
    /// on the current tokio runtime; a runtime whose tasks must stay where
    /// they were made (a simulated host's) spawns them there, so that they
    /// end with it.
    fn spawn(&self, task: BackgroundTask) {
        tokio::spawn(task);
    }
}

/// Production connector: real tokio TCP sockets.
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioConnector;

impl Connector for TokioConnector {
    type Io = tokio::net::TcpStream;

    async fn connect(&self, addr: SocketAddr) -> io::Result<Self::Io> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        // Requests are small and answered one at a time; Nagle only adds
        // latency here.
        stream.set_nodelay(true)?;
        Ok(stream)
    }
}

/// A byte stream of any connector's.
pub(super) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A connect of an [`ErasedConnector`].
type Connecting<'a> = Pin<Box<dyn Future<Output = io::Result<Box<dyn Stream>>> + Send + 'a>>;

/// A [`Connector`] with its types erased.
pub(super) trait ErasedConnector: Send + Sync {
    fn connect(&self, addr: SocketAddr) -> Connecting<'_>;
    fn spawn(&self, task: BackgroundTask);
}

impl<C: Connector> ErasedConnector for C {
    fn connect(&self, addr: SocketAddr) -> Connecting<'_> {
        Box::pin(async move {
            let io = Connector::connect(self, addr).await?;
            Ok(Box::new(io) as Box<dyn Stream>)
        })
    }

    fn spawn(&self, task: BackgroundTask) {
        Connector::spawn(self, task);
    }
}

/// Makes the pool's connections: the connector's socket to the client's
/// one server, under the connect timeout (reqwest puts its
/// `connect_timeout` around its connector the same way).
#[derive(Clone)]
pub(super) struct Dial {
    connector: Arc<dyn ErasedConnector>,
    addr: SocketAddr,
    timeout: Option<Duration>,
}

/// Why [`Dial`] made no connection; found again in the pool's error.
#[derive(Debug, thiserror::Error)]
pub(super) enum DialError {
    #[error("connect timed out after {0:?}")]
    TimedOut(Duration),
    #[error(transparent)]
    Io(io::Error),
}

impl tower_service::Service<Uri> for Dial {
    type Response = Socket<Box<dyn Stream>>;
    type Error = DialError;
    type Future = Pin<Box<dyn Future<Output = Result<Socket<Box<dyn Stream>>, DialError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), DialError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: Uri) -> Self::Future {
        // The client has one server; the URI names the same address.
        let Dial {
            connector,
            addr,
            timeout,
        } = self.clone();
        Box::pin(async move {
            let connect = connector.connect(addr);
            let io = match timeout {
                Some(after) => tokio::time::timeout(after, connect)
                    .await
                    .map_err(|_elapsed| DialError::TimedOut(after))?,
                None => connect.await,
            }
            .map_err(DialError::Io)?;
            Ok(Socket(TokioIo::new(io)))
        })
    }
}

/// A connector's byte stream as hyper's pool takes it.
pub(super) struct Socket<I>(TokioIo<I>);

impl<I: AsyncRead + AsyncWrite + Unpin> hyper::rt::Read for Socket<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> hyper::rt::Write for Socket<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

impl<I> Connection for Socket<I> {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

/// Runs the pool's tasks where the connector says.
#[derive(Clone)]
struct SpawnWith(Arc<dyn ErasedConnector>);

impl hyper::rt::Executor<BackgroundTask> for SpawnWith {
    fn execute(&self, task: BackgroundTask) {
        self.0.spawn(task);
    }
}

/// The authority of every request's URI: hyper-util's pool key, and
/// nothing else. A client talks to one address, `Client::addr`, which
/// [`Dial`] connects to whatever the URI says; hyper-util sends an HTTP/1
/// request line in origin form (the path alone) and keeps the `Host`
/// header the request carries (`Client::host`, the address). So the bytes
/// on the wire are the same as with the address in the URI, as reqwest
/// puts it. What changes is the pool's work: it hashes its key with
/// SipHash a byte at a time (`http::uri::Authority`'s `Hash`) at every
/// checkout and return, and an IPv6 socket address is some thirty bytes
/// (docs/decisions/0028-the-pool-key-is-not-the-address.md). It holds
/// because every client builds its own pool (see
/// `clients_of_one_connector_keep_to_their_own_servers`).
pub(super) const POOL_KEY: &str = "p";

/// hyper-util's pooling client as reqwest's `ClientBuilder` builds it
/// (reqwest 0.13.5 `async_impl/client.rs`: both timers on tokio's clock,
/// `pool_idle_timeout`, `pool_max_idle_per_host`), on `connector`'s
/// sockets to `addr`.
pub(super) fn pool(
    connector: &Arc<dyn ErasedConnector>,
    addr: SocketAddr,
    connect_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    keep_connections: bool,
) -> legacy::Client<Dial, Full<Bytes>> {
    legacy::Client::builder(SpawnWith(connector.clone()))
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(idle_timeout)
        .pool_max_idle_per_host(if keep_connections { usize::MAX } else { 0 })
        .build(Dial {
            connector: connector.clone(),
            addr,
            timeout: connect_timeout,
        })
}
