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

/// Looks switch zones up in the simulated internal DNS zone.
#[derive(Clone, Debug)]
pub struct InternalDnsResolver {
    client: HttpClient<TurmoilConnector>,
}

impl InternalDnsResolver {
    pub fn new(dns: Ipv6Addr) -> Self {
        InternalDnsResolver {
            client: HttpClient::new(
                TurmoilConnector,
                SocketAddr::new(dns.into(), INTERNAL_DNS_PORT),
            ),
        }
    }
}

impl SwitchZoneResolver for InternalDnsResolver {
    fn switch_zones(&self) -> impl Future<Output = Result<Vec<Ipv6Addr>, DiscoveryError>> + Send {
        let client = self.client.clone();
        async move {
            client
                .get::<SrvAnswer>("/srv/dendrite")
                .await
                .map(|a| a.addresses)
                .map_err(|e| DiscoveryError(format!("internal DNS lookup of dendrite failed: {e}")))
        }
    }
}
