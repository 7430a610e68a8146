//! The software of each simulated host. turmoil restarts a host by calling
//! its function again, so each one rebuilds its state from the world (a
//! restarted switch zone comes back with an empty NAT table).

pub mod control_plane;
pub mod sled;
pub mod switch_zone;
pub mod upstream;

use racksim_reconciler::{dpd::NatTarget, nat::NatEntry};

use crate::{
    fakes::http::{serve, Handler},
    world::World,
};

/// Serve `handler` on `port` for as long as the host runs; a failure to
/// serve is a bug in the testbed and lands in the trace.
pub(crate) fn spawn_server<H: Handler>(world: &World, host: &str, port: u16, handler: H) {
    let (world, host) = (world.clone(), host.to_string());
    tokio::task::spawn_local(async move {
        if let Err(e) = serve(port, handler).await {
            world.trace(
                &host,
                crate::trace::Kind::Bug,
                format!("BUG: server on port {port} stopped: {e}"),
            );
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
