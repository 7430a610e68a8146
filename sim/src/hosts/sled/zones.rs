//! Zone start, per strategy. `legacy` blocks each zone with external
//! connectivity on `legacy::ensure_zone_nat` (the bug seed 000 describes);
//! the other strategies start every zone at once and leave NAT to their
//! reconcilers. A started zone runs its software: boundary NTP's client,
//! Nexus.

use std::collections::BTreeSet;

use racksim_reconciler::legacy::{self, LegacyProgress};
use rand::{rngs::SmallRng, SeedableRng};
use tokio::sync::watch;
use tracing::Instrument;

use super::ntp::ntp_client;
use crate::{
    hosts::control_plane,
    net::{InternalDnsResolver, TurmoilConnector},
    plan::Strategy,
    rack::{ZoneKind, ZoneSpec},
    trace::{fmt_duration, Kind},
    world::World,
};

/// Starts the `zones` of sled `index` (host `name`, in its boot `boot`), in
/// order.
pub(super) async fn start(
    world: &World,
    index: usize,
    name: &str,
    boot: u64,
    zones: &[ZoneSpec],
    resolver: &InternalDnsResolver,
) {
    let rack = world.params.rack.clone();
    let mut rng = SmallRng::seed_from_u64(world.derive_seed(name, boot));
    for zone in zones {
        let kind = zone.kind;
        world.record(
            world
                .line(name, Kind::Zone, format!("starting zone {kind}"))
                .field("zone", kind),
        );
        let started = tokio::time::Instant::now();
        if world.params.strategy == Strategy::Legacy {
            let entry = rack.nat_entry(zone);
            let expected: BTreeSet<_> = rack.uplinked_switches().into_iter().collect();
            let progress = watch::Sender::new(LegacyProgress::LookingUpSwitches);
            // The legacy path logs its phases; the `zone` span names the
            // zone in those lines (`crate::logging`).
            legacy::ensure_zone_nat(
                &TurmoilConnector,
                resolver,
                &expected,
                &entry,
                &mut rng,
                &progress,
            )
            .instrument(tracing::info_span!("zone", zone = %kind))
            .await;
        }
        let took = started.elapsed();
        world
            .lock()
            .zone_starts
            .push((name.to_string(), kind, took));
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
            ZoneKind::BoundaryNtp => {
                tokio::task::spawn_local(ntp_client(world.clone(), name.to_string(), zone.clone()));
            }
            ZoneKind::Nexus => {
                tokio::task::spawn_local(control_plane::run(
                    world.clone(),
                    index,
                    resolver.clone(),
                ));
            }
            ZoneKind::ExternalDns => {}
        }
    }
}
