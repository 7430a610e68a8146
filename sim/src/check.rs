//! Checks: what "converged" means, and what is missing when it is not.
//!
//! The rack has converged when every live, uplinked switch holds exactly
//! the desired service NAT entries (no more, no fewer, no stale target),
//! boundary NTP has synchronised, and the control plane is up. Each gap is a
//! sentence naming the switch, zone and sled involved, so a failed run's
//! verdict says what to look at.

use std::collections::BTreeSet;

use racksim_reconciler::{nat::NatEntry, SERVICES_VNI};

use crate::{hosts::fmt_entry, world::World};

/// Everything between the world and convergence, in a fixed order.
pub fn convergence_gaps(world: &World) -> Vec<String> {
    let rack = world.rack();
    let desired: BTreeSet<NatEntry> = rack.desired_nat().into_iter().collect();
    let st = world.lock();
    let mut gaps = Vec::new();
    for sw in rack.switches.iter().filter(|s| s.uplinked) {
        // A switch zone that is down cannot hold entries; it is not a gap
        // until it is back.
        let Some(dpd) = st.dpd.get(&sw.slot) else {
            continue;
        };
        let actual: BTreeSet<NatEntry> = dpd
            .ipv4_entries()
            .iter()
            .filter(|e| e.target.vni == SERVICES_VNI)
            .map(NatEntry::from_dpd)
            .collect();
        for e in desired.difference(&actual) {
            let zone = rack.zone_for(e.external_ip, e.first_port);
            let what = zone
                .map(|z| format!("{} on {}", z.kind, rack.sleds[z.sled].name))
                .unwrap_or_else(|| "unknown zone".to_string());
            gaps.push(format!(
                "{} lacks the NAT entry of {what}: {}",
                sw.name(),
                fmt_entry(rack, e)
            ));
        }
        for e in actual.difference(&desired) {
            gaps.push(format!(
                "{} holds a stale NAT entry: {}",
                sw.name(),
                fmt_entry(rack, e)
            ));
        }
    }
    if !st.ntp_synced {
        let ntp = rack
            .zones
            .iter()
            .find(|z| z.kind == crate::rack::ZoneKind::BoundaryNtp)
            .map(|z| format!(" on {}", rack.sleds[z.sled].name))
            .unwrap_or_default();
        gaps.push(format!(
            "NTP unsynchronised: boundary NTP{ntp} has had no reply from upstream"
        ));
    }
    if !st.control_plane_up {
        gaps.push(
            "control plane down: Nexus has not started (it waits for time to synchronise)"
                .to_string(),
        );
    }
    gaps
}
