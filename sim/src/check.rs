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

use racksim_reconciler::nat::NatEntry;

use racksim_nexus::instances::{SagaState, VmmState};

use crate::{hosts::fmt_entry, rack::ZoneKind, world::World};

pub mod gaps;

use gaps::{DesiredNat, RackView, SledView, SwitchTable};

/// One gap of a simulated rack, as a run keeps it between looks: a
/// switch's service NAT and an instance's as data ([`gaps::ServiceGap`],
/// [`gaps::InstanceGap`]: a rack of a hundred instances has that many at a
/// look, and a run looks after every change), the few others in words.
/// Written out by [`Judgement::words`] when a verdict or a report reads
/// them; equal gaps read the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimGap {
    Said(String),
    Service(gaps::ServiceGap),
    Instance(gaps::InstanceGap),
}

/// The rack as the shared checks read it, from `snap` alone (the world
/// only names addresses): `f` gets the view.
fn with_view<R>(world: &World, snap: &Snapshot, f: impl FnOnce(&RackView) -> R) -> R {
    let specs = &snap.config.specs;
    let desired: Vec<DesiredNat> = snap
        .config
        .zones
        .config(0, |i| specs[i].address)
        .nat_entries()
        .into_iter()
        .map(|entry| {
            let zone = snap
                .config
                .zones
                .zone_for(entry.external_ip, entry.first_port);
            DesiredNat {
                zone: zone.map(|z| (z.id.kind, z.spec.sled)),
                sled_up: zone.is_none_or(|z| snap.sleds_up.contains(&z.spec.sled)),
                entry,
            }
        })
        .collect();
    let host = |a| world.name_of(a);
    let sled = |i: usize| (specs[i].name.clone(), specs[i].address);
    f(&snap.view(&desired, world, &host, &sled))
}

/// A judgement of the rack: its gaps, and the snapshot they were found
/// in, which names them when they are written out ([`Judgement::words`]).
/// A run keeps its last one between changes of the world.
pub struct Judgement {
    pub gaps: Vec<SimGap>,
    pub(crate) snapshot: Snapshot,
}

impl Judgement {
    /// The gaps of the world as `snapshot` saw it.
    pub fn new(world: &World, snapshot: Snapshot) -> Self {
        Judgement {
            gaps: convergence_gaps(world, &snapshot),
            snapshot,
        }
    }

    /// The gaps in words, named as the rack was when they were found.
    pub fn words(&self, world: &World) -> Vec<String> {
        with_view(world, &self.snapshot, |view| {
            self.gaps
                .iter()
                .map(|g| match g {
                    SimGap::Said(text) => text.clone(),
                    SimGap::Service(g) => g.render(view).message,
                    SimGap::Instance(g) => g.render(view).message,
                })
                .collect()
        })
    }
}

/// Everything between the world and convergence, in a fixed order: the
/// rack's gaps ([`gaps::ServiceGap::find_all`]), boundary NTP, the control
/// plane, the instances ([`gaps::InstanceGap::find_all`]) and stuck sagas.
pub fn convergence_gaps(world: &World, snap: &Snapshot) -> Vec<SimGap> {
    let zones = &snap.config.zones;
    let (mut gaps, instances) = with_view(world, snap, |view| {
        let service: Vec<SimGap> = gaps::ServiceGap::find_all(view)
            .into_iter()
            .map(SimGap::Service)
            .collect();
        (service, gaps::InstanceGap::find_all(view))
    });
    let sled_name = |i: usize| snap.config.specs[i].name.clone();
    // Every running boundary NTP zone must have heard from upstream: each
    // gets its replies through its own source-NAT port range, so this
    // checks the data path of every range, shared IP or not.
    for z in zones
        .zones()
        .iter()
        .filter(|z| z.id.kind == ZoneKind::BoundaryNtp)
    {
        if snap.sleds_up.contains(&z.spec.sled) && !snap.ntp_synced.contains(&z.spec.sled) {
            let sled = sled_name(z.spec.sled);
            let why = match snap.blocked_starts.get(&(z.spec.sled, z.id)) {
                Some(progress) => {
                    format!("has not started: {}", blocked_start(world, snap, progress))
                }
                None => "has had no reply from upstream".to_string(),
            };
            gaps.push(SimGap::Said(format!(
                "NTP unsynchronised: boundary NTP on {sled} {why}"
            )));
        }
    }
    // An operator who took the control plane down meant it; the rack must
    // converge without it.
    if snap.nexus_up.is_empty() && snap.config.nexus_enabled {
        // A Nexus zone whose start is blocked in the zone-start NAT path
        // is named with where it is blocked (the first, in sled order);
        // otherwise Nexus waits for time.
        let blocked = snap
            .blocked_starts
            .iter()
            .find(|((_, zone), _)| zone.kind == ZoneKind::Nexus);
        gaps.push(SimGap::Said(match blocked {
            Some(((sled, _), progress)) => format!(
                "control plane down: Nexus on {} has not started: {}",
                sled_name(*sled),
                blocked_start(world, snap, progress)
            ),
            None => "control plane down: Nexus has not started (it waits for time to synchronise)"
                .to_string(),
        }));
    }
    gaps.extend(instances.into_iter().map(SimGap::Instance));
    for saga in &snap.stuck_sagas {
        let instance = world.instance_name(saga.instance);
        let sled = sled_name(saga.sled as usize);
        gaps.extend(stuck_saga_gap(saga, &instance, &sled).map(SimGap::Said));
    }
    gaps
}

/// Where a zone start blocked in the zone-start NAT path is, for a gap. A
/// start that retries an address no switch zone has any more (its
/// scrimlet was replaced after the lookup) is named as such: that is
/// upstream's defect (`opte_ports_needed` looks the switch zones up once,
/// then retries each ensure for ever), not a missing reply.
fn blocked_start(
    world: &World,
    snap: &Snapshot,
    progress: &racksim_reconciler::legacy::LegacyProgress,
) -> String {
    use racksim_reconciler::legacy::LegacyProgress;
    match progress {
        LegacyProgress::EnsuringNat {
            switch, address, ..
        } if snap.config.switch_addresses.get(switch) != Some(address) => format!(
            "its zone start retries the NAT ensure on {switch} at a retired address ({}) for ever",
            world.name_of(*address)
        ),
        other => format!(
            "its zone start is blocked in the zone-start NAT path ({})",
            world.name_addrs(&other.to_string())
        ),
    }
}

/// A stuck saga is a gap of its own, whatever the instance looks like:
/// steno never resumes it, so what its failed undo left (a VMM, NAT rows, a
/// record still Starting) stays until someone intervenes — and even where
/// the rest of the checks find nothing amiss, a rack with a stuck saga is
/// not one an operator would call converged. `None` unless `saga` is stuck.
pub fn stuck_saga_gap(
    saga: &racksim_nexus::instances::SagaRecord,
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
/// a VMM only registered has no Propolis zone yet), on different sleds or
/// on one (a sled may hold several VMMs of an instance).
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

/// What the checks read, taken out of the world once per check: the
/// checks then work without the lock (naming addresses takes it again).
/// The instance records and the sled-agents' states are shared with the
/// world, not copied (it copies one on write while a snapshot holds it);
/// the rest is copied. A run keeps the snapshot of its last judgement, to
/// write that judgement's gaps out in its words ([`Judgement`]).
///
/// Equal snapshots are judged the same: see [`Snapshot::same_as`].
#[derive(PartialEq)]
pub struct Snapshot {
    /// The database's records, shared with it.
    instances: Vec<std::sync::Arc<racksim_nexus::instances::InstanceRecord>>,
    /// Every live switch's IPv4 entries, and whether it is uplinked.
    tables: Vec<SwitchTable>,
    ntp_synced: BTreeSet<usize>,
    /// Where each zone start blocked in the zone-start NAT path is, by
    /// sled index and zone.
    blocked_starts: std::collections::BTreeMap<
        (usize, crate::world::ZoneId),
        racksim_reconciler::legacy::LegacyProgress,
    >,
    nexus_up: BTreeSet<usize>,
    sleds_up: BTreeSet<usize>,
    /// The up sleds and their sled-agents.
    sleds: Vec<SledView>,
    /// When each of `instances` began running (the control plane's
    /// `running_since`), by position: read for every instance at every
    /// look, so looked up once, when the snapshot is made, not in a map
    /// each time.
    running_since: Vec<Option<std::time::Duration>>,
    deletes_completed: std::collections::BTreeMap<u32, std::time::Duration>,
    /// The database's live instance NAT rows' versions.
    nat_row_versions: gaps::NatRowVersions,
    /// The database's live instance NAT rows of each instance whose delete
    /// has completed (the only ones `no-state-after-delete` reads).
    nat_rows: std::collections::BTreeMap<u32, Vec<NatEntry>>,
    /// Stuck sagas, by id.
    stuck_sagas: Vec<racksim_nexus::instances::SagaRecord>,
    /// The driver's partitions.
    net: crate::world::NetState,
    /// The host names of the Nexus zones that are up.
    nexus_hosts: Vec<String>,
    /// When a path to Nexus last came back: a heal, or a Nexus coming up.
    paths_since: std::time::Duration,
    /// The rack's configuration of the moment.
    config: ChecksConfig,
}

/// What the checks read of the rack's configuration of the moment: a run
/// adds, moves and removes zones, replaces a scrimlet (its switch zone
/// moves, and its old address is named `retired-…`), and may take the
/// control plane down on purpose. Read into the snapshot with the rest, so
/// that the checks are a function of the snapshot and the instant alone
/// (the world only writes names out), and a snapshot equal to another is
/// judged the same ([`Snapshot::same_as`]).
#[derive(Clone, Debug, PartialEq, Eq)]
struct ChecksConfig {
    zones: crate::world::ZoneSet,
    specs: std::sync::Arc<Vec<crate::rack::SledSpec>>,
    switch_addresses:
        std::collections::BTreeMap<racksim_reconciler::discovery::SwitchSlot, std::net::Ipv6Addr>,
    /// Whether the control plane is meant to run (the plan did not take
    /// it down).
    nexus_enabled: bool,
    /// How many names addresses were given so far: the gaps' words name
    /// the hosts they involve.
    names: u64,
}

impl Snapshot {
    /// Whether the checks read `other` exactly as this one: then they judge
    /// it the same, at any instant before [`next_time_based_check`]. That
    /// holds because a snapshot is the checks' whole input besides the
    /// instant: [`convergence_gaps`] and [`invariant_violation`] take the
    /// world only to write names out (a name given anew shows in
    /// `config`) and to read the run's parameters, which never change. A
    /// check that read anything else of the world would have to read it
    /// into the snapshot, where the comparison (every field's, derived)
    /// takes it in. What the world shares with a snapshot (instance
    /// records, sled-agent states, dpd tables, the NAT rows' versions)
    /// compares by pointer first (`Arc`'s equality does, for a value that
    /// is `Eq`): the world copies one on write while a snapshot holds it,
    /// so an unchanged one is the same `Arc`. Used by the recheck
    /// (`RunConfig::recheck_every_event`; decision 0021).
    pub fn same_as(&self, other: &Snapshot) -> bool {
        self == other
    }

    /// The snapshot as the shared checks read it.
    fn view<'a>(
        &'a self,
        desired: &'a [DesiredNat],
        world: &World,
        host: &'a dyn Fn(std::net::Ipv6Addr) -> String,
        sled: &'a dyn Fn(usize) -> (String, std::net::Ipv6Addr),
    ) -> RackView<'a> {
        RackView {
            desired,
            switches: &self.tables,
            sleds: &self.sleds,
            instances: &self.instances,
            nat_row_versions: &self.nat_row_versions,
            reincarnation: world.params.era.reincarnation == crate::era::PeriodicTask::On,
            stop_removes_nat: world.params.start == racksim_nexus::instances::StartImpl::Saga,
            host,
            sled,
        }
    }
}

pub fn observe(world: &World) -> Snapshot {
    let rack = world.rack();
    let st = world.lock();
    Snapshot {
        ntp_synced: st.sleds.boundary_synced(),
        blocked_starts: st
            .sleds
            .blocked_starts
            .iter()
            .map(|(k, rx)| (*k, rx.borrow().clone()))
            .collect(),
        nexus_up: st.control_plane.nexus_up.clone(),
        sleds_up: st.sleds.up.clone(),
        instances: st.control_plane.db.instances.values().cloned().collect(),
        tables: rack
            .switches
            .iter()
            .filter_map(|s| {
                st.switches.dpd.get(&s.slot).map(|d| SwitchTable {
                    slot: s.slot,
                    uplinked: s.uplinked,
                    entries: d.ipv4_entries_shared(),
                    entries_v6: d.ipv6_entries(),
                    pulled_to: Some(d.generation()),
                })
            })
            .collect(),
        sleds: st
            .sleds
            .up
            .iter()
            .map(|&i| SledView {
                index: i,
                name: st.sleds.specs[i].name.clone(),
                address: st.sleds.specs[i].address,
                agent: st.sleds.agents.get(&i).cloned().unwrap_or_default(),
            })
            .collect(),
        running_since: aligned(
            st.control_plane.db.instances.keys(),
            &st.control_plane.running_since,
        ),
        deletes_completed: st.control_plane.deletes_completed.clone(),
        net: st.net.clone(),
        nexus_hosts: st
            .control_plane
            .nexus_up
            .iter()
            .map(|&i| st.sleds.specs[i].name.clone())
            .collect(),
        paths_since: st.net.last_heal.max(st.control_plane.last_up),
        config: ChecksConfig {
            zones: world.zones(),
            specs: st.sleds.specs.clone(),
            switch_addresses: st.switches.addresses.clone(),
            nexus_enabled: world.nexus_is_enabled(),
            names: st.names.given(),
        },
        nat_row_versions: st.control_plane.db.nat.live_instance_versions_shared(),
        nat_rows: {
            let db = &st.control_plane.db;
            let deleted = &st.control_plane.deletes_completed;
            if deleted.is_empty() {
                // Nothing to read them for: no pass over the table's rows.
                Default::default()
            } else {
                let mut rows = db.nat.live_by_instance();
                rows.retain(|id, _| db.instances.contains_key(id) && deleted.contains_key(id));
                rows
            }
        },
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

/// Where instance `inst` runs, since when, and when its `nat-follows-vmm`
/// grace ends: [`RUNNING_GRACE`] after it began running or after a path to
/// Nexus last came back, whichever is later (a dpd learns of a move only
/// by pulling from Nexus). None unless it is running on a sled.
fn running_grace(
    o: &Snapshot,
    inst: &racksim_nexus::instances::InstanceRecord,
    running_since: Option<std::time::Duration>,
) -> Option<(u32, std::time::Duration, std::time::Duration)> {
    use racksim_nexus::instances::InstanceState;
    match (inst.state, inst.sled, running_since) {
        (InstanceState::Running, Some(sled), Some(since)) => {
            Some((sled, since, since.max(o.paths_since) + RUNNING_GRACE))
        }
        _ => None,
    }
}

/// The value `by_id` holds for each of `ids` (ascending, as a map's keys
/// are), by position: one merged pass over the two, not a look-up each.
fn aligned<'a, T: Copy>(
    ids: impl Iterator<Item = &'a u32>,
    by_id: &std::collections::BTreeMap<u32, T>,
) -> Vec<Option<T>> {
    let mut values = by_id.iter().peekable();
    ids.map(|id| {
        while values.next_if(|(k, _)| *k < id).is_some() {}
        values.next_if(|(k, _)| *k == id).map(|(_, v)| *v)
    })
    .collect()
}

/// The next instant after `now` at which a time-based invariant can break
/// with the world as `o` saw it: the end of a running instance's
/// [`RUNNING_GRACE`] (`nat-follows-vmm`). Between two changes of the world
/// nothing else that [`invariant_violation`] reads moves, so checking at
/// these instants and at every change is checking at every instant. None
/// when no grace is running.
pub fn next_time_based_check(
    o: &Snapshot,
    now: std::time::Duration,
) -> Option<std::time::Duration> {
    o.instances
        .iter()
        .zip(&o.running_since)
        .filter_map(|(inst, &since)| running_grace(o, inst, since))
        .map(|(_, _, ends)| ends)
        .filter(|&ends| ends > now)
        .min()
}

/// The first broken safety invariant, if any. Checked after every change
/// of the world, and at each instant [`next_time_based_check`] names.
pub fn invariant_violation(
    world: &World,
    o: &Snapshot,
    now: std::time::Duration,
) -> Option<Violation> {
    let vmms = gaps::VmmIndex::new(&o.sleds);
    debug_assert!(o.tables.iter().all(SwitchTable::is_in_key_order));
    // Whether each switch can reach a Nexus: the same for every instance,
    // so asked once per table, and only once some instance needs it.
    let mut reachable: Vec<Option<bool>> = vec![None; o.tables.len()];
    for (inst, &running_since) in o.instances.iter().zip(&o.running_since) {
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
            if let Some((sled, v)) = vmms.of(inst.id).next() {
                let what = if v.state == VmmState::Starting {
                    "holds its registered, never-started"
                } else {
                    "runs its"
                };
                return Some(Violation {
                    invariant: NO_STATE_AFTER_DELETE,
                    cause: None,
                    message: format!(
                        "the delete of instance {name} completed, but {} still {what} VMM {}",
                        sled.name, v.vmm_id
                    ),
                });
            }
        }
        // Guests, not registrations, on different sleds or on one.
        if let Some(message) = vmms.second_guest(inst.id, name) {
            return Some(Violation {
                invariant: ONE_VMM,
                cause: None,
                message,
            });
        }
        if let Some((sled, since, grace_ends)) = running_grace(o, inst, running_since) {
            if now >= grace_ends {
                let sled_addr = o.config.specs[sled as usize].address;
                for (t, table) in o.tables.iter().enumerate() {
                    let slot = &table.slot;
                    // A switch cut off from every Nexus cannot learn of the
                    // move (no design can); what it holds then is a gap to
                    // close once the partition heals, not a violation.
                    let reachable = *reachable[t].get_or_insert_with(|| {
                        let zone = slot.to_string();
                        o.nexus_hosts.iter().any(|n| o.net.connected(&zone, n))
                    });
                    if !reachable {
                        continue;
                    }
                    for ip in &inst.external_ips {
                        if let Some(e) = table
                            .entries_of(ip.ip)
                            .iter()
                            .find(|e| e.target.internal_ip != sled_addr)
                        {
                            return Some(Violation {
                                invariant: NAT_FOLLOWS_VMM,
                                cause: Some((slot.to_string(), format!("NAT + {}/{}-{}", e.external, e.low, e.high))),
                                message: format!(
                                    "instance {name} has run on {} since {}, but {slot}'s NAT entry points elsewhere: {}",
                                    o.config.specs[sled as usize].name,
                                    crate::trace::fmt_time(since),
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
