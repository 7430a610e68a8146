//! Instance operations of the control plane: create, start (three ways),
//! stop, delete, and saga recovery.
//!
//! See the [module documentation](super) for why there are three start
//! implementations and why the saga's conditional `MARK_AS_STARTING` closes
//! seed 002's start/delete race.
//!
//! ## Ensure and remove
//!
//! Naive and saga propagate through the background tasks, as Omicron does:
//!
//! * *ensure NAT*: write the instance's rows to the versioned NAT table
//!   ([`super::NatTable`]), then trigger every boundary switch's dpd
//!   (`POST /rpw/nat/trigger`) so that it pulls the change now rather than
//!   at its next periodic run. A trigger that fails is logged, not returned:
//!   the rows are the intent, and dpd pulls them within 30 s anyway.
//! * *remove NAT*: clear the rows (soft-deleted at new versions, so a dpd
//!   pulling from an older generation learns of the removal), then trigger
//!   every boundary dpd likewise.
//! * *ensure V2P* and *remove V2P*: activate the V2P background task
//!   ([`super::v2p_sync`]) through the handle given with
//!   [`InstanceOps::with_v2p_task`]. It derives every sled's mappings from
//!   the instance records, so an activation must follow the record change
//!   it is about (stop and unwind activate after writing the record).
//!   Without a handle nothing is activated and the task's periodic run
//!   picks the change up.
//!
//! Only the database write can fail one of these steps; a switch or sled
//! that cannot be reached is the background tasks' to repair.
//!
//! Legacy models seed 002's time, before either task, and pushes inline:
//!
//! * *ensure NAT*: write the rows, then on every boundary switch, for each
//!   entry, `GET` the entry at `(ip, first_port)`: identical target →
//!   nothing; another target → `DELETE` then `PUT`; none → `PUT`.
//! * *ensure V2P*: `PUT` each NIC's mapping on every sled other than the
//!   target; on the target itself, delete any mapping of those NICs (an
//!   instance never maps itself, and after a move its new sled must lose the
//!   mapping to its old one).
//! * *remove NAT*: clear the rows, then `DELETE` `(ip, first_port)` on every
//!   boundary switch; 404 is success.
//! * *remove V2P*: on every sled, delete every mapping of the instance's
//!   NICs, whatever physical host it names. The mappings are listed first
//!   because the instance's sled is not always known (a legacy instance is
//!   stopped with its mappings kept and its sled cleared) and sled-agent
//!   deletes by the whole mapping.
//!
//! The rows legacy writes are never pulled in a rack of its time (dpd had
//! no NAT RPW then); they keep the database the same in every
//! implementation. Legacy's inline steps visit every switch and sled even
//! after a failure (the others should not be left behind), then fail with
//! every error seen.

use std::{collections::BTreeSet, net::SocketAddr, sync::Arc};

use serde::Serialize;
use tokio::sync::Notify;

use super::{
    instance_nat_entries, instance_v2p_mappings, InstanceRecord, InstanceState, InstanceStore,
    NodeFailure, RuntimeUpdate, SagaNode, SagaRecord, SagaState, SledAgentClient, SledRef,
    StartImpl, StoreError, VmmState, SLED_AGENT_PORT,
};
use crate::{
    dpd::DpdClient,
    http::{ClientError, Connector, HttpClient},
};

/// Why an instance operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum OpError {
    /// The instance is in a state that does not allow the operation.
    #[error("instance {id} is {state}: {op} refused")]
    Refused {
        id: u32,
        state: InstanceState,
        op: &'static str,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A dpd / sled-agent request failed (message).
    #[error("{0}")]
    Client(String),
    /// A start saga failed and every node that had completed was undone
    /// (or, if the message says so, the saga log could not be written and
    /// the rest is left for [`InstanceOps::resume_sagas`]).
    #[error("saga unwound: {0}")]
    Unwound(String),
    /// A start saga failed, and so did one of its undo actions: the saga is
    /// stuck for good ([`SagaState::Stuck`]).
    #[error(
        "saga stuck: undo of {} failed: {} (after {})",
        .undo.node,
        .undo.error,
        .failed
    )]
    Stuck {
        failed: NodeFailure,
        undo: NodeFailure,
    },
    /// The operation names a sled the store does not know.
    #[error("no sled {0}")]
    UnknownSled(u32),
    /// The record says the instance runs, but not where.
    #[error("instance {0} has no sled")]
    NotPlaced(u32),
}

impl From<ClientError> for OpError {
    fn from(e: ClientError) -> Self {
        OpError::Client(e.to_string())
    }
}

/// Several failures of one ensure/remove step as one error.
fn client_failures(failures: Vec<ClientError>) -> Result<(), OpError> {
    if failures.is_empty() {
        Ok(())
    } else {
        Err(OpError::Client(
            failures
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        ))
    }
}

fn refused(record: &InstanceRecord, op: &'static str) -> OpError {
    OpError::Refused {
        id: record.id,
        state: record.state,
        op,
    }
}

/// Only an instance that runs nowhere may be deleted: Stopped, Failed, or
/// still Creating.
#[cfg_attr(feature = "mutants", racksim_mutants::mutant(DeleteWithoutStateCheck))]
fn deletable(state: InstanceState) -> bool {
    matches!(
        state,
        InstanceState::Stopped | InstanceState::Failed | InstanceState::Creating
    )
}

const STOPPED: RuntimeUpdate = RuntimeUpdate {
    state: InstanceState::Stopped,
    sled: None,
    vmm: None,
};

/// One saga id, instance id and the outcome of resuming it.
pub type ResumedSaga = (u64, u32, Result<InstanceRecord, OpError>);

/// Instance operations of the control plane, one implementation per
/// [`StartImpl`].
#[derive(Clone, Debug)]
pub struct InstanceOps<C, S> {
    connector: C,
    store: S,
    imp: StartImpl,
    /// Activates the V2P background task (naive and saga).
    v2p_task: Option<Arc<Notify>>,
}

impl<C: Connector, S: InstanceStore> InstanceOps<C, S> {
    /// Operations with no V2P task to activate: naive and saga then rely
    /// on the task's periodic run to propagate V2P changes.
    pub fn new(connector: C, store: S, imp: StartImpl) -> Self {
        InstanceOps {
            connector,
            store,
            imp,
            v2p_task: None,
        }
    }

    /// Ensure and remove V2P (naive and saga) call `notify_one` on
    /// `activate`; whoever runs the V2P task runs an activation when it is
    /// notified. A notification while an activation is in progress is
    /// kept (one permit), so a change made during a run is seen by the
    /// next one.
    pub fn with_v2p_task(mut self, activate: Arc<Notify>) -> Self {
        self.v2p_task = Some(activate);
        self
    }

    pub fn start_impl(&self) -> StartImpl {
        self.imp
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// Create an instance that already has a record in state Creating, and
    /// start it on `sled`.
    ///
    /// * legacy: ensure NAT and V2P ("mappings made at create"), register
    ///   and run a VMM, mark Running (conditional on the fetched generation).
    /// * naive / saga: mark Stopped, then [`InstanceOps::start`].
    pub async fn create(&self, id: u32, sled: u32) -> Result<InstanceRecord, OpError> {
        let record = self.store.fetch(id).await?;
        if record.state != InstanceState::Creating {
            return Err(refused(&record, "create"));
        }
        let sled_ref = self.sled(sled).await?;
        match self.imp {
            StartImpl::Legacy => {
                self.ensure_nat(&record, &sled_ref).await?;
                self.ensure_v2p(&record, &sled_ref).await?;
                let vmm = self.store.allocate_vmm_id().await?;
                self.register_and_run(&sled_ref, id, vmm).await?;
                Ok(self
                    .store
                    .update_if(id, record.generation, running(sled, vmm))
                    .await?)
            }
            StartImpl::Naive | StartImpl::Saga => {
                self.store.update_if(id, record.generation, STOPPED).await?;
                self.start(id, sled).await
            }
        }
    }

    /// Start a Stopped instance on `sled`; see [`StartImpl`] and the module
    /// documentation for what each implementation does.
    pub async fn start(&self, id: u32, sled: u32) -> Result<InstanceRecord, OpError> {
        match self.imp {
            StartImpl::Legacy => self.start_unprotected(id, sled, false).await,
            StartImpl::Naive => self.start_unprotected(id, sled, true).await,
            StartImpl::Saga => self.start_saga(id, sled).await,
        }
    }

    /// Legacy (`ensure == false`: no NAT, no V2P — seed 002's bug) and naive
    /// (`ensure == true`) start. Both read the record, act, and only then
    /// mark Running on the generation read: nothing stops a concurrent
    /// delete in between, which is the naive implementation's race.
    pub(crate) async fn start_unprotected(
        &self,
        id: u32,
        sled: u32,
        ensure: bool,
    ) -> Result<InstanceRecord, OpError> {
        let record = self.store.fetch(id).await?;
        if !record.state.startable() {
            return Err(refused(&record, "start"));
        }
        let sled_ref = self.sled(sled).await?;
        if ensure {
            self.ensure_nat(&record, &sled_ref).await?;
        }
        let vmm = self.store.allocate_vmm_id().await?;
        self.register_and_run(&sled_ref, id, vmm).await?;
        let running = self
            .store
            .update_if(id, record.generation, running(sled, vmm))
            .await?;
        if ensure {
            // V2P is the task's, which derives it from the records: it is
            // activated once the record says Running, which is what it
            // reads (activated before, it would find the instance Stopped
            // and program nothing until its next period).
            self.ensure_v2p(&running, &sled_ref).await?;
        }
        Ok(running)
    }

    #[cfg_attr(
        feature = "mutants",
        racksim_mutants::mutant(StartWithoutConditionalTransition)
    )]
    async fn start_saga(&self, id: u32, sled: u32) -> Result<InstanceRecord, OpError> {
        // Checked before the saga is logged so that a start refused outright
        // leaves no trace in the log; MARK_AS_STARTING checks again, and its
        // conditional update is what actually decides.
        let record = self.store.fetch(id).await?;
        if !record.state.startable() {
            return Err(refused(&record, "start"));
        }
        self.sled(sled).await?;
        let mut saga = SagaRecord::new(self.store.next_id().await?, id, sled);
        // The VMM this start will create is named before anything happens,
        // as Omicron names the saga's Propolis: MARK_AS_STARTING writes it
        // into the instance record, which is how a re-run of that node
        // (after a crash between the write and its log entry) recognises
        // the write as its own.
        saga.vmm_id = Some(self.store.allocate_vmm_id().await?);
        self.store.saga_create(&saga).await?;
        self.run_saga(saga).await
    }

    /// Stop a Running instance.
    ///
    /// * legacy / naive: destroy the VMM, mark Stopped, then — as Nexus's
    ///   Propolis-generation-change handler did — ensure NAT and V2P for the
    ///   sled the instance ran on. That is why seed 002's start/stop/start
    ///   workaround works: under legacy the mappings are kept while
    ///   stopped. (Under naive, V2P is the task's, which follows the record
    ///   and removes a stopped instance's mappings; its NAT rows stay.)
    /// * saga: destroy the VMM, remove NAT, mark Stopped, then activate the
    ///   V2P task (after the record says Stopped, which is what it reads): a
    ///   stopped instance holds no networking state, and start puts it back.
    pub async fn stop(&self, id: u32) -> Result<InstanceRecord, OpError> {
        let record = self.store.fetch(id).await?;
        if record.state != InstanceState::Running {
            return Err(refused(&record, "stop"));
        }
        let sled_ref = self
            .sled(record.sled.ok_or(OpError::NotPlaced(id))?)
            .await?;
        // Naive and saga (today's control plane, with its instance
        // watcher): the record says Stopping before the VMM is destroyed,
        // as upstream's instance is Stopping while its VMM winds down, and
        // forgets the VMM as soon as the sled has destroyed it, as
        // upstream's VMM row is Destroyed once sled-agent says so — before
        // the network clean-up. So the watcher (which watches Running and
        // Stopping records with a VMM) cannot mistake the VMM this stop
        // destroys for one that died, fail the instance and have
        // reincarnation start what the operator stopped (the model did,
        // found by `racksim fuzz`, standard seed 245). Legacy keeps seed
        // 002's order: its era had no watcher.
        let record = match self.imp {
            StartImpl::Legacy => record,
            StartImpl::Naive | StartImpl::Saga => self.mark_stopping(&record, record.vmm).await?,
        };
        match self
            .sled_agent(&sled_ref)
            .instance_set_state(id, VmmState::Stopped)
            .await
        {
            // Already gone is what we wanted.
            Ok(()) => {}
            Err(e) if e.status() == Some(404) => {}
            Err(e) => {
                // The VMM was not stopped: the instance runs as before.
                if record.state == InstanceState::Stopping {
                    let back = RuntimeUpdate {
                        state: InstanceState::Running,
                        sled: record.sled,
                        vmm: record.vmm,
                    };
                    self.store.update_if(id, record.generation, back).await?;
                }
                return Err(e.into());
            }
        }
        // The VMM is destroyed: the record no longer names it (see above).
        let record = match record.state {
            InstanceState::Stopping => self.mark_stopping(&record, None).await?,
            _ => record,
        };
        match self.imp {
            StartImpl::Legacy | StartImpl::Naive => {
                let stopped = self.store.update_if(id, record.generation, STOPPED).await?;
                self.ensure_nat(&stopped, &sled_ref).await?;
                self.ensure_v2p(&stopped, &sled_ref).await?;
                Ok(stopped)
            }
            StartImpl::Saga => {
                // The VMM is gone: the record must say so whatever a switch
                // or sled does. Removing NAT only clears the rows and
                // triggers the dpds (a failed trigger is logged), and V2P
                // is the task's: nothing here can leave the instance
                // Running without its VMM (a stop that returned early on an
                // unreachable switch once did; found by `racksim fuzz`).
                self.remove_nat(&record).await?;
                let stopped = self.store.update_if(id, record.generation, STOPPED).await?;
                self.remove_v2p(&record).await?;
                Ok(stopped)
            }
        }
    }

    /// The stop's record: Stopping on its sled, naming `vmm` (the VMM
    /// being destroyed, or none once the sled has destroyed it).
    async fn mark_stopping(
        &self,
        record: &InstanceRecord,
        vmm: Option<u64>,
    ) -> Result<InstanceRecord, OpError> {
        let update = RuntimeUpdate {
            state: InstanceState::Stopping,
            sled: record.sled,
            vmm,
        };
        Ok(self
            .store
            .update_if(record.id, record.generation, update)
            .await?)
    }

    /// Delete an instance that is Stopped, Failed or Creating: mark it
    /// Deleted (conditional on the generation read), then remove NAT and
    /// then V2P (see "Ensure and remove" in the module documentation).
    ///
    /// Marking first makes the conditional update the single point where a
    /// delete and a start saga are ordered (see the module documentation).
    /// If a removal fails (the NAT rows cannot be cleared; for legacy, a
    /// switch or sled too) the instance is still Deleted and the error is
    /// returned; with naive and saga the background tasks remove what is
    /// left once the rows are cleared, since a deleted instance has no
    /// desired state.
    pub async fn delete(&self, id: u32) -> Result<InstanceRecord, OpError> {
        let record = self.store.fetch(id).await?;
        if !deletable(record.state) {
            return Err(refused(&record, "delete"));
        }
        let deleted = self
            .store
            .update_if(
                id,
                record.generation,
                RuntimeUpdate {
                    state: InstanceState::Deleted,
                    sled: None,
                    vmm: None,
                },
            )
            .await?;
        let nat = self.remove_nat(&record).await;
        let v2p = self.remove_v2p(&record).await;
        nat.and(v2p)?;
        Ok(deleted)
    }

    /// Saga recovery: resumes each of this Nexus's unfinished sagas, by id.
    /// A running saga re-runs its node in flight (the first one not done —
    /// steno re-runs a node whose start is logged and whose end is not, so
    /// nodes must be idempotent) and goes on; an unwinding one re-runs its
    /// undo in flight and goes on unwinding. Done, unwound and stuck sagas
    /// are never resumed: steno leaves a stuck saga as it is, and Nexus's
    /// recovery only loads sagas in its `RECOVERY_CANDIDATE_STATES`
    /// (`Running`, `Unwinding`; omicron `nexus/db-model/src/saga_types.rs`).
    ///
    /// "This Nexus's": upstream each saga names the SEC (Nexus) that runs
    /// it, and recovery lists only its own (`saga_list_recovery_candidates_batched`
    /// in `nexus/db-queries/src/db/datastore/saga.rs`), so two Nexus never
    /// run one saga. Here that filter is the store's
    /// ([`InstanceStore::sagas_unfinished`]): the simulation's database
    /// keys each saga by the host of the Nexus zone that created it. The
    /// model runs one Nexus at a time (one implementation, usually one
    /// zone), and it does not reassign an expunged Nexus's sagas to
    /// another, as upstream does.
    ///
    /// Simplified: upstream also runs recovery periodically (every 600 s);
    /// here the caller decides when (the simulated Nexus, at its start).
    ///
    /// If the saga log cannot be read this returns an empty list; use
    /// [`InstanceOps::try_resume_sagas`] to see that error.
    pub async fn resume_sagas(&self) -> Vec<ResumedSaga> {
        self.try_resume_sagas().await.unwrap_or_default()
    }

    /// [`InstanceOps::resume_sagas`], failing if the saga log cannot be read.
    pub async fn try_resume_sagas(&self) -> Result<Vec<ResumedSaga>, StoreError> {
        let mut sagas = self.store.sagas_unfinished().await?;
        sagas.sort_by_key(|s| s.id);
        let mut outcomes = Vec::with_capacity(sagas.len());
        for saga in sagas {
            let (id, instance) = (saga.id, saga.instance);
            let outcome = match saga.state {
                SagaState::Running => self.run_saga(saga).await,
                SagaState::Unwinding { .. } => self.unwind(saga).await,
                // Terminal (a store that returns them anyway): a stuck saga
                // in particular must not be revived.
                SagaState::Done | SagaState::Unwound { .. } | SagaState::Stuck { .. } => continue,
            };
            outcomes.push((id, instance, outcome));
        }
        Ok(outcomes)
    }

    // ---- the saga ----

    /// Runs `saga` forward from its first node not done; on a node's
    /// failure, unwinds it ([`Self::fail_saga`]).
    ///
    /// Each node is recorded in the log *after* it succeeds. If recording
    /// fails, the saga neither goes on nor unwinds (undoing needs the log
    /// too): the error is returned and [`InstanceOps::resume_sagas`] picks it
    /// up from the last recorded node, re-running the unrecorded one, which
    /// is idempotent. (Simplified: Nexus's saga store retries a log write
    /// until it lands — `record_event` in omicron
    /// `nexus/db-queries/src/db/sec_store.rs` — so upstream the saga waits
    /// instead of stopping.)
    async fn run_saga(&self, mut saga: SagaRecord) -> Result<InstanceRecord, OpError> {
        let mut last = None;
        while let Some(node) = saga.next_node() {
            match self.saga_node(&mut saga, node).await {
                Ok(record) => {
                    tracing::debug!(saga = saga.id, instance = saga.instance, node = %node, "saga node done");
                    saga.done.push(node);
                    if saga.next_node().is_none() {
                        saga.state = SagaState::Done;
                    }
                    self.store.saga_update(&saga).await?;
                    last = record;
                }
                Err(e) => {
                    tracing::debug!(saga = saga.id, instance = saga.instance, node = %node, error = %e, "saga node failed; unwinding");
                    let failed = NodeFailure {
                        node,
                        error: e.to_string(),
                    };
                    let unwound = self.fail_saga(saga, failed).await;
                    return match (node, &e, unwound) {
                        // MARK_AS_STARTING refused, or lost its conditional
                        // update to another start or a delete: nothing was
                        // done, nothing is undone, and the caller is told
                        // why (Refused, or the Conflict) rather than that a
                        // saga unwound. A write of ours that only missed its
                        // log entry is not refused: the node recognises it.
                        (
                            SagaNode::MarkAsStarting,
                            OpError::Refused { .. } | OpError::Store(StoreError::Conflict { .. }),
                            Err(OpError::Unwound(_)),
                        ) => Err(e),
                        (_, _, outcome) => outcome,
                    };
                }
            }
        }
        match last {
            Some(record) => Ok(record),
            // Resumed with every node already done.
            None => Ok(self.store.fetch(saga.instance).await?),
        }
    }

    /// One node. Returns the instance record when the node wrote it.
    async fn saga_node(
        &self,
        saga: &mut SagaRecord,
        node: SagaNode,
    ) -> Result<Option<InstanceRecord>, OpError> {
        match node {
            SagaNode::MarkAsStarting => {
                let record = self.store.fetch(saga.instance).await?;
                if record.state == InstanceState::Starting
                    && record.sled == Some(saga.sled)
                    && saga.vmm_id.is_some()
                    && record.vmm == saga.vmm_id
                {
                    // This node already ran: the control plane died after
                    // the update and before its log entry. Saga nodes must
                    // be idempotent (the engine re-runs the last one), so
                    // the write is recognised as ours rather than refused,
                    // which would leave the instance Starting for ever.
                    saga.starting_generation = Some(record.generation);
                    return Ok(Some(record));
                }
                if !record.state.startable() {
                    return Err(refused(&record, "start"));
                }
                let starting = self
                    .store
                    .update_if(
                        saga.instance,
                        record.generation,
                        RuntimeUpdate {
                            state: InstanceState::Starting,
                            sled: Some(saga.sled),
                            // The VMM this saga will create (the record's
                            // target VMM while Starting).
                            vmm: saga.vmm_id,
                        },
                    )
                    .await?;
                saga.starting_generation = Some(starting.generation);
                Ok(Some(starting))
            }
            SagaNode::DpdEnsure => {
                let record = self.owned_record(saga).await?;
                let sled = self.sled(saga.sled).await?;
                self.ensure_nat(&record, &sled).await?;
                Ok(None)
            }
            SagaNode::V2pEnsure => {
                let record = self.owned_record(saga).await?;
                let sled = self.sled(saga.sled).await?;
                self.ensure_v2p(&record, &sled).await?;
                Ok(None)
            }
            SagaNode::Register => {
                self.owned_record(saga).await?;
                let sled = self.sled(saga.sled).await?;
                let vmm = match saga.vmm_id {
                    Some(vmm) => vmm,
                    None => {
                        // Logged before registering, so that whoever unwinds
                        // or resumes knows which VMM may exist.
                        let vmm = self.store.allocate_vmm_id().await?;
                        saga.vmm_id = Some(vmm);
                        self.store.saga_update(saga).await?;
                        vmm
                    }
                };
                self.sled_agent(&sled)
                    .instance_register(saga.instance, vmm)
                    .await?;
                Ok(None)
            }
            SagaNode::Run => {
                let vmm = saga.vmm_id.ok_or_else(|| {
                    OpError::Unwound(format!("saga {} reached RUN without a VMM", saga.id))
                })?;
                let record = self.store.fetch(saga.instance).await?;
                if record.state == InstanceState::Running
                    && record.sled == Some(saga.sled)
                    && record.vmm == Some(vmm)
                {
                    // Resumed after a crash between the update and its log
                    // entry.
                    return Ok(Some(record));
                }
                let generation = self.check_owned(saga, &record)?;
                let sled = self.sled(saga.sled).await?;
                self.sled_agent(&sled)
                    .instance_set_state(saga.instance, VmmState::Running)
                    .await?;
                Ok(Some(
                    self.store
                        .update_if(saga.instance, generation, running(saga.sled, vmm))
                        .await?,
                ))
            }
        }
    }

    /// The instance record, provided it is still in the state
    /// MARK_AS_STARTING put it in. Nothing else may write it meanwhile
    /// (Starting refuses start, stop and delete); if something did, the
    /// saga must not act on an instance that is no longer its own.
    async fn owned_record(&self, saga: &SagaRecord) -> Result<InstanceRecord, OpError> {
        let record = self.store.fetch(saga.instance).await?;
        self.check_owned(saga, &record)?;
        Ok(record)
    }

    fn check_owned(&self, saga: &SagaRecord, record: &InstanceRecord) -> Result<u64, OpError> {
        match saga.starting_generation {
            Some(generation)
                if record.generation == generation && record.state == InstanceState::Starting =>
            {
                Ok(generation)
            }
            _ => Err(OpError::Store(StoreError::Conflict {
                id: record.id,
                current: record.generation,
            })),
        }
    }

    /// A node failed: log why, then unwind (or, with nothing to undo, log
    /// the saga unwound at once — one write instead of two, since a resume
    /// of an unwind with nothing left would only log it unwound).
    ///
    /// Any failure of a node's action unwinds, as in steno, whatever the
    /// error: a database error of MARK_AS_STARTING included. (Upstream the
    /// VMM record's undo marks it `SagaUnwound`, which lets a later start
    /// replace a Propolis id such a write left behind; the model has no
    /// separate VMM record, and its store's writes do not fail once made.)
    ///
    /// If the failure cannot be logged the saga stays as the log last said
    /// — running, the failed node in flight — and a resume re-runs that
    /// node (idempotent) instead of unwinding. Upstream the write would be
    /// retried until it landed.
    async fn fail_saga(
        &self,
        mut saga: SagaRecord,
        failed: NodeFailure,
    ) -> Result<InstanceRecord, OpError> {
        saga.state = if saga.next_undo().is_some() {
            SagaState::Unwinding {
                failed: failed.clone(),
            }
        } else {
            SagaState::Unwound {
                failed: failed.clone(),
            }
        };
        if let Err(e) = self.store.saga_update(&saga).await {
            return Err(OpError::Unwound(format!(
                "{failed}; could not log the failure ({e}); left for resume"
            )));
        }
        self.unwind(saga).await
    }

    /// Undoes, latest first, every node that *completed* (`done` and not
    /// yet `undone`), by steno's rules (`SagaExecutor` in steno
    /// `src/saga_exec.rs`):
    ///
    /// * the node whose action failed is not undone: steno treats a failed
    ///   action as one that did nothing (its `UndoMode::ActionFailed`), so
    ///   each action must leave nothing behind when it fails — or leave
    ///   what it leaves for ever. REGISTER whose request reached the sled
    ///   and whose reply was lost leaves a VMM there that nothing in this
    ///   saga removes: upstream's behaviour, kept on purpose;
    /// * each undo action runs once, and its end is logged before the next
    ///   one starts. A resume re-runs only the undo in flight (steno re-runs
    ///   an undo whose start is logged and whose end is not), so undo
    ///   actions are idempotent;
    /// * an undo action that fails makes the saga [`SagaState::Stuck`]:
    ///   nothing is retried and nothing before it is undone. steno marks
    ///   the saga stuck and stops (`saga_stuck`); its result carries the
    ///   undo failure, which Nexus logs as "saga stuck". Here the stuck
    ///   state is logged durably (so recovery skips it) and as an error
    ///   event, and the convergence checks report it as a gap of its own.
    ///
    /// The undo actions follow the start saga's (omicron
    /// `nexus/src/app/sagas/instance_start.rs`); see [`Self::undo_node`].
    ///
    /// Always an error: [`OpError::Unwound`] when every completed node was
    /// undone, [`OpError::Stuck`] when an undo failed, and an `Unwound`
    /// saying what is left for a resume when the log could not be written.
    async fn unwind(&self, mut saga: SagaRecord) -> Result<InstanceRecord, OpError> {
        let failed = match &saga.state {
            SagaState::Unwinding { failed } | SagaState::Unwound { failed } => failed.clone(),
            other => {
                return Err(OpError::Unwound(format!(
                    "saga {} is {other}: nothing to unwind",
                    saga.id
                )))
            }
        };
        // V2P_ENSURE's undo activates the V2P task, which derives every
        // sled's mappings from the instance records: activated while the
        // record still says Starting, it would keep the mappings until its
        // next periodic run. So the activation waits until the undos after
        // it in the unwind (MARK_AS_STARTING's, which puts the record back
        // to Stopped) have run — or the saga is stuck or interrupted. A
        // reordering of a notification only (upstream's undo activates the
        // task in place); if a crash comes in between, the task's periodic
        // run catches up.
        let mut activate_v2p = false;
        let mut stuck = None;
        while let Some(node) = saga.next_undo() {
            tracing::debug!(saga = saga.id, instance = saga.instance, node = %node, "undoing saga node");
            match self.undo_node(&saga, node).await {
                Ok(()) => {
                    activate_v2p |= node == SagaNode::V2pEnsure;
                    saga.undone.push(node);
                    if let Err(e) = self.store.saga_update(&saga).await {
                        if activate_v2p {
                            self.activate_v2p_task();
                        }
                        return Err(OpError::Unwound(format!(
                            "{failed}; unwinding interrupted: could not log the undo of {node} \
                             ({e}); left for resume"
                        )));
                    }
                }
                Err(e) => {
                    stuck = Some(NodeFailure {
                        node,
                        error: e.to_string(),
                    });
                    break;
                }
            }
        }
        if activate_v2p {
            self.activate_v2p_task();
        }
        let Some(undo) = stuck else {
            if !matches!(saga.state, SagaState::Unwound { .. }) {
                saga.state = SagaState::Unwound {
                    failed: failed.clone(),
                };
                if let Err(e) = self.store.saga_update(&saga).await {
                    return Err(OpError::Unwound(format!(
                        "{failed}; unwound, but could not log it ({e})"
                    )));
                }
            }
            return Err(OpError::Unwound(failed.to_string()));
        };
        // An error, not a warning: a stuck saga needs someone to look. It
        // reaches the run's trace as a reconciler line.
        tracing::error!(
            saga = saga.id,
            instance = saga.instance,
            node = %undo.node,
            error = %undo.error,
            failed_node = %failed.node,
            "saga {} stuck: undo of {} failed: {} (after {}); nothing will undo the rest",
            saga.id,
            undo.node,
            undo.error,
            failed
        );
        saga.state = SagaState::Stuck {
            failed: failed.clone(),
            undo: undo.clone(),
        };
        if let Err(e) = self.store.saga_update(&saga).await {
            // Simplified: upstream retries the write until it lands. Here
            // the log still says unwinding, so a resume runs this undo
            // once more — the only way an undo runs twice.
            return Err(OpError::Unwound(format!(
                "{failed}; undo of {undo}; could not log the saga stuck ({e}); left for resume"
            )));
        }
        Err(OpError::Stuck { failed, undo })
    }

    /// The undo action of one completed node, after the start saga's:
    ///
    /// * RUN: none (`sis_ensure_running` has no undo). RUN is the last node,
    ///   so it is never completed in an unwinding saga anyway.
    /// * REGISTER: [`Self::unregister`] (`sis_ensure_registered_undo`).
    /// * V2P_ENSURE: activate the V2P task (`sis_v2p_ensure_undo`);
    ///   deferred by [`Self::unwind`], and it cannot fail.
    /// * DPD_ENSURE: clear the instance's NAT rows and trigger every dpd
    ///   (`sis_dpd_ensure_undo` → `instance_delete_dpd_config`): a dpd that
    ///   cannot be told is only logged, as upstream, so only the database
    ///   can fail it — and then the saga is stuck, as upstream's `?` makes it.
    /// * MARK_AS_STARTING: put the record back to Stopped, conditional on
    ///   the generation the node wrote (`sis_move_to_starting_undo`). A
    ///   record that has moved on is not this saga's to change: success, as
    ///   upstream logs "old generation number" and succeeds. A database
    ///   error fails it.
    ///
    /// Upstream's CREATE_VMM_RECORD (whose undo marks the VMM record
    /// `SagaUnwound`) has no node here: the model keeps the VMM id in the
    /// instance record, which MARK_AS_STARTING's undo clears.
    async fn undo_node(&self, saga: &SagaRecord, node: SagaNode) -> Result<(), OpError> {
        match node {
            SagaNode::Run | SagaNode::V2pEnsure => Ok(()),
            SagaNode::Register => self.unregister(saga).await,
            SagaNode::DpdEnsure => {
                let record = self.store.fetch(saga.instance).await?;
                self.remove_nat(&record).await
            }
            SagaNode::MarkAsStarting => self.undo_mark_as_starting(saga).await,
        }
    }

    /// MARK_AS_STARTING's undo: the record back to Stopped, on the
    /// generation the node wrote (see [`Self::undo_node`]).
    #[cfg_attr(feature = "mutants", racksim_mutants::mutant(SagaSkipsUndo))]
    async fn undo_mark_as_starting(&self, saga: &SagaRecord) -> Result<(), OpError> {
        let Some(generation) = saga.starting_generation else {
            return Ok(());
        };
        match self
            .store
            .update_if(saga.instance, generation, STOPPED)
            .await
        {
            Ok(_) | Err(StoreError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// REGISTER's undo, after `sis_ensure_registered_undo`: make sure the
    /// sled no longer runs the saga's VMM.
    ///
    /// Upstream treats every sled-agent error except "this VMM is gone"
    /// (404 `NO_SUCH_INSTANCE`, for which it marks the VMM Failed and fails
    /// the undo) as "already unregistered", and the undo succeeds — a
    /// sled-agent that cannot be reached included. Its own TODO(#3238)
    /// says this may be "a bit of a stretch": if the sled is only cut off,
    /// the VMM keeps running there while the instance goes back to Stopped.
    /// The same here: any error from the sled-agent is logged (a warning,
    /// so it is in the trace) and the undo succeeds. The model's sled-agent
    /// API has no "VMM gone" error distinct from "not registered" (its 404
    /// on stop), and sled-agent's `ensure_unregistered` succeeds for a VMM
    /// it does not know, so no sled-agent answer fails this undo. Only the
    /// database can fail it (upstream: the sled-client lookup, an `Other`
    /// error) — which makes the saga stuck.
    async fn unregister(&self, saga: &SagaRecord) -> Result<(), OpError> {
        let Some(vmm) = saga.vmm_id else {
            return Ok(());
        };
        let sled = match self.sled(saga.sled).await {
            Ok(sled) => sled,
            // The store no longer lists the sled (the simulation retires a
            // replaced sled). Upstream an expunged sled's record stays, and
            // its sled-agent is unreachable: "already unregistered".
            Err(OpError::UnknownSled(id)) => {
                tracing::warn!(
                    saga = saga.id,
                    instance = saga.instance,
                    vmm,
                    "start saga: sled {id} is gone; treating the VMM as already unregistered \
                     (as upstream: omicron#3238)"
                );
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        if let Err(e) = self.destroy_vmm_if(&sled, saga.instance, vmm).await {
            tracing::warn!(
                saga = saga.id,
                instance = saga.instance,
                vmm,
                sled_agent = %sled_agent_client(&self.connector, &sled).addr(),
                error = %e,
                "start saga: failed to unregister the VMM from its sled; treating it as \
                 already unregistered (as upstream: omicron#3238)"
            );
        }
        Ok(())
    }

    /// Stops the instance's VMM on `sled` if it is `vmm` — a 409 at
    /// registration means another VMM is there, and that one is not ours to
    /// destroy. A VMM already gone (404) is success, as sled-agent's
    /// `ensure_unregistered` of a VMM it does not know.
    async fn destroy_vmm_if(
        &self,
        sled: &SledRef,
        instance: u32,
        vmm: u64,
    ) -> Result<(), ClientError> {
        let agent = self.sled_agent(sled);
        let ours = agent
            .instances()
            .await?
            .iter()
            .any(|v| v.instance_id == instance && v.vmm_id == vmm);
        if ours {
            match agent.instance_set_state(instance, VmmState::Stopped).await {
                Ok(()) => {}
                Err(e) if e.status() == Some(404) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    // ---- ensure / remove ----

    async fn ensure_nat(&self, record: &InstanceRecord, sled: &SledRef) -> Result<(), OpError> {
        let entries = instance_nat_entries(record, sled.address);
        self.store
            .nat_set_instance(record.id, entries.clone())
            .await?;
        if self.imp != StartImpl::Legacy {
            return self.trigger_dpds(record.id).await;
        }
        let mut failures = Vec::new();
        for addr in self.switches().await? {
            let dpd = self.dpd(addr);
            for entry in &entries {
                if let Err(e) = ensure_nat_entry(&dpd, entry).await {
                    failures.push(e);
                }
            }
        }
        client_failures(failures)
    }

    async fn remove_nat(&self, record: &InstanceRecord) -> Result<(), OpError> {
        self.store.nat_clear_instance(record.id).await?;
        if self.imp != StartImpl::Legacy {
            return self.trigger_dpds(record.id).await;
        }
        let keys: BTreeSet<_> = record
            .external_ips
            .iter()
            .map(|ip| (ip.ip, ip.first_port))
            .collect();
        let mut failures = Vec::new();
        for addr in self.switches().await? {
            let dpd = self.dpd(addr);
            for &(ip, first_port) in &keys {
                match dpd.nat_ipv4_delete(ip, first_port).await {
                    Ok(()) => {}
                    Err(e) if e.status() == Some(404) => {}
                    Err(e) => failures.push(e),
                }
            }
        }
        client_failures(failures)
    }

    /// Asks every boundary switch's dpd to pull the NAT changes now. As in
    /// Nexus, a dpd that cannot be told is logged and skipped: the rows are
    /// already written, and its periodic pull (or, after a restart, its
    /// pull from generation 0) catches up. Only the database lookup of the
    /// switches can fail this.
    pub(super) async fn trigger_dpds(&self, instance: u32) -> Result<(), OpError> {
        for addr in self.switches().await? {
            if let Err(e) = self.dpd(addr).nat_trigger_update().await {
                tracing::warn!(
                    instance,
                    dpd = %addr,
                    error = %e,
                    "failed to notify dpd of instance NAT changes; it will pull them on its own"
                );
            }
        }
        Ok(())
    }

    /// Naive and saga: activate the V2P task (it reads the record, so call
    /// this after the record change it should see). Legacy: push inline.
    async fn ensure_v2p(&self, record: &InstanceRecord, target: &SledRef) -> Result<(), OpError> {
        if self.imp != StartImpl::Legacy {
            self.activate_v2p_task();
            return Ok(());
        }
        let mappings = instance_v2p_mappings(record, target.address);
        let mut failures = Vec::new();
        for sled in self.sleds().await? {
            let agent = self.sled_agent(&sled);
            if sled.id == target.id {
                if let Err(e) = remove_nic_mappings(&agent, record).await {
                    failures.push(e);
                }
            } else {
                for m in &mappings {
                    if let Err(e) = agent.v2p_set(m).await {
                        failures.push(e);
                    }
                }
            }
        }
        client_failures(failures)
    }

    /// As [`Self::ensure_v2p`]: naive and saga activate the V2P task,
    /// legacy removes inline.
    async fn remove_v2p(&self, record: &InstanceRecord) -> Result<(), OpError> {
        if self.imp != StartImpl::Legacy {
            self.activate_v2p_task();
            return Ok(());
        }
        let mut failures = Vec::new();
        for sled in self.sleds().await? {
            if let Err(e) = remove_nic_mappings(&self.sled_agent(&sled), record).await {
                failures.push(e);
            }
        }
        client_failures(failures)
    }

    pub(super) fn activate_v2p_task(&self) {
        if let Some(task) = &self.v2p_task {
            task.notify_one();
        }
    }

    async fn register_and_run(&self, sled: &SledRef, id: u32, vmm: u64) -> Result<(), OpError> {
        let agent = self.sled_agent(sled);
        agent.instance_register(id, vmm).await?;
        agent.instance_set_state(id, VmmState::Running).await?;
        Ok(())
    }

    // ---- lookups ----

    async fn sled(&self, id: u32) -> Result<SledRef, OpError> {
        self.store
            .sleds()
            .await?
            .into_iter()
            .find(|s| s.id == id)
            .ok_or(OpError::UnknownSled(id))
    }

    /// Every sled, sorted by id.
    async fn sleds(&self) -> Result<Vec<SledRef>, OpError> {
        let mut sleds = self.store.sleds().await?;
        sleds.sort();
        sleds.dedup();
        Ok(sleds)
    }

    /// The boundary switches' dpd addresses, sorted.
    async fn switches(&self) -> Result<BTreeSet<SocketAddr>, OpError> {
        Ok(self.store.boundary_switches().await?.into_iter().collect())
    }

    fn dpd(&self, addr: SocketAddr) -> DpdClient<C> {
        DpdClient::new(HttpClient::new(self.connector.clone(), addr))
    }

    fn sled_agent(&self, sled: &SledRef) -> SledAgentClient<C> {
        sled_agent_client(&self.connector, sled)
    }
}

fn running(sled: u32, vmm: u64) -> RuntimeUpdate {
    RuntimeUpdate {
        state: InstanceState::Running,
        sled: Some(sled),
        vmm: Some(vmm),
    }
}

/// Timeout of Nexus's requests to a sled-agent: upstream builds every
/// sled-agent client of Nexus (the start saga's, the instance watcher's,
/// the V2P task's) with `nexus_networking::default_reqwest_client_builder`,
/// 60 s to connect and 60 s for the whole request (omicron b848b6df
/// `nexus/networking/src/sled_client.rs`), not progenitor's 15 s.
pub const NEXUS_SLED_AGENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A sled-agent client as Nexus builds one ([`NEXUS_SLED_AGENT_TIMEOUT`]).
pub(super) fn sled_agent_client<C: Connector>(connector: &C, sled: &SledRef) -> SledAgentClient<C> {
    SledAgentClient::new(
        HttpClient::new(
            connector.clone(),
            SocketAddr::new(sled.address.into(), SLED_AGENT_PORT),
        )
        .with_timeout(NEXUS_SLED_AGENT_TIMEOUT),
    )
}

/// Makes one switch hold exactly `entry` at `(ip, first_port)`.
async fn ensure_nat_entry<C: Connector>(
    dpd: &DpdClient<C>,
    entry: &crate::nat::NatEntry,
) -> Result<(), ClientError> {
    match dpd
        .nat_ipv4_get(entry.external_ip, entry.first_port)
        .await?
    {
        Some(target) if target == entry.target => return Ok(()),
        Some(_) => match dpd
            .nat_ipv4_delete(entry.external_ip, entry.first_port)
            .await
        {
            Ok(()) => {}
            Err(e) if e.status() == Some(404) => {}
            Err(e) => return Err(e),
        },
        None => {}
    }
    dpd.nat_ipv4_create(
        entry.external_ip,
        entry.first_port,
        entry.last_port,
        &entry.target,
    )
    .await
}

/// Deletes, on one sled, every mapping of `record`'s NICs (404 is success).
async fn remove_nic_mappings<C: Connector>(
    agent: &SledAgentClient<C>,
    record: &InstanceRecord,
) -> Result<(), ClientError> {
    let mut current = agent.v2p_list().await?;
    current.sort();
    for m in current.iter().filter(|m| {
        record
            .nics
            .iter()
            .any(|nic| nic.vni == m.vni && nic.virtual_ip == m.virtual_ip)
    }) {
        match agent.v2p_del(m).await {
            Ok(()) => {}
            Err(e) if e.status() == Some(404) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
