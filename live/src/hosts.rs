//! The live rack's hosts and their lives: each switch zone (a dpd and an
//! MGS) and each sled (a sled-agent and the strategy's reconcilers) can be
//! up or down, and every plan action that acts on hosts is applied here.
//!
//! A host that goes down (crash, sidecar or rack power loss) stops its
//! servers — connections to it are refused — and loses everything it held:
//! a dpd's NAT table, a sled-agent's V2P mappings and VMMs, a sled's
//! reconcilers. A host that comes back starts from nothing on the same
//! loopback ports, as a rebooted host keeps its addresses. A replaced
//! scrimlet is new hardware: a new sled (`sled{N}`, as the simulation
//! names it) with a new underlay address, and its switch zone with new
//! ports and a new underlay address that discovery learns.
//!
//! One module per host kind, as sim's `hosts/`: [`switch_zone`] (a dpd, an
//! MGS and the dpd's NAT RPW) and [`sled`] (a sled-agent, the reconcilers,
//! zone starts). This module holds the rack of them and the actions that
//! span both: a sidecar's power, a replaced scrimlet, a config change.

mod sled;
mod switch_zone;

pub(crate) use sled::SledHost;
pub(crate) use switch_zone::SwitchHost;

use std::{
    collections::{BTreeMap, BTreeSet},
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    time::Duration,
};

use racksim_reconciler::{
    discovery::SwitchSlot, scrimlet_local::ServiceZoneNat, scrimlet_local::SystemNetworkingConfig,
    task::ScrimletStatus,
};
use racksim_sim::{
    plan::ConfigChange,
    rack::{sled_address, switch_zone_address},
    world::ZoneSet,
    RackSpec,
};
use tokio::{sync::watch, task::JoinHandle};

use super::{nexus::Inventory, Shared};

/// How long a restart waits for the previous incarnation's servers to let
/// go of their ports.
const CLOSE_BOUND: Duration = Duration::from_secs(10);

/// Waits until the servers being closed have let go of their ports, or
/// says why not (a client holding a connection open): the host then stays
/// down rather than the control API hanging.
async fn closed(closing: &mut Vec<JoinHandle<()>>, host: &str) -> Result<(), String> {
    while let Some(c) = closing.last_mut() {
        tokio::time::timeout(CLOSE_BOUND, c)
            .await
            .map_err(|_| {
                format!(
                    "{host}'s servers from before have not closed within {CLOSE_BOUND:?} \
                 (a connection is still open); try again"
                )
            })?
            .ok();
        closing.pop();
    }
    Ok(())
}

fn loopback() -> SocketAddr {
    SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0)
}

/// Every host of the live rack, and the rack-wide inputs of the
/// reconcilers (the zones and the bootstore).
pub(super) struct Hosts {
    pub switches: BTreeMap<SwitchSlot, SwitchHost>,
    pub sleds: Vec<SledHost>,
    pub zones: ZoneSet,
    bootstore: watch::Sender<Option<SystemNetworkingConfig>>,
    sidecars_off: BTreeSet<SwitchSlot>,
}

/// What never changes while a live rack runs, and what its hosts share.
pub(super) struct Env {
    pub spec: RackSpec,
    pub shared: Shared,
    /// The database's inventory of sleds and boundary switches.
    pub inventory: Inventory,
    /// The service zones as the current config places them (every zone of
    /// the config runs in live mode; the inventory reports them all).
    pub desired: watch::Sender<Vec<ServiceZoneNat>>,
    /// Where dpds pull instance NAT from (Nexus's internal API).
    pub nexus: SocketAddr,
}

impl Env {}

impl Hosts {
    /// The rack's hosts, none started yet.
    pub fn new(env: &Env) -> Self {
        let spec = &env.spec;
        let switches = spec
            .switches
            .iter()
            .map(|s| (s.slot, env.new_switch(s.slot, s.zone_address)))
            .collect();
        let sleds = spec
            .sleds
            .iter()
            .map(|s| env.new_sled(&s.name, s.address, s.scrimlet_of))
            .collect();
        let zones = ZoneSet::from_rack(spec);
        let config = zones.config(1, |i| spec.sleds[i].address);
        env.desired.send_replace(config.service_nat.clone());
        let bootstore = watch::Sender::new(Some(config));
        Hosts {
            switches,
            sleds,
            zones,
            bootstore,
            sidecars_off: BTreeSet::new(),
        }
    }

    /// Starts every host (power on).
    pub async fn start_all(&mut self, env: &Env) -> Result<(), String> {
        let slots: Vec<SwitchSlot> = self.switches.keys().copied().collect();
        for slot in slots {
            if !self.sidecars_off.contains(&slot) {
                self.start_switch(env, slot).await?;
            }
        }
        for i in 0..self.sleds.len() {
            if !self.sleds[i].retired {
                self.start_sled(env, i).await?;
            }
        }
        Ok(())
    }

    /// Stops every host (power loss).
    pub fn stop_all(&mut self) {
        let slots: Vec<SwitchSlot> = self.switches.keys().copied().collect();
        for slot in slots {
            self.stop_switch(slot);
        }
        for i in 0..self.sleds.len() {
            self.stop_sled(i);
        }
    }

    /// Waits until every stopped server has let go of its port.
    pub async fn wait_closed(&mut self) {
        for s in self.switches.values_mut() {
            for c in s.closing.drain(..) {
                let _ = c.await;
            }
        }
        for s in &mut self.sleds {
            for c in s.closing.drain(..) {
                let _ = c.await;
            }
        }
    }

    /// The live sled named `name`, by index.
    pub fn sled_index(&self, name: &str) -> Option<usize> {
        self.sleds.iter().position(|s| s.name == name && !s.retired)
    }

    /// The live scrimlet cabled to `slot`.
    pub fn scrimlet_of(&self, slot: SwitchSlot) -> Option<usize> {
        self.sleds
            .iter()
            .position(|s| s.scrimlet_of == Some(slot) && !s.retired)
    }

    /// The sidecar in `slot` loses power (its switch zone with it) or gets
    /// it back; its scrimlet stops or starts being a scrimlet.
    pub async fn sidecar_power(
        &mut self,
        env: &Env,
        slot: SwitchSlot,
        on: bool,
    ) -> Result<(), String> {
        if on {
            self.sidecars_off.remove(&slot);
            self.start_switch(env, slot).await?;
        } else {
            self.sidecars_off.insert(slot);
            self.stop_switch(slot);
        }
        if let Some(status) = self
            .scrimlet_of(slot)
            .and_then(|i| self.sleds[i].status.as_ref())
        {
            status.send_replace(if on {
                ScrimletStatus::Scrimlet
            } else {
                ScrimletStatus::NotScrimlet
            });
        }
        Ok(())
    }

    /// The scrimlet cabled to `slot` dies for good; a new sled takes its
    /// place, with a new switch zone discovery learns. What happened, for
    /// the trace.
    pub async fn replace_scrimlet(
        &mut self,
        env: &Env,
        slot: SwitchSlot,
    ) -> Result<String, String> {
        let old = self.scrimlet_of(slot);
        if let Some(i) = old {
            self.stop_sled(i);
            self.sleds[i].retired = true;
            env.inventory.retire_sled(i);
        }
        self.stop_switch(slot);
        let index = self.sleds.len();
        let zone = switch_zone_address(index);
        // New hardware: the old dpd's faults do not follow, and its
        // servers (closing) held other ports.
        self.switches.insert(slot, env.new_switch(slot, zone));
        self.sidecars_off.remove(&slot);
        let name = format!("sled{index}");
        // Named and addressed as the simulation names a replacement.
        self.sleds
            .push(env.new_sled(&name, sled_address(index), Some(slot)));
        self.start_switch(env, slot).await?;
        self.start_sled(env, index).await?;
        let old = old.map_or_else(|| "(none)".to_string(), |i| self.sleds[i].name.clone());
        Ok(format!(
            "{old} replaced by {name} ({}); {slot}'s zone now at {zone}",
            self.sleds[index].address
        ))
    }

    /// Applies a config change as Nexus's blueprint execution would: the
    /// zones change and the bootstore gets the next generation, or nothing
    /// changes. What happened, for the trace.
    pub fn change_config(&mut self, env: &Env, change: &ConfigChange) -> Result<String, String> {
        let generation = self.bootstore.borrow().as_ref().map_or(0, |c| c.generation);
        let addresses: Vec<Ipv6Addr> = self.sleds.iter().map(|s| s.address).collect();
        let (next, config) = self.zones.change(
            change,
            |name| self.sled_index(name),
            generation,
            |i| addresses[i],
        )?;
        self.zones = next;
        env.desired.send_replace(config.service_nat.clone());
        self.bootstore.send_replace(Some(config));
        // With no reconcilers of racksim's there is no one to tell.
        let racksim_reconcilers = env.shared.reconcilers == super::Reconcilers::Racksim;
        for i in (0..self.sleds.len()).filter(|_| racksim_reconcilers) {
            if env.shared.strategy.live().is_some_and(|p| p.sled_task) {
                self.follow_zones(env, i);
            }
            if env.shared.strategy.blocks_zone_start() {
                self.start_zones(env, i);
            }
        }
        Ok(format!(
            "{change}; the bootstore now holds generation {}",
            generation + 1
        ))
    }
}
