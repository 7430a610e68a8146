//! What instance operations need from the control plane's database, and the
//! saga log they keep in it.

use std::{fmt, future::Future, net::SocketAddr};

use serde::{Deserialize, Serialize};

use super::{InstanceRecord, RuntimeUpdate, SledRef};
use crate::nat::NatEntry;

/// Why a store operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum StoreError {
    #[error("no instance {0}")]
    NotFound(u32),
    #[error("generation conflict: instance {id} is at generation {current}")]
    Conflict { id: u32, current: u64 },
    #[error("{0}")]
    Unavailable(String),
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

    /// dpd addresses of the boundary (uplinked) switches.
    fn boundary_switches(&self)
        -> impl Future<Output = Result<Vec<SocketAddr>, StoreError>> + Send;

    /// A fresh id from a durable counter, for saga ids (and, by default, VMM
    /// ids). Never returns the same value twice, even across a restart.
    fn next_id(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// A fresh VMM id. Defaults to [`InstanceStore::next_id`] (one counter
    /// for sagas and VMMs); a store with a separate VMM sequence overrides it.
    fn allocate_vmm_id(&self) -> impl Future<Output = Result<u64, StoreError>> + Send {
        self.next_id()
    }

    /// The instance NAT table (what the NAT RPW serves): replace this
    /// instance's rows. Each change bumps the table version.
    fn nat_set_instance(
        &self,
        id: u32,
        entries: Vec<NatEntry>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Remove this instance's rows from the NAT table (bumping the version
    /// if there were any).
    fn nat_clear_instance(&self, id: u32) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// (table version, every current row)
    fn nat_all(&self) -> impl Future<Output = Result<(u64, Vec<NatEntry>), StoreError>> + Send;

    /// Every instance (for the V2P manager).
    fn instances(&self) -> impl Future<Output = Result<Vec<InstanceRecord>, StoreError>> + Send;

    /// Saga log: durable, survives a control-plane crash.
    fn saga_create(&self, saga: &SagaRecord)
        -> impl Future<Output = Result<(), StoreError>> + Send;
    fn saga_update(&self, saga: &SagaRecord)
        -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Sagas in state [`SagaState::Running`] or [`SagaState::Unwinding`].
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

    pub fn as_str(self) -> &'static str {
        match self {
            SagaNode::MarkAsStarting => "MARK_AS_STARTING",
            SagaNode::DpdEnsure => "DPD_ENSURE",
            SagaNode::V2pEnsure => "V2P_ENSURE",
            SagaNode::Register => "REGISTER",
            SagaNode::Run => "RUN",
        }
    }
}

impl fmt::Display for SagaNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a saga is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SagaState {
    /// Going forward; `done` lists the nodes that have succeeded.
    Running,
    /// A node failed; undoing the nodes attempted (those in `done`, and the
    /// first one not in it).
    Unwinding,
    /// Every node succeeded.
    Done,
    /// Fully undone.
    Unwound,
}

/// The durable log of one instance-start saga.
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
}
