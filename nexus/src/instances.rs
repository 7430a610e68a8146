//! Instance networking: the control plane's side of the instance-start networking issue.
//!
//! An instance (a guest VM) reaches the outside world through **NAT entries**
//! on every boundary switch — one per external IP, pointing at the sled that
//! runs it — and reaches other instances of its VPC through **V2P mappings**
//! (virtual-to-physical: `(vni, virtual_ip) → (virtual_mac, physical_host)`)
//! on every *other* sled. Both are plain state in somebody else's memory
//! (the switch ASIC, OPTE on each sled): a cold boot wipes them, so whoever
//! starts an instance must be able to put them back.
//!
//! ## Three ways to start an instance ([`StartImpl`])
//!
//! * [`StartImpl::Inline`] — what Nexus did when the instance-start networking issue was filed: NAT and
//!   V2P are programmed when the instance is *created* and removed when it is
//!   *deleted*; `start` only registers and runs a VMM. After stop → cold boot
//!   → start the instance has no connectivity. The accidental workaround
//!   (start, stop, start) works because stopping changes the Propolis
//!   generation, whose handler re-ensures NAT and V2P for the sled the
//!   instance ran on — reproduced in [`InstanceOps::stop`].
//! * [`StartImpl::Naive`] — the obvious fix: call the ensure functions at
//!   start. It has the race the issue describes: T1 starts (reads Stopped),
//!   T2 deletes (removes the mappings, marks Deleted), T1 re-creates the
//!   mappings, then fails to mark Running. The mappings of a deleted instance
//!   leak.
//! * [`StartImpl::Saga`] — the fix that shipped: start is a saga whose first
//!   node, `MARK_AS_STARTING`, is a *conditional* update of the instance
//!   record (Stopped → Starting, on the generation just read, bumping it).
//!   Nothing is programmed before it succeeds, and once it has, delete is
//!   refused (it is only allowed from Stopped/Failed), so T2 can no longer
//!   remove mappings underneath T1 and T1 can no longer program mappings for
//!   an instance T2 has deleted: of the two conditional updates on the same
//!   generation exactly one wins. The same update serialises concurrent
//!   starts, so at most one VMM is ever registered. Each node is recorded in
//!   a durable saga log after it succeeds; a node that fails unwinds the ones
//!   before it, and [`InstanceOps::resume_sagas`] finishes what a crashed
//!   control plane left half done (see "Sagas" below).
//!
//! ## Sagas, by steno's rules
//!
//! The start saga runs as steno (`src/saga_exec.rs`) runs Omicron's
//! `instance_start` saga (`nexus/src/app/sagas/instance_start.rs`):
//!
//! * **The failed node is not undone.** On a node's failure the nodes that
//!   *completed* are undone, latest first; the failed one is taken to have
//!   done nothing. So a REGISTER whose request reached the sled and whose
//!   reply was lost leaves its VMM there, and the instance goes back to
//!   Stopped: upstream's behaviour, shown rather than hidden.
//! * **Each undo runs once**, its end logged before the next begins.
//! * **An undo that fails leaves the saga stuck** ([`SagaState::Stuck`]):
//!   terminal, with the failed undo and the original failure in the log; no
//!   retry, and nothing before it is undone. It is logged as an error event
//!   (in the simulation's trace), and the simulation's checks report it as a
//!   convergence gap of its own.
//! * **Recovery** ([`InstanceOps::resume_sagas`]) resumes only this Nexus's
//!   running and unwinding sagas (the store knows whose each saga is), never
//!   a done, unwound or stuck one. It re-runs the node (or undo) in flight,
//!   so every node and undo action is idempotent.
//! * **The undo actions are upstream's**: MARK_AS_STARTING's puts the record
//!   back to Stopped if it is still at the saga's generation; DPD_ENSURE's
//!   clears the NAT rows and notifies the dpds (a dpd that cannot be told is
//!   only logged); V2P_ENSURE's activates the V2P task; REGISTER's
//!   (`sis_ensure_registered_undo`) destroys the saga's VMM, and treats any
//!   sled-agent error — an unreachable sled included — as "already
//!   unregistered" (upstream's TODO #3238); RUN has none. Only the database
//!   can fail an undo here.
//!
//! Simplified: the log keeps the done and undone nodes of one linear saga
//! rather than steno's node events; upstream retries a saga-log write until
//! it lands, while here a failed write stops the saga where the log says it
//! is, for a resume; recovery runs when the caller asks (the simulated Nexus
//! at its start), not also every 600 s; there is one Nexus, and sagas of a
//! Nexus that is gone are not reassigned to another; upstream's
//! CREATE_VMM_RECORD node (its VMM record) has no counterpart, the VMM id
//! living in the instance record; and the V2P task's activation by
//! V2P_ENSURE's undo waits until MARK_AS_STARTING's undo has run, so that the
//! task reads the record Stopped.
//!
//! ## Delete marks first
//!
//! [`InstanceOps::delete`] marks the record Deleted (conditionally) *before*
//! removing NAT (first) and V2P. Removing first and marking last, as the
//! Omicron delete saga of the time did, leaves a window the other way round:
//! a delete that read Stopped can remove the mappings a start saga has just
//! programmed, then lose its conditional update — leaving a Running instance
//! without connectivity and, worse, without its rows in the NAT table the
//! background task serves. Marking first makes the conditional update the
//! single decision point for both operations; removals that fail afterwards
//! are mopped up by the background tasks, which derive desired state from
//! the records.
//!
//! ## Background tasks (RPWs)
//!
//! The database, not the last request, is the source of truth, as upstream:
//!
//! * instance NAT: operations write versioned rows ([`NatTable`]) and
//!   trigger every boundary dpd (`POST /rpw/nat/trigger`; a failed trigger
//!   is logged, never fatal); each dpd pulls the changes since its own
//!   generation, every 30 s and on trigger, and a restarted dpd pulls from
//!   generation 0 — so a cold-booted or restarted switch repairs itself;
//! * V2P: [`v2p_sync`] is one activation of the V2P background task, run
//!   periodically and activated by V2P_ENSURE and its undo (and by the
//!   naive start and stop), which no longer push to every sled inline.
//!
//! The inline implementation models the instance-start networking issue's time, before either: it
//! programs switches and sleds inline and nothing repairs them.
//!
//! ## Ordering and determinism
//!
//! Every operation issues its requests one at a time in a fixed order —
//! boundary switches sorted by address, then sleds sorted by id — and never
//! spawns or sleeps: the interleavings a simulation explores are exactly
//! those of the awaits, and a seed replays them.

pub mod history;
mod nat_table;
mod ops;
mod rpw;
mod sled_agent;
mod store;
#[cfg(test)]
mod test_store;
#[cfg(test)]
mod tests;
pub mod watcher;

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    str::FromStr,
};

use serde::{Deserialize, Serialize};

use racksim_wire::enum_names;

pub use history::{DpdNotify, NatChangeset, NatConflict, NatEnsure, Propagation, SwitchLookup};
pub use nat_table::{NatEntryView, NatEntryViewExt, NatTable};
pub use ops::{InstanceOps, OpError, ResumedSaga, SwitchZoneDns, NEXUS_SLED_AGENT_TIMEOUT};
pub use racksim_reconciler::dpd::MacAddr;
/// Port of sled-agent on a sled's underlay address.
pub use racksim_wire::SLED_AGENT_PORT;
pub use rpw::{v2p_sync, V2pSledOutcome};
pub use sled_agent::{
    mac_string, SledAgentClient, VirtualNetworkInterfaceHost, VmmInfo, VmmRegistration, VmmState,
    VmmStateRequest, VmmUnregisterResponse, API_VERSION as SLED_AGENT_API_VERSION,
    NO_SUCH_INSTANCE,
};
pub use store::{InstanceStore, NodeFailure, SagaNode, SagaRecord, SagaState, StoreError};
pub use watcher::{AutoRestart, AutoRestartPolicy};

/// The VNI of the one VPC the simulated rack's instances live in.
pub const GUEST_VNI: u32 = 1001;

/// Lifecycle state of an instance record. Displays (and serializes) as
/// `snake_case`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceState {
    Creating,
    Stopped,
    Starting,
    Running,
    Stopping,
    Failed,
    Deleted,
}

impl InstanceState {
    /// Whether a start may begin from this state: Stopped, or Failed (as
    /// upstream, where an operator or reincarnation starts a Failed
    /// instance again).
    pub fn startable(self) -> bool {
        matches!(self, InstanceState::Stopped | InstanceState::Failed)
    }
}

enum_names!(InstanceState {
    Creating => "creating",
    Stopped => "stopped",
    Starting => "starting",
    Running => "running",
    Stopping => "stopping",
    Failed => "failed",
    Deleted => "deleted",
});

/// One external IPv4 address and port range of an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ExternalIp {
    pub ip: Ipv4Addr,
    pub first_port: u16,
    pub last_port: u16,
}

/// One virtual NIC of an instance. The first NIC is the primary: external
/// traffic is NATed to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Nic {
    pub virtual_ip: IpAddr,
    pub mac: MacAddr,
    pub vni: u32,
}

/// A sled as the control plane knows it: sled-agent listens on
/// `[address]:SLED_AGENT_PORT`, and `address` is the physical host of V2P
/// mappings and the internal IP of NAT targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SledRef {
    pub id: u32,
    pub address: Ipv6Addr,
}

/// The control plane's record of an instance.
///
/// `generation` grows with every runtime update; every write is conditional
/// on it ([`InstanceStore::update_if`]), which is what serialises
/// concurrent operations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceRecord {
    pub id: u32,
    pub name: String,
    pub state: InstanceState,
    pub generation: u64,
    pub sled: Option<u32>,
    pub vmm: Option<u64>,
    pub external_ips: Vec<ExternalIp>,
    pub nics: Vec<Nic>,
    /// Whether and when the control plane restarts it after a failure
    /// ([`watcher::reincarnate`]).
    #[serde(default)]
    pub auto_restart: AutoRestart,
}

impl InstanceRecord {
    /// The rule of [`InstanceStore::update_if`], for a store to apply under
    /// its lock: `update` goes through only if the record is at
    /// `expected_generation` (else [`StoreError::Conflict`]), and bumps the
    /// generation.
    pub fn update_if(
        &mut self,
        expected_generation: u64,
        update: RuntimeUpdate,
    ) -> Result<(), StoreError> {
        if self.generation != expected_generation {
            return Err(StoreError::Conflict {
                id: self.id,
                current: self.generation,
            });
        }
        self.state = update.state;
        self.sled = update.sled;
        self.vmm = update.vmm;
        self.generation += 1;
        Ok(())
    }
}

/// The runtime part of an instance record that operations change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeUpdate {
    pub state: InstanceState,
    pub sled: Option<u32>,
    pub vmm: Option<u64>,
}

/// Which implementation of instance start [`InstanceOps`] uses.
/// Displays and parses as `inline`, `naive`, `saga`. (`inline` was called
/// `legacy` until it was renamed so as not to share a name with the
/// service-NAT strategy; the old name is refused with a pointer to the new.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum StartImpl {
    Inline,
    Naive,
    Saga,
}

impl StartImpl {
    /// Every implementation, in a fixed order.
    pub const ALL: [StartImpl; 3] = [StartImpl::Inline, StartImpl::Naive, StartImpl::Saga];
}

enum_names!(StartImpl {
    Inline => "inline",
    Naive => "naive",
    Saga => "saga",
});

/// A string that names no [`StartImpl`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown start implementation {name:?} (expected inline, naive or saga{hint})", name = .0, hint = renamed_hint(.0))]
pub struct ParseStartImplError(pub String);

/// What a reader of an old scenario file needs to know about a start name
/// that was renamed.
fn renamed_hint(name: &str) -> &'static str {
    match name {
        "legacy" => "; the start `legacy` is now called `inline`",
        _ => "",
    }
}

impl FromStr for StartImpl {
    type Err = ParseStartImplError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StartImpl::from_name(s).ok_or_else(|| ParseStartImplError(s.to_string()))
    }
}

/// The NAT entries of `instance` when it runs on the sled at `sled_address`:
/// one per external IP, targeting the primary NIC. An instance without NICs
/// cannot receive external traffic and has none.
pub fn instance_nat_entries(
    instance: &InstanceRecord,
    sled_address: Ipv6Addr,
) -> Vec<racksim_reconciler::nat::NatEntry> {
    let Some(primary) = instance.nics.first() else {
        return Vec::new();
    };
    let mut entries: Vec<_> = instance
        .external_ips
        .iter()
        .map(|ip| racksim_reconciler::nat::NatEntry {
            external_ip: ip.ip,
            first_port: ip.first_port,
            last_port: ip.last_port,
            target: racksim_reconciler::dpd::NatTarget {
                internal_ip: sled_address,
                inner_mac: primary.mac,
                vni: primary.vni,
            },
        })
        .collect();
    entries.sort();
    entries.dedup();
    entries
}

/// The V2P mappings of `instance` when it runs on the sled at
/// `sled_address`: one per NIC, in NIC order.
pub fn instance_v2p_mappings(
    instance: &InstanceRecord,
    sled_address: Ipv6Addr,
) -> Vec<VirtualNetworkInterfaceHost> {
    instance
        .nics
        .iter()
        .map(|nic| VirtualNetworkInterfaceHost {
            virtual_ip: nic.virtual_ip,
            virtual_mac: nic.mac,
            physical_host_ip: sled_address,
            vni: nic.vni,
        })
        .collect()
}
