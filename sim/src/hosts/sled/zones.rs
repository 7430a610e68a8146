//! Zone start and stop, per strategy. `legacy` and
//! `scrimlet-local-with-zone-start` (today's omicron, which keeps the
//! zone-start path beside the scrimlet reconcilers) block each zone with
//! external connectivity on `legacy::ensure_zone_nat` (the bug the zone-start NAT issue
//! describes); the other strategies start every zone at once and leave NAT
//! to their reconcilers. A started zone runs its software: boundary NTP,
//! Nexus. A zone stops when the config removes it or moves it away.

use std::collections::BTreeSet;

use racksim_reconciler::legacy::{self, LegacyProgress};
use rand::rngs::SmallRng;
use tokio::{sync::watch, task::JoinHandle};
use tracing::Instrument;

use super::ntp::boundary_ntp;
use crate::{
    hosts::control_plane,
    net::{InternalDnsResolver, TurmoilConnector},
    rack::ZoneKind,
    trace::{fmt_duration, Kind},
    world::{LiveZone, World, ZoneId},
};

/// A zone stops (removed, or moved to another sled): what ran in it is gone.
pub(super) fn stop_zone(world: &World, index: usize, host: &str, id: ZoneId) {
    let was_up = {
        let mut st = world.lock();
        // This sled's Nexus stops; others may still be up.
        let was_up = id.kind == ZoneKind::Nexus && st.control_plane.nexus_up.remove(&index);
        if let Some(running) = st.sleds.running_zones.get_mut(&index) {
            running.remove(&id);
        }
        // A start still blocked is abandoned with the zone.
        st.sleds.blocked_starts.remove(&(index, id));
        st.version += 1;
        was_up
    };
    // Simplification: a stopped boundary NTP zone leaves the rack's clocks
    // synchronised (they hold time); a new one must still reach upstream.
    world.record(
        world
            .line(host, Kind::Zone, format!("zone {} stopped", id.kind))
            .field("zone", id.kind),
    );
    if was_up {
        world.record(
            world
                .line(
                    host,
                    Kind::ControlPlane,
                    "nexus: zone stopped; this Nexus is down",
                )
                .field("state", "down"),
        );
    }
}

/// Start one zone: under a strategy that [blocks zone
/// start](crate::strategy::NatStrategy::blocks_zone_start) only once its NAT entry is ensured
/// (the blocking path); then what runs in it. Returns that task, if any.
pub(super) async fn start_zone(
    world: &World,
    index: usize,
    name: &str,
    resolver: &InternalDnsResolver,
    zone: &LiveZone,
    rng: &mut SmallRng,
) -> Option<JoinHandle<()>> {
    let rack = world.params.rack.clone();
    let zone_id = zone.id;
    let zone = &zone.spec;
    let kind = zone.kind;
    world.record(
        world
            .line(name, Kind::Zone, format!("starting zone {kind}"))
            .field("zone", kind),
    );
    let started = tokio::time::Instant::now();
    if world.params.strategy.blocks_zone_start() {
        let entry = world.zone_nat_entry(zone);
        let expected: BTreeSet<_> = rack.uplinked_switches().into_iter().collect();
        let progress = watch::Sender::new(LegacyProgress::LookingUpSwitches);
        {
            let mut st = world.lock();
            st.sleds
                .blocked_starts
                .insert((index, zone_id), progress.subscribe());
            st.version += 1;
        }
        // The checks read where the start is (a verdict names a retired
        // address), so each step of the path is a change of the world;
        // the task ends with the path (its sender dropped).
        let mut steps = progress.subscribe();
        let counted = world.clone();
        crate::task::spawn(async move {
            while steps.changed().await.is_ok() {
                counted.lock().version += 1;
            }
        });
        // The legacy path logs its phases; the `zone` span names the
        // zone in those lines (`crate::logging`).
        legacy::ensure_zone_nat(
            &TurmoilConnector,
            resolver,
            &expected,
            &entry,
            rng,
            &progress,
        )
        .instrument(tracing::info_span!("zone", zone = %kind))
        .await;
    }
    let took = started.elapsed();
    {
        let mut st = world.lock();
        st.sleds.zone_starts.push((name.to_string(), kind, took));
        st.sleds.blocked_starts.remove(&(index, zone_id));
        // From now on the sled's inventory reports it running.
        st.sleds
            .running_zones
            .entry(index)
            .or_default()
            .insert(zone_id);
    }
    world.record(
        world
            .line(
                name,
                Kind::Zone,
                format!("zone {kind} started (start took {})", fmt_duration(took)),
            )
            .field("zone", kind)
            .field("took_us", took.as_micros()),
    );
    match kind {
        ZoneKind::BoundaryNtp => Some(crate::task::spawn(boundary_ntp(
            world.clone(),
            index,
            name.to_string(),
            zone.clone(),
        ))),
        ZoneKind::Nexus => Some(crate::task::spawn(control_plane::run(
            world.clone(),
            index,
            resolver.clone(),
        ))),
        ZoneKind::ExternalDns => None,
    }
}
