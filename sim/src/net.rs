//! The reconciler's I/O seams, implemented on turmoil: sockets and discovery.

use std::{
    future::Future,
    io,
    net::{Ipv6Addr, SocketAddr},
};

use racksim_reconciler::{
    discovery::{DiscoveryError, SwitchZoneResolver},
    http::HttpClient,
    Connector,
};
use serde::{Deserialize, Serialize};

/// Port of the internal DNS zone's (simplified) lookup API.
pub const INTERNAL_DNS_PORT: u16 = 5353;
/// Port of sled-agent's API (the reconciler's clients use the same).
pub use racksim_nexus::instances::SLED_AGENT_PORT;
/// Port on which a sled's OPTE receives Geneve-encapsulated traffic.
pub const GENEVE_PORT: u16 = 6081;
/// Port on which a switch's uplink receives traffic from the outside world.
pub const UPLINK_PORT: u16 = 7000;
/// NTP.
pub const NTP_PORT: u16 = 123;

/// Linux's TCP timers, as the simulation's network uses them (live mode
/// takes its SYN schedule from here too).
pub use turmoil::LinuxTcp;

/// TCP keepalive as reqwest sets it on every connection of every client
/// (reqwest 0.12.23 and 0.13.2, `ClientBuilder::new`: `tcp_keepalive`
/// 15 s, `tcp_keepalive_interval` 15 s, `tcp_keepalive_retries` 3; socket2
/// applies all three on illumos). It is what ends a request with no
/// timeout of its own (the scrimlet reconcilers', dpd's pulls from Nexus)
/// when the peer goes away under it: 60 s after it was last heard from, or
/// at the first probe if it rebooted.
pub const REQWEST_KEEPALIVE: turmoil::Keepalive = turmoil::Keepalive {
    idle: std::time::Duration::from_secs(15),
    interval: std::time::Duration::from_secs(15),
    retries: 3,
};

/// Connects over the simulated network, with reqwest's keepalive.
#[derive(Clone, Copy, Debug, Default)]
pub struct TurmoilConnector;

impl Connector for TurmoilConnector {
    type Io = turmoil::net::TcpStream;

    async fn connect(&self, addr: SocketAddr) -> io::Result<Self::Io> {
        let stream = turmoil::net::TcpStream::connect(addr).await?;
        stream.set_keepalive(REQWEST_KEEPALIVE)?;
        Ok(stream)
    }

    /// On the host that made the client: a host's tasks run on its own
    /// `LocalSet` (every host shares one tokio runtime in event-driven
    /// mode), so a kept connection ends when its host crashes, and its
    /// sockets are used in its host's context.
    fn spawn(&self, task: racksim_reconciler::http::BackgroundTask) {
        crate::task::spawn(task);
    }
}

/// How long one internal DNS query waits for an answer: hickory-resolver's
/// default `ResolverOpts::timeout`, 5 s (hickory 0.25.2
/// `crates/resolver/src/config.rs`, `default_timeout`), which omicron's
/// resolver keeps (omicron b848b6df `internal-dns/resolver/src/resolver.rs`,
/// `Resolver::new_from_addrs`, sets neither `timeout` nor `attempts`).
pub const DNS_QUERY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How often a failed lookup is tried again: hickory's default
/// `ResolverOpts::attempts`, 2 ("number of retries after lookup failure
/// before giving up", `default_attempts`).
pub const DNS_RETRIES: usize = 2;

/// Internal DNS's answer for the dendrite service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrvAnswer {
    pub addresses: Vec<Ipv6Addr>,
}

/// Looks switch zones up in the simulated internal DNS servers.
///
/// A rack runs several internal DNS servers with the same records; the
/// resolver knows all their addresses and asks them all at once, taking
/// the first answer, as omicron's resolver does (`num_concurrent_reqs` set
/// to the number of servers). Each query waits [`DNS_QUERY_TIMEOUT`]; a
/// round in which none answers is tried again, [`DNS_RETRIES`] times.
/// Simplified: queries are HTTP over the simulated TCP, not DNS over UDP,
/// so a query to a down server waits out its timeout as a UDP query would,
/// and one to a server whose port is closed fails at once (a UDP query
/// would draw an ICMP port unreachable, which hickory also takes as an
/// error).
#[derive(Clone, Debug)]
pub struct InternalDnsResolver {
    servers: Vec<HttpClient<TurmoilConnector>>,
}

impl InternalDnsResolver {
    pub fn new(servers: Vec<Ipv6Addr>) -> Self {
        InternalDnsResolver {
            servers: servers
                .into_iter()
                .map(|dns| {
                    HttpClient::new(
                        TurmoilConnector,
                        SocketAddr::new(dns.into(), INTERNAL_DNS_PORT),
                    )
                    .with_timeouts(Some(DNS_QUERY_TIMEOUT), Some(DNS_QUERY_TIMEOUT))
                    // A real query is a UDP datagram: nothing is kept
                    // between two of them.
                    .without_kept_connections()
                })
                .collect(),
        }
    }
}

impl SwitchZoneResolver for InternalDnsResolver {
    fn switch_zones(&self) -> impl Future<Output = Result<Vec<Ipv6Addr>, DiscoveryError>> + Send {
        let servers = self.servers.clone();
        async move {
            if servers.is_empty() {
                return Err(DiscoveryError(
                    "internal DNS lookup of dendrite failed: no internal DNS server configured"
                        .to_string(),
                ));
            }
            let mut errors = Vec::new();
            for _ in 0..=DNS_RETRIES {
                // Every server at once; the first answer wins. The queries
                // are polled in the servers' order, so a run replays.
                let queries = servers.iter().map(|server| {
                    Box::pin(async move { server.get::<SrvAnswer>("/srv/dendrite").await })
                });
                match futures::future::select_ok(queries).await {
                    Ok((answer, _rest)) => return Ok(answer.addresses),
                    // `select_ok` reports the last error; the others were
                    // alike in kind (each server timed out or refused).
                    Err(e) => errors.push(e.to_string()),
                }
            }
            Err(DiscoveryError(format!(
                "internal DNS lookup of dendrite failed: {}",
                errors.join("; ")
            )))
        }
    }
}
