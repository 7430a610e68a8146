//! The era of upstream's code a run stands for, and the control plane that
//! era ran.
//!
//! A service-NAT strategy is not only the code on the sleds: it stands for
//! an era of Omicron, and each era ran a different control plane around it.
//! Nexus had a service-zone NAT task while the zone-start path owned
//! service NAT and lost it once the scrimlet reconcilers did; dpd pulls
//! instance NAT from Nexus only since its NAT RPW exists. Which of these
//! mechanisms runs is one value, an [`Era`], decided once per run and
//! carried in its configuration (racksim-sim's `RunConfig::era`, live
//! mode's shared state): Nexus reads it where it chooses behaviour
//! ([`crate::serve`], [`crate::tasks`], [`crate::inventory`], the database's
//! NAT queries), the simulated hosts read the rest (dpd's NAT RPW,
//! sled-agent's RUN reply), never the strategy, and the report header names
//! it. [`Era::of`] is the one place that derives a preset's era from the
//! strategy's [`ServiceNatEra`] and the instance start's [`InstanceEra`];
//! [`EraChoices`] set any mechanism to another era.
//!
//! The strategy itself still decides what it is: which reconciler runs on
//! the sleds, and whether zones start through the legacy blocking path.

use std::fmt;

mod choices;
pub use choices::{EraChoices, MECHANISMS};

use crate::instances::{
    DpdNotify, NatChangeset, NatConflict, NatEnsure, Propagation, StartImpl, SwitchLookup,
};
use serde::{Deserialize, Serialize};

/// The era of upstream's code a service-NAT strategy stands for (facts
/// from `DOMAIN.md`, read against omicron b848b6df).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServiceNatEra {
    /// Omicron before the scrimlet reconcilers: sled-agent's blocking
    /// zone-start NAT path, and Nexus's service-zone NAT task
    /// (`ServiceZoneNatTracker`, removed in `1a20a12eb1`). Strategy `legacy`.
    Legacy,
    /// The zone-start NAT issue's per-sled periodic task: a proposal that never shipped,
    /// modelled on the legacy era's control plane (Nexus's service-zone NAT
    /// task still runs beside it). Strategy `sled-task`.
    Proposal,
    /// The design after omicron #9727: the per-scrimlet reconcilers alone
    /// own service NAT, and Nexus's service-zone NAT task is gone (two
    /// owners of one table duel). Strategy `scrimlet-local`.
    Target,
    /// What ships at omicron b848b6df: #10961 (`1a20a12eb1`) runs the
    /// scrimlet reconcilers in sled-agent and removed Nexus's service-zone
    /// NAT task, but sled-agent still sets up a zone's NAT in its zone-start
    /// path (`ServiceManager::opte_ports_needed` in
    /// `sled-agent/src/services.rs`: `WAIT_FOR_ALL_SWITCH_ZONES_TIMEOUT`,
    /// then `dpd_ensure_nat_entry` retried forever) until #9727 removes it.
    /// Strategy `scrimlet-local-with-zone-start`.
    Shipped,
}

racksim_wire::enum_names!(ServiceNatEra {
    Legacy => "legacy",
    Proposal => "proposal",
    Target => "target",
    Shipped => "shipped",
});

impl ServiceNatEra {
    /// Which upstream code it is, in a phrase.
    pub fn upstream(self) -> &'static str {
        match self {
            ServiceNatEra::Legacy => {
                "omicron before the scrimlet reconcilers, with the blocking zone-start NAT path and Nexus's service-zone NAT task"
            }
            ServiceNatEra::Proposal => {
                "the zone-start NAT issue's per-sled task, never shipped, on the legacy era's control plane"
            }
            ServiceNatEra::Target => {
                "the design after #9727, the scrimlet reconcilers alone, without Nexus's service-zone NAT task"
            }
            ServiceNatEra::Shipped => {
                "omicron at b848b6df, #10961's scrimlet reconcilers plus the blocking zone-start NAT path, without Nexus's service-zone NAT task"
            }
        }
    }
}

/// The era of upstream's instance networking an instance start
/// implementation stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceEra {
    /// Before dpd's NAT RPW (omicron #3804) and Nexus's V2P task: the time
    /// of the instance-start networking issue, when instance operations
    /// programmed switches and sleds inline. Start `inline`.
    PreRpw,
    /// Today's Omicron and dendrite: instance NAT is written as versioned
    /// rows that each dpd's NAT RPW pulls, and Nexus's V2P task pushes V2P
    /// mappings. Starts `saga` (upstream's) and `naive` (a racing variant on
    /// the same control plane).
    Current,
}

racksim_wire::enum_names!(InstanceEra {
    PreRpw => "pre-rpw",
    Current => "current",
});

impl InstanceEra {
    /// The era `start` stands for.
    pub fn of(start: StartImpl) -> InstanceEra {
        match start {
            StartImpl::Inline => InstanceEra::PreRpw,
            StartImpl::Naive | StartImpl::Saga => InstanceEra::Current,
        }
    }

    /// Which upstream code it is, in a phrase.
    pub fn upstream(self) -> &'static str {
        match self {
            InstanceEra::PreRpw => {
                "the instance-start networking issue's time, operations program NAT and V2P inline, without dpd's NAT RPW or Nexus's V2P task"
            }
            InstanceEra::Current => {
                "omicron and dendrite today, dpd pulls instance NAT and Nexus's V2P task pushes V2P"
            }
        }
    }
}

/// What Nexus does about service-zone NAT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NexusServiceNat {
    /// Nothing: the sleds' reconcilers own service NAT.
    Off,
    /// Upstream's `ServiceZoneNatTracker` (omicron before `1a20a12eb1`):
    /// every 30 s it writes the service zones' rows (VNI 100), derived from
    /// the latest inventory collection (every 600 s), into the versioned NAT
    /// table and triggers dpd when a row was added; each dpd pulls them
    /// (`racksim_nexus::inventory`). It never reads a dpd's table, so it
    /// needs dpd's NAT RPW, whatever the instance era.
    InventoryTracker,
}

racksim_wire::enum_names!(NexusServiceNat {
    Off => "off",
    InventoryTracker => "inventory-tracker",
});

/// Whether a periodic control-plane task runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeriodicTask {
    Off,
    On,
}

racksim_wire::enum_names!(PeriodicTask {
    Off => "off",
    On => "on",
});

/// Which control-plane mechanisms a run has: the control plane of an era.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Era {
    /// Nexus's service-zone NAT task.
    pub nexus_service_nat: NexusServiceNat,
    /// Each switch zone's dpd NAT RPW: pulls instance NAT changesets from
    /// Nexus at start, every 30 s and on trigger (`hosts::switch_zone`).
    /// Without it (before omicron #3804) instance operations push their
    /// NAT to every dpd inline.
    pub dpd_nat_rpw: PeriodicTask,
    /// Nexus's V2P background task: pushes guest V2P mappings to sleds
    /// every 30 s and when an instance operation activates it. Without it
    /// (before omicron #5568) instance operations push V2P inline.
    pub nexus_v2p: PeriodicTask,
    /// Nexus's instance watcher (every 30 s) and the instance-update saga
    /// it runs for a VMM it finds gone
    /// (`crate::instances::watcher`).
    pub instance_watcher: PeriodicTask,
    /// Nexus's instance reincarnation (every 60 s): restarts Failed
    /// instances under their auto-restart policy.
    pub reincarnation: PeriodicTask,
    /// Which rows Nexus's NAT ensure query counts as already there: only
    /// live ones (since omicron #4610), or soft-deleted ones too (before
    /// it: bug #4589).
    pub nat_ensure: NatEnsure,
    /// Whether a dpd that cannot be told of an instance's new NAT rows
    /// fails the operation (before omicron #8914: bugs #8206, #6896) or is
    /// logged (since).
    pub dpd_notify: DpdNotify,
    /// Whether a dpd that cannot be told of an instance's removed NAT rows
    /// fails the stop's update saga, the delete or the DPD_ENSURE undo
    /// (before omicron #10389: bug #10343) or is logged (since).
    pub remove_notify: DpdNotify,
    /// The order of Nexus's NAT changeset query: by each change's version
    /// (since omicron #5036), or by `version_added` (before it: bug #5037).
    pub nat_changeset: NatChangeset,
    /// How instance operations tell the switch zones apart: each dpd's
    /// `/switch/identifiers`, leaving out one that fails (since omicron
    /// #8914), or each zone's MGS, retried every 2 s until all answer
    /// (before it: bug #8206). Absent from JSON written before the
    /// mechanism existed: today's.
    #[serde(default)]
    pub switch_lookup: SwitchLookup,
    /// What Nexus's NAT ensure does when the NAT table's unique index on
    /// live rows refuses its insert: soft-delete the row in the way and
    /// insert again (since omicron #4694), or fail (before it). Absent
    /// from JSON written before the mechanism existed: today's.
    #[serde(default)]
    pub nat_conflict: NatConflict,
    /// When sled-agent answers RUN: once its instance runner has the
    /// request, the zone's install and Propolis's boot going on after the
    /// reply (since omicron #4691), or after the boot (before it: #3927).
    /// Left out of JSON when today's, and absent from JSON written before
    /// the mechanism existed: today's.
    #[serde(default, skip_serializing_if = "RunReply::is_at_once")]
    pub run_reply: RunReply,
}

/// When sled-agent answers RUN (`PUT .../state` to running), whose work —
/// the Propolis zone's install and boot — takes
/// racksim-sim's `ServiceTimes::run`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum RunReply {
    /// Before omicron #4691 (March 2024): the request is held until the
    /// zone is installed and booted, so a slow install times the caller
    /// out (#3927: 81 s against Nexus's 60 s).
    AfterBoot,
    /// Since omicron #4691: `InstanceManager::ensure_state` hands a
    /// `Running` request to the instance runner and answers at once
    /// (`updated_runtime: None`, omicron b848b6df
    /// `sled-agent/src/instance_manager.rs`: "these may involve a
    /// long-running zone creation, so avoid HTTP request timeouts by
    /// decoupling the response"); the VMM is starting until the boot ends.
    #[default]
    AtOnce,
}

racksim_wire::enum_names!(RunReply {
    AfterBoot => "after-boot",
    AtOnce => "at-once",
});

impl RunReply {
    fn is_at_once(&self) -> bool {
        *self == RunReply::AtOnce
    }
}

impl Era {
    /// The control plane of the era a run stands for: service NAT from the
    /// strategy's [`ServiceNatEra`], instance networking from the start
    /// implementation's [`InstanceEra`] (facts from `DOMAIN.md`).
    ///
    /// | strategy         | era        | Nexus service-zone NAT task |
    /// |------------------|------------|-----------------------------|
    /// | `legacy`         | `legacy`   | `ServiceZoneNatTracker` (omicron #4857), beside the zone-start path |
    /// | `sled-task`      | `proposal` | `ServiceZoneNatTracker`: the proposal kept the legacy control plane |
    /// | `scrimlet-local` | `target`   | off: removed (`1a20a12eb1`) once the scrimlet reconcilers owned service NAT |
    /// | `scrimlet-local-with-zone-start` | `shipped` | off: removed in the same PR that brought the reconcilers (`1a20a12eb1`) |
    ///
    /// | start            | era        | dpd NAT RPW, Nexus V2P task |
    /// |------------------|------------|-----------------------------|
    /// | `inline`         | `pre-rpw`  | off: operations programmed switches and sleds inline |
    /// | `naive`, `saga`  | `current`  | on: dpd pulls versioned rows from Nexus; the V2P task pushes |
    ///
    /// The instance watcher and reincarnation follow the instance era too:
    /// off in the instance-start networking issue's time (they came later, with the instance-update
    /// saga and the auto-restart policy), on in the current one. dpd's NAT
    /// RPW runs wherever anything writes NAT rows for it to pull: the
    /// current instance era, or the service-zone NAT tracker.
    ///
    /// The instance-start networking issue's time had neither dpd's RPW (omicron #3804) nor the
    /// tracker (#4857), so an `inline` start runs neither, whatever the
    /// strategy: its Nexus leaves service NAT to the zone-start path.
    /// A run chooses another era for any one mechanism with
    /// [`EraChoices`].
    pub fn of(service_nat: ServiceNatEra, start: StartImpl) -> Era {
        let instances = match InstanceEra::of(start) {
            InstanceEra::PreRpw => PeriodicTask::Off,
            InstanceEra::Current => PeriodicTask::On,
        };
        let nexus_service_nat = match (service_nat, instances) {
            // The instance-start networking issue's time predates both dpd's NAT RPW (omicron #3804,
            // November 2023) and the tracker (#4857, January 2024).
            (_, PeriodicTask::Off) => NexusServiceNat::Off,
            (ServiceNatEra::Legacy | ServiceNatEra::Proposal, PeriodicTask::On) => {
                NexusServiceNat::InventoryTracker
            }
            // #10961 removed the tracker in the PR that integrated the
            // reconcilers, so today's code runs without it even though the
            // zone-start path is still there.
            (ServiceNatEra::Target | ServiceNatEra::Shipped, PeriodicTask::On) => {
                NexusServiceNat::Off
            }
        };
        let dpd_nat_rpw = match nexus_service_nat {
            NexusServiceNat::InventoryTracker => PeriodicTask::On,
            NexusServiceNat::Off => instances,
        };
        Era {
            nexus_service_nat,
            dpd_nat_rpw,
            nexus_v2p: instances,
            instance_watcher: instances,
            reincarnation: instances,
            // Every preset has today's code for these; a run chooses the
            // code before a fix by naming it ([`EraChoices`]).
            nat_ensure: NatEnsure::LiveOnly,
            dpd_notify: DpdNotify::Logged,
            remove_notify: DpdNotify::Logged,
            nat_changeset: NatChangeset::VersionOrder,
            switch_lookup: SwitchLookup::Dpd,
            nat_conflict: NatConflict::Takeover,
            // Every preset answers RUN as today's sled-agent does, even
            // `inline`, whose era predates #4691: a run chooses the older
            // sled-agent by naming it (docs/fidelity.md, "Service times").
            run_reply: RunReply::AtOnce,
        }
    }
}

/// What the Nexus of this era runs, read where it decides (the
/// simulation's and live mode's Nexus alike, [`crate::serve`]).
impl Era {
    /// The legacy era's service-zone NAT: the inventory collector (every
    /// 600 s) and `ServiceZoneNatTracker` ([`crate::inventory`]).
    pub fn service_zone_nat_task(&self) -> bool {
        self.nexus_service_nat == NexusServiceNat::InventoryTracker
    }

    /// How instance operations' NAT changes reach the switches: rows for
    /// each dpd's NAT RPW to pull, or inline where no dpd pulls.
    pub fn nat_propagation(&self) -> Propagation {
        match self.dpd_nat_rpw {
            PeriodicTask::On => Propagation::Background,
            PeriodicTask::Off => Propagation::Inline,
        }
    }

    /// How instance operations' V2P changes reach the sleds: the V2P task,
    /// or inline without it.
    pub fn v2p_propagation(&self) -> Propagation {
        match self.nexus_v2p {
            PeriodicTask::On => Propagation::Background,
            PeriodicTask::Off => Propagation::Inline,
        }
    }
}

/// One line, e.g. `nexus service-NAT task on (rows from inventory every 30s),
/// dpd NAT RPW on, nexus V2P task on`.
impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let service_nat = match self.nexus_service_nat {
            NexusServiceNat::Off => "off",
            NexusServiceNat::InventoryTracker => "on (rows from inventory every 30s)",
        };
        write!(
            f,
            "nexus service-NAT task {service_nat}, dpd NAT RPW {}, nexus V2P task {}, \
             instance watcher {}, reincarnation {}",
            self.dpd_nat_rpw, self.nexus_v2p, self.instance_watcher, self.reincarnation
        )?;
        // The code before a fix is named only when a run chose it, so the
        // presets' header lines read as they always did.
        before_fix(f, "NAT ensure", self.nat_ensure, 4610)?;
        before_fix(f, "dpd notify", self.dpd_notify, 8914)?;
        before_fix(f, "dpd notify on removal", self.remove_notify, 10389)?;
        before_fix(f, "NAT changeset", self.nat_changeset, 5036)?;
        before_fix(f, "switch lookup", self.switch_lookup, 8914)?;
        before_fix(f, "NAT conflict", self.nat_conflict, 4694)?;
        before_fix(f, "RUN reply", self.run_reply, 4691)?;
        Ok(())
    }
}

/// `, {mechanism} {era} (before omicron #{fix})`, when `era` is not today's
/// (the mechanism's default); nothing when it is.
fn before_fix<T: PartialEq + Default + fmt::Display>(
    f: &mut fmt::Formatter<'_>,
    mechanism: &str,
    era: T,
    fix: u32,
) -> fmt::Result {
    if era == T::default() {
        return Ok(());
    }
    write!(f, ", {mechanism} {era} (before omicron #{fix})")
}
