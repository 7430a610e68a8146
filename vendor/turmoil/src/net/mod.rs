//! This module contains the simulated TCP/UDP networking types.
//!
//! They mirror [tokio::net](https://docs.rs/tokio/latest/tokio/net/) to provide
//! a high fidelity implementation.

use std::net::SocketAddr;
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

// racksim patch: a pair is a host's key for each of its streams, looked up
// on every segment and every read and write. The derived `Hash` fed the
// hasher six times per address (the enum's tag, the octets' length and
// bytes, the port, the flow info, the scope); this feeds it twice. Equal
// pairs still hash equal (the fields left out are compared by `Eq`), and an
// `IndexMap` iterates in insertion order whatever the hash.
impl std::hash::Hash for SocketPair {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for addr in [self.local, self.remote] {
            crate::hash_ip(&addr.ip(), state);
            state.write_u16(addr.port());
        }
    }
}

impl SocketPair {
    pub(crate) fn new(local: SocketAddr, remote: SocketAddr) -> SocketPair {
        assert_ne!(local, remote);
        SocketPair { local, remote }
    }
}
