//! Applying a plan action to a live rack: each fault, config change and
//! instance request the control API's `POST /actions` accepts, done to the
//! live hosts, the Nexus and the trace.

use racksim_fakes::fault::Fault;
use racksim_nexus::InstanceRequest;
use racksim_sim::{world::zone_nat_entry, Action};

use dropshot::HttpError;

use super::{bad, Control};

impl Control {
    fn instance_id(&self, name: &str) -> Result<u32, HttpError> {
        self.instances
            .iter()
            .position(|i| i == name)
            .map(|i| i as u32 + 1)
            .ok_or_else(|| bad(format!("no instance {name:?}")))
    }

    /// Applies `action` now, recording what happened in the trace.
    pub(super) async fn apply(&self, action: &Action) -> Result<(), HttpError> {
        let env = &self.env;
        let trace = &env.shared.trace;
        trace.record("control", action.to_string());
        let mut hosts = self.hosts.lock().await;
        let internal = |e: String| HttpError::for_internal_error(e);
        match action {
            Action::DpdRestart(slot) => {
                let s = &hosts.switches[slot];
                if s.up() {
                    *s.dpd.lock() = racksim_fakes::dpd::DpdState::new(slot.index());
                    trace.record(&slot.to_string(), "dpd restarted: NAT table empty");
                } else {
                    trace.record(&slot.to_string(), "switch zone down: no dpd to restart");
                }
            }
            Action::DpdErrors { switch, window }
            | Action::DpdHang { switch, window }
            | Action::MgsErrors { switch, window }
            | Action::MgsHang { switch, window } => {
                let (fault, what) = match action {
                    Action::DpdErrors { .. } | Action::MgsErrors { .. } => {
                        (Fault::Errors, "answers 500s")
                    }
                    _ => (Fault::Hang, "hangs"),
                };
                let switch_host = &hosts.switches[switch];
                let service = match action {
                    Action::DpdErrors { .. } | Action::DpdHang { .. } => {
                        switch_host.dpd.inject(fault, *window);
                        "dpd"
                    }
                    _ => {
                        switch_host.mgs.inject(fault, *window);
                        "MGS"
                    }
                };
                trace.record(
                    &switch.to_string(),
                    format!(
                        "{service} {what} for {}",
                        racksim_sim::trace::fmt_duration(*window)
                    ),
                );
            }
            Action::HideSwitch(slot) | Action::RevealSwitch(slot) => {
                let hide = matches!(action, Action::HideSwitch(_));
                env.shared.resolver.hide(*slot, hide);
                let what = if hide { "hidden from" } else { "visible to" };
                trace.record("live", format!("{slot} {what} discovery"));
            }
            Action::SidecarPowerOff(slot) | Action::SidecarPowerOn(slot) => {
                let on = matches!(action, Action::SidecarPowerOn(_));
                hosts
                    .sidecar_power(env, *slot, on)
                    .await
                    .map_err(internal)?;
                let what = if on { "on" } else { "off (NAT table lost)" };
                trace.record(&slot.to_string(), format!("sidecar power {what}"));
            }
            Action::LostEntry { switch, zone } => {
                let Some(z) = hosts.zones.zones().iter().find(|z| z.id.kind == *zone) else {
                    return Err(bad(format!("the rack has no {zone} zone now")));
                };
                let e = zone_nat_entry(&z.spec, hosts.sleds[z.spec.sled].address);
                let s = &hosts.switches[switch];
                if !s.up() {
                    trace.record(&switch.to_string(), "switch zone down: no entry to delete");
                    return Ok(());
                }
                s.dpd
                    .change(|d| Ok(d.ipv4_delete(e.external_ip, e.first_port)))?;
            }
            Action::StaleEntry { switch, zone } => {
                let Some(z) = hosts.zones.zones().iter().find(|z| z.id.kind == *zone) else {
                    return Err(bad(format!("the rack has no {zone} zone now")));
                };
                let mut e = zone_nat_entry(&z.spec, hosts.sleds[z.spec.sled].address);
                e.target.inner_mac.a[5] ^= 0xff;
                let s = &hosts.switches[switch];
                if !s.up() {
                    trace.record(&switch.to_string(), "switch zone down: no entry planted");
                    return Ok(());
                }
                s.dpd.change(|d| {
                    d.ipv4_delete(e.external_ip, e.first_port);
                    Ok(d.ipv4_create(e.external_ip, e.first_port, e.last_port, e.target)?)
                })?;
            }
            Action::Crash(host) | Action::Restart(host) => {
                let up = matches!(action, Action::Restart(_));
                if let Ok(slot) = host.parse() {
                    if up {
                        hosts.start_switch(env, slot).await.map_err(internal)?;
                    } else {
                        hosts.stop_switch(slot);
                    }
                } else if let Some(i) = hosts.sled_index(host) {
                    if up {
                        hosts.start_sled(env, i).await.map_err(internal)?;
                    } else {
                        hosts.stop_sled(i);
                    }
                } else {
                    return Err(bad(format!("no host {host:?} runs in this live rack")));
                }
            }
            Action::Partition { a, b, oneway } | Action::Heal { a, b, oneway } => {
                let heal = matches!(action, Action::Heal { .. });
                env.shared.links.partition(a, b, heal);
                if !oneway {
                    env.shared.links.partition(b, a, heal);
                }
            }
            Action::Latency { a, b, latency } => env.shared.links.set_latency(a, b, *latency),
            Action::ScrimletReboot(slot) => {
                // The sled and the switch zone it hosts, together.
                if let Some(i) = hosts.scrimlet_of(*slot) {
                    hosts.stop_sled(i);
                }
                hosts.stop_switch(*slot);
            }
            Action::ScrimletBack(slot) => {
                if let Some(i) = hosts.scrimlet_of(*slot) {
                    hosts.start_sled(env, i).await.map_err(internal)?;
                }
                hosts.start_switch(env, *slot).await.map_err(internal)?;
            }
            Action::PowerOff => hosts.stop_all(),
            Action::ColdBoot => hosts.start_all(env).await.map_err(internal)?,
            Action::ReplaceScrimlet(slot) => {
                let what = hosts.replace_scrimlet(env, *slot).await.map_err(internal)?;
                trace.record("control", format!("  {what}"));
            }
            Action::ConfigChange(change) => {
                let what = hosts.change_config(env, change).map_err(bad)?;
                trace.record("control", format!("  {what}"));
            }
            // Live mode's database is an in-memory one with no faults.
            Action::DbStall { .. } | Action::DbErrors { .. } => {
                return Err(bad(format!(
                    "{} is not available in live mode (its database has no faults); run it in the simulation",
                    action.kind()
                )));
            }
            Action::ControlPlaneDown => self.nexus.lock().await.stop(),
            Action::ControlPlaneCrash => self.nexus.lock().await.crash(),
            Action::ControlPlaneUp => self.nexus.lock().await.start().map_err(internal)?,
            Action::InstanceCreate { instance, sled }
            | Action::InstanceStart { instance, sled } => {
                let id = self.instance_id(instance)?;
                let sled = hosts
                    .sled_index(sled)
                    .ok_or_else(|| bad(format!("no sled {sled} runs now")))?
                    as u32;
                let req = if matches!(action, Action::InstanceCreate { .. }) {
                    InstanceRequest::Create { instance: id, sled }
                } else {
                    InstanceRequest::Start { instance: id, sled }
                };
                self.nexus.lock().await.submit(req);
            }
            Action::InstanceStop { instance } | Action::InstanceDelete { instance } => {
                let instance = self.instance_id(instance)?;
                let req = if matches!(action, Action::InstanceStop { .. }) {
                    InstanceRequest::Stop { instance }
                } else {
                    InstanceRequest::Delete { instance }
                };
                self.nexus.lock().await.submit(req);
            }
        }
        Ok(())
    }
}
