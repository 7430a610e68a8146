//! The rack's networking config as the world holds it: the live
//! [`ZoneSet`] (sleds start and stop their zones as it changes; the checks
//! derive the desired NAT state from it) and the bootstore's copy of the
//! rack-wide config (the scrimlet reconcilers follow it), both in watch
//! channels, and a plan's config change applied to both at once, as
//! Nexus's blueprint execution would.

use racksim_reconciler::{nat::NatEntry, scrimlet_local::SystemNetworkingConfig};
use tokio::sync::watch;

use super::{
    handle::World,
    zones::{zone_nat_entry, ZoneSet},
};
use crate::{plan::ConfigChange, rack::ZoneSpec};

impl World {
    pub fn bootstore(&self) -> watch::Receiver<Option<SystemNetworkingConfig>> {
        self.bootstore.subscribe()
    }

    /// The rack's service zones now.
    pub fn zones(&self) -> ZoneSet {
        self.zones.borrow().clone()
    }

    /// `f` of the rack's service zones now, without copying them.
    pub fn with_zones<T>(&self, f: impl FnOnce(&ZoneSet) -> T) -> T {
        f(&self.zones.borrow())
    }

    /// Follow the rack's service zones.
    pub fn subscribe_zones(&self) -> watch::Receiver<ZoneSet> {
        self.zones.subscribe()
    }

    /// The desired NAT entry of one zone, pointing at its current sled.
    pub fn zone_nat_entry(&self, zone: &ZoneSpec) -> NatEntry {
        zone_nat_entry(zone, self.sled(zone.sled).address)
    }

    /// Apply a config change as Nexus's blueprint execution would: the
    /// new zone set, and the new config written to the bootstore under the
    /// next generation. An invalid config is refused as a whole — zones
    /// and bootstore stay as they were (omicron's validated type cannot
    /// even be built from it, so it never reaches the bootstore). Returns
    /// what happened, for the trace.
    pub fn change_config(&self, change: &ConfigChange) -> Result<String, String> {
        let generation = self.bootstore.borrow().as_ref().map_or(0, |c| c.generation);
        let sleds = self.lock().sleds.specs.clone();
        let current = self.zones();
        let (next, config) = {
            let st = self.lock();
            current.change(
                change,
                |name| {
                    (0..st.sleds.specs.len())
                        .find(|&i| st.sleds.specs[i].name == name && !st.sleds.retired.contains(&i))
                },
                generation,
                |i| sleds[i].address,
            )?
        };
        let what = match change {
            ConfigChange::AddZone { .. } => {
                let added = next
                    .zones()
                    .iter()
                    .find(|z| current.get(z.id).is_none())
                    .expect("an add adds a zone");
                format!(
                    "zone {} added on {} ({})",
                    added.id,
                    sleds[added.spec.sled].name,
                    self.name_addrs(
                        &zone_nat_entry(&added.spec, sleds[added.spec.sled].address).to_string()
                    )
                )
            }
            ConfigChange::MoveZone { zone, .. } | ConfigChange::RemoveZone { zone } => {
                let id = current.resolve(zone).expect("applied");
                let from = &sleds[current.get(id).expect("resolved").spec.sled].name;
                match next.get(id) {
                    Some(z) => {
                        format!("zone {id} moves from {from} to {}", sleds[z.spec.sled].name)
                    }
                    None => format!("zone {id} removed from {from}"),
                }
            }
        };
        self.zones.send_replace(next);
        self.bootstore.send_replace(Some(config));
        self.lock().version += 1;
        Ok(format!(
            "{what}; the bootstore now holds generation {}",
            generation + 1
        ))
    }
}
