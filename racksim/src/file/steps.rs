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
    let aspan = s.action.span();
    let Some((_, allowed)) = ACTION_FIELDS.iter().find(|(n, _)| *n == name) else {
        let known: Vec<&str> = ACTION_FIELDS.iter().map(|(n, _)| *n).collect();
        return Err((
            aspan,
            format!("unknown action {name:?}"),
            Some(format!("known actions: {}", known.join(", "))),
        ));
    };
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
    let missing = |field: &str| -> StepError {
        (
            aspan.clone(),
            format!("action {name:?} needs `{field}`"),
            Some(format!("{name} takes: {}", allowed.join(", "))),
        )
    };
    let switch = || -> Result<SwitchSlot, StepError> {
        let sw = s.switch.as_ref().ok_or_else(|| missing("switch"))?;
        let slot: Option<SwitchSlot> = sw.get_ref().parse().ok();
        slot.filter(|slot| st.switches.contains(slot))
            .ok_or_else(|| {
                let known: Vec<String> = st.switches.iter().map(|s| s.to_string()).collect();
                (
                    sw.span(),
                    format!("unknown switch {:?} in rack {}", sw.get_ref(), rack.name),
                    Some(format!("switches of this rack: {}", known.join(", "))),
                )
            })
    };
    let host_ok = |h: &str, span: Range<usize>, st: &PlanState| -> Result<(), StepError> {
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
    };
    let group = |g: &Option<Spanned<HostGroup>>,
                 field: &str,
                 st: &PlanState|
     -> Result<Vec<String>, StepError> {
        let g = g.as_ref().ok_or_else(|| missing(field))?;
        let names = g.get_ref().names();
        if names.is_empty() {
            return Err((g.span(), format!("`{field}` names no host"), None));
        }
        for h in &names {
            host_ok(h, g.span(), st)?;
        }
        Ok(names)
    };
    // The two sides of a partition, a heal or a latency: a host named on
    // both would be cut from (or delayed to) itself, which no network does
    // and which turmoil would take as a cut of its loopback.
    let sides = |st: &PlanState| -> Result<(Vec<String>, Vec<String>), StepError> {
        let (a, b) = (group(&s.a, "a", st)?, group(&s.b, "b", st)?);
        if let Some(h) = b.iter().find(|h| a.contains(h)) {
            let span = s.b.as_ref().map(|b| b.span()).unwrap_or(aspan.clone());
            return Err((
                span,
                format!("{h} is named in both `a` and `b`: a host cannot be cut off from itself"),
                Some("name each host on one side only".into()),
            ));
        }
        Ok((a, b))
    };
    let window = || -> Result<Duration, StepError> {
        Ok(s.window.as_ref().ok_or_else(|| missing("for"))?.get_ref().0)
    };
    // A step the plan so far does not allow (it undoes what was not done,
    // or does again what is still done).
    let refused = |message: String, hint: Option<&str>| -> StepError {
        (aspan.clone(), message, hint.map(str::to_string))
    };
    // A step that undoes an earlier one (reveal-switch a hide-switch,
    // sidecar-power-on a sidecar-power-off, control-plane-up a
    // control-plane-down, cold-boot a power-off): refused unless the plan
    // so far `did` it.
    let undo = |did: bool, message: String, hint: &str| -> Result<(), StepError> {
        if did {
            Ok(())
        } else {
            Err(refused(message, Some(hint)))
        }
    };
    let action = match name {
        "hide-switch" => {
            let sw = switch()?;
            st.hidden.insert(sw);
            Action::HideSwitch(sw)
        }
        "reveal-switch" => {
            let sw = switch()?;
            let message =
                format!("reveal-switch {sw}: {sw} is not hidden at that point of the plan");
            undo(
                st.hidden.remove(&sw),
                message,
                "add a hide-switch step before it",
            )?;
            Action::RevealSwitch(sw)
        }
        "crash" | "restart" => {
            let h = s.host.as_ref().ok_or_else(|| missing("host"))?;
            host_ok(h.get_ref(), h.span(), st)?;
            let host = h.get_ref().clone();
            if name == "crash" {
                // A second crash would do nothing (the host runs nothing),
                // so the plan would not be what it says; a second
                // `sidecar-power-off` is refused the same way. A `restart`
                // of a host that is up is a reboot, and allowed.
                if !st.crashed.insert(host.clone()) {
                    return Err(refused(
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
        "dpd-restart" => Action::DpdRestart(switch()?),
        "partition" | "heal" => {
            let (a, b) = sides(st)?;
            let oneway = s.oneway.as_ref().map(|o| *o.get_ref()).unwrap_or(false);
            let key = (a.clone(), b.clone(), oneway);
            if name == "partition" {
                st.partitions.push(key);
                Action::Partition { a, b, oneway }
            } else {
                let Some(pos) = st.partitions.iter().position(|p| *p == key) else {
                    return Err(refused("heal of a partition that was never made".into(), Some("a heal must name the same a, b and oneway as an earlier partition step")));
                };
                st.partitions.remove(pos);
                Action::Heal { a, b, oneway }
            }
        }
        "latency" => {
            let (a, b) = sides(st)?;
            let latency = s
                .latency
                .as_ref()
                .ok_or_else(|| missing("latency"))?
                .get_ref()
                .0;
            Action::Latency { a, b, latency }
        }
        "dpd-errors" => Action::DpdErrors {
            switch: switch()?,
            window: window()?,
        },
        "dpd-hang" => Action::DpdHang {
            switch: switch()?,
            window: window()?,
        },
        "mgs-errors" => Action::MgsErrors {
            switch: switch()?,
            window: window()?,
        },
        "mgs-hang" => Action::MgsHang {
            switch: switch()?,
            window: window()?,
        },
        "db-stall" | "db-errors" => {
            let w = s.window.as_ref().ok_or_else(|| missing("for"))?;
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
        "sidecar-power-off" => {
            let sw = switch()?;
            if !st.sidecars_off.insert(sw) {
                return Err(refused(
                    format!("sidecar {sw} is already off at that point of the plan"),
                    None,
                ));
            }
            Action::SidecarPowerOff(sw)
        }
        "sidecar-power-on" => {
            let sw = switch()?;
            let message = format!("sidecar {sw} is not off at that point of the plan");
            undo(
                st.sidecars_off.remove(&sw),
                message,
                "add a sidecar-power-off step before it",
            )?;
            Action::SidecarPowerOn(sw)
        }
        "reboot-scrimlet" => {
            let sw = switch()?;
            if !st.scrimlets_down.insert(sw) {
                return Err(refused(
                    format!("{sw}'s scrimlet is already rebooting at that point of the plan"),
                    Some("add a scrimlet-back step between the two reboots"),
                ));
            }
            Action::ScrimletReboot(sw)
        }
        "scrimlet-back" => {
            let sw = switch()?;
            let message = format!("{sw}'s scrimlet is not rebooting at that point of the plan");
            undo(
                st.scrimlets_down.remove(&sw),
                message,
                "add a reboot-scrimlet step before it",
            )?;
            Action::ScrimletBack(sw)
        }
        "replace-scrimlet" => {
            let sw = switch()?;
            st.next_sled += 1;
            Action::ReplaceScrimlet(sw)
        }
        "control-plane-down" | "control-plane-crash" => {
            st.control_plane_down = true;
            if name == "control-plane-crash" {
                Action::ControlPlaneCrash
            } else {
                Action::ControlPlaneDown
            }
        }
        "control-plane-up" => {
            undo(
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
            undo(
                std::mem::replace(&mut st.powered_off, false),
                "cold-boot, but the rack was never powered off".into(),
                "add a power-off step before it",
            )?;
            // A cold boot starts every host again, crashed ones included.
            st.crashed.clear();
            Action::ColdBoot
        }
        "stale-entry" | "lost-entry" => {
            let sw = switch()?;
            let z = s.zone.as_ref().ok_or_else(|| missing("zone"))?;
            let kinds = [
                ZoneKind::BoundaryNtp,
                ZoneKind::Nexus,
                ZoneKind::ExternalDns,
            ];
            let Some(kind) = kinds.into_iter().find(|k| k.name() == z.get_ref()) else {
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
        "instance-create" | "instance-start" | "instance-stop" | "instance-delete" => {
            let i = s.instance.as_ref().ok_or_else(|| missing("instance"))?;
            if !instances.iter().any(|x| x.name == *i.get_ref()) {
                let known: Vec<&str> = instances.iter().map(|x| x.name.as_str()).collect();
                return Err((
                    i.span(),
                    format!("unknown instance {:?}", i.get_ref()),
                    Some(if known.is_empty() {
                        "declare it with [[instance]] name = \"...\" (kind = \"instances\")".into()
                    } else {
                        format!("declared instances: {}", known.join(", "))
                    }),
                ));
            }
            let instance = i.get_ref().clone();
            let sled = || -> Result<String, StepError> {
                let sl = s.sled.as_ref().ok_or_else(|| missing("sled"))?;
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
        "config-change" => Action::ConfigChange(config_change(s, rack, st)?),
        _ => unreachable!("every action in ACTION_FIELDS is handled"),
    };
    Ok(action)
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
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (change, sled_index) = match *change {
        "add-zone" => {
            let Some(kind) = ZONE_KINDS.into_iter().find(|k| k.name() == z.get_ref()) else {
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
