//! The software of each simulated host. turmoil restarts a host by calling
//! its function again, so each one rebuilds its state from the world (a
//! restarted switch zone comes back with an empty NAT table).

pub mod control_plane;
pub mod sled;
pub mod switch_zone;
pub mod upstream;

use racksim_reconciler::{dpd::NatTarget, nat::NatEntry};

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
    tokio::task::spawn_local(async move {
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

/// `198.51.100.1/16384-32767 -> sled2 (a8:40:25:ff:00:01, vni 100)`
pub(crate) fn fmt_entry(world: &World, e: &NatEntry) -> String {
    format!(
        "{}/{}-{} -> {}",
        e.external_ip,
        e.first_port,
        e.last_port,
        fmt_target(world, &e.target)
    )
}

pub(crate) fn fmt_target(world: &World, t: &NatTarget) -> String {
    format!(
        "{} ({}, vni {})",
        world.name_of(t.internal_ip),
        t.inner_mac,
        t.vni
    )
}
