//! The action vocabulary: each `[[step]]` becomes a plan action, checked
//! against the rack and against what the plan has done so far.

use std::{ops::Range, time::Duration};

use racksim_reconciler::discovery::SwitchSlot;
use racksim_sim::{
    plan::{ConfigChange, ZoneRef, ZONE_KINDS},
    rack::{sled_address, RackSpec, ZoneKind},
    world::ZoneSet,
    Action, InstanceSpec,
};
use toml::Spanned;

use super::raw::{HostGroup, RawStep};

type StepError = (Range<usize>, String, Option<String>);

/// What the plan has done so far, to reject steps that make no sense
/// (healing a partition never made, powering on a sidecar that is on).
#[derive(Clone)]
pub(super) struct PlanState {
    hosts: Vec<String>,
    switches: Vec<SwitchSlot>,
    hidden: std::collections::BTreeSet<SwitchSlot>,
    partitions: Vec<(Vec<String>, Vec<String>, bool)>,
    sidecars_off: std::collections::BTreeSet<SwitchSlot>,
    scrimlets_down: std::collections::BTreeSet<SwitchSlot>,
    control_plane_down: bool,
    powered_off: bool,
    /// Hosts a `crash` left down: a `restart` (or a cold boot) brings
    /// them back.
    crashed: std::collections::BTreeSet<String>,
    next_sled: usize,
    /// The service zones as the plan's config changes leave them.
    zones: ZoneSet,
}

impl PlanState {
    pub fn new(rack: &RackSpec) -> Self {
        PlanState {
            hosts: rack.host_names(),
            switches: rack.switches.iter().map(|s| s.slot).collect(),
            hidden: Default::default(),
            partitions: Vec::new(),
            sidecars_off: Default::default(),
            scrimlets_down: Default::default(),
            control_plane_down: false,
            powered_off: false,
            crashed: Default::default(),
            next_sled: rack.sleds.len(),
            zones: ZoneSet::from_rack(rack),
        }
    }
}

/// The fields each action takes (besides `at` and `action`).
const ACTION_FIELDS: &[(&str, &[&str])] = &[
    ("hide-switch", &["switch"]),
    ("reveal-switch", &["switch"]),
    ("crash", &["host"]),
    ("restart", &["host"]),
    ("dpd-restart", &["switch"]),
    ("partition", &["a", "b", "oneway"]),
    ("heal", &["a", "b", "oneway"]),
    ("latency", &["a", "b", "latency"]),
    ("dpd-errors", &["switch", "for"]),
    ("dpd-hang", &["switch", "for"]),
    ("mgs-errors", &["switch", "for"]),
    ("mgs-hang", &["switch", "for"]),
    ("db-stall", &["for"]),
    ("db-errors", &["for"]),
    ("sidecar-power-off", &["switch"]),
    ("sidecar-power-on", &["switch"]),
    ("reboot-scrimlet", &["switch"]),
    ("scrimlet-back", &["switch"]),
    ("replace-scrimlet", &["switch"]),
    ("control-plane-down", &[]),
    ("control-plane-up", &[]),
    ("control-plane-crash", &[]),
    ("power-off", &[]),
    ("cold-boot", &[]),
    ("stale-entry", &["switch", "zone"]),
    ("lost-entry", &["switch", "zone"]),
    ("instance-create", &["instance", "sled"]),
    ("instance-start", &["instance", "sled"]),
    ("instance-stop", &["instance"]),
    ("instance-delete", &["instance"]),
    // `zone`: a kind for add-zone; a zone (`nexus`, `nexus.1`) otherwise.
    // `sled`: where the zone goes (add-zone, move-zone). `external_ip`:
    // add-zone only, optional.
    ("config-change", &["change", "zone", "sled", "external_ip"]),
];

/// The changes `config-change` takes, and the fields each needs.
const CONFIG_CHANGES: &[(&str, &[&str])] = &[
    ("add-zone", &["zone", "sled"]),
    ("move-zone", &["zone", "sled"]),
    ("remove-zone", &["zone"]),
];

pub(super) fn step_action(
    s: &RawStep,
    rack: &RackSpec,
    instances: &[InstanceSpec],
    st: &mut PlanState,
) -> Result<Action, StepError> {
    let name = s.action.get_ref().as_str();
    let Some((_, allowed)) = ACTION_FIELDS.iter().find(|(n, _)| *n == name) else {
        let known: Vec<&str> = ACTION_FIELDS.iter().map(|(n, _)| *n).collect();
        return Err((
            s.action.span(),
            format!("unknown action {name:?}"),
            Some(format!("known actions: {}", known.join(", "))),
        ));
    };
    let step = Step {
        s,
        rack,
        instances,
        name,
        allowed,
    };
    step.only_its_fields()?;
    match name {
        "hide-switch" | "reveal-switch" | "dpd-restart" | "sidecar-power-off"
        | "sidecar-power-on" | "reboot-scrimlet" | "scrimlet-back" | "replace-scrimlet" => {
            step.switch_action(st)
        }
        "crash" | "restart" => step.host_action(st),
        "partition" | "heal" | "latency" => step.network_action(st),
        "dpd-errors" | "dpd-hang" | "mgs-errors" | "mgs-hang" | "db-stall" | "db-errors" => {
            step.service_fault(st)
        }
        "control-plane-down"
        | "control-plane-crash"
        | "control-plane-up"
        | "power-off"
        | "cold-boot" => step.rack_action(st),
        "stale-entry" | "lost-entry" => step.entry_action(st),
        "instance-create" | "instance-start" | "instance-stop" | "instance-delete" => {
            step.instance_action()
        }
        "config-change" => Ok(Action::ConfigChange(config_change(s, rack, st)?)),
        _ => unreachable!("every action in ACTION_FIELDS is handled"),
    }
}

/// One `[[step]]` being read: its action's name and the fields it allows.
struct Step<'a> {
    s: &'a RawStep,
    rack: &'a RackSpec,
    instances: &'a [InstanceSpec],
    name: &'a str,
    allowed: &'a [&'a str],
}

impl Step<'_> {
    /// A field the action does not take is refused, where it is written.
    fn only_its_fields(&self) -> Result<(), StepError> {
        let (s, name, allowed) = (self.s, self.name, self.allowed);
        let present: [(&str, Option<Range<usize>>); 7] = [
            ("switch", s.switch.as_ref().map(|v| v.span())),
            ("host", s.host.as_ref().map(|v| v.span())),
            ("a", s.a.as_ref().map(|v| v.span())),
            ("b", s.b.as_ref().map(|v| v.span())),
            ("oneway", s.oneway.as_ref().map(|v| v.span())),
            ("latency", s.latency.as_ref().map(|v| v.span())),
            ("for", s.window.as_ref().map(|v| v.span())),
        ];
        let zone_present = [
            ("zone", s.zone.as_ref().map(|v| v.span())),
            ("instance", s.instance.as_ref().map(|v| v.span())),
            ("sled", s.sled.as_ref().map(|v| v.span())),
            ("change", s.change.as_ref().map(|v| v.span())),
            ("external_ip", s.external_ip.as_ref().map(|v| v.span())),
        ];
        for (field, span) in present.iter().chain(zone_present.iter()) {
            if let Some(span) = span {
                if !allowed.contains(field) {
                    return Err((
                        span.clone(),
                        format!("action {name:?} does not take `{field}`"),
                        Some(if allowed.is_empty() {
                            format!("{name} takes no parameters")
                        } else {
                            format!("{name} takes: {}", allowed.join(", "))
                        }),
                    ));
                }
            }
        }
        Ok(())
    }

    fn missing(&self, field: &str) -> StepError {
        let (name, allowed) = (self.name, self.allowed);
        (
            self.s.action.span(),
            format!("action {name:?} needs `{field}`"),
            Some(format!("{name} takes: {}", allowed.join(", "))),
        )
    }

    /// The step's `switch`, one of the rack's.
    fn switch(&self, st: &PlanState) -> Result<SwitchSlot, StepError> {
        let sw = self
            .s
            .switch
            .as_ref()
            .ok_or_else(|| self.missing("switch"))?;
        let slot: Option<SwitchSlot> = sw.get_ref().parse().ok();
        slot.filter(|slot| st.switches.contains(slot))
            .ok_or_else(|| {
                let known: Vec<String> = st.switches.iter().map(|s| s.to_string()).collect();
                (
                    sw.span(),
                    format!(
                        "unknown switch {:?} in rack {}",
                        sw.get_ref(),
                        self.rack.name
                    ),
                    Some(format!("switches of this rack: {}", known.join(", "))),
                )
            })
    }

    /// `h` is a host of the rack, or a replacement sled the plan made.
    fn host_ok(&self, h: &str, span: Range<usize>, st: &PlanState) -> Result<(), StepError> {
        let rack = self.rack;
        let replacement = h
            .strip_prefix("sled")
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n < st.next_sled);
        if st.hosts.iter().any(|k| k == h) || replacement {
            Ok(())
        } else {
            Err((
                span,
                format!("unknown host {h:?} in rack {}", rack.name),
                Some(format!("hosts of this rack: {}", st.hosts.join(", "))),
            ))
        }
    }

    /// The hosts of one side (`a` or `b`).
    fn group(
        &self,
        g: &Option<Spanned<HostGroup>>,
        field: &str,
        st: &PlanState,
    ) -> Result<Vec<String>, StepError> {
        let g = g.as_ref().ok_or_else(|| self.missing(field))?;
        let names = g.get_ref().names();
        if names.is_empty() {
            return Err((g.span(), format!("`{field}` names no host"), None));
        }
        for h in &names {
            self.host_ok(h, g.span(), st)?;
        }
        Ok(names)
    }

    /// The two sides of a partition, a heal or a latency: a host named on
    /// both would be cut from (or delayed to) itself, which no network does
    /// and which turmoil would take as a cut of its loopback.
    fn sides(&self, st: &PlanState) -> Result<(Vec<String>, Vec<String>), StepError> {
        let s = self.s;
        let aspan = s.action.span();
        let (a, b) = (self.group(&s.a, "a", st)?, self.group(&s.b, "b", st)?);
        if let Some(h) = b.iter().find(|h| a.contains(h)) {
            let span = s.b.as_ref().map(|b| b.span()).unwrap_or(aspan.clone());
            return Err((
                span,
                format!("{h} is named in both `a` and `b`: a host cannot be cut off from itself"),
                Some("name each host on one side only".into()),
            ));
        }
        Ok((a, b))
    }

    /// The step's `for`.
    fn window(&self) -> Result<Duration, StepError> {
        Ok(self
            .s
            .window
            .as_ref()
            .ok_or_else(|| self.missing("for"))?
            .get_ref()
            .0)
    }

    /// A step the plan so far does not allow (it undoes what was not done,
    /// or does again what is still done).
    fn refused(&self, message: String, hint: Option<&str>) -> StepError {
        (self.s.action.span(), message, hint.map(str::to_string))
    }

    /// A step that undoes an earlier one (reveal-switch a hide-switch,
    /// sidecar-power-on a sidecar-power-off, control-plane-up a
    /// control-plane-down, cold-boot a power-off): refused unless the plan
    /// so far `did` it.
    fn undo(&self, did: bool, message: String, hint: &str) -> Result<(), StepError> {
        if did {
            Ok(())
        } else {
            Err(self.refused(message, Some(hint)))
        }
    }

    /// A switch's events: hidden from discovery and back, dpd restarted, its
    /// sidecar powered off and on, its scrimlet rebooted, back or replaced.
    fn switch_action(&self, st: &mut PlanState) -> Result<Action, StepError> {
        let name = self.name;
        Ok(match name {
            "hide-switch" => {
                let sw = self.switch(st)?;
                st.hidden.insert(sw);
                Action::HideSwitch(sw)
            }
            "reveal-switch" => {
                let sw = self.switch(st)?;
                let message =
                    format!("reveal-switch {sw}: {sw} is not hidden at that point of the plan");
                self.undo(
                    st.hidden.remove(&sw),
                    message,
                    "add a hide-switch step before it",
                )?;
                Action::RevealSwitch(sw)
            }
            "dpd-restart" => Action::DpdRestart(self.switch(st)?),
            "sidecar-power-off" => {
                let sw = self.switch(st)?;
                if !st.sidecars_off.insert(sw) {
                    return Err(self.refused(
                        format!("sidecar {sw} is already off at that point of the plan"),
                        None,
                    ));
                }
                Action::SidecarPowerOff(sw)
            }
            "sidecar-power-on" => {
                let sw = self.switch(st)?;
                let message = format!("sidecar {sw} is not off at that point of the plan");
                self.undo(
                    st.sidecars_off.remove(&sw),
                    message,
                    "add a sidecar-power-off step before it",
                )?;
                Action::SidecarPowerOn(sw)
            }
            "reboot-scrimlet" => {
                let sw = self.switch(st)?;
                if !st.scrimlets_down.insert(sw) {
                    return Err(self.refused(
                        format!("{sw}'s scrimlet is already rebooting at that point of the plan"),
                        Some("add a scrimlet-back step between the two reboots"),
                    ));
                }
                Action::ScrimletReboot(sw)
            }
            "scrimlet-back" => {
                let sw = self.switch(st)?;
                let message = format!("{sw}'s scrimlet is not rebooting at that point of the plan");
                self.undo(
                    st.scrimlets_down.remove(&sw),
                    message,
                    "add a reboot-scrimlet step before it",
                )?;
                Action::ScrimletBack(sw)
            }
            "replace-scrimlet" => {
                let sw = self.switch(st)?;
                st.next_sled += 1;
                Action::ReplaceScrimlet(sw)
            }
            _ => unreachable!("step_action sends only these actions here"),
        })
    }

    /// A host crashed or restarted.
    fn host_action(&self, st: &mut PlanState) -> Result<Action, StepError> {
        let name = self.name;
        let s = self.s;
        Ok(match name {
            "crash" | "restart" => {
                let h = s.host.as_ref().ok_or_else(|| self.missing("host"))?;
                self.host_ok(h.get_ref(), h.span(), st)?;
                let host = h.get_ref().clone();
                if name == "crash" {
                    // A second crash would do nothing (the host runs nothing),
                    // so the plan would not be what it says; a second
                    // `sidecar-power-off` is refused the same way. A `restart`
                    // of a host that is up is a reboot, and allowed.
                    if !st.crashed.insert(host.clone()) {
                        return Err(self.refused(
                        format!("crash {host}: {host} is already down (crashed earlier in the plan, not restarted since)"),
                        Some("add a restart step between the two crashes, or remove one"),
                    ));
                    }
                    Action::Crash(host)
                } else {
                    st.crashed.remove(&host);
                    Action::Restart(host)
                }
            }
            _ => unreachable!("step_action sends only these actions here"),
        })
    }

    /// A partition, its heal, or latency between two groups of hosts.
    fn network_action(&self, st: &mut PlanState) -> Result<Action, StepError> {
        let name = self.name;
        let s = self.s;
        Ok(match name {
            "partition" | "heal" => {
                let (a, b) = self.sides(st)?;
                let oneway = s.oneway.as_ref().map(|o| *o.get_ref()).unwrap_or(false);
                let key = (a.clone(), b.clone(), oneway);
                if name == "partition" {
                    st.partitions.push(key);
                    Action::Partition { a, b, oneway }
                } else {
                    let Some(pos) = st.partitions.iter().position(|p| *p == key) else {
                        return Err(self.refused("heal of a partition that was never made".into(), Some("a heal must name the same a, b and oneway as an earlier partition step")));
                    };
                    st.partitions.remove(pos);
                    Action::Heal { a, b, oneway }
                }
            }
            "latency" => {
                let (a, b) = self.sides(st)?;
                let latency = s
                    .latency
                    .as_ref()
                    .ok_or_else(|| self.missing("latency"))?
                    .get_ref()
                    .0;
                Action::Latency { a, b, latency }
            }
            _ => unreachable!("step_action sends only these actions here"),
        })
    }

    /// A service's faults for a window: dpd's or MGS's errors and hangs, the
    /// database's stall or errors.
    fn service_fault(&self, st: &mut PlanState) -> Result<Action, StepError> {
        let name = self.name;
        let s = self.s;
        Ok(match name {
            "dpd-errors" => Action::DpdErrors {
                switch: self.switch(st)?,
                window: self.window()?,
            },
            "dpd-hang" => Action::DpdHang {
                switch: self.switch(st)?,
                window: self.window()?,
            },
            "mgs-errors" => Action::MgsErrors {
                switch: self.switch(st)?,
                window: self.window()?,
            },
            "mgs-hang" => Action::MgsHang {
                switch: self.switch(st)?,
                window: self.window()?,
            },
            "db-stall" | "db-errors" => {
                let w = s.window.as_ref().ok_or_else(|| self.missing("for"))?;
                let window = w.get_ref().0;
                if window.is_zero() {
                    return Err((
                    w.span(),
                    format!("{name} for 0s does nothing"),
                    Some("give it a length, e.g. `for = \"9s\"` (a CockroachDB lease moving after a node dies)".into()),
                ));
                }
                if name == "db-stall" {
                    Action::DbStall { window }
                } else {
                    Action::DbErrors { window }
                }
            }
            _ => unreachable!("step_action sends only these actions here"),
        })
    }

    /// The control plane down, crashed or up; the rack powered off or cold
    /// booted.
    fn rack_action(&self, st: &mut PlanState) -> Result<Action, StepError> {
        let name = self.name;
        Ok(match name {
            "control-plane-down" | "control-plane-crash" => {
                st.control_plane_down = true;
                if name == "control-plane-crash" {
                    Action::ControlPlaneCrash
                } else {
                    Action::ControlPlaneDown
                }
            }
            "control-plane-up" => {
                self.undo(
                    std::mem::replace(&mut st.control_plane_down, false),
                    "control-plane-up, but the plan never took it down".into(),
                    "add a control-plane-down step before it",
                )?;
                Action::ControlPlaneUp
            }
            "power-off" => {
                st.powered_off = true;
                Action::PowerOff
            }
            "cold-boot" => {
                self.undo(
                    std::mem::replace(&mut st.powered_off, false),
                    "cold-boot, but the rack was never powered off".into(),
                    "add a power-off step before it",
                )?;
                // A cold boot starts every host again, crashed ones included.
                st.crashed.clear();
                Action::ColdBoot
            }
            _ => unreachable!("step_action sends only these actions here"),
        })
    }

    /// A NAT entry made stale or lost on a switch's dpd.
    fn entry_action(&self, st: &mut PlanState) -> Result<Action, StepError> {
        let name = self.name;
        let s = self.s;
        Ok(match name {
            "stale-entry" | "lost-entry" => {
                let sw = self.switch(st)?;
                let z = s.zone.as_ref().ok_or_else(|| self.missing("zone"))?;
                let kinds = [
                    ZoneKind::BoundaryNtp,
                    ZoneKind::Nexus,
                    ZoneKind::ExternalDns,
                ];
                let Some(kind) = kinds.into_iter().find(|k| k.as_str() == z.get_ref()) else {
                    return Err((
                        z.span(),
                        format!("unknown zone {:?}", z.get_ref()),
                        Some("zones: boundary-ntp, nexus, external-dns".into()),
                    ));
                };
                if name == "stale-entry" {
                    Action::StaleEntry {
                        switch: sw,
                        zone: kind,
                    }
                } else {
                    Action::LostEntry {
                        switch: sw,
                        zone: kind,
                    }
                }
            }
            _ => unreachable!("step_action sends only these actions here"),
        })
    }

    /// An instance API request: create, start, stop or delete.
    fn instance_action(&self) -> Result<Action, StepError> {
        let name = self.name;
        let (s, rack, instances) = (self.s, self.rack, self.instances);
        Ok(match name {
            "instance-create" | "instance-start" | "instance-stop" | "instance-delete" => {
                let i = s
                    .instance
                    .as_ref()
                    .ok_or_else(|| self.missing("instance"))?;
                if !instances.iter().any(|x| x.name == *i.get_ref()) {
                    let known: Vec<&str> = instances.iter().map(|x| x.name.as_str()).collect();
                    return Err((
                        i.span(),
                        format!("unknown instance {:?}", i.get_ref()),
                        Some(if known.is_empty() {
                            "declare it with [[instance]] name = \"...\" (kind = \"instances\")"
                                .into()
                        } else {
                            format!("declared instances: {}", known.join(", "))
                        }),
                    ));
                }
                let instance = i.get_ref().clone();
                let sled = || -> Result<String, StepError> {
                    let sl = s.sled.as_ref().ok_or_else(|| self.missing("sled"))?;
                    let known = rack.sleds.iter().any(|x| x.name == *sl.get_ref());
                    if !known {
                        let names: Vec<&str> = rack.sleds.iter().map(|x| x.name.as_str()).collect();
                        return Err((
                            sl.span(),
                            format!("unknown sled {:?} in rack {}", sl.get_ref(), rack.name),
                            Some(format!("sleds of this rack: {}", names.join(", "))),
                        ));
                    }
                    Ok(sl.get_ref().clone())
                };
                match name {
                    "instance-create" => Action::InstanceCreate {
                        instance,
                        sled: sled()?,
                    },
                    "instance-start" => Action::InstanceStart {
                        instance,
                        sled: sled()?,
                    },
                    "instance-stop" => Action::InstanceStop { instance },
                    _ => Action::InstanceDelete { instance },
                }
            }
            _ => unreachable!("step_action sends only these actions here"),
        })
    }
}

/// A `config-change` step. Zone references are resolved against the zones
/// as the plan's earlier changes leave them. A change that leaves the
/// config invalid (no boundary NTP, Nexus or external DNS left; an added
/// zone overlapping another's address and ports) is accepted here — it
/// exists to exercise the refusal — and, as the run will refuse it, it
/// does not change the zones later steps see.
fn config_change(
    s: &RawStep,
    rack: &RackSpec,
    st: &mut PlanState,
) -> Result<ConfigChange, StepError> {
    let aspan = s.action.span();
    let c = s.change.as_ref().ok_or_else(|| {
        let names: Vec<&str> = CONFIG_CHANGES.iter().map(|(n, _)| *n).collect();
        (
            aspan.clone(),
            "action \"config-change\" needs `change`".to_string(),
            Some(format!("change is one of: {}", names.join(", "))),
        )
    })?;
    let Some((change, needs)) = CONFIG_CHANGES.iter().find(|(n, _)| *n == c.get_ref()) else {
        let names: Vec<&str> = CONFIG_CHANGES.iter().map(|(n, _)| *n).collect();
        return Err((
            c.span(),
            format!("unknown config change {:?}", c.get_ref()),
            Some(format!("change is one of: {}", names.join(", "))),
        ));
    };
    let missing = |field: &str| -> StepError {
        (
            c.span(),
            format!("config change {change:?} needs `{field}`"),
            Some(format!("{change} takes: {}", needs.join(", "))),
        )
    };
    if !needs.contains(&"sled") {
        if let Some(sl) = &s.sled {
            return Err((
                sl.span(),
                format!("config change {change:?} does not take `sled`"),
                Some(format!("{change} takes: {}", needs.join(", "))),
            ));
        }
    }
    if *change != "add-zone" {
        if let Some(ip) = &s.external_ip {
            return Err((
                ip.span(),
                format!("config change {change:?} does not take `external_ip`"),
                Some("only add-zone takes an address (a moved zone keeps its own)".into()),
            ));
        }
    }
    let z = s.zone.as_ref().ok_or_else(|| missing("zone"))?;
    let sled = || -> Result<(String, usize), StepError> {
        let sl = s.sled.as_ref().ok_or_else(|| missing("sled"))?;
        let name = sl.get_ref();
        let index = name
            .strip_prefix("sled")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n < st.next_sled && name == &format!("sled{n}"));
        match index {
            Some(i) => Ok((name.clone(), i)),
            None => {
                let names: Vec<&str> = rack.sleds.iter().map(|x| x.name.as_str()).collect();
                Err((
                    sl.span(),
                    format!("unknown sled {name:?} in rack {}", rack.name),
                    Some(format!(
                        "sleds of this rack: {} (and sledN for each replacement so far)",
                        names.join(", ")
                    )),
                ))
            }
        }
    };
    let kinds = || {
        ZONE_KINDS
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (change, sled_index) = match *change {
        "add-zone" => {
            let Some(kind) = ZoneKind::from_name(z.get_ref()) else {
                return Err((
                    z.span(),
                    format!("unknown zone kind {:?}", z.get_ref()),
                    Some(format!("add-zone takes a kind: {}", kinds())),
                ));
            };
            let external_ip = match &s.external_ip {
                None => None,
                Some(ip) => Some(ip.get_ref().parse().map_err(|_| {
                    (
                        ip.span(),
                        format!("invalid IPv4 address {:?}", ip.get_ref()),
                        Some("e.g. external_ip = \"198.51.100.9\"".into()),
                    )
                })?),
            };
            let (sled, i) = sled()?;
            (
                ConfigChange::AddZone {
                    kind,
                    sled,
                    external_ip,
                },
                Some(i),
            )
        }
        "move-zone" | "remove-zone" => {
            let zone = zone_ref(z, &st.zones, &kinds())?;
            if *change == "move-zone" {
                let (sled, i) = sled()?;
                (ConfigChange::MoveZone { zone, sled }, Some(i))
            } else {
                (ConfigChange::RemoveZone { zone }, None)
            }
        }
        _ => unreachable!("every change in CONFIG_CHANGES is handled"),
    };
    match st.zones.apply(&change, sled_index) {
        Ok(next) => {
            // The run refuses an invalid config as a whole; later steps see
            // the zones it leaves unchanged.
            if next.config(0, sled_address).validate().is_ok() {
                st.zones = next;
            }
        }
        Err(e) => {
            return Err((
                s.sled
                    .as_ref()
                    .map(|v| v.span())
                    .unwrap_or_else(|| z.span()),
                format!("{change}: {e}"),
                None,
            ))
        }
    }
    Ok(change)
}

/// `nexus` or `nexus.1`, naming a zone that exists at that point of the plan.
fn zone_ref(z: &Spanned<String>, zones: &ZoneSet, kinds: &str) -> Result<ZoneRef, StepError> {
    let r: ZoneRef = z.get_ref().parse().map_err(|e: String| {
        (
            z.span(),
            e,
            Some(format!("a zone is KIND or KIND.N, KIND one of: {kinds}")),
        )
    })?;
    zones.resolve(&r).map_err(|e| (z.span(), e, None))?;
    Ok(r)
}
