//! What instance operations need from the control plane's database
//! ([`InstanceStore`]), and the saga log they keep in it. Its one
//! implementation is [`crate::store::NexusStore`], over [`Db`](crate::Db);
//! the unit tests have an in-memory one (`test_store.rs`).

use std::{fmt, future::Future, net::Ipv4Addr};

use serde::{Deserialize, Serialize};

use racksim_wire::enum_names;

use super::{InstanceRecord, NatEntryView, RuntimeUpdate, SledRef};
use racksim_reconciler::nat::NatEntry;

/// Why a store operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum StoreError {
    #[error("no instance {0}")]
    NotFound(u32),
    #[error("generation conflict: instance {id} is at generation {current}")]
    Conflict { id: u32, current: u64 },
    /// The database did not answer the statement: a transient error
    /// (CockroachDB's retryable `40001` "restart transaction", a broken
    /// connection). Nothing was read or written.
    #[error("{0}")]
    Unavailable(String),
    /// The NAT table's unique index on live rows refused a row: a live
    /// row with this external address and port range has another target
    /// (omicron's `overlapping_nat_entry`; see [`NatTable`](crate::instances::NatTable)). Upstream's
    /// `public_error_from_diesel` makes it a 500.
    #[error(
        "NAT row {ip}/{first_port}-{last_port} refused: a live row with that address and port range has another target (unique index overlapping_nat_entry)"
    )]
    NatConflict {
        ip: Ipv4Addr,
        first_port: u16,
        last_port: u16,
    },
    /// No address of the external-IP pool is free.
    #[error("no free external IP in pool {pool}")]
    PoolExhausted { pool: String },
}

/// The control plane's database, as the instance code needs it. Every method
/// is one transaction.
///
/// Implementations must be cheap to clone (a handle to shared state).
pub trait InstanceStore: Clone + Send + Sync + 'static {
    fn fetch(&self, id: u32) -> impl Future<Output = Result<InstanceRecord, StoreError>> + Send;

    /// Conditional update: applies only if the record is at
    /// `expected_generation` (else [`StoreError::Conflict`]); bumps the
    /// generation; returns the new record.
    fn update_if(
        &self,
        id: u32,
        expected_generation: u64,
        update: RuntimeUpdate,
    ) -> impl Future<Output = Result<InstanceRecord, StoreError>> + Send;

    fn sleds(&self) -> impl Future<Output = Result<Vec<SledRef>, StoreError>> + Send;

    /// The boundary switches: those with an uplink configured (upstream's
    /// `boundary_switches`, from the switch port settings in the database).
    /// Where their dpds are is the switch lookup's to find.
    fn boundary_switches(
        &self,
    ) -> impl Future<Output = Result<Vec<racksim_reconciler::discovery::SwitchSlot>, StoreError>> + Send;

    /// A fresh id from a durable counter, for saga ids (and, by default, VMM
    /// ids). Never returns the same value twice, even across a restart.
    fn next_id(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// A fresh VMM id. Defaults to [`InstanceStore::next_id`] (one counter
    /// for sagas and VMMs); a store with a separate VMM sequence overrides it.
    fn allocate_vmm_id(&self) -> impl Future<Output = Result<u64, StoreError>> + Send {
        self.next_id()
    }

    /// Records the state a sled-agent answered REGISTER with: the start
    /// saga's `notify_vmm_updated` after a successful `vmm_register`
    /// (omicron `nexus/src/app/instance.rs` `instance_ensure_registered`:
    /// `self.notify_vmm_updated(..).await?`). Its failure fails REGISTER
    /// after the sled registered the VMM. A store that keeps no VMM
    /// record (the default) has nothing to write.
    fn vmm_registered(
        &self,
        id: u32,
        vmm: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (id, vmm);
        std::future::ready(Ok(()))
    }

    /// The instance NAT table (a [`NatTable`](crate::instances::NatTable), whose changes dpd pulls):
    /// replace this instance's rows. Each row added or removed takes the
    /// next table version.
    fn nat_set_instance(
        &self,
        id: u32,
        entries: Vec<NatEntry>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Remove this instance's rows from the NAT table (soft-deleted at the
    /// next versions, so a dpd pulling changes learns of the removal).
    fn nat_clear_instance(&self, id: u32) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The changes after version `from_gen`, oldest first, at most `limit`
    /// ([`NatTable::changeset`](crate::instances::NatTable::changeset)): Nexus's `GET /nat/ipv4/changeset/{from_gen}`.
    fn nat_changeset(
        &self,
        from_gen: i64,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<NatEntryView>, StoreError>> + Send;

    /// Instance `record`'s external IP, allocated from the IP pool if it
    /// has none (omicron's instance-create saga,
    /// `sic_allocate_instance_external_ip`): the record with its IPs. A
    /// store without a pool gives every record its IPs when it is
    /// declared, so this returns the record as it is, with no
    /// transaction. Idempotent: a record that has its IP keeps it.
    fn allocate_external_ips(
        &self,
        record: &InstanceRecord,
    ) -> impl Future<Output = Result<InstanceRecord, StoreError>> + Send {
        std::future::ready(Ok(record.clone()))
    }

    /// Return instance `id`'s external IPs to the pool, once its delete
    /// has removed everything else (omicron's instance-delete saga,
    /// `sid_deallocate_external_ip`, after its dendrite-config node). A
    /// store without a pool has nothing to release.
    fn release_external_ips(&self, id: u32) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = id;
        std::future::ready(Ok(()))
    }

    /// Records that reincarnation restarts instance `id` at `at` (the
    /// caller's clock): sets its auto-restart time and counts the restart.
    /// Durable, as upstream's `time_last_auto_restarted`.
    fn note_auto_restart(
        &self,
        id: u32,
        at: std::time::Duration,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Every instance (for the V2P manager).
    fn instances(&self) -> impl Future<Output = Result<Vec<InstanceRecord>, StoreError>> + Send;

    /// Saga log: durable, survives a control-plane crash.
    fn saga_create(&self, saga: &SagaRecord)
        -> impl Future<Output = Result<(), StoreError>> + Send;
    fn saga_update(&self, saga: &SagaRecord)
        -> impl Future<Output = Result<(), StoreError>> + Send;
    /// This Nexus's sagas that are running or unwinding
    /// ([`SagaState::is_unfinished`]); never a done, unwound or stuck one.
    fn sagas_unfinished(&self) -> impl Future<Output = Result<Vec<SagaRecord>, StoreError>> + Send;
}

/// The nodes of the instance-start saga, in execution order.
/// Displays as `MARK_AS_STARTING`, `DPD_ENSURE`, `V2P_ENSURE`, `REGISTER`,
/// `RUN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SagaNode {
    MarkAsStarting,
    DpdEnsure,
    V2pEnsure,
    Register,
    Run,
}

impl SagaNode {
    /// Every node, in execution order.
    pub const ALL: [SagaNode; 5] = [
        SagaNode::MarkAsStarting,
        SagaNode::DpdEnsure,
        SagaNode::V2pEnsure,
        SagaNode::Register,
        SagaNode::Run,
    ];
}

enum_names!(SagaNode {
    MarkAsStarting => "MARK_AS_STARTING",
    DpdEnsure => "DPD_ENSURE",
    V2pEnsure => "V2P_ENSURE",
    Register => "REGISTER",
    Run => "RUN",
});

/// A node and the error it failed with: the action that made a saga
/// unwind, or the undo action that made it stuck. Displays as
/// `REGISTER failed: ...`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFailure {
    pub node: SagaNode,
    pub error: String,
}

impl fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {}", self.node, self.error)
    }
}

/// Where a saga is in its life, by steno's rules (`src/saga_exec.rs` of
/// oxidecomputer/steno): forward until every node is done or one fails;
/// then the nodes that *completed* are undone in reverse, the failed one
/// not (its action failed, so steno treats it as never having happened);
/// an undo action that fails ends the saga for good. `Done`, `Unwound` and
/// `Stuck` are terminal: saga recovery never resumes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SagaState {
    /// Going forward; `done` lists the nodes that have succeeded, and the
    /// first node not in it is the one in flight (a resume re-runs it).
    Running,
    /// `failed`'s action failed; the nodes in `done` and not in `undone`
    /// are being undone, latest first.
    Unwinding { failed: NodeFailure },
    /// Every node succeeded.
    Done,
    /// `failed`'s action failed and every completed node was undone.
    Unwound { failed: NodeFailure },
    /// `failed`'s action failed, and then the undo action of `undo.node`
    /// failed too. steno runs each undo action once and has no way back
    /// from here (its `SagaResult` reports an undo failure; Nexus logs
    /// "saga stuck"): what the saga did and did not undo stays as it is
    /// until someone intervenes. The nodes before `undo.node` in `done`
    /// are not undone either.
    Stuck {
        failed: NodeFailure,
        undo: NodeFailure,
    },
}

impl SagaState {
    /// Running or unwinding: what saga recovery resumes.
    pub fn is_unfinished(&self) -> bool {
        matches!(self, SagaState::Running | SagaState::Unwinding { .. })
    }

    /// One word: `running`, `unwinding`, `done`, `unwound`, `stuck`.
    pub fn name(&self) -> &'static str {
        match self {
            SagaState::Running => "running",
            SagaState::Unwinding { .. } => "unwinding",
            SagaState::Done => "done",
            SagaState::Unwound { .. } => "unwound",
            SagaState::Stuck { .. } => "stuck",
        }
    }
}

/// The name, and for the states that follow a failure, what failed:
/// `unwinding after REGISTER failed: ...`, `stuck: undo of DPD_ENSURE
/// failed: ... (after RUN failed: ...)`.
impl fmt::Display for SagaState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SagaState::Running | SagaState::Done => f.write_str(self.name()),
            SagaState::Unwinding { failed } | SagaState::Unwound { failed } => {
                write!(f, "{} after {failed}", self.name())
            }
            SagaState::Stuck { failed, undo } => {
                write!(f, "stuck: undo of {undo} (after {failed})")
            }
        }
    }
}

/// The durable log of one instance-start saga.
///
/// Simplified from steno's log, which records each node's start, success,
/// failure, undo start and undo finish as events: here the sequence is
/// linear, so `done` (successes, in order), `undone` (undo finishes) and
/// the state carry the same information — the node in flight is the first
/// one not done (or, unwinding, the latest done one not undone).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SagaRecord {
    /// From [`InstanceStore::next_id`].
    pub id: u64,
    pub instance: u32,
    pub sled: u32,
    /// Generation the saga set with MARK_AS_STARTING (None before it ran).
    pub starting_generation: Option<u64>,
    /// Written to the log *before* the VMM is registered, so that an unwind
    /// or a resume after a crash knows which VMM may exist.
    pub vmm_id: Option<u64>,
    pub done: Vec<SagaNode>,
    /// The nodes whose undo action has finished, in the order undone.
    #[serde(default)]
    pub undone: Vec<SagaNode>,
    pub state: SagaState,
}

impl SagaRecord {
    /// A new saga, nothing done yet.
    pub fn new(id: u64, instance: u32, sled: u32) -> Self {
        SagaRecord {
            id,
            instance,
            sled,
            starting_generation: None,
            vmm_id: None,
            done: Vec::new(),
            undone: Vec::new(),
            state: SagaState::Running,
        }
    }

    /// The first node (in execution order) not yet done.
    pub fn next_node(&self) -> Option<SagaNode> {
        SagaNode::ALL.into_iter().find(|n| !self.done.contains(n))
    }

    pub fn is_done(&self, node: SagaNode) -> bool {
        self.done.contains(&node)
    }

    /// The latest completed node not yet undone: the next undo to run.
    pub fn next_undo(&self) -> Option<SagaNode> {
        self.done
            .iter()
            .rev()
            .find(|n| !self.undone.contains(n))
            .copied()
    }
}
