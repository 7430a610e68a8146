//! Test support: the fakes of `racksim-fakes` on an in-memory network.
//!
//! The fakes (dpd, MGS, sled-agent) are those of the simulation and of live
//! mode — one state machine each — reached through
//! [`racksim_fakes::memnet::MemNet`]. This module only adapts them to this
//! crate's unit tests:
//!
//! * [`FakeConnector`] implements this crate's [`Connector`] on the
//!   network's duplex streams;
//! * the typed helpers take and return this crate's types. The fakes crate
//!   depends on the *library* build of this crate, and these unit tests are
//!   a second build of it, so its `Ipv4Nat` is not ours: values cross by
//!   their wire format (JSON), which is exactly what the fakes are tested on.

use std::{io, net::Ipv6Addr, net::SocketAddr};

use racksim_fakes::memnet::MemNet;
pub(crate) use racksim_fakes::memnet::{zone_ip, CannedResponse as FakeResponse};
use serde::{de::DeserializeOwned, Serialize};

use crate::{
    dpd::Ipv4Nat,
    http::Connector,
    instances::{VirtualNetworkInterfaceHost, VmmInfo},
};

/// A value of one build of a wire type as the same type of another build.
fn convert<A: Serialize, B: DeserializeOwned>(a: &A) -> B {
    let json = serde_json::to_value(a).expect("wire types serialize");
    serde_json::from_value(json).expect("both builds have the same wire format")
}

/// The fake network; clone freely (shared state).
#[derive(Clone, Default)]
pub(crate) struct FakeNet {
    net: MemNet,
}

/// Connector into a [`FakeNet`].
#[derive(Clone)]
pub(crate) struct FakeConnector {
    net: MemNet,
}

impl Connector for FakeConnector {
    type Io = tokio::io::DuplexStream;

    async fn connect(&self, addr: SocketAddr) -> io::Result<Self::Io> {
        self.net.connect(addr)
    }
}

impl std::ops::Deref for FakeNet {
    type Target = MemNet;

    fn deref(&self) -> &MemNet {
        &self.net
    }
}

impl FakeNet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn connector(&self) -> FakeConnector {
        FakeConnector {
            net: self.net.clone(),
        }
    }

    /// Sets what the dpd in `zone` answers to `GET /rpw/nat/gen`.
    pub fn set_nat_gen(&self, zone: Ipv6Addr, nat_gen: i64) {
        self.net.with_dpd(zone, |d| d.set_generation(nat_gen));
    }

    pub fn insert_nat(&self, zone: Ipv6Addr, entry: Ipv4Nat) {
        self.net.insert_nat(zone, convert(&entry));
    }

    /// All NAT entries of the dpd in `zone`, sorted.
    pub fn nat(&self, zone: Ipv6Addr) -> Vec<Ipv4Nat> {
        convert(&self.net.nat(zone))
    }

    /// The V2P mappings of the sled-agent at `ip`, sorted.
    pub fn v2p(&self, ip: Ipv6Addr) -> Vec<VirtualNetworkInterfaceHost> {
        convert(&self.net.v2p(ip))
    }

    pub fn insert_v2p(&self, ip: Ipv6Addr, m: VirtualNetworkInterfaceHost) {
        self.net.insert_v2p(ip, convert(&m));
    }

    /// The VMMs of the sled-agent at `ip`, by instance id.
    pub fn vmms(&self, ip: Ipv6Addr) -> Vec<VmmInfo> {
        convert(&self.net.vmms(ip))
    }
}

/// A service NAT entry for tests: `ip/first-last` pointing at
/// `fd00:1122:3344:<sled>::1` with a MAC derived from `sled`.
pub(crate) fn service_entry(ip: [u8; 4], first: u16, last: u16, sled: u16) -> crate::nat::NatEntry {
    crate::nat::NatEntry {
        external_ip: std::net::Ipv4Addr::from(ip),
        first_port: first,
        last_port: last,
        target: convert(&racksim_fakes::memnet::service_target(sled)),
    }
}
