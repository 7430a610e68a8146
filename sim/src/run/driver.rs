//! The driver's view of the simulation: turmoil plus the hosts by name.
//!
//! It adds each host's software to turmoil, finds a live host by name,
//! crashes and restarts hosts (telling the world what a stopped host lost),
//! replaces a scrimlet with new hardware, and steps the simulation, turning
//! a host's panic or error into a testbed error.

use std::{
    net::{IpAddr, Ipv6Addr},
    time::Duration,
};

use racksim_reconciler::{discovery::SwitchSlot, task::ScrimletStatus};
use tokio::sync::watch;

use super::verdict::Verdict;
use crate::{
    hosts,
    rack::{sled_address, switch_zone_address, SledSpec},
    trace::Kind,
    world::{HostKind, World},
};

/// A simulated host the driver knows by name.
#[derive(Clone, Debug)]
pub(super) struct HostEntry {
    name: String,
    pub(super) addr: Ipv6Addr,
    kind: HostKind,
    /// Gone for good (a replaced scrimlet and its switch zone).
    retired: bool,
}

/// The driver's view of the simulation: turmoil plus the hosts by name.
pub(super) struct Driver<'a> {
    pub(super) sim: turmoil::Sim<'a>,
    pub(super) world: World,
    hosts: Vec<HostEntry>,
}

impl<'a> Driver<'a> {
    /// The simulation before any host is added.
    pub(super) fn new(sim: turmoil::Sim<'a>, world: World) -> Self {
        Driver {
            sim,
            world,
            hosts: Vec::new(),
        }
    }

    pub(super) fn add_host(&mut self, name: String, addr: Ipv6Addr, kind: HostKind) {
        let w = self.world.clone();
        match kind {
            HostKind::SwitchZone(slot) => self.sim.host(IpAddr::V6(addr), move || {
                hosts::switch_zone::run(w.clone(), slot)
            }),
            HostKind::Sled(index) => self
                .sim
                .host(IpAddr::V6(addr), move || hosts::sled::run(w.clone(), index)),
            HostKind::UpstreamNtp => self
                .sim
                .host(IpAddr::V6(addr), move || hosts::ntp_server::run(w.clone())),
        }
        self.hosts.push(HostEntry {
            name,
            addr,
            kind,
            retired: false,
        });
    }

    pub(super) fn live(&self, name: &str) -> Option<HostEntry> {
        self.hosts
            .iter()
            .find(|h| h.name == name && !h.retired)
            .cloned()
    }

    pub(super) fn addrs(&self, names: &[String]) -> Vec<IpAddr> {
        names
            .iter()
            .filter_map(|n| self.live(n))
            .map(|h| IpAddr::V6(h.addr))
            .collect()
    }

    pub(super) fn crash(&mut self, host: &HostEntry) {
        self.sim.crash(IpAddr::V6(host.addr));
        self.world.host_down(&host.kind);
    }

    pub(super) fn restart(&mut self, host: &HostEntry) {
        // Whatever the software held is lost, as in a reboot.
        self.world.host_down(&host.kind);
        self.sim.bounce(IpAddr::V6(host.addr));
    }

    pub(super) fn scrimlet_of(&self, slot: SwitchSlot) -> Option<HostEntry> {
        let sleds = self.world.lock().sleds.specs.clone();
        self.hosts
            .iter()
            .find(|h| {
                !h.retired
                    && matches!(h.kind, HostKind::Sled(i) if sleds[i].scrimlet_of == Some(slot))
            })
            .cloned()
    }

    pub(super) fn set_scrimlet(&self, slot: SwitchSlot, status: ScrimletStatus) {
        if let Some(HostEntry {
            kind: HostKind::Sled(index),
            ..
        }) = self.scrimlet_of(slot)
        {
            if let Some(tx) = self.world.lock().sleds.scrimlet_status.get(&index) {
                tx.send_replace(status);
            }
        }
    }

    pub(super) fn rack_hosts(&self) -> Vec<HostEntry> {
        self.hosts
            .iter()
            .filter(|h| !h.retired && h.kind != HostKind::UpstreamNtp)
            .cloned()
            .collect()
    }

    pub(super) fn replace_scrimlet(&mut self, now: Duration, slot: SwitchSlot) {
        let world = self.world.clone();
        let old_sled = self.scrimlet_of(slot);
        let old_zone = self.live(&slot.to_string());
        for old in [old_sled.clone(), old_zone.clone()].into_iter().flatten() {
            self.crash(&old);
            if let Some(h) = self.hosts.iter_mut().find(|h| h.addr == old.addr) {
                h.retired = true;
            }
        }
        let (index, sled_addr, zone_addr) = {
            let mut st = world.lock();
            let index = st.sleds.specs.len();
            let sled = SledSpec {
                name: format!("sled{index}"),
                address: sled_address(index),
                scrimlet_of: Some(slot),
            };
            let zone_addr = switch_zone_address(index);
            if let Some(old) = &old_zone {
                st.names.insert(old.addr, format!("retired-{slot}"));
            }
            st.names.insert(sled.address, sled.name.clone());
            st.names.insert(zone_addr, slot.to_string());
            st.switches.addresses.insert(slot, zone_addr);
            // New hardware: faults injected into the old dpd do not follow.
            st.switches.faults.remove(&slot);
            st.switches.mgs_faults.remove(&slot);
            st.sleds
                .scrimlet_status
                .insert(index, watch::Sender::new(ScrimletStatus::Scrimlet));
            let addr = sled.address;
            std::sync::Arc::make_mut(&mut st.sleds.specs).push(sled);
            if let Some(HostEntry {
                kind: HostKind::Sled(old),
                ..
            }) = &old_sled
            {
                st.sleds.retired.insert(*old);
            }
            (index, addr, zone_addr)
        };
        world.trace_at(
            now,
            "plan",
            Kind::Plan,
            format!(
                "  {} replaced by sled{index} ({sled_addr}); {slot}'s zone now at {zone_addr}",
                old_sled.map(|h| h.name).unwrap_or_else(|| "(none)".into())
            ),
        );
        self.add_host(slot.to_string(), zone_addr, HostKind::SwitchZone(slot));
        self.add_host(format!("sled{index}"), sled_addr, HostKind::Sled(index));
    }
}

/// Step the simulation up to `limit` (`limit` = now: run what is due now,
/// without moving time). A host's software that panics or fails ends the
/// run as a testbed error. (turmoil, built with `--cfg tokio_unstable`,
/// shuts the runtime down on a panic in any host task, and the panic unwinds
/// out of the step; without the flag a panicking task would vanish
/// silently, which is why the sim crate refuses to build without it.)
pub(super) fn step_hosts(
    driver: &mut Driver<'_>,
    world: &World,
    limit: Duration,
) -> Result<(), Verdict> {
    let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        driver.sim.step_until(limit)
    }));
    let panicked = crate::testbed::take_panic();
    let error = match stepped {
        Ok(Ok(_)) => return Ok(()),
        // A host's top-level future failed (if by a panic, the hook noted
        // it).
        Ok(Err(e)) => match &panicked.message {
            Some(m) => format!("panicked: {m}"),
            None => e.to_string(),
        },
        Err(payload) => format!(
            "panicked: {}",
            panicked
                .message
                .clone()
                .unwrap_or_else(|| crate::testbed::panic_message(payload.as_ref()))
        ),
    };
    let host = match panicked.host {
        Some(IpAddr::V6(addr)) => world.name_of(addr),
        Some(other) => other.to_string(),
        None => "?".to_string(),
    };
    Err(Verdict::TestbedError {
        at: panicked.at.unwrap_or_else(|| driver.sim.elapsed()),
        host,
        error,
    })
}
