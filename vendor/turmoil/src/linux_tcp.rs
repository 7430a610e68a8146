//! racksim patch: TCP that behaves as Linux's does across a faulty network
//! ([`crate::Builder::linux_tcp`]).
//!
//! As published, turmoil's TCP hands the SYN-ACK back through an in-memory
//! channel (a connection opens across a one-way cut) and a segment that
//! meets a partition is gone for good (no retransmission). With this mode
//! on:
//!
//! * the handshake is three messages on the network (SYN, SYN-ACK, ACK),
//!   each subject to latency, partitions (one-way included) and crashes;
//!   an unanswered SYN is sent again after [`LinuxTcp::syn_rto`], doubling,
//!   [`LinuxTcp::syn_retries`] times, and then the connect fails with
//!   `TimedOut` — unless the caller's own timeout drops it first;
//! * a host that is up with no listener answers a SYN with RST (connection
//!   refused); a host that is down answers nothing;
//! * a data or FIN segment of an established connection that a cut (or a
//!   down peer) loses is sent again on the retransmission timer: RTO from
//!   [`LinuxTcp::rto_min`], doubling, at most [`LinuxTcp::rto_max`]; the
//!   sender aborts the connection when the timer expires after
//!   [`LinuxTcp::retries2`] retransmissions' worth of time, as Linux's
//!   `tcp_retries2` does; a connection the application has closed (an
//!   orphan) gives up after [`LinuxTcp::orphan_retries`];
//! * a crash loses the host's connections without a word on the wire: the
//!   peer learns of it from the RST the rebooted host answers its next
//!   segment with, from its keepalive ([`Keepalive`]), or from its own
//!   timeout.
//!
//! Simplifications, each one a choice between two behaviours that differ
//! only in timing: ACKs are not messages (a segment that arrives is
//! acknowledged; one that is lost is retransmitted), so a cut of the ACK
//! direction alone neither delays data nor counts towards the sender's
//! abort; the listener does not retransmit its SYN-ACK on a timer of its
//! own, it answers each retransmitted SYN; a closed socket is forgotten
//! at once (no TIME-WAIT: a late ACK of it draws no RST); there is no fast
//! retransmit (a lost segment waits for its RTO) and no congestion
//! control.

use std::time::Duration;

use tokio::time::Instant;

/// Linux's TCP timers, as `net.ipv4` sysctls and kernel constants set them
/// by default (Documentation/networking/ip-sysctl.rst, include/net/tcp.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinuxTcp {
    /// `TCP_TIMEOUT_INIT`: the first SYN's retransmission timeout (1 s,
    /// RFC 6298 §2.1).
    pub syn_rto: Duration,
    /// `net.ipv4.tcp_syn_retries`: how often an unanswered SYN is sent
    /// again before the connect fails (6: the connect gives up after
    /// 1 + 2 + … + 64 = 127 s).
    pub syn_retries: u32,
    /// `TCP_RTO_MIN`: the floor of an established connection's
    /// retransmission timeout (200 ms; on a rack's sub-millisecond
    /// round trips the RTO sits at this floor).
    pub rto_min: Duration,
    /// `TCP_RTO_MAX`: the ceiling the doubling RTO stops at (120 s).
    pub rto_max: Duration,
    /// `net.ipv4.tcp_retries2`: the connection is aborted when the RTO
    /// expires after this many retransmissions' worth of time (15: about
    /// 924.6 s with a 200 ms RTO).
    pub retries2: u32,
    /// `net.ipv4.tcp_orphan_retries`: retransmissions of a connection the
    /// application has closed (the default 0 means 8).
    pub orphan_retries: u32,
}

impl Default for LinuxTcp {
    fn default() -> Self {
        LinuxTcp {
            syn_rto: Duration::from_secs(1),
            syn_retries: 6,
            rto_min: Duration::from_millis(200),
            rto_max: Duration::from_secs(120),
            retries2: 15,
            orphan_retries: 8,
        }
    }
}

impl LinuxTcp {
    /// How long an unanswered connect waits in all before it fails:
    /// the sum of the doubling SYN timeouts.
    pub fn connect_gives_up_after(&self) -> Duration {
        (0..=self.syn_retries)
            .map(|i| self.syn_rto * (1 << i))
            .sum()
    }

    /// The RTO after `n` expiries: `rto_min` doubled `n` times, capped.
    pub fn rto(&self, n: u32) -> Duration {
        let doubled = self
            .rto_min
            .saturating_mul(1u32.checked_shl(n).unwrap_or(u32::MAX));
        doubled.min(self.rto_max)
    }

    /// How long after a segment is first sent Linux gives up on it when
    /// `boundary` retransmissions are allowed (`tcp_model_timeout` with
    /// `TCP_RTO_MIN`): the sum of the first `boundary + 1` RTOs.
    pub fn gives_up_after(&self, boundary: u32) -> Duration {
        (0..=boundary).map(|n| self.rto(n)).sum()
    }

    /// When a connection the application holds is aborted
    /// (`tcp_retries2`).
    pub fn abort_after(&self) -> Duration {
        self.gives_up_after(self.retries2)
    }

    /// When a connection the application has closed gives up
    /// (`tcp_orphan_retries`).
    pub fn orphan_gives_up_after(&self) -> Duration {
        self.gives_up_after(self.orphan_retries)
    }
}

/// TCP keepalive on a connection (`SO_KEEPALIVE` with `TCP_KEEPIDLE`,
/// `TCP_KEEPINTVL`, `TCP_KEEPCNT`), set with
/// [`crate::net::TcpStream::set_keepalive`]: after `idle` with nothing
/// heard from the peer (and nothing waiting for retransmission), a probe;
/// then one every `interval`; after `retries` unanswered the connection is
/// aborted. A peer that does not know the connection (rebooted) answers
/// the first probe with RST. Simplified: idleness is measured to the
/// second (a probe may go out up to a second late).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keepalive {
    pub idle: Duration,
    pub interval: Duration,
    pub retries: u32,
}

/// The retransmission state a segment of an established connection
/// carries through the network.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rtx {
    /// The sending host's boot: a crash ends its retransmissions.
    pub(crate) boot: u64,
    /// The sending connection (unique on its host).
    pub(crate) conn: u64,
    /// When the segment was first sent.
    pub(crate) first: Instant,
    /// When it was last sent.
    pub(crate) last: Instant,
    /// Retransmission timer expiries so far.
    pub(crate) expiries: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_defaults_give_linux_totals() {
        let t = LinuxTcp::default();
        assert_eq!(t.connect_gives_up_after(), Duration::from_secs(127));
        assert_eq!(t.rto(0), Duration::from_millis(200));
        assert_eq!(t.rto(9), Duration::from_millis(102_400));
        assert_eq!(t.rto(10), Duration::from_secs(120));
        assert_eq!(t.abort_after(), Duration::from_millis(924_600));
        assert_eq!(t.orphan_gives_up_after(), Duration::from_millis(102_200));
    }
}
