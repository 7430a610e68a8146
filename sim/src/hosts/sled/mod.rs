//! A sled: sled-agent, the zones it hosts, and its OPTE (the end of the
//! data path that delivers NAT'd traffic to a zone). One module per concept:
//!
//! * this module — the sled host: it boots sled-agent (the fake of
//!   `racksim-fakes`, served by [`crate::services::sled_agent`]), the internal
//!   DNS server if the sled hosts it, OPTE, what the strategy runs on the
//!   sled ([`crate::strategy::NatStrategy::start_on_sled`]: the per-sled
//!   task, the scrimlet's reconcilers of its own switch zone, or nothing),
//!   and then its zones;
//! * `zones` — zone start and stop: under a strategy that [blocks zone
//!   start](crate::strategy::NatStrategy::blocks_zone_start) each zone's
//!   start waits on `legacy::ensure_zone_nat`, otherwise zones start at once;
//! * `opte` — delivery of Geneve traffic to the zone it is for;
//! * `ntp` — the sled's NTP zone: boundary NTP (a zone of the zone set)
//!   or, on every other sled, internal NTP (started with sled-agent).
//!
//! The sled runs the zones the rack's current config puts on it
//! ([`crate::world::ZoneSet`]): when a config change adds a zone here it
//! starts (the same way as at boot, so under `legacy` its start blocks on
//! the NAT ensure), and when one is removed or moved away it stops. Zones
//! start one after another, as sled-agent's zone starts did.

pub mod ntp;
mod opte;
mod zones;

use std::collections::BTreeMap;

use racksim_reconciler::nat::NatEntry;
use rand::{rngs::SmallRng, SeedableRng};
use tokio::task::JoinHandle;

use super::spawn_server;
pub use crate::services::sled_agent::TimeSync;
use crate::{
    net::{InternalDnsResolver, INTERNAL_DNS_PORT, SLED_AGENT_PORT},
    rack::ZoneKind,
    services::{dns::InternalDnsApi, sled_agent::SledAgentApi},
    strategy::SledContext,
    trace::Kind,
    world::{LiveZone, World, ZoneId},
};

pub async fn run(world: World, index: usize) -> turmoil::Result {
    let rack = world.params.rack.clone();
    let sled = world.sled(index);
    let name = sled.name.clone();
    let boot = world.boot(&name);
    // Subscribed before the first zones start, so that a change while they
    // start (an inline start can block for minutes) is seen afterwards.
    let mut zone_set = world.subscribe_zones();
    let zones: Vec<LiveZone> = zone_set.borrow_and_update().on_sled(index);
    {
        // sled-agent's instance and V2P state does not survive a restart.
        let mut st = world.lock();
        st.sleds.up.insert(index);
        st.sleds.agents.insert(index, Default::default());
        st.version += 1;
    }
    world.trace(&name, Kind::Boot, "sled-agent up");
    spawn_server(
        &world,
        &name,
        SLED_AGENT_PORT,
        SledAgentApi::new(world.clone(), index, boot),
    );
    if rack.internal_dns.contains(&index) {
        spawn_server(
            &world,
            &name,
            INTERNAL_DNS_PORT,
            InternalDnsApi {
                world: world.clone(),
            },
        );
        world.record(
            world
                .line(&name, Kind::Zone, "zone internal-dns started")
                .field("zone", "internal-dns")
                .field("took_us", 0),
        );
    }
    let opte_world = world.clone();
    crate::task::spawn(async move {
        // Nothing waits on OPTE: a socket error ends it, unreported.
        let _ = opte::opte(opte_world, index).await;
    });
    // Every sled runs one NTP zone: a sled the zone set gives no boundary
    // NTP zone runs internal NTP, which needs no NAT.
    if !zones.iter().any(|z| z.spec.kind == ZoneKind::BoundaryNtp) {
        crate::task::spawn(ntp::internal_ntp(world.clone(), index, name.clone()));
    }

    let resolver = InternalDnsResolver::new(rack.internal_dns_addresses());

    // What the strategy runs on the sled starts with sled-agent, before
    // any zone and independently of zone start: a zone blocked in the
    // zone-start path below does not hold it up (under
    // `scrimlet-local-with-zone-start` the scrimlet reconcilers start here,
    // as upstream's long-running task does). It lives as long as this
    // host's software.
    let strategy = world.params.strategy;
    let context = SledContext::new(&world, index, boot, resolver.clone());
    let mut on_sled = strategy.start_on_sled(&context, &nat_entries(&world, &zones));

    let mut rng = SmallRng::seed_from_u64(world.derive_seed(&name, boot));
    let mut running: BTreeMap<ZoneId, Option<JoinHandle<()>>> = BTreeMap::new();
    for zone in &zones {
        let task = zones::start_zone(&world, index, &name, &resolver, zone, &mut rng).await;
        running.insert(zone.id, task);
    }
    // Then follow the config: stop what left this sled, start what came.
    loop {
        if zone_set.changed().await.is_err() {
            return Ok(());
        }
        let now: Vec<LiveZone> = zone_set.borrow_and_update().on_sled(index);
        let gone: Vec<ZoneId> = running
            .keys()
            .filter(|id| !now.iter().any(|z| z.id == **id))
            .copied()
            .collect();
        for id in gone {
            if let Some(Some(task)) = running.remove(&id) {
                task.abort();
            }
            zones::stop_zone(&world, index, &name, id);
        }
        on_sled.zones_changed(&context, &nat_entries(&world, &now));
        for zone in &now {
            if running.contains_key(&zone.id) {
                continue;
            }
            let task = zones::start_zone(&world, index, &name, &resolver, zone, &mut rng).await;
            running.insert(zone.id, task);
        }
    }
}

/// The NAT entries of `zones`, for the strategy.
fn nat_entries(world: &World, zones: &[LiveZone]) -> Vec<NatEntry> {
    zones
        .iter()
        .map(|z| world.zone_nat_entry(&z.spec))
        .collect()
}
