//! This module contains the simulated TCP/UDP networking types.
//!
//! They mirror [tokio::net](https://docs.rs/tokio/latest/tokio/net/) to provide
//! a high fidelity implementation.

use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr};
use std::{io, iter};

use crate::world::World;
use crate::ToSocketAddrs;

pub mod tcp;
pub use tcp::{listener::TcpListener, stream::TcpStream};

pub(crate) mod udp;
pub use udp::UdpSocket;

/// Performs a DNS resolution.
///
/// Must be called from within a turmoil simulation context.
pub async fn lookup_host<T>(host: T) -> io::Result<impl Iterator<Item = SocketAddr>>
where
    T: ToSocketAddrs,
{
    let addr = World::current(|world| host.to_socket_addr(&world.dns))?;
    Ok(iter::once(addr))
}

#[derive(Debug, Copy, Clone, Eq, PartialEq)]
pub(crate) struct SocketPair {
    pub(crate) local: SocketAddr,
    pub(crate) remote: SocketAddr,
}

/// racksim: a pair hashes as two 128-bit addresses and one word of
/// ports, not field by field as the derived `Hash` does (the family, the
/// address's length and bytes, port, flow label and scope, twice). Every
/// segment looks its socket up by pair, and the derived hash was about
/// 1.7% of a simulated run. Equal pairs still hash alike, as `Eq` needs;
/// the pairs live in `IndexMap`s, whose order is their insertion order,
/// so the hash decides no order.
impl Hash for SocketPair {
    fn hash<H: Hasher>(&self, state: &mut H) {
        fn bits(addr: &SocketAddr) -> u128 {
            match addr.ip() {
                IpAddr::V4(ip) => u128::from(ip.to_bits()),
                IpAddr::V6(ip) => ip.to_bits(),
            }
        }
        state.write_u128(bits(&self.local));
        state.write_u128(bits(&self.remote));
        state.write_u32(u32::from(self.local.port()) << 16 | u32::from(self.remote.port()));
    }
}

impl SocketPair {
    pub(crate) fn new(local: SocketAddr, remote: SocketAddr) -> SocketPair {
        assert_ne!(local, remote);
        SocketPair { local, remote }
    }
}
