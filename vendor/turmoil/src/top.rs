use crate::envelope::{Envelope, Protocol};
use crate::host::Host;
use crate::linux_tcp::{LinuxTcp, Rtx};
use crate::net::SocketPair;
use crate::rt::Rt;
use crate::{config, TRACING_TARGET};

use crate::IndexMap;
use rand::{Rng, RngCore};
use rand_distr::{Distribution, Exp};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{Error, ErrorKind, Result};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::time::Instant;

/// Describes the network topology.
pub(crate) struct Topology {
    config: config::Link,

    /// Specific configuration overrides between specific hosts.
    links: IndexMap<Pair, Link>,

    /// We don't use a Rt for async. Right now, we just use it to tick time
    /// forward in the same way we do it elsewhere. We'd like to represent
    /// network state with async in the future.
    rt: Rt<'static>,

    /// Event-driven mode (racksim patch): the simulation's current instant,
    /// which stamps every send.
    clock: Option<Instant>,

    /// Event-driven mode: when messages are due, as `(at, seq, link)`, the
    /// link by its index in `links` (links are never removed, so an index
    /// names one link for the run, and a delivery finds its link without
    /// hashing its pair of addresses); entries of messages a partition
    /// dropped are stale and harmless (their link has nothing due then).
    due: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    seq: u64,

    /// racksim patch ([`crate::Builder::linux_tcp`]): TCP segments the
    /// network lost, by when their sender's retransmission timer expires.
    linux_tcp: Option<LinuxTcp>,
    retransmits: BinaryHeap<Reverse<Retransmit>>,
    /// Linux mode: how many segments of each connection (by its sending
    /// host and id) wait for retransmission. Keepalive does not probe a
    /// connection with data outstanding: its retransmission timer is in
    /// charge.
    outstanding: std::collections::HashMap<(IpAddr, u64), usize>,
}

/// Linux mode: a segment the network lost, waiting for its sender's
/// retransmission timer.
struct Retransmit {
    at: Instant,
    seq: u64,
    lost: Lost,
}

impl PartialEq for Retransmit {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Retransmit {}
impl PartialOrd for Retransmit {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Retransmit {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Linux mode: a segment of an established connection that a cut or a
/// down receiver lost.
struct Lost {
    src: SocketAddr,
    dst: SocketAddr,
    message: Protocol,
    rtx: Rtx,
}

/// This type is used as the key in the [`Topology::links`] map. See [`new`]
/// which orders the addrs, such that this type uniquely identifies the link
/// between two hosts on the network.
#[derive(Debug, Clone, Hash, Eq, PartialEq)]
struct Pair(IpAddr, IpAddr);

impl Pair {
    fn new(a: IpAddr, b: IpAddr) -> Pair {
        assert_ne!(a, b);

        if a < b {
            Pair(a, b)
        } else {
            Pair(b, a)
        }
    }
}

/// An iterator for the network topology, providing access to all active links
/// in the simulated network.
pub struct LinksIter<'a> {
    iter: indexmap::map::IterMut<'a, Pair, Link>,
}

/// An iterator for the link, providing access to sent messages that have not
/// yet been delivered.
pub struct LinkIter<'a> {
    a: IpAddr,
    b: IpAddr,
    now: Instant,
    iter: std::collections::vec_deque::IterMut<'a, Sent>,
}

impl LinkIter<'_> {
    /// The [`IpAddr`] pair for the link. Always ordered to uniquely identify
    /// the link.
    pub fn pair(&self) -> (IpAddr, IpAddr) {
        (self.a, self.b)
    }

    /// Schedule all messages on the link for delivery the next time the
    /// simulation steps, consuming the iterator.
    pub fn deliver_all(self) {
        for sent in self {
            sent.deliver();
        }
    }
}

/// Provides a reference to a message that is currently inflight on the network
/// from one host to another.
pub struct SentRef<'a> {
    src: SocketAddr,
    dst: SocketAddr,
    now: Instant,
    sent: &'a mut Sent,
}

impl SentRef<'_> {
    /// The (src, dst) [`SocketAddr`] pair for the message.
    pub fn pair(&self) -> (SocketAddr, SocketAddr) {
        (self.src, self.dst)
    }

    /// The message [`Protocol`].
    pub fn protocol(&self) -> &Protocol {
        &self.sent.protocol
    }

    /// Schedule the message for delivery the next time the simulation steps,
    /// consuming the item.
    pub fn deliver(self) {
        self.sent.deliver(self.now);
    }
}

impl<'a> Iterator for LinksIter<'a> {
    type Item = LinkIter<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let (pair, link) = self.iter.next()?;

        Some(LinkIter {
            a: pair.0,
            b: pair.1,
            now: link.now,
            iter: link.sent.iter_mut(),
        })
    }
}

impl<'a> Iterator for LinkIter<'a> {
    type Item = SentRef<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let sent = self.iter.next()?;

        Some(SentRef {
            src: sent.src,
            dst: sent.dst,
            now: self.now,
            sent,
        })
    }
}

/// A two-way link between two hosts on the network.
struct Link {
    /// The state of the link from node 'a' to node 'b'.
    /// Of the two nodes attached to a link, 'a' is the
    /// one whose ip address sorts smallest.
    state_a_b: State,
    /// The state of the link from node 'b' to node 'a'.
    /// Of the two nodes attached to a link, 'b' is the
    /// one whose ip address sorts greatest.
    state_b_a: State,

    /// Optional, per-link configuration.
    config: config::Link,

    /// Sent messages that are either scheduled for delivery in the future
    /// or are on hold.
    sent: VecDeque<Sent>,

    /// Messages that are ready to be delivered.
    deliverable: IndexMap<IpAddr, VecDeque<Envelope>>,

    /// The current network time, moved forward with [`Link::tick`].
    now: Instant,

    /// Linux mode: retransmittable segments this link lost, for the
    /// topology to schedule.
    lost: Vec<Lost>,
}

/// States that a link between two nodes can be in.
#[derive(Clone, Copy)]
enum State {
    /// The link is healthy.
    Healthy,

    /// The link was explicitly partitioned.
    ExplicitPartition,

    /// The link was randomly partitioned.
    RandPartition,

    /// Messages are being held indefinitely.
    Hold,
}

impl Topology {
    pub(crate) fn new(config: config::Link, linux_tcp: Option<LinuxTcp>) -> Topology {
        Topology {
            config,
            links: IndexMap::default(),
            rt: Rt::no_software(),
            clock: None,
            due: BinaryHeap::new(),
            seq: 0,
            linux_tcp,
            retransmits: BinaryHeap::new(),
            outstanding: Default::default(),
        }
    }

    /// Linux mode: whether connection `conn` of host `host` has segments
    /// waiting for retransmission.
    pub(crate) fn has_outstanding(&self, host: IpAddr, conn: u64) -> bool {
        self.outstanding.contains_key(&(host, conn))
    }

    /// The network's current instant.
    pub(crate) fn now(&self) -> Instant {
        self.clock.unwrap_or_else(|| self.rt.now())
    }

    /// Linux mode: schedule the segments `pair`'s link lost for
    /// retransmission, each when its sender's RTO expires.
    fn collect_lost(&mut self, pair: &Pair) {
        if let Some(i) = self.links.get_index_of(pair) {
            self.collect_lost_at(i);
        }
    }

    /// [`Topology::collect_lost`] of the link at index `i` of `links`.
    fn collect_lost_at(&mut self, i: usize) {
        let Some(timers) = self.linux_tcp else { return };
        let now = self.now();
        let Some((_, link)) = self.links.get_index_mut(i) else {
            return;
        };
        for lost in std::mem::take(&mut link.lost) {
            *self
                .outstanding
                .entry((lost.src.ip(), lost.rtx.conn))
                .or_default() += 1;
            let at = (lost.rtx.last + timers.rto(lost.rtx.expiries)).max(now);
            self.seq += 1;
            self.retransmits.push(Reverse(Retransmit {
                at,
                seq: self.seq,
                lost,
            }));
        }
    }

    /// Linux mode: when the next retransmission timer expires.
    fn next_retransmit(&self) -> Option<Instant> {
        self.retransmits.peek().map(|Reverse(r)| r.at)
    }

    /// Linux mode: each lost segment whose sender's RTO has expired by now
    /// is sent again — unless its sender crashed since, its connection was
    /// reset, or the sender gives up on it (`tcp_retries2`, or
    /// `tcp_orphan_retries` for a connection the application closed), in
    /// which case a connection still held by the application is aborted.
    pub(crate) fn retransmit_due(
        &mut self,
        rand: &mut dyn RngCore,
        hosts: &mut IndexMap<IpAddr, Host>,
    ) {
        let Some(timers) = self.linux_tcp else { return };
        let now = self.now();
        while self.next_retransmit().is_some_and(|at| at <= now) {
            let Reverse(Retransmit { lost, .. }) = self.retransmits.pop().expect("peeked");
            let Lost {
                src,
                dst,
                message,
                mut rtx,
            } = lost;
            // Out of the queue: sent again (and counted again if lost
            // again) or given up.
            if let std::collections::hash_map::Entry::Occupied(mut e) =
                self.outstanding.entry((src.ip(), rtx.conn))
            {
                *e.get_mut() -= 1;
                if *e.get() == 0 {
                    e.remove();
                }
            }
            let pair = SocketPair::new(src, dst);
            let Some(sender) = hosts.get_mut(&src.ip()) else {
                continue;
            };
            if !sender.up || sender.boot != rtx.boot {
                continue;
            }
            let Some(held) = sender.tcp.retransmits(pair, rtx.conn) else {
                continue;
            };
            rtx.expiries += 1;
            let gives_up_after = if held {
                timers.abort_after()
            } else {
                timers.orphan_gives_up_after()
            };
            if now - rtx.first >= gives_up_after {
                sender.tcp.abort(pair, rtx.conn);
                continue;
            }
            rtx.last = now;
            tracing::trace!(target: TRACING_TARGET, ?src, ?dst, protocol = %message, expiries = rtx.expiries, "Retransmit");
            let _ = self.enqueue(rand, src, dst, message, Some(rtx));
        }
    }

    /// Register a link between two hosts
    pub(crate) fn register(&mut self, a: IpAddr, b: IpAddr) {
        let pair = Pair::new(a, b);
        let now = self.clock.unwrap_or_else(|| self.rt.now());
        assert!(self.links.insert(pair, Link::new(now)).is_none());
    }

    /// Event-driven mode: set the current instant.
    pub(crate) fn set_clock(&mut self, now: Instant) {
        self.clock = Some(now);
    }

    /// Event-driven mode: the link at index `link` of `links` has a
    /// message due at `at`.
    fn schedule(&mut self, at: Option<Instant>, link: usize) {
        if let (Some(at), Some(_)) = (at, self.clock) {
            self.seq += 1;
            self.due.push(Reverse((at, self.seq, link)));
        }
    }

    /// Event-driven mode: when the next message is due, if any is in flight.
    pub(crate) fn next_delivery(&self) -> Option<Instant> {
        let delivery = self.due.peek().map(|Reverse((at, ..))| *at);
        match (delivery, self.next_retransmit()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Event-driven mode: hand every message due by `now` to its host, in
    /// the order they fall due (then the order they were sent).
    pub(crate) fn deliver_due(
        &mut self,
        rand: &mut dyn RngCore,
        hosts: &mut IndexMap<IpAddr, Host>,
    ) {
        let Some(now) = self.clock else { return };
        self.retransmit_due(rand, hosts);
        while let Some(Reverse((at, _, i))) = self.due.peek().copied() {
            if at > now {
                break;
            }
            self.due.pop();
            let Some((pair, link)) = self.links.get_index_mut(i) else {
                continue;
            };
            let (a, b) = (pair.0, pair.1);
            link.tick(now);
            let mut bounced = Vec::new();
            for addr in [a, b] {
                if let Some(host) = hosts.get_mut(&addr) {
                    bounced.extend(link.deliver_messages(&self.config, rand, host, now));
                }
            }
            for at in bounced {
                self.schedule(Some(at), i);
            }
            self.collect_lost_at(i);
        }
    }

    pub(crate) fn set_max_message_latency(&mut self, value: Duration) {
        self.config.latency_mut().max_message_latency = value;
    }

    pub(crate) fn set_link_message_latency(&mut self, a: IpAddr, b: IpAddr, value: Duration) {
        let pair = Pair::new(a, b);
        let latency = self
            .links
            .get_mut(&pair)
            .unwrap_or_else(|| panic!("unable to find link between {pair:?}"))
            .latency(self.config.latency());
        latency.min_message_latency = value;
        latency.max_message_latency = value;
    }

    pub(crate) fn set_link_max_message_latency(&mut self, a: IpAddr, b: IpAddr, value: Duration) {
        let pair = Pair::new(a, b);
        self.links
            .get_mut(&pair)
            .unwrap_or_else(|| panic!("unable to find link between {pair:?}"))
            .latency(self.config.latency())
            .max_message_latency = value;
    }

    pub(crate) fn set_message_latency_curve(&mut self, value: f64) {
        self.config.latency_mut().latency_distribution = Exp::new(value).unwrap();
    }

    pub(crate) fn set_fail_rate(&mut self, value: f64) {
        self.config.message_loss_mut().fail_rate = value;
    }

    pub(crate) fn set_link_fail_rate(&mut self, a: IpAddr, b: IpAddr, value: f64) {
        let pair = Pair::new(a, b);
        self.links
            .get_mut(&pair)
            .unwrap_or_else(|| panic!("unable to find link between {pair:?}"))
            .message_loss(self.config.message_loss())
            .fail_rate = value;
    }

    // Send a `message` from `src` to `dst`. This method returns immediately,
    // and message delivery happens at a later time (or never, if the link is
    // broken).
    pub(crate) fn enqueue_message(
        &mut self,
        rand: &mut dyn RngCore,
        src: SocketAddr,
        dst: SocketAddr,
        message: Protocol,
    ) -> Result<()> {
        self.enqueue(rand, src, dst, message, None)
    }

    /// [`Topology::enqueue_message`], for a segment that (in linux mode)
    /// its sender retransmits if the network loses it.
    pub(crate) fn enqueue(
        &mut self,
        rand: &mut dyn RngCore,
        src: SocketAddr,
        dst: SocketAddr,
        message: Protocol,
        rtx: Option<Rtx>,
    ) -> Result<()> {
        let pair = Pair::new(src.ip(), dst.ip());
        let rtx = rtx.filter(|_| self.linux_tcp.is_some());
        if let Some((i, _, link)) = self.links.get_full_mut(&pair) {
            if let Some(now) = self.clock {
                link.now = now;
            }
            let at = link.enqueue_message(&self.config, rand, src, dst, message, rtx)?;
            self.schedule(at, i);
            self.collect_lost_at(i);
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::ConnectionRefused,
                "Connection refused",
            ))
        }
    }

    // Move messages from any network links to the `dst` host.
    pub(crate) fn deliver_messages(&mut self, rand: &mut dyn RngCore, dst: &mut Host) {
        let now = self.now();
        let mut touched = Vec::new();
        for (i, (pair, link)) in self.links.iter_mut().enumerate() {
            if pair.0 == dst.addr || pair.1 == dst.addr {
                let _ = link.deliver_messages(&self.config, rand, dst, now);
                if !link.lost.is_empty() {
                    touched.push(i);
                }
            }
        }
        for i in touched {
            self.collect_lost_at(i);
        }
    }

    pub(crate) fn hold(&mut self, a: IpAddr, b: IpAddr) {
        self.get_link_mut(&Pair::new(a, b)).hold();
    }

    pub(crate) fn release(&mut self, a: IpAddr, b: IpAddr) {
        let clock = self.clock;
        let pair = Pair::new(a, b);
        let (i, _, link) = self
            .links
            .get_full_mut(&pair)
            .unwrap_or_else(|| panic!("unable to find link between {pair:?}"));
        if let Some(now) = clock {
            link.now = now;
        }
        link.release();
        self.schedule(clock, i);
    }

    pub(crate) fn partition(&mut self, a: IpAddr, b: IpAddr) {
        let pair = Pair::new(a, b);
        self.get_link_mut(&pair).explicit_partition();
        self.collect_lost(&pair);
    }

    pub(crate) fn partition_oneway(&mut self, a: IpAddr, b: IpAddr) {
        let pair = Pair::new(a, b);
        let link = &mut self.get_link_mut(&pair);
        link.partition_oneway(a, b);
        self.collect_lost(&pair);
    }

    pub(crate) fn repair(&mut self, a: IpAddr, b: IpAddr) {
        self.get_link_mut(&Pair::new(a, b)).explicit_repair();
    }

    pub(crate) fn repair_oneway(&mut self, a: IpAddr, b: IpAddr) {
        let link = &mut self.get_link_mut(&Pair::new(a, b));
        link.repair_oneway(a, b);
    }

    pub(crate) fn tick_by(&mut self, duration: Duration) {
        let _ = self.rt.tick(duration);
        for link in self.links.values_mut() {
            link.tick(self.rt.now());
        }
    }

    pub(crate) fn iter_mut(&mut self) -> LinksIter<'_> {
        LinksIter {
            iter: self.links.iter_mut(),
        }
    }

    #[inline]
    fn get_link_mut(&mut self, pair: &Pair) -> &mut Link {
        self.links
            .get_mut(pair)
            .unwrap_or_else(|| panic!("unable to find link between {pair:?}"))
    }
}

/// Represents a message sent between two hosts on the network.
struct Sent {
    src: SocketAddr,
    dst: SocketAddr,
    status: DeliveryStatus,
    protocol: Protocol,
    /// Linux mode: the segment's retransmission state, if its sender
    /// retransmits it when it is lost.
    rtx: Option<Rtx>,
}

impl Sent {
    fn deliver(&mut self, now: Instant) {
        self.status = DeliveryStatus::DeliverAfter(now);
    }
}

enum DeliveryStatus {
    DeliverAfter(Instant),
    Hold,
}

impl Link {
    fn new(now: Instant) -> Link {
        Link {
            state_a_b: State::Healthy,
            state_b_a: State::Healthy,
            config: config::Link::default(),
            sent: VecDeque::new(),
            deliverable: IndexMap::default(),
            now,
            lost: Vec::new(),
        }
    }

    /// A message the network did not deliver: gone, unless (linux mode) its
    /// sender retransmits it, in which case it waits for the topology to
    /// schedule that.
    fn lose(&mut self, src: SocketAddr, dst: SocketAddr, message: Protocol, rtx: Option<Rtx>) {
        if let Some(rtx) = rtx {
            self.lost.push(Lost {
                src,
                dst,
                message,
                rtx,
            });
        }
    }

    /// Drop the in-flight messages `cut` selects. Linux mode: the
    /// retransmittable ones are lost, for their sender to send again.
    fn drop_in_flight(&mut self, cut: impl Fn(&Sent) -> bool) {
        let mut kept = VecDeque::with_capacity(self.sent.len());
        for sent in std::mem::take(&mut self.sent) {
            if !cut(&sent) {
                kept.push_back(sent);
            } else {
                self.lose(sent.src, sent.dst, sent.protocol, sent.rtx);
            }
        }
        self.sent = kept;
    }

    fn enqueue_message(
        &mut self,
        global_config: &config::Link,
        rand: &mut dyn RngCore,
        src: SocketAddr,
        dst: SocketAddr,
        message: Protocol,
        rtx: Option<Rtx>,
    ) -> Result<Option<Instant>> {
        tracing::trace!(target: TRACING_TARGET, ?src, ?dst, protocol = %message, "Send");

        self.rand_partition_or_repair(global_config, rand);
        let result = self.enqueue(global_config, rand, src, dst, message, rtx);
        self.process_deliverables();
        result
    }

    fn get_state_for_message(&self, src: IpAddr, dst: IpAddr) -> State {
        // Between each pair of ip-addresses there can exist a link.
        // A link between two such pairs can be constructed as
        // Pair::new(x,y) or Pair::new(y,x). These two expressions create
        // the exact same link. We denote one of the ends of the link as 'a',
        // and the other 'b'. 'a' is always the one that compares smaller, i.e,
        // `a < b` holds.
        if src < dst {
            self.state_a_b
        } else {
            self.state_b_a
        }
    }

    // src -> link -> dst
    //        ^-- you are here!
    //
    // Messages may be dropped, sit on the link for a while (due to latency, or
    // because the link has stalled), or be delivered immediately.
    // Link will return an Err(()) if the socket buffer is full.
    fn enqueue(
        &mut self,
        global_config: &config::Link,
        rand: &mut dyn RngCore,
        src: SocketAddr,
        dst: SocketAddr,
        message: Protocol,
        rtx: Option<Rtx>,
    ) -> Result<Option<Instant>> {
        let state = self.get_state_for_message(src.ip(), dst.ip());
        let status = match state {
            State::Healthy => {
                let delay = self.delay(global_config.latency(), rand);
                DeliveryStatus::DeliverAfter(self.now + delay)
            }
            // Only A->B is blocked, so B can send, so we can send if src is B
            State::Hold => {
                tracing::trace!(target: TRACING_TARGET,?src, ?dst, protocol = %message, "Hold");
                DeliveryStatus::Hold
            }
            _ => {
                tracing::trace!(target: TRACING_TARGET,?src, ?dst, protocol = %message, "Drop");
                self.lose(src, dst, message, rtx);
                return Ok(None);
            }
        };
        let at = match status {
            DeliveryStatus::DeliverAfter(at) => Some(at),
            DeliveryStatus::Hold => None,
        };

        let sent = Sent {
            src,
            dst,
            status,
            protocol: message,
            rtx,
        };

        self.sent.push_back(sent);
        Ok(at)
    }

    fn tick(&mut self, now: Instant) {
        self.now = now;
        self.process_deliverables();
    }

    fn process_deliverables(&mut self) {
        // TODO: `drain_filter` is not yet stable, and so we have a low quality
        // implementation here that avoids clones.
        let mut deliverable = 0;
        for i in 0..self.sent.len() {
            let index = i - deliverable;
            let sent = &self.sent[index];
            if let DeliveryStatus::DeliverAfter(time) = sent.status {
                if time <= self.now {
                    let sent = self.sent.remove(index).unwrap();
                    let envelope = Envelope {
                        src: sent.src,
                        dst: sent.dst,
                        message: sent.protocol,
                        rtx: sent.rtx,
                    };
                    self.deliverable
                        .entry(sent.dst.ip())
                        .or_default()
                        .push_back(envelope);
                    deliverable += 1;
                }
            }
        }
    }

    // FIXME: This implementation does not respect message delivery order. If
    // host A and host B are ordered (by addr), and B sends before A, then this
    // method will deliver A's message before B's.
    fn deliver_messages(
        &mut self,
        global_config: &config::Link,
        rand: &mut dyn RngCore,
        host: &mut Host,
        now: Instant,
    ) -> Vec<Instant> {
        // racksim patch: a link is delivered to both its ends when either has
        // something due; the end with nothing queued costs no allocation.
        let deliverable = match self.deliverable.get_mut(&host.addr) {
            Some(queue) if !queue.is_empty() => std::mem::take(queue),
            _ => return Vec::new(),
        };

        let mut scheduled = Vec::new();
        for message in deliverable {
            let (src, dst) = (message.src, message.dst);
            // racksim patch (linux mode): a host that is down answers
            // nothing; what it was sent is lost (and retransmitted, if its
            // sender does).
            if !host.up {
                tracing::trace!(target: TRACING_TARGET, ?src, ?dst, protocol = %message.message, "Drop (host down)");
                self.lose(src, dst, message.message, message.rtx);
                continue;
            }
            if let Err(message) = host.receive_from_network(message, now) {
                if let Ok(Some(at)) =
                    self.enqueue_message(global_config, rand, dst, src, message, None)
                {
                    scheduled.push(at);
                }
            }
        }
        scheduled
    }

    // Randomly break or repair this link.
    fn rand_partition_or_repair(&mut self, global_config: &config::Link, rand: &mut dyn RngCore) {
        let do_rand = self.rand_partition(global_config.message_loss(), rand);
        match (self.state_a_b, self.state_b_a) {
            (State::Healthy, _) | (_, State::Healthy) if do_rand => {
                self.state_a_b = State::RandPartition;
                self.state_b_a = State::RandPartition;

                self.drop_in_flight(|_| true);
            }
            (State::RandPartition, _) | (_, State::RandPartition)
                if self.rand_repair(global_config.message_loss(), rand) =>
            {
                self.release();
            }
            _ => {}
        }
    }

    fn hold(&mut self) {
        self.state_a_b = State::Hold;
        self.state_b_a = State::Hold;

        for sent in &mut self.sent {
            sent.status = DeliveryStatus::Hold;
        }
    }

    // This link becomes healthy, and any held messages are scheduled for delivery.
    fn release(&mut self) {
        self.state_a_b = State::Healthy;
        self.state_b_a = State::Healthy;
        for sent in &mut self.sent {
            if let DeliveryStatus::Hold = sent.status {
                sent.deliver(self.now);
            }
        }
    }

    fn explicit_partition(&mut self) {
        self.state_a_b = State::ExplicitPartition;
        self.state_b_a = State::ExplicitPartition;

        self.drop_in_flight(|_| true);
    }

    fn partition_oneway(&mut self, from: IpAddr, to: IpAddr) {
        if from < to {
            self.state_a_b = State::ExplicitPartition;
        } else {
            self.state_b_a = State::ExplicitPartition;
        }

        self.drop_in_flight(|sent| sent.src.ip() == from);
    }

    fn repair_oneway(&mut self, from: IpAddr, to: IpAddr) {
        if from < to {
            self.state_a_b = State::Healthy;
        } else {
            self.state_b_a = State::Healthy;
        }
    }

    // Repair the link, without releasing any held messages.
    fn explicit_repair(&mut self) {
        self.state_a_b = State::Healthy;
        self.state_b_a = State::Healthy;
    }

    /// Should the link be randomly partitioned
    fn rand_partition(&self, global: &config::MessageLoss, rand: &mut dyn RngCore) -> bool {
        let config = self.config.message_loss.as_ref().unwrap_or(global);
        let fail_rate = config.fail_rate;
        fail_rate > 0.0 && rand.random_bool(fail_rate)
    }

    fn rand_repair(&self, global: &config::MessageLoss, rand: &mut dyn RngCore) -> bool {
        let config = self.config.message_loss.as_ref().unwrap_or(global);
        let repair_rate = config.repair_rate;
        repair_rate > 0.0 && rand.random_bool(repair_rate)
    }

    fn delay(&self, global: &config::Latency, rand: &mut dyn RngCore) -> Duration {
        let config = self.config.latency.as_ref().unwrap_or(global);

        let mult = config.latency_distribution.sample(rand);
        // racksim patch: nanosecond resolution (it was whole milliseconds,
        // which made any sub-millisecond range a constant).
        let range = (config.max_message_latency - config.min_message_latency).as_nanos() as f64;
        let delay = config.min_message_latency + Duration::from_nanos((range * mult) as _);

        std::cmp::min(delay, config.max_message_latency)
    }

    fn latency(&mut self, global: &config::Latency) -> &mut config::Latency {
        self.config.latency.get_or_insert_with(|| global.clone())
    }

    fn message_loss(&mut self, global: &config::MessageLoss) -> &mut config::MessageLoss {
        self.config
            .message_loss
            .get_or_insert_with(|| global.clone())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Link;

    use super::*;

    #[test]
    #[should_panic(expected = "unable to find link between Pair(10.0.0.1, 192.168.0.1)")]
    fn link_access_gives_useful_panic_message() {
        let mut topo = Topology::new(Link::default(), None);
        topo.hold("10.0.0.1".parse().unwrap(), "192.168.0.1".parse().unwrap());
    }
}
