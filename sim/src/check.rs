//! Checks: what "converged" means, and what is missing when it is not.
//!
//! The rack has converged when every live, uplinked switch holds exactly
//! the desired service NAT entries (no more, no fewer, no stale target),
//! boundary NTP has synchronised, and the control plane is up (unless the
//! plan took it down on purpose), every instance is settled (see
//! `instance_gaps`) and no saga is stuck. Each gap is a sentence naming the
//! switch, zone, sled, instance or saga involved, so a failed run's verdict
//! says what to look at.

use std::collections::BTreeSet;

use racksim_reconciler::{
    discovery::SwitchSlot,
    instances::{SagaState, VmmInfo, VmmState},
    nat::NatEntry,
    SERVICES_VNI,
};

use crate::{hosts::fmt_entry, rack::ZoneKind, world::World};

/// Everything between the world and convergence, in a fixed order.
pub fn convergence_gaps(world: &World, snap: &Snapshot) -> Vec<String> {
    // The config as it is now: a run can add, move and remove zones.
    let zones = world.zones();
    let sleds = world.lock().sleds.specs.clone();
    let desired: BTreeSet<NatEntry> = world.desired_nat().into_iter().collect();
    let mut gaps = Vec::new();
    // A switch zone that is down cannot hold entries (it is absent from the
    // snapshot); it is not a gap until it is back.
    for (slot, _, entries) in snap.tables.iter().filter(|(_, uplinked, _)| *uplinked) {
        let actual: BTreeSet<NatEntry> = entries
            .iter()
            .filter(|e| e.target.vni == SERVICES_VNI)
            .map(NatEntry::from_dpd)
            .collect();
        for e in desired.difference(&actual) {
            let zone = zones.zone_for(e.external_ip, e.first_port);
            // A zone whose sled is down serves nothing through its entry,
            // so its absence is not a gap (the legacy era's service-zone
            // NAT task removes it once inventory misses the sled); it is
            // owed again as soon as the sled is back. Present, it is not
            // stale either: it is still the config's.
            if zone.is_some_and(|z| !snap.sleds_up.contains(&z.spec.sled)) {
                continue;
            }
            let what = zone
                .map(|z| format!("{} on {}", z.id.kind, sleds[z.spec.sled].name))
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
    // Every running boundary NTP zone must have heard from upstream: each
    // gets its replies through its own source-NAT port range, so this
    // checks the data path of every range, shared IP or not.
    for z in zones
        .zones()
        .iter()
        .filter(|z| z.id.kind == ZoneKind::BoundaryNtp)
    {
        if snap.sleds_up.contains(&z.spec.sled) && !snap.ntp_synced.contains(&z.spec.sled) {
            gaps.push(format!(
                "NTP unsynchronised: boundary NTP on {} has had no reply from upstream",
                sleds[z.spec.sled].name
            ));
        }
    }
    // An operator who took the control plane down meant it; the rack must
    // converge without it.
    if snap.nexus_up.is_empty() && world.nexus_is_enabled() {
        gaps.push(
            "control plane down: Nexus has not started (it waits for time to synchronise)"
                .to_string(),
        );
    }
    gaps.extend(instance_gaps(world, snap));
    for saga in &snap.stuck_sagas {
        let instance = world.instance_name(saga.instance);
        let sled = world.sled(saga.sled as usize).name;
        gaps.extend(stuck_saga_gap(saga, &instance, &sled));
    }
    gaps
}

/// A stuck saga is a gap of its own, whatever the instance looks like:
/// steno never resumes it, so what its failed undo left (a VMM, NAT rows, a
/// record still Starting) stays until someone intervenes — and even where
/// the rest of the checks find nothing amiss, a rack with a stuck saga is
/// not one an operator would call converged. `None` unless `saga` is stuck.
fn stuck_saga_gap(
    saga: &racksim_reconciler::instances::SagaRecord,
    instance: &str,
    sled: &str,
) -> Option<String> {
    match &saga.state {
        SagaState::Stuck { failed, undo } => Some(format!(
            "saga {} (start of {instance} on {sled}) is stuck: undo of {undo} (after {failed})",
            saga.id
        )),
        _ => None,
    }
}

/// How long an instance must have been running before `nat-follows-vmm`
/// applies: two periods of the background tasks that would repair it.
pub const RUNNING_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Once an instance's delete has completed, the database holds none of its
/// NAT rows and no sled runs a VMM for it.
pub const NO_STATE_AFTER_DELETE: &str = "no-state-after-delete";
/// At most one VMM per instance that runs a guest (one past registration:
/// a VMM only registered has no Propolis zone yet).
pub const ONE_VMM: &str = "one-vmm";
/// Once an instance has run on a sled for [`RUNNING_GRACE`], no switch's NAT
/// entry for it points elsewhere — among the switches that can reach a
/// Nexus that is up, and with the grace counted again from the last heal or
/// Nexus start (a dpd learns of a move only by pulling from Nexus).
pub const NAT_FOLLOWS_VMM: &str = "nat-follows-vmm";

/// Every safety invariant [`invariant_violation`] can report: the one list
/// scenario files are checked against (`invariant`, `some_seeds_violate`).
/// A test below keeps it equal to what this module reports.
pub const INVARIANTS: [&str; 3] = [NO_STATE_AFTER_DELETE, ONE_VMM, NAT_FOLLOWS_VMM];

/// A broken safety invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// One of [`INVARIANTS`].
    pub invariant: &'static str,
    pub message: String,
    /// `(host, text)` of the trace line that caused it, when that is not
    /// simply the latest line (a time-based invariant fires after the fact).
    pub cause: Option<(String, String)>,
}

/// What the checks read, copied out of the world once per check: the
/// checks then format their findings without the lock (naming addresses
/// takes it again).
pub struct Snapshot {
    instances: Vec<racksim_reconciler::instances::InstanceRecord>,
    /// Every live switch's IPv4 entries, and whether it is uplinked.
    tables: Vec<(SwitchSlot, bool, Vec<racksim_reconciler::dpd::Ipv4Nat>)>,
    ntp_synced: BTreeSet<usize>,
    nexus_up: BTreeSet<usize>,
    sleds_up: BTreeSet<usize>,
    /// Up sleds: (index, name, address, agent state).
    sleds: Vec<(
        usize,
        String,
        std::net::Ipv6Addr,
        racksim_fakes::sled_agent::SledAgentState,
    )>,
    running_since: std::collections::BTreeMap<u32, std::time::Duration>,
    deletes_completed: std::collections::BTreeMap<u32, std::time::Duration>,
    /// The database's live instance NAT rows, by instance.
    nat_rows: std::collections::BTreeMap<u32, Vec<NatEntry>>,
    /// Stuck sagas, by id.
    stuck_sagas: Vec<racksim_reconciler::instances::SagaRecord>,
    /// The driver's partitions.
    net: crate::world::NetState,
    /// The host names of the Nexus zones that are up.
    nexus_hosts: Vec<String>,
    /// When a path to Nexus last came back: a heal, or a Nexus coming up.
    paths_since: std::time::Duration,
}

impl Snapshot {
    /// The VMMs instance `id` has on the up sleds, with their sled's name,
    /// in sled order.
    fn vmms_of(&self, id: u32) -> impl Iterator<Item = (&str, &VmmInfo)> {
        self.sleds
            .iter()
            .filter_map(move |(_, sled, _, a)| a.vmms.get(&id).map(|v| (sled.as_str(), v)))
    }
}

pub fn observe(world: &World) -> Snapshot {
    let rack = world.rack();
    let st = world.lock();
    Snapshot {
        ntp_synced: st.sleds.ntp_synced.clone(),
        nexus_up: st.control_plane.nexus_up.clone(),
        sleds_up: st.sleds.up.clone(),
        instances: st.control_plane.db.instances.values().cloned().collect(),
        tables: rack
            .switches
            .iter()
            .filter_map(|s| {
                st.switches
                    .dpd
                    .get(&s.slot)
                    .map(|d| (s.slot, s.uplinked, d.ipv4_entries()))
            })
            .collect(),
        sleds: st
            .sleds
            .up
            .iter()
            .map(|&i| {
                (
                    i,
                    st.sleds.specs[i].name.clone(),
                    st.sleds.specs[i].address,
                    st.sleds.agents.get(&i).cloned().unwrap_or_default(),
                )
            })
            .collect(),
        running_since: st.control_plane.running_since.clone(),
        deletes_completed: st.control_plane.deletes_completed.clone(),
        net: st.net.clone(),
        nexus_hosts: st
            .control_plane
            .nexus_up
            .iter()
            .map(|&i| st.sleds.specs[i].name.clone())
            .collect(),
        paths_since: st.net.last_heal.max(st.control_plane.last_up),
        nat_rows: st
            .control_plane
            .db
            .instances
            .keys()
            .map(|&id| (id, st.control_plane.db.nat.live_of(id)))
            .filter(|(_, rows)| !rows.is_empty())
            .collect(),
        stuck_sagas: st
            .control_plane
            .db
            .sagas
            .values()
            .filter(|s| matches!(s.state, SagaState::Stuck { .. }))
            .cloned()
            .collect(),
    }
}

/// The first broken safety invariant, if any. Checked after every step.
pub fn invariant_violation(
    world: &World,
    o: &Snapshot,
    now: std::time::Duration,
) -> Option<Violation> {
    use racksim_reconciler::instances::InstanceState;
    for inst in &o.instances {
        let name = &inst.name;
        // From the moment the delete operation reported success; while it
        // runs, removing the instance's state is its job.
        if o.deletes_completed.contains_key(&inst.id) {
            // What the delete itself guarantees holds at once: the database
            // asks for nothing of the instance (its NAT rows are cleared)
            // and no VMM runs. Switch entries and V2P mappings are removed
            // by the repairs that follow the database (each dpd's pull,
            // the V2P task), as upstream, so their leftovers are
            // convergence gaps, not safety violations; a start racing the
            // delete that writes rows back is caught here, for ever.
            if let Some(rows) = o.nat_rows.get(&inst.id) {
                return Some(Violation {
                    invariant: NO_STATE_AFTER_DELETE,
                    cause: None,
                    message: format!(
                        "the delete of instance {name} completed, but the database still holds its NAT row {}",
                        fmt_entry(world, &rows[0])
                    ),
                });
            }
            if let Some((sled, v)) = o.vmms_of(inst.id).next() {
                let what = if v.state == VmmState::Starting {
                    "holds its registered, never-started"
                } else {
                    "runs its"
                };
                return Some(Violation {
                    invariant: NO_STATE_AFTER_DELETE,
                    cause: None,
                    message: format!(
                        "the delete of instance {name} completed, but {sled} still {what} VMM {}",
                        v.vmm_id
                    ),
                });
            }
        }
        // Guests, not registrations: a VMM that was only registered has no
        // Propolis zone yet (upstream's sled-agent creates it on the first
        // request to run), so it cannot be a second copy of the guest.
        let vmms: Vec<String> = o
            .vmms_of(inst.id)
            .filter(|(_, v)| v.state != VmmState::Starting)
            .map(|(sled, v)| format!("VMM {} on {sled}", v.vmm_id))
            .collect();
        if vmms.len() > 1 {
            return Some(Violation {
                invariant: ONE_VMM,
                cause: None,
                message: format!(
                    "instance {name} has {} VMMs: {}",
                    vmms.len(),
                    vmms.join(", ")
                ),
            });
        }
        if let (InstanceState::Running, Some(sled), Some(since)) =
            (inst.state, inst.sled, o.running_since.get(&inst.id))
        {
            // The grace runs from when the instance began running, or
            // from when a path to Nexus last came back, whichever is later:
            // a dpd learns of a move only by pulling from Nexus.
            if now.saturating_sub((*since).max(o.paths_since)) >= RUNNING_GRACE {
                let sled_addr = world.sled(sled as usize).address;
                for (slot, _, entries) in &o.tables {
                    // A switch cut off from every Nexus cannot learn of the
                    // move (no design can); what it holds then is a gap to
                    // close once the partition heals, not a violation.
                    let zone = slot.to_string();
                    let reachable = o.nexus_hosts.iter().any(|n| o.net.connected(&zone, n));
                    if !reachable {
                        continue;
                    }
                    for ip in &inst.external_ips {
                        if let Some(e) = entries
                            .iter()
                            .find(|e| e.external == ip.ip && e.target.internal_ip != sled_addr)
                        {
                            return Some(Violation {
                                invariant: NAT_FOLLOWS_VMM,
                                cause: Some((slot.to_string(), format!("NAT + {}/{}-{}", e.external, e.low, e.high))),
                                message: format!(
                                    "instance {name} has run on {} since {}, but {slot}'s NAT entry points elsewhere: {}",
                                    world.sled(sled as usize).name,
                                    crate::trace::fmt_time(*since),
                                    fmt_entry(world, &NatEntry::from_dpd(e))
                                ),
                            });
                        }
                    }
                }
            }
        }
    }
    None
}

/// What keeps instances from having converged: a running instance has its
/// VMM, its NAT entry on every live uplinked switch and its V2P mapping on
/// every other live sled; a stopped one has no VMM; a failed one that its
/// auto-restart policy restarts has been restarted; none is stuck midway.
fn instance_gaps(world: &World, o: &Snapshot) -> Vec<String> {
    use racksim_reconciler::instances::{AutoRestartPolicy, InstanceState};
    let mut gaps = Vec::new();
    for inst in &o.instances {
        let name = &inst.name;
        match (inst.state, inst.sled) {
            (InstanceState::Running, Some(sled)) => {
                let target = world.sled(sled as usize);
                if !o
                    .sleds
                    .iter()
                    .any(|(i, _, _, a)| *i == sled as usize && a.vmms.contains_key(&inst.id))
                {
                    gaps.push(format!(
                        "instance {name} is running on {}, which has no VMM for it",
                        target.name
                    ));
                }
                let nic = inst.nics.first();
                for (slot, uplinked, entries) in &o.tables {
                    if !uplinked {
                        continue;
                    }
                    for ip in &inst.external_ips {
                        let ok = entries.iter().any(|e| {
                            e.external == ip.ip
                                && e.low == ip.first_port
                                && e.high == ip.last_port
                                && e.target.internal_ip == target.address
                                && nic.is_none_or(|n| {
                                    e.target.inner_mac == n.mac && e.target.vni == n.vni
                                })
                        });
                        if !ok {
                            gaps.push(format!(
                                "{slot} lacks the NAT entry of instance {name}: {}/{}-{} -> {}",
                                ip.ip, ip.first_port, ip.last_port, target.name
                            ));
                        }
                    }
                }
                for (i, sled_name, _, agent) in &o.sleds {
                    if *i == sled as usize {
                        continue;
                    }
                    for nic in &inst.nics {
                        let ok = agent.v2p.iter().any(|m| {
                            m.virtual_ip == nic.virtual_ip
                                && m.vni == nic.vni
                                && m.virtual_mac == nic.mac
                                && m.physical_host_ip == target.address
                        });
                        if !ok {
                            gaps.push(format!(
                                "{sled_name} lacks the V2P mapping of instance {name}: {} -> {}",
                                nic.virtual_ip, target.name
                            ));
                        }
                    }
                }
            }
            (InstanceState::Stopped | InstanceState::Failed | InstanceState::Deleted, _) => {
                // A failed instance whose policy restarts it has not settled
                // until reincarnation has (upstream's intent: BestEffort
                // instances come back on their own); under `Never`, or with
                // no reincarnation in the era, Failed is where it rests.
                if inst.state == InstanceState::Failed
                    && inst.auto_restart.policy == AutoRestartPolicy::BestEffort
                    && world.params.era.reincarnation == crate::era::Task::On
                {
                    gaps.push(format!(
                        "instance {name} is failed and not yet restarted (auto-restart policy best-effort)"
                    ));
                }
                if inst.state == InstanceState::Deleted {
                    // Nothing of a deleted instance may remain once the
                    // repairs have run (each dpd's pull, the V2P task).
                    for (slot, _, entries) in &o.tables {
                        for ip in &inst.external_ips {
                            if let Some(e) = entries.iter().find(|e| e.external == ip.ip) {
                                gaps.push(format!(
                                    "{slot} still holds the NAT entry of deleted instance {name}: {}",
                                    fmt_entry(world, &NatEntry::from_dpd(e))
                                ));
                            }
                        }
                    }
                    for (_, sled_name, _, agent) in &o.sleds {
                        for nic in &inst.nics {
                            if agent
                                .v2p
                                .iter()
                                .any(|m| m.virtual_ip == nic.virtual_ip && m.vni == nic.vni)
                            {
                                gaps.push(format!(
                                    "{sled_name} still holds the V2P mapping of deleted instance {name}: {}",
                                    nic.virtual_ip
                                ));
                            }
                        }
                    }
                }
                for (sled_name, v) in o.vmms_of(inst.id) {
                    // Upstream's sled-agent creates the Propolis zone (and
                    // so a guest) only on the first request to run; a VMM
                    // only registered is an idle runner, leaked all the
                    // same (omicron b848b6df `sled-agent/src/instance.rs`).
                    let what = if v.state == VmmState::Starting {
                        "holds a registered, never-started VMM"
                    } else {
                        "runs a VMM"
                    };
                    gaps.push(
                        format!(
                            "instance {name} is {:?} but {sled_name} still {what} for it",
                            inst.state
                        )
                        .to_lowercase(),
                    );
                }
            }
            (state, _) => {
                gaps.push(format!("instance {name} is stuck in state {state:?}").to_lowercase());
            }
        }
    }
    gaps
}

#[cfg(test)]
mod tests;
