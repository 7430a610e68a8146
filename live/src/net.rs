//! The live rack's network, as the reconcilers see it: where a switch
//! zone's services really listen, which switch zones discovery finds, and
//! the links a plan partitions or slows down.
//!
//! Live mode has no simulated network, so links are enforced where the
//! reconcilers make their connections ([`LinkConnector`]): every
//! reconciler's connector knows the host it runs on and asks [`Links`]
//! about the host at the other end. What that simplifies, against the
//! simulation's packet-level links:
//!
//! * **Partitions** mean what they mean in the simulation (Linux's TCP,
//!   `docs/fidelity.md`): a *new* connection across a cut, either way, is
//!   held, and made at the first of Linux's SYN retransmissions (1, 3, 7,
//!   15, 31, 63 s after the connect began) that falls after the heal, or
//!   fails as timed out at 127 s — unless the client's own timeout gives
//!   up first. A connection already made when a cut begins is held, not
//!   broken: what it writes into the cut, and what it would read from
//!   across it, wait for the heal, so a short cut delays a reply and a cut
//!   that outlasts the caller's timeout loses it. Simplified: held bytes
//!   move at the heal, not at the sender's next RTO expiry, and the
//!   connection is not aborted after `tcp_retries2` (the callers' own
//!   timeouts are all far shorter).
//! * **Latency** delays a connection's establishment and the first read
//!   after each write (the answer to a request) by the link's latency.

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    io,
    net::{Ipv6Addr, SocketAddr},
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll},
    time::Duration,
};

use racksim_reconciler::{
    discovery::{DiscoveryError, SwitchSlot, SwitchZoneResolver},
    http::{Connector, TokioConnector},
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    sync::watch,
    time::Sleep,
};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Default)]
struct LinkTable {
    /// Host pairs that cannot talk, as the plan named them (`a` to `b`).
    blocked: BTreeSet<(String, String)>,
    latency: BTreeMap<(String, String), Duration>,
    /// Which host serves each loopback address.
    hosts: BTreeMap<SocketAddr, String>,
    /// Where each switch zone service's underlay address really listens.
    underlay: BTreeMap<SocketAddr, SocketAddr>,
}

/// The live rack's links and addresses; cheap to clone, shared by every
/// connector.
#[derive(Clone)]
pub struct Links {
    table: Arc<Mutex<LinkTable>>,
    /// Bumped on every change, to wake connections held by a partition.
    changed: Arc<watch::Sender<u64>>,
}

impl Default for Links {
    fn default() -> Self {
        Links {
            table: Arc::default(),
            changed: Arc::new(watch::Sender::new(0)),
        }
    }
}

impl Links {
    fn changed(&self) {
        self.changed.send_modify(|v| *v += 1);
    }

    /// `host` serves `addr` (a loopback address the OS gave a server).
    pub fn serves(&self, host: &str, addr: SocketAddr) {
        lock(&self.table).hosts.insert(addr, host.to_string());
    }

    /// A switch zone service's underlay address is served at `real`.
    pub fn maps(&self, underlay: SocketAddr, real: SocketAddr) {
        lock(&self.table).underlay.insert(underlay, real);
    }

    /// Blocks (or, with `heal`, unblocks) every pair of `a` × `b`.
    pub fn partition(&self, a: &[String], b: &[String], heal: bool) {
        {
            let mut t = lock(&self.table);
            for x in a {
                for y in b {
                    let pair = (x.clone(), y.clone());
                    if heal {
                        t.blocked.remove(&pair);
                    } else {
                        t.blocked.insert(pair);
                    }
                }
            }
        }
        self.changed();
    }

    /// Latency of every link of `a` × `b`, both ways (zero removes it).
    pub fn set_latency(&self, a: &[String], b: &[String], latency: Duration) {
        let mut t = lock(&self.table);
        for x in a {
            for y in b {
                for pair in [(x.clone(), y.clone()), (y.clone(), x.clone())] {
                    if latency.is_zero() {
                        t.latency.remove(&pair);
                    } else {
                        t.latency.insert(pair, latency);
                    }
                }
            }
        }
    }

    /// Where `addr` really listens, the host serving it (if a host of the
    /// rack does), and the link's latency.
    fn route(&self, from: &str, addr: SocketAddr) -> (SocketAddr, Option<String>, Duration) {
        let t = lock(&self.table);
        let real = t.underlay.get(&addr).copied().unwrap_or(addr);
        let Some(to) = t.hosts.get(&real) else {
            return (real, None, Duration::ZERO);
        };
        let latency = t
            .latency
            .get(&(from.to_string(), to.clone()))
            .copied()
            .unwrap_or_default();
        (real, Some(to.clone()), latency)
    }

    /// Whether `from` cannot reach `to` (a cut of that direction).
    fn blocked(&self, from: &str, to: &str) -> bool {
        lock(&self.table)
            .blocked
            .contains(&(from.to_string(), to.to_string()))
    }
}

/// One direction of a connection, held while a cut blocks it.
struct Direction {
    links: Links,
    from: String,
    to: String,
    /// Set while blocked: resolves on the next change of the links.
    wait: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Direction {
    /// Ready when the direction is open; registers for the next change of
    /// the links while it is cut.
    fn poll_open(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if self.wait.is_none() {
                // Subscribe before looking, so a heal between the look and
                // the wait is not missed.
                let mut changes = self.links.changed.subscribe();
                if !self.links.blocked(&self.from, &self.to) {
                    return Poll::Ready(());
                }
                self.wait = Some(Box::pin(async move {
                    let _ = changes.changed().await;
                }));
            }
            let wait = self.wait.as_mut().expect("just set");
            if wait.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.wait = None;
        }
    }
}

/// The connector of a reconciler running on host `from`: maps underlay
/// addresses to loopback ports, holds connections across a partition and
/// delays them by the link's latency.
#[derive(Clone)]
pub struct LinkConnector {
    pub from: String,
    pub links: Links,
}

impl Connector for LinkConnector {
    type Io = DelayedIo;

    async fn connect(&self, addr: SocketAddr) -> io::Result<DelayedIo> {
        let (real, to, latency) = self.links.route(&self.from, addr);
        if let Some(to) = &to {
            // The SYN goes out now and again at Linux's retransmission
            // instants; the first that finds both directions open connects.
            // Cancel-safe: dropping a sleep loses nothing.
            // Linux's SYN schedule, as the simulation's network has it.
            let tcp = racksim_sim::net::LinuxTcp::default();
            let start = tokio::time::Instant::now();
            let mut next = Duration::ZERO;
            let mut retries = 0;
            while self.links.blocked(&self.from, to) || self.links.blocked(to, &self.from) {
                if retries == tcp.syn_retries {
                    tokio::time::sleep_until(start + tcp.connect_gives_up_after()).await;
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "{addr}: no answer to SYN after {} retransmissions",
                            tcp.syn_retries
                        ),
                    ));
                }
                next += tcp.syn_rto * (1 << retries);
                retries += 1;
                tokio::time::sleep_until(start + next).await;
            }
        }
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let stream = TokioConnector.connect(real).await?;
        let direction = |from: &str, to: &str| Direction {
            links: self.links.clone(),
            from: from.to_string(),
            to: to.to_string(),
            wait: None,
        };
        Ok(DelayedIo {
            inner: stream,
            latency,
            armed: false,
            delay: None,
            link: to.map(|to| (direction(&self.from, &to), direction(&to, &self.from))),
        })
    }
}

/// A TCP stream whose answers arrive a link's latency late (the first
/// read after a write waits `latency` first), and whose writes and reads
/// wait while a cut blocks their direction.
pub struct DelayedIo {
    inner: tokio::net::TcpStream,
    latency: Duration,
    armed: bool,
    delay: Option<Pin<Box<Sleep>>>,
    /// The connection's two directions (out, back), for a peer of the rack.
    link: Option<(Direction, Direction)>,
}

impl AsyncRead for DelayedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some((_, back)) = &mut this.link {
            if back.poll_open(cx).is_pending() {
                return Poll::Pending;
            }
        }
        if this.armed {
            let latency = this.latency;
            let delay = this
                .delay
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(latency)));
            if delay.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.delay = None;
            this.armed = false;
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for DelayedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if let Some((out, _)) = &mut this.link {
            if out.poll_open(cx).is_pending() {
                return Poll::Pending;
            }
        }
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) && !this.latency.is_zero() {
            this.armed = true;
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Discovery without an internal DNS server: the switch zones the live
/// rack runs, less those hidden (`hide-switch`). A replaced scrimlet's
/// switch zone takes its slot's entry with its new address.
#[derive(Clone, Default)]
pub struct FixedResolver {
    zones: Arc<Mutex<BTreeMap<SwitchSlot, Ipv6Addr>>>,
    hidden: Arc<Mutex<BTreeSet<SwitchSlot>>>,
}

impl FixedResolver {
    pub fn register(&self, slot: SwitchSlot, zone: Ipv6Addr) {
        lock(&self.zones).insert(slot, zone);
    }

    /// Hides (or reveals) the switch zone in `slot`.
    pub fn hide(&self, slot: SwitchSlot, hide: bool) {
        let mut hidden = lock(&self.hidden);
        if hide {
            hidden.insert(slot);
        } else {
            hidden.remove(&slot);
        }
    }

    pub fn is_hidden(&self, slot: SwitchSlot) -> bool {
        lock(&self.hidden).contains(&slot)
    }
}

impl SwitchZoneResolver for FixedResolver {
    fn switch_zones(
        &self,
    ) -> impl std::future::Future<Output = Result<Vec<Ipv6Addr>, DiscoveryError>> + Send {
        let hidden = lock(&self.hidden).clone();
        let zones = lock(&self.zones)
            .iter()
            .filter(|(slot, _)| !hidden.contains(slot))
            .map(|(_, ip)| *ip)
            .collect();
        std::future::ready(Ok(zones))
    }
}

#[cfg(test)]
mod tests;
