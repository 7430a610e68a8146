//! A plan step acting on the simulation: each [`Action`] as what it does
//! to the hosts (crash, restart, replace), to the network (partitions,
//! latency), to the world's state (hidden switches, dpd faults, planted or
//! lost NAT entries) and to the control plane (operator commands, instance
//! requests, config changes).

use std::time::Duration;

use racksim_fakes::dpd::DpdState;
use racksim_nexus::InstanceRequest;
use racksim_reconciler::task::ScrimletStatus;

use super::driver::Driver;
use crate::{
    plan::Action,
    trace::Kind,
    world::{NexusCommand, ServiceFault},
};

impl Driver<'_> {
    /// Apply one plan step at simulated time `now`.
    pub(super) fn apply(&mut self, now: Duration, action: &Action) {
        let world = self.world.clone();
        match action {
            Action::HideSwitch(s) => {
                world.lock().dns.hidden.insert(*s);
            }
            Action::RevealSwitch(s) => {
                world.lock().dns.hidden.remove(s);
            }
            Action::Crash(name) => {
                if let Some(h) = self.live(name) {
                    self.crash(&h);
                }
            }
            Action::Restart(name) => {
                if let Some(h) = self.live(name) {
                    self.restart(&h);
                }
            }
            Action::DpdRestart(slot) => {
                // dpd alone restarts: an empty table at generation 0, and
                // its NAT RPW starts over, as a starting dpd's does (at its
                // next look at its timer, within a second: `restart`
                // takes no instant, since the plan does not run on the
                // zone's clock). Simplified: the API does not go away
                // meanwhile.
                let mut st = world.lock();
                if st.switches.dpd.contains_key(slot) {
                    st.switches.dpd.insert(*slot, DpdState::new(slot.index()));
                    if let Some(rpw) = st.switches.nat_rpw.get(slot) {
                        rpw.restart();
                    }
                }
            }
            Action::Partition { a, b, oneway } | Action::Heal { a, b, oneway } => {
                let heal = matches!(action, Action::Heal { .. });
                {
                    let mut st = world.lock();
                    for x in a {
                        for y in b {
                            let mut pairs = vec![(x.clone(), y.clone())];
                            if !*oneway {
                                pairs.push((y.clone(), x.clone()));
                            }
                            for pair in pairs {
                                if heal {
                                    st.net.cuts.remove(&pair);
                                } else {
                                    st.net.cuts.insert(pair);
                                }
                            }
                        }
                    }
                    if heal {
                        st.net.last_heal = now;
                    }
                    st.version += 1;
                }
                for x in self.addrs(a) {
                    for y in self.addrs(b) {
                        match (heal, *oneway) {
                            (false, false) => self.sim.partition(x, y),
                            (false, true) => self.sim.partition_oneway(x, y),
                            (true, false) => self.sim.repair(x, y),
                            (true, true) => self.sim.repair_oneway(x, y),
                        }
                    }
                }
            }
            Action::Latency { a, b, latency } => {
                for x in self.addrs(a) {
                    for y in self.addrs(b) {
                        self.sim.set_link_latency(x, y, *latency);
                    }
                }
            }
            Action::DpdErrors { switch, window }
            | Action::DpdHang { switch, window }
            | Action::MgsErrors { switch, window }
            | Action::MgsHang { switch, window } => {
                let until = now + *window;
                let fault = match action {
                    Action::DpdErrors { .. } | Action::MgsErrors { .. } => {
                        ServiceFault::Errors { until }
                    }
                    _ => ServiceFault::Hang { until },
                };
                let mut st = world.lock();
                let faults = match action {
                    Action::DpdErrors { .. } | Action::DpdHang { .. } => &mut st.switches.faults,
                    _ => &mut st.switches.mgs_faults,
                };
                faults.insert(*switch, fault);
            }
            Action::DbStall { window } => {
                let mut st = world.lock();
                let until = now + *window;
                // Two stalls that overlap hold statements to the later end.
                let end = &mut st.control_plane.db_stall_until;
                *end = Some(end.map_or(until, |e| e.max(until)));
                st.version += 1;
            }
            Action::DbErrors { window } => {
                let mut st = world.lock();
                let until = now + *window;
                let end = &mut st.control_plane.db_errors_until;
                *end = Some(end.map_or(until, |e| e.max(until)));
                st.version += 1;
            }
            Action::SidecarPowerOff(slot) => {
                if let Some(h) = self.live(&slot.to_string()) {
                    self.crash(&h);
                }
                self.set_scrimlet(*slot, ScrimletStatus::NotScrimlet);
            }
            Action::SidecarPowerOn(slot) => {
                if let Some(h) = self.live(&slot.to_string()) {
                    self.restart(&h);
                }
                self.set_scrimlet(*slot, ScrimletStatus::Scrimlet);
            }
            Action::ScrimletReboot(slot) => {
                // One reboot takes both: the sled's software and the switch
                // zone it hosts stop at the same instant.
                for h in [self.scrimlet_of(*slot), self.live(&slot.to_string())]
                    .into_iter()
                    .flatten()
                {
                    self.crash(&h);
                }
            }
            Action::ScrimletBack(slot) => {
                // The sled boots and its sled-agent starts the switch zone:
                // both start from nothing at this instant (simplified: the
                // switch zone's own boot takes no time after the sled's).
                for h in [self.scrimlet_of(*slot), self.live(&slot.to_string())]
                    .into_iter()
                    .flatten()
                {
                    self.restart(&h);
                }
            }
            Action::ReplaceScrimlet(slot) => self.replace_scrimlet(now, *slot),
            Action::ControlPlaneDown => world.command_nexus(NexusCommand::Stop),
            Action::ControlPlaneCrash => world.command_nexus(NexusCommand::Crash),
            Action::ControlPlaneUp => world.command_nexus(NexusCommand::Run),
            Action::PowerOff => {
                for h in self.rack_hosts() {
                    self.crash(&h);
                }
            }
            Action::ColdBoot => {
                for h in self.rack_hosts() {
                    self.restart(&h);
                }
            }
            Action::InstanceCreate { instance, sled }
            | Action::InstanceStart { instance, sled } => {
                let (Some(id), Some(s)) = (self.instance_id(instance), self.sled_index(sled))
                else {
                    return;
                };
                let req = if matches!(action, Action::InstanceCreate { .. }) {
                    InstanceRequest::Create {
                        instance: id,
                        sled: s,
                    }
                } else {
                    InstanceRequest::Start {
                        instance: id,
                        sled: s,
                    }
                };
                self.instance_request(now, req);
            }
            Action::InstanceStop { instance } => {
                if let Some(id) = self.instance_id(instance) {
                    self.instance_request(now, InstanceRequest::Stop { instance: id });
                }
            }
            Action::InstanceDelete { instance } => {
                if let Some(id) = self.instance_id(instance) {
                    self.instance_request(now, InstanceRequest::Delete { instance: id });
                }
            }
            Action::ConfigChange(change) => {
                let line = match world.change_config(change) {
                    Ok(done) | Err(done) => format!("  {done}"),
                };
                world.trace_at(now, "plan", Kind::Plan, line);
            }
            Action::StaleEntry { switch, zone } => {
                let zones = world.zones();
                if let Some(z) = zones.zones().iter().find(|z| z.id.kind == *zone) {
                    let mut e = world.zone_nat_entry(&z.spec);
                    e.target.inner_mac.a[5] ^= 0xff;
                    let mut st = world.lock();
                    if let Some(dpd) = st.switches.dpd.get_mut(switch) {
                        let _ = dpd.ipv4_delete(e.external_ip, e.first_port);
                        let _ = dpd.ipv4_create(e.external_ip, e.first_port, e.last_port, e.target);
                    }
                }
            }
            Action::LostEntry { switch, zone } => {
                let zones = world.zones();
                if let Some(z) = zones.zones().iter().find(|z| z.id.kind == *zone) {
                    let e = world.zone_nat_entry(&z.spec);
                    let mut st = world.lock();
                    if let Some(dpd) = st.switches.dpd.get_mut(switch) {
                        let _ = dpd.ipv4_delete(e.external_ip, e.first_port);
                    }
                }
            }
        }
        world.lock().version += 1;
    }

    fn instance_id(&self, name: &str) -> Option<u32> {
        self.world
            .params
            .instances
            .iter()
            .position(|i| i.name == name)
            .map(|i| i as u32 + 1)
    }

    fn sled_index(&self, name: &str) -> Option<u32> {
        let st = self.world.lock();
        st.sleds
            .specs
            .iter()
            .enumerate()
            .find(|(i, s)| s.name == name && !st.sleds.retired.contains(i))
            .map(|(i, _)| i as u32)
    }

    /// Hand a request to Nexus's API, as a client would; while the control
    /// plane is down there is no API to take it.
    fn instance_request(&self, now: Duration, req: InstanceRequest) {
        if self.world.lock().control_plane_up() {
            self.world.request(req);
        } else {
            self.world.trace_at(
                now,
                "plan",
                Kind::Plan,
                "  rejected: the control plane is down (no instance API)",
            );
        }
    }
}
