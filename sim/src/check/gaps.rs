//! The gaps between what a rack should hold and what it holds — service
//! NAT on every switch, each instance's VMM, NAT entry and V2P mappings —
//! read from a neutral picture of the rack, a [`RackView`].
//!
//! One implementation for two worlds: a simulated run builds its view from
//! the world ([`super::convergence_gaps`]), a live rack from its hosts and
//! Nexus (`racksim::live`, behind `GET /gaps` and `POST /wait` of its
//! control API). A gap found by one is found, in the same words, by the
//! other. What only a simulated world can know (boundary NTP's replies,
//! stuck sagas, whether the plan took Nexus down on purpose) stays in
//! [`super::convergence_gaps`].

use std::{
    collections::{BTreeMap, BTreeSet},
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

use racksim_fakes::sled_agent::SledAgentState;
use racksim_nexus::instances::{ExternalIp, InstanceRecord, InstanceState, VmmInfo, VmmState};
use racksim_reconciler::{
    discovery::SwitchSlot,
    dpd::{Ipv4Nat, Ipv6Nat},
    nat::NatEntry,
    SERVICES_VNI,
};
use racksim_wire::sled_agent::VirtualNetworkInterfaceHost;
use schemars::JsonSchema;

use crate::rack::ZoneKind;
use serde::Serialize;

/// Something the rack does not yet hold, or holds and should not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Gap {
    /// Where it is: the switch (`switch0`) or sled (`sled2`) that lacks or
    /// holds the state, or for an instance's own state, `instance NAME`.
    pub at: String,
    /// What is missing or stale, as a sentence naming the zone, instance
    /// or entry involved.
    pub message: String,
}

/// One service zone's desired NAT entry.
#[derive(Clone, Debug)]
pub struct DesiredNat {
    pub entry: NatEntry,
    /// The zone it belongs to: its kind and the index of its sled (`None`:
    /// no zone of the config owns it).
    pub zone: Option<(ZoneKind, usize)>,
    /// Whether the zone's sled is up: a zone whose sled is down serves
    /// nothing through its entry, so its absence is not a gap.
    pub sled_up: bool,
}

/// One live switch: its slot, whether it is uplinked, its NAT tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchTable {
    pub slot: SwitchSlot,
    pub uplinked: bool,
    /// The IPv4 table in dpd's key order, by external address and first
    /// port, as `DpdState::ipv4_entries` lists it: the checks find an
    /// address's entries by binary search ([`SwitchTable::entries_of`]).
    /// Shared with the dpd it was read from while its table is unchanged
    /// (`DpdState::ipv4_entries_shared`).
    pub entries: std::sync::Arc<[Ipv4Nat]>,
    /// The IPv6 table. racksim's services and instances have IPv4
    /// external addresses only, so every entry here is one nothing asked
    /// for.
    pub entries_v6: Vec<Ipv6Nat>,
    /// The NAT generation this switch's dpd has pulled to (its RPW's), if
    /// known.
    pub pulled_to: Option<i64>,
}

impl SwitchTable {
    /// The IPv4 entries of external address `ip`, by first port. A look
    /// at the rack asks this for every instance's every address, so it is
    /// a binary search in the ordered table, not a scan of it (a rack of a
    /// hundred instances spent its checks scanning).
    pub fn entries_of(&self, ip: Ipv4Addr) -> &[Ipv4Nat] {
        let start = self.entries.partition_point(|e| e.external < ip);
        let len = self.entries[start..].partition_point(|e| e.external == ip);
        &self.entries[start..start + len]
    }

    /// Whether `entries` is in the order [`SwitchTable::entries_of`]
    /// needs (checked once per look in debug builds).
    pub fn is_in_key_order(&self) -> bool {
        self.entries.is_sorted_by_key(|e| (e.external, e.low))
    }
}

/// Each live instance NAT row in the database with its `version_added`,
/// ordered by instance and entry
/// ([`NatTable::live_instance_versions_shared`], shared with the table
/// until its rows change).
///
/// [`NatTable::live_instance_versions_shared`]:
///     racksim_nexus::instances::NatTable::live_instance_versions_shared
pub type NatRowVersions = std::sync::Arc<[(u32, NatEntry, i64)]>;

/// One up sled: its index in the rack, name, underlay address and
/// sled-agent state.
#[derive(Clone, Debug, PartialEq)]
pub struct SledView {
    pub index: usize,
    pub name: String,
    pub address: Ipv6Addr,
    /// Shared with the world it was read from (a snapshot copies no
    /// sled-agent's tables).
    pub agent: std::sync::Arc<SledAgentState>,
}

/// A rack as the checks read it. Switch zones that are down and sleds that
/// are down are absent from `switches` and `sleds`: they cannot hold state,
/// and lacking it is not a gap until they are back.
pub struct RackView<'a> {
    pub desired: &'a [DesiredNat],
    pub switches: &'a [SwitchTable],
    pub sleds: &'a [SledView],
    /// The database's instance records (shared: a simulated run's
    /// snapshot copies none).
    pub instances: &'a [std::sync::Arc<InstanceRecord>],
    /// The versions of the database's live instance NAT rows (empty where
    /// they are not known): a switch that lacks an entry whose row's
    /// version it has pulled past missed it for good.
    pub nat_row_versions: &'a NatRowVersions,
    /// Whether the control plane's era restarts failed instances whose
    /// policy asks for it (reincarnation): then a failed instance has not
    /// settled until it is restarted.
    pub reincarnation: bool,
    /// Whether the run's stop removes an instance's NAT (the saga start's
    /// control plane: its stop clears the rows, as upstream's, and the
    /// update saga those of a failed instance); inline's and naive's stop
    /// keep the entries by design (they remove them only at delete). Then
    /// a stopped or failed instance's entry left on a switch is a gap.
    pub stop_removes_nat: bool,
    /// The name of an underlay address (a sled, a switch zone), for
    /// messages.
    pub host: &'a dyn Fn(Ipv6Addr) -> String,
    /// Any sled of the rack, up or down, by index: its name and address.
    pub sled: &'a dyn Fn(usize) -> (String, Ipv6Addr),
}

impl RackView<'_> {
    /// `external/first-last -> host (mac, vni V)`.
    pub fn entry(&self, e: &NatEntry) -> String {
        nat_entry_text(e, self.host)
    }
}

/// The VMMs on `sleds` by instance, each with its sled's name, in sled
/// order and by propolis id on a sled: a sled may hold several VMMs of one
/// instance, as upstream's (its instance manager keys them by propolis
/// id). Built once per look at the rack, so that asking for every
/// instance's VMMs costs one pass over the sleds, not one per instance (a
/// rack of a hundred instances spent most of its checks here).
pub struct VmmIndex<'a>(Vec<(u32, &'a SledView, u64, &'a VmmInfo)>);

impl<'a> VmmIndex<'a> {
    pub fn new(sleds: &'a [SledView]) -> Self {
        let mut all: Vec<(u32, &SledView, u64, &VmmInfo)> = sleds
            .iter()
            .flat_map(|s| {
                s.agent
                    .vmms
                    .iter()
                    .map(move |(&propolis, v)| (v.instance_id, s, propolis, v))
            })
            .collect();
        // One allocation per look, not one per instance: sorted by
        // instance, stably, so each instance's VMMs stay in sled order and
        // by propolis id on a sled.
        all.sort_by_key(|&(id, _, _, _)| id);
        VmmIndex(all)
    }

    /// The entries of instance `id`.
    fn entries_of(&self, id: u32) -> impl Iterator<Item = &(u32, &'a SledView, u64, &'a VmmInfo)> {
        let start = self.0.partition_point(|&(i, _, _, _)| i < id);
        self.0[start..]
            .iter()
            .take_while(move |&&(i, _, _, _)| i == id)
    }

    /// The VMMs of instance `id`, each with its sled.
    pub fn of(&self, id: u32) -> impl Iterator<Item = (&'a SledView, &'a VmmInfo)> + '_ {
        self.entries_of(id).map(|&(_, sled, _, v)| (sled, v))
    }

    /// Whether sled `sled` holds VMM `propolis` of instance `id`: its
    /// agent's map has the id, and the VMM is the instance's. (The index
    /// has the instance's few VMMs together; the sled's map would be a
    /// search of all of the sled's.)
    pub fn holds(&self, sled: usize, propolis: u64, id: u32) -> bool {
        self.entries_of(id)
            .any(|&(_, s, p, _)| s.index == sled && p == propolis)
    }

    /// The `one-vmm` breach of instance `name` (`id`), if any: it has more
    /// than one VMM past registration — on different sleds or on one.
    /// Guests, not registrations: a VMM that was only registered has no
    /// Propolis zone yet (upstream's sled-agent creates it on the first
    /// request to run), so it cannot be a second copy of the guest.
    pub fn second_guest(&self, id: u32, name: &str) -> Option<String> {
        let guests = || self.of(id).filter(|(_, v)| v.state != VmmState::Starting);
        // Counted first: the message is written only for a breach, not on
        // every look at every instance.
        let count = guests().count();
        (count > 1).then(|| {
            let vmms: Vec<String> = guests()
                .map(|(sled, v)| format!("VMM {} on {}", v.vmm_id, sled.name))
                .collect();
            format!("instance {name} has {count} VMMs: {}", vmms.join(", "))
        })
    }
}

/// How the checks and the traces write a NAT entry, its target named.
pub fn nat_entry_text(e: &NatEntry, host: &dyn Fn(Ipv6Addr) -> String) -> String {
    format!(
        "{}/{}-{} -> {} ({}, vni {})",
        e.external_ip,
        e.first_port,
        e.last_port,
        host(e.target.internal_ip),
        e.target.inner_mac,
        e.target.vni
    )
}

/// Every gap of service NAT and of instances, in a fixed order: per
/// switch, the service entries it lacks and the stale ones it holds; then
/// per instance.
pub fn rack_gaps(view: &RackView) -> Vec<Gap> {
    let mut gaps = service_nat_gaps(view);
    gaps.extend(instance_gaps(view));
    gaps.extend(unexplained_gaps(view));
    gaps
}

/// State that no desired state explains: a VMM, a V2P mapping or an
/// instance NAT entry (IPv4 or IPv6) that belongs to no instance the
/// control plane knows of, in any state. The checks above start from what
/// should be and look for it, so without this a rack holding state nobody
/// asked for would pass as converged (issue 39: live mode's `/gaps` did).
/// Service entries (the services' VNI) are judged by
/// [`service_nat_gaps`], which already counts every stale one; an
/// instance's own leftovers (a stopped instance's VMM, a deleted one's
/// mappings) by [`instance_gaps`].
pub fn unexplained_gaps(view: &RackView) -> Vec<Gap> {
    // What the known instances explain, gathered once.
    let ids: BTreeSet<u32> = view.instances.iter().map(|i| i.id).collect();
    let nics: BTreeSet<(std::net::IpAddr, u32)> = view
        .instances
        .iter()
        .flat_map(|i| i.nics.iter().map(|n| (n.virtual_ip, n.vni)))
        .collect();
    let externals: BTreeSet<Ipv4Addr> = view
        .instances
        .iter()
        .flat_map(|i| i.external_ips.iter().map(|x| x.ip))
        .collect();
    let known = |id: u32| ids.contains(&id);
    let has_nic = |ip: std::net::IpAddr, vni: u32| nics.contains(&(ip, vni));
    let has_external = |ip: Ipv4Addr| externals.contains(&ip);
    let mut gaps = Vec::new();
    for s in view.sleds {
        for v in s.agent.vmms.values().filter(|v| !known(v.instance_id)) {
            gaps.push(Gap {
                at: s.name.clone(),
                message: format!(
                    "{} holds VMM {} of instance id {}, which no known instance explains",
                    s.name, v.vmm_id, v.instance_id
                ),
            });
        }
        for m in s.agent.v2p.iter().filter(|m| !has_nic(m.virtual_ip, m.vni)) {
            gaps.push(Gap {
                at: s.name.clone(),
                message: format!(
                    "{} holds a V2P mapping no known instance explains: {} (vni {}) -> {}",
                    s.name,
                    m.virtual_ip,
                    m.vni,
                    (view.host)(m.physical_host_ip)
                ),
            });
        }
    }
    for table in view.switches {
        let slot = table.slot;
        for e in table
            .entries
            .iter()
            .filter(|e| e.target.vni != SERVICES_VNI && !has_external(e.external))
        {
            gaps.push(Gap {
                at: slot.to_string(),
                message: format!(
                    "{slot} holds a NAT entry no known instance explains: {}",
                    view.entry(&NatEntry::from_dpd(e))
                ),
            });
        }
        for e in &table.entries_v6 {
            gaps.push(Gap {
                at: slot.to_string(),
                message: format!(
                    "{slot} holds an IPv6 NAT entry nothing explains (racksim's services and instances are IPv4): {}/{}-{} -> {} ({}, vni {})",
                    e.external,
                    e.low,
                    e.high,
                    (view.host)(e.target.internal_ip),
                    e.target.inner_mac,
                    e.target.vni
                ),
            });
        }
    }
    gaps
}

/// Every live, uplinked switch holds exactly the desired service entries
/// (no more, no fewer, no stale target). Each gap written out
/// ([`ServiceGap::render`]).
pub fn service_nat_gaps(view: &RackView) -> Vec<Gap> {
    ServiceGap::find_all(view)
        .iter()
        .map(|g| g.render(view))
        .collect()
}

/// One switch's service-NAT gap as data: what [`service_nat_gaps`] writes
/// out, before it is written. A simulated run keeps these between looks
/// and writes them out only when a verdict or a report needs the words,
/// as it does [`InstanceGap`]s: most looks find the same gaps as the last
/// one, and the sentences were most of what a look at the switches cost
/// (issue 40). Equal gaps read the same: an entry's target is a sled's
/// underlay address and a zone's sled its index, and a run never renames
/// either (a replaced scrimlet's new sled comes with a new address; only
/// the retired switch zone's address is renamed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceGap {
    /// The switch.
    pub slot: SwitchSlot,
    pub kind: ServiceGapKind,
}

/// What is amiss with one service entry on one switch. The zone's sled is
/// named by its index in the rack; the words come from the view the gap is
/// rendered with ([`ServiceGap::render`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceGapKind {
    /// The switch lacks a desired entry: that of the zone of this kind on
    /// this sled, or (`None`) one that no zone of the config claims.
    Lacks {
        zone: Option<(ZoneKind, usize)>,
        entry: NatEntry,
    },
    /// The switch holds a services-VNI entry that nothing desires.
    Stale { entry: NatEntry },
}

impl ServiceGap {
    /// Every service-NAT gap of `view`, switch by switch in the view's
    /// order; on a switch, the lacking entries in entry order, then the
    /// stale ones in entry order.
    pub fn find_all(view: &RackView) -> Vec<ServiceGap> {
        // In entry order, once each: what a table lacks is listed the same
        // way whatever order the view was built in.
        let mut desired: BTreeMap<&NatEntry, &DesiredNat> = BTreeMap::new();
        for d in view.desired {
            desired.entry(&d.entry).or_insert(d);
        }
        let mut gaps = Vec::new();
        for table in view.switches.iter().filter(|t| t.uplinked) {
            let slot = table.slot;
            let actual: BTreeSet<NatEntry> = table
                .entries
                .iter()
                .filter(|e| e.target.vni == SERVICES_VNI)
                .map(NatEntry::from_dpd)
                .collect();
            for d in desired.values().filter(|d| !actual.contains(&d.entry)) {
                // The legacy era's service-zone NAT task removes the entry
                // of a zone whose sled inventory misses; it is owed again as
                // soon as the sled is back. Present, it is not stale either:
                // it is still the config's.
                if !d.sled_up {
                    continue;
                }
                gaps.push(ServiceGap {
                    slot,
                    kind: ServiceGapKind::Lacks {
                        zone: d.zone,
                        entry: d.entry,
                    },
                });
            }
            for e in actual.iter().filter(|e| !desired.contains_key(e)) {
                gaps.push(ServiceGap {
                    slot,
                    kind: ServiceGapKind::Stale { entry: *e },
                });
            }
        }
        gaps
    }

    /// The gap in words, naming the zone's sled and the entry's target as
    /// `view` names them.
    pub fn render(&self, view: &RackView) -> Gap {
        let slot = self.slot;
        let message = match &self.kind {
            ServiceGapKind::Lacks { zone, entry } => {
                let what = zone.map_or_else(
                    || "unknown zone".to_string(),
                    |(kind, sled)| format!("{kind} on {}", (view.sled)(sled).0),
                );
                format!(
                    "{slot} lacks the NAT entry of {what}: {}",
                    view.entry(entry)
                )
            }
            ServiceGapKind::Stale { entry } => {
                format!("{slot} holds a stale NAT entry: {}", view.entry(entry))
            }
        };
        Gap {
            at: slot.to_string(),
            message,
        }
    }
}

/// What keeps instances from having converged: a running instance has its
/// VMM, its NAT entry on every live uplinked switch and its V2P mapping on
/// every other live sled; a stopped one has no VMM; a failed one that its
/// auto-restart policy restarts has been restarted; none is stuck midway.
/// Each gap written out ([`InstanceGap::render`]).
pub fn instance_gaps(view: &RackView) -> Vec<Gap> {
    InstanceGap::find_all(view)
        .iter()
        .map(|g| g.render(view))
        .collect()
}

/// One instance's gap as data: what [`instance_gaps`] writes out, before
/// it is written. A simulated run looks at the rack after every change of
/// it and needs only to know whether gaps remain and whether they changed;
/// writing a hundred instances' sentences at every look was most of the
/// checks' cost (issue 40), so the run keeps these and writes them out
/// when a verdict or a report needs the words. Equal gaps read the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstanceGap {
    /// The instance, by id.
    pub instance: u32,
    pub kind: InstanceGapKind,
}

/// What is amiss with an instance. Sleds are named by their index in
/// the rack, switches by slot; the words come from the view they are
/// rendered with ([`InstanceGap::render`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceGapKind {
    /// Running on `sled`, which has no VMM for it (not the one its
    /// record names).
    NoVmm { sled: usize },
    /// A live uplinked switch lacks its entry for `ip` to `sled`;
    /// `pulled_past` is `(version, generation)` when the row's version is
    /// at or below the generation the switch's dpd has pulled to.
    LacksNat {
        switch: SwitchSlot,
        ip: ExternalIp,
        sled: usize,
        pulled_past: Option<(i64, i64)>,
    },
    /// Sled `at` lacks the mapping of NIC `virtual_ip` to `sled`.
    LacksV2p {
        at: usize,
        virtual_ip: IpAddr,
        sled: usize,
    },
    /// Failed, and its auto-restart policy (best-effort) restarts it.
    NotRestarted,
    /// Stopped or failed (`state`), with `entry` still on a switch.
    HoldsNat {
        switch: SwitchSlot,
        state: InstanceState,
        entry: Ipv4Nat,
    },
    /// Deleted, with `entry` still on a switch.
    DeletedHoldsNat { switch: SwitchSlot, entry: Ipv4Nat },
    /// Deleted, with the mapping of NIC `virtual_ip` still on sled `at`.
    DeletedHoldsV2p { at: usize, virtual_ip: IpAddr },
    /// Stopped, failed or deleted (`state`), with a VMM still on sled
    /// `at` (`registered_only`: never started).
    LeftoverVmm {
        at: usize,
        state: InstanceState,
        registered_only: bool,
    },
    /// Stuck midway, in `state`.
    Stuck { state: InstanceState },
}

impl InstanceGap {
    /// Every instance's gaps, in a fixed order: by instance as the view
    /// lists them, then as [`instance_gaps`] has always listed them.
    pub fn find_all(view: &RackView) -> Vec<InstanceGap> {
        use racksim_nexus::instances::AutoRestartPolicy;
        let vmms = VmmIndex::new(view.sleds);
        debug_assert!(view.switches.iter().all(SwitchTable::is_in_key_order));
        let mut gaps = Vec::new();
        for inst in view.instances {
            let mut gap = |kind| {
                gaps.push(InstanceGap {
                    instance: inst.id,
                    kind,
                })
            };
            match (inst.state, inst.sled) {
                (InstanceState::Running, Some(sled)) => {
                    let sled = sled as usize;
                    // Its sled's address: from the view's sleds while it is
                    // up (no name to copy), else from the rack's.
                    let target_address = view
                        .sleds
                        .iter()
                        .find(|s| s.index == sled)
                        .map_or_else(|| (view.sled)(sled).1, |s| s.address);
                    // The record's VMM, by its propolis id: another VMM of the
                    // instance on the sled is not the one the record says runs.
                    let has_its_vmm = match inst.vmm {
                        Some(vmm) => vmms.holds(sled, vmm, inst.id),
                        None => vmms.of(inst.id).any(|(on, _)| on.index == sled),
                    };
                    if !has_its_vmm {
                        gap(InstanceGapKind::NoVmm { sled });
                    }
                    let nic = inst.nics.first();
                    for table in view.switches.iter().filter(|t| t.uplinked) {
                        for ip in &inst.external_ips {
                            let ok = table.entries_of(ip.ip).iter().any(|e| {
                                e.low == ip.first_port
                                    && e.high == ip.last_port
                                    && e.target.internal_ip == target_address
                                    && nic.is_none_or(|n| {
                                        e.target.inner_mac == n.mac && e.target.vni == n.vni
                                    })
                            });
                            if !ok {
                                gap(InstanceGapKind::LacksNat {
                                    switch: table.slot,
                                    ip: *ip,
                                    sled,
                                    pulled_past: pulled_past(view, table, inst.id, ip),
                                });
                            }
                        }
                    }
                    for s in view.sleds.iter().filter(|s| s.index != sled) {
                        for nic in &inst.nics {
                            // The mapping, every field of it: a look-up in the
                            // sled's ordered set, not a scan of it.
                            let ok = s.agent.v2p.contains(&VirtualNetworkInterfaceHost {
                                virtual_ip: nic.virtual_ip,
                                virtual_mac: nic.mac,
                                physical_host_ip: target_address,
                                vni: nic.vni,
                            });
                            if !ok {
                                gap(InstanceGapKind::LacksV2p {
                                    at: s.index,
                                    virtual_ip: nic.virtual_ip,
                                    sled,
                                });
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
                        && view.reincarnation
                    {
                        gap(InstanceGapKind::NotRestarted);
                    }
                    if inst.state != InstanceState::Deleted && view.stop_removes_nat {
                        // What the stop (or the update saga) removed must be
                        // gone from every switch once each dpd has pulled: an
                        // entry left routes the instance's external IP to a
                        // sled with no VMM for it, and holds the IP's key.
                        for table in view.switches {
                            for ip in &inst.external_ips {
                                if let Some(e) = table
                                    .entries_of(ip.ip)
                                    .iter()
                                    .find(|e| e.low == ip.first_port)
                                {
                                    gap(InstanceGapKind::HoldsNat {
                                        switch: table.slot,
                                        state: inst.state,
                                        entry: *e,
                                    });
                                }
                            }
                        }
                    }
                    if inst.state == InstanceState::Deleted {
                        // Nothing of a deleted instance may remain once the
                        // repairs have run (each dpd's pull, the V2P task).
                        // An address the pool has handed to another instance
                        // since is that instance's to judge: its entry there
                        // is not this one's leftover.
                        let reused = |ip: &std::net::Ipv4Addr| {
                            view.instances.iter().any(|o| {
                                o.id != inst.id
                                    && o.state != InstanceState::Deleted
                                    && o.external_ips.iter().any(|x| x.ip == *ip)
                            })
                        };
                        for table in view.switches {
                            for ip in inst.external_ips.iter().filter(|ip| !reused(&ip.ip)) {
                                if let Some(e) = table.entries_of(ip.ip).first() {
                                    gap(InstanceGapKind::DeletedHoldsNat {
                                        switch: table.slot,
                                        entry: *e,
                                    });
                                }
                            }
                        }
                        for s in view.sleds {
                            for nic in &inst.nics {
                                if s.agent
                                    .v2p
                                    .iter()
                                    .any(|m| m.virtual_ip == nic.virtual_ip && m.vni == nic.vni)
                                {
                                    gap(InstanceGapKind::DeletedHoldsV2p {
                                        at: s.index,
                                        virtual_ip: nic.virtual_ip,
                                    });
                                }
                            }
                        }
                    }
                    for (on, v) in vmms.of(inst.id) {
                        gap(InstanceGapKind::LeftoverVmm {
                            at: on.index,
                            state: inst.state,
                            registered_only: v.state == VmmState::Starting,
                        });
                    }
                }
                (state, _) => gap(InstanceGapKind::Stuck { state }),
            }
        }
        gaps
    }

    /// The gap in words, named from `view`: where it is and what.
    pub fn render(&self, view: &RackView) -> Gap {
        let name = view
            .instances
            .iter()
            .find(|i| i.id == self.instance)
            .map_or_else(|| format!("id {}", self.instance), |i| i.name.clone());
        let sled_name = |i: usize| (view.sled)(i).0;
        // A sled the view lists as up, by its own name.
        let up_sled = |i: usize| {
            view.sleds
                .iter()
                .find(|s| s.index == i)
                .map_or_else(|| sled_name(i), |s| s.name.clone())
        };
        let (at, message) = match self.kind {
            InstanceGapKind::NoVmm { sled } => {
                let target = sled_name(sled);
                let message =
                    format!("instance {name} is running on {target}, which has no VMM for it");
                (target, message)
            }
            InstanceGapKind::LacksNat {
                switch,
                ip,
                sled,
                pulled_past,
            } => (
                switch.to_string(),
                format!(
                    "{switch} lacks the NAT entry of instance {name}: {}/{}-{} -> {}{}",
                    ip.ip,
                    ip.first_port,
                    ip.last_port,
                    sled_name(sled),
                    pulled_past.map_or_else(String::new, |(version, pulled_to)| format!(
                        " (its row's version {version} is at or below the generation {switch} has pulled to, {pulled_to})"
                    ))
                ),
            ),
            InstanceGapKind::LacksV2p {
                at,
                virtual_ip,
                sled,
            } => {
                let at = up_sled(at);
                let message = format!(
                    "{at} lacks the V2P mapping of instance {name}: {virtual_ip} -> {}",
                    sled_name(sled)
                );
                (at, message)
            }
            InstanceGapKind::NotRestarted => (
                format!("instance {name}"),
                format!(
                    "instance {name} is failed and not yet restarted (auto-restart policy best-effort)"
                ),
            ),
            InstanceGapKind::HoldsNat {
                switch,
                state,
                entry,
            } => (
                switch.to_string(),
                format!(
                    "{switch} still holds the NAT entry of {} instance {name}: {}",
                    format!("{state:?}").to_lowercase(),
                    view.entry(&NatEntry::from_dpd(&entry))
                ),
            ),
            InstanceGapKind::DeletedHoldsNat { switch, entry } => (
                switch.to_string(),
                format!(
                    "{switch} still holds the NAT entry of deleted instance {name}: {}",
                    view.entry(&NatEntry::from_dpd(&entry))
                ),
            ),
            InstanceGapKind::DeletedHoldsV2p { at, virtual_ip } => {
                let at = up_sled(at);
                let message = format!(
                    "{at} still holds the V2P mapping of deleted instance {name}: {virtual_ip}"
                );
                (at, message)
            }
            InstanceGapKind::LeftoverVmm {
                at,
                state,
                registered_only,
            } => {
                // Upstream's sled-agent creates the Propolis zone (and so
                // a guest) only on the first request to run; a VMM only
                // registered is an idle runner, leaked all the same (omicron
                // b848b6df `sled-agent/src/instance.rs`).
                let what = if registered_only {
                    "holds a registered, never-started VMM"
                } else {
                    "runs a VMM"
                };
                let at = up_sled(at);
                let message =
                    format!("instance {name} is {state:?} but {at} still {what} for it")
                        .to_lowercase();
                (at, message)
            }
            InstanceGapKind::Stuck { state } => (
                format!("instance {name}"),
                format!("instance {name} is stuck in state {state:?}").to_lowercase(),
            ),
        };
        Gap { at, message }
    }
}

/// Why a switch that lacks an instance's entry will not get it from its
/// pulls: the row's version is at or below the generation its dpd has
/// pulled to, so no changeset from there returns it (a version that
/// became visible after a later one was read): `(version, generation)`.
/// None when that is not known to be so: the row is newer (a pull will
/// bring it), absent, or the versions are unknown.
fn pulled_past(
    view: &RackView<'_>,
    table: &SwitchTable,
    instance: u32,
    ip: &ExternalIp,
) -> Option<(i64, i64)> {
    let pulled_to = table.pulled_to?;
    // The row of the unique index's key (address and port range; one
    // live row at most) among the instance's, which the order puts
    // together and in key order.
    let key = |&(i, e, _): &(u32, NatEntry, i64)| (i, e.external_ip, e.first_port, e.last_port);
    let wanted = (instance, ip.ip, ip.first_port, ip.last_port);
    let rows = &view.nat_row_versions;
    match rows.get(rows.partition_point(|r| key(r) < wanted)) {
        Some(r @ &(_, _, version)) if key(r) == wanted && version <= pulled_to => {
            Some((version, pulled_to))
        }
        _ => None,
    }
}
