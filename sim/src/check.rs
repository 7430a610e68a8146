//! Checks: what "converged" means, and what is missing when it is not.
//!
//! The rack has converged when every live, uplinked switch holds exactly
//! the desired service NAT entries (no more, no fewer, no stale target),
//! boundary NTP has synchronised, and the control plane is up (unless the
//! plan took it down on purpose). Each gap is a sentence naming the switch,
//! zone and sled involved, so a failed run's verdict says what to look at.

use std::collections::BTreeSet;

use racksim_reconciler::{discovery::SwitchSlot, nat::NatEntry, SERVICES_VNI};

use crate::{hosts::fmt_entry, rack::ZoneKind, world::World};

/// Everything between the world and convergence, in a fixed order.
pub fn convergence_gaps(world: &World) -> Vec<String> {
    let rack = world.rack();
    let desired: BTreeSet<NatEntry> = rack.desired_nat().into_iter().collect();
    // Read under the lock, then format without it (formatting names
    // addresses, which takes the lock again).
    let (tables, ntp_synced, control_plane_up) = {
        let st = world.lock();
        let tables: Vec<(SwitchSlot, BTreeSet<NatEntry>)> = rack
            .switches
            .iter()
            .filter(|s| s.uplinked)
            // A switch zone that is down cannot hold entries; it is not a
            // gap until it is back.
            .filter_map(|s| st.dpd.get(&s.slot).map(|d| (s.slot, d)))
            .map(|(slot, dpd)| {
                let actual = dpd
                    .ipv4_entries()
                    .iter()
                    .filter(|e| e.target.vni == SERVICES_VNI)
                    .map(NatEntry::from_dpd)
                    .collect();
                (slot, actual)
            })
            .collect();
        (tables, st.ntp_synced, st.control_plane_up)
    };
    let mut gaps = Vec::new();
    for (slot, actual) in &tables {
        for e in desired.difference(actual) {
            let what = rack
                .zone_for(e.external_ip, e.first_port)
                .map(|z| format!("{} on {}", z.kind, rack.sleds[z.sled].name))
                .unwrap_or_else(|| "unknown zone".to_string());
            gaps.push(format!(
                "{slot} lacks the NAT entry of {what}: {}",
                fmt_entry(world, e)
            ));
        }
        for e in actual.difference(&desired) {
            gaps.push(format!(
                "{slot} holds a stale NAT entry: {}",
                fmt_entry(world, e)
            ));
        }
    }
    if !ntp_synced {
        let ntp = rack
            .zones
            .iter()
            .find(|z| z.kind == ZoneKind::BoundaryNtp)
            .map(|z| format!(" on {}", rack.sleds[z.sled].name))
            .unwrap_or_default();
        gaps.push(format!(
            "NTP unsynchronised: boundary NTP{ntp} has had no reply from upstream"
        ));
    }
    // An operator who took the control plane down meant it; the rack must
    // converge without it.
    if !control_plane_up && world.nexus_is_enabled() {
        gaps.push(
            "control plane down: Nexus has not started (it waits for time to synchronise)"
                .to_string(),
        );
    }
    gaps
}
