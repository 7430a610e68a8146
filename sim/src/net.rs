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
pub use racksim_reconciler::instances::SLED_AGENT_PORT;
/// Port on which a sled's OPTE receives Geneve-encapsulated traffic.
pub const GENEVE_PORT: u16 = 6081;
/// Port on which a switch's uplink receives traffic from the outside world.
pub const UPLINK_PORT: u16 = 7000;
/// NTP.
pub const NTP_PORT: u16 = 123;

/// Connects over the simulated network.
#[derive(Clone, Copy, Debug, Default)]
pub struct TurmoilConnector;

impl Connector for TurmoilConnector {
    type Io = turmoil::net::TcpStream;

    fn connect(&self, addr: SocketAddr) -> impl Future<Output = io::Result<Self::Io>> + Send {
        turmoil::net::TcpStream::connect(addr)
    }
}

/// Internal DNS's answer for the dendrite service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrvAnswer {
    pub addresses: Vec<Ipv6Addr>,
}

/// Looks switch zones up in the simulated internal DNS servers.
///
/// A rack runs several internal DNS servers with the same records; the
/// resolver knows all their addresses and asks them in turn until one
/// answers, starting with the one that answered last. (Omicron's resolver
/// hands every server to its DNS library, which likewise fails over to the
/// next name server; which one it prefers first is its own business, so
/// only the failover is modelled.)
#[derive(Clone, Debug)]
pub struct InternalDnsResolver {
    servers: Vec<HttpClient<TurmoilConnector>>,
    /// Index of the server that answered last: shared by the clones a host
    /// hands its tasks, as one resolver's state would be.
    preferred: std::sync::Arc<std::sync::atomic::AtomicUsize>,
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
                })
                .collect(),
            preferred: Default::default(),
        }
    }
}

impl SwitchZoneResolver for InternalDnsResolver {
    fn switch_zones(&self) -> impl Future<Output = Result<Vec<Ipv6Addr>, DiscoveryError>> + Send {
        let (servers, preferred) = (self.servers.clone(), self.preferred.clone());
        async move {
            use std::sync::atomic::Ordering::Relaxed;
            let n = servers.len();
            let first = preferred.load(Relaxed);
            let mut errors = Vec::new();
            for k in 0..n {
                let i = (first + k) % n;
                match servers[i].get::<SrvAnswer>("/srv/dendrite").await {
                    Ok(answer) => {
                        preferred.store(i, Relaxed);
                        return Ok(answer.addresses);
                    }
                    Err(e) => errors.push(e.to_string()),
                }
            }
            Err(DiscoveryError(format!(
                "internal DNS lookup of dendrite failed: {}",
                if errors.is_empty() {
                    "no internal DNS server configured".to_string()
                } else {
                    errors.join("; ")
                }
            )))
        }
    }
}
