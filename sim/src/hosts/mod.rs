//! The software of each simulated host. turmoil restarts a host by calling
//! its function again, so each one rebuilds its state from the world (a
//! restarted switch zone comes back with an empty NAT table).

pub mod control_plane;
pub mod ntp_server;
pub mod sled;
pub mod switch_zone;

use std::net::{Ipv6Addr, SocketAddr};

use racksim_reconciler::nat::NatEntry;
use serde::{de::DeserializeOwned, Serialize};

use crate::{
    services::{serve, Handler},
    world::World,
};

/// Serve `handler` on `port` for as long as the host runs. A server that
/// stops on its own is a failure of the testbed, not of the code under
/// test: it ends the run as a testbed error.
pub(crate) fn spawn_server<H: Handler>(world: &World, host: &str, port: u16, handler: H) {
    let (world, host) = (world.clone(), host.to_string());
    let sabotage = world
        .params
        .sabotage
        .clone()
        .filter(|s| s.target() == (host.as_str(), port));
    crate::task::spawn(async move {
        let served = match sabotage {
            None => serve(port, handler).await,
            Some(sabotage) => {
                tokio::select! {
                    // Cancel-safe: dropping the server drops its listener,
                    // which is what a stopping server does.
                    r = serve(port, handler) => r,
                    e = sabotage.strike() => Err(e),
                }
            }
        };
        if let Err(e) = served {
            world.testbed_error(&host, format!("the server on port {port} stopped: {e}"));
        }
    });
}

/// A UDP socket on every address of a host, read as the JSON packets of
/// the simulated data path.
pub(crate) struct PacketSocket {
    sock: turmoil::net::UdpSocket,
    buf: Vec<u8>,
}

impl PacketSocket {
    pub(crate) async fn bind(port: u16) -> std::io::Result<Self> {
        let sock = turmoil::net::UdpSocket::bind((Ipv6Addr::UNSPECIFIED, port)).await?;
        Ok(Self {
            sock,
            buf: vec![0u8; 4096],
        })
    }

    /// The next packet that reads as a `T`. Anything else is passed over,
    /// as a real host drops what it cannot parse.
    pub(crate) async fn recv<T: DeserializeOwned>(&mut self) -> std::io::Result<T> {
        Ok(self.recv_from().await?.0)
    }

    /// [`Self::recv`], with the address the packet came from.
    pub(crate) async fn recv_from<T: DeserializeOwned>(
        &mut self,
    ) -> std::io::Result<(T, SocketAddr)> {
        loop {
            let (n, from) = self.sock.recv_from(&mut self.buf).await?;
            if let Ok(packet) = serde_json::from_slice(&self.buf[..n]) {
                return Ok((packet, from));
            }
        }
    }

    /// Send `packet` to `to`. Like the real data path, delivery is best
    /// effort: a send that fails is not retried.
    pub(crate) async fn send<T: Serialize>(&self, packet: &T, to: SocketAddr) {
        let bytes = serde_json::to_vec(packet).expect("packets serialize");
        let _ = self.sock.send_to(&bytes, to).await;
    }
}

/// `198.51.100.1/16384-32767 -> sled2 (a8:40:25:ff:00:01, vni 100)`
pub(crate) fn fmt_entry(world: &World, e: &NatEntry) -> String {
    crate::check::gaps::nat_entry_text(e, &|a| world.name_of(a))
}
