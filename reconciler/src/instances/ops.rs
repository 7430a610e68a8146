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
    RuntimeUpdate, SagaNode, SagaRecord, SagaState, SledAgentClient, SledRef, StartImpl,
    StoreError, VmmState, SLED_AGENT_PORT,
};
use crate::{
    dpd::DpdClient,
    http::{ClientError, Connector, HttpClient},
    mutants::Mutant,
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
    /// A start saga failed and was rolled back (or, if the message says
    /// so, its rollback is incomplete and left for [`InstanceOps::resume_sagas`]).
    #[error("saga unwound: {0}")]
    Unwound(String),
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
            StartImpl::Saga
                if crate::mutants::active(Mutant::StartWithoutConditionalTransition) =>
            {
                self.start_unprotected(id, sled, true).await
            }
            StartImpl::Saga => self.start_saga(id, sled).await,
        }
    }

    /// Legacy (`ensure == false`: no NAT, no V2P — seed 002's bug) and naive
    /// (`ensure == true`) start. Both read the record, act, and only then
    /// mark Running on the generation read: nothing stops a concurrent
    /// delete in between, which is the naive implementation's race.
    async fn start_unprotected(
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
        match self
            .sled_agent(&sled_ref)
            .instance_set_state(id, VmmState::Stopped)
            .await
        {
            // Already gone is what we wanted.
            Ok(()) => {}
            Err(e) if e.status() == Some(404) => {}
            Err(e) => return Err(e.into()),
        }
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
        if !matches!(
            record.state,
            InstanceState::Stopped | InstanceState::Failed | InstanceState::Creating
        ) && !crate::mutants::active(Mutant::DeleteWithoutStateCheck)
        {
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

    /// After a control-plane restart: for each unfinished saga (by id),
    /// resume from the first node not done (nodes are idempotent); a saga
    /// that was unwinding finishes unwinding.
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
                SagaState::Unwinding => {
                    self.unwind(saga, "resumed after a restart".to_string())
                        .await
                }
                // A store that returns finished sagas as unfinished: nothing
                // to do for them.
                SagaState::Done | SagaState::Unwound => continue,
            };
            outcomes.push((id, instance, outcome));
        }
        Ok(outcomes)
    }

    // ---- the saga ----

    /// Runs `saga` forward from its first node not done.
    ///
    /// Each node is recorded in the log *after* it succeeds. If recording
    /// fails, the saga neither goes on nor unwinds (undoing needs the log
    /// too): the error is returned and [`InstanceOps::resume_sagas`] picks it
    /// up from the last recorded node, re-running the unrecorded one, which
    /// is idempotent.
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
                Err(
                    e @ (OpError::Refused { .. } | OpError::Store(StoreError::Conflict { .. })),
                ) if node == SagaNode::MarkAsStarting => {
                    // The instance was not (or is no longer) ours to start:
                    // nothing was done, so the saga is unwound as it
                    // stands, and the caller sees why (Refused, or the
                    // Conflict of losing a race with another start or a
                    // delete). A write of ours that only missed its log
                    // entry is not refused: the node recognises it.
                    saga.state = SagaState::Unwound;
                    self.store.saga_update(&saga).await?;
                    return Err(e);
                }
                // Any other failure of MARK_AS_STARTING (the database
                // unreachable) may or may not have written the record: the
                // saga stays Running, and a resume re-runs the node.
                Err(e) if node == SagaNode::MarkAsStarting => return Err(e),
                Err(e) => {
                    tracing::debug!(saga = saga.id, instance = saga.instance, node = %node, error = %e, "saga node failed; unwinding");
                    return self.unwind(saga, format!("{node} failed: {e}")).await;
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

    /// Records the saga as unwinding, undoes what it attempted, records it
    /// unwound. Always an error: `Unwound(cause)` when the rollback is
    /// complete, and a message saying what is left otherwise (the log still
    /// says Unwinding, so [`InstanceOps::resume_sagas`] finishes it).
    async fn unwind(&self, mut saga: SagaRecord, cause: String) -> Result<InstanceRecord, OpError> {
        saga.state = SagaState::Unwinding;
        if let Err(e) = self.store.saga_update(&saga).await {
            return Err(OpError::Unwound(format!(
                "{cause}; could not log the unwind ({e}); left for resume"
            )));
        }
        let leftovers = match self.undo(&saga).await {
            Ok(leftovers) => leftovers,
            Err(e) => {
                return Err(OpError::Unwound(format!(
                    "{cause}; unwinding incomplete ({e}); left for resume"
                )))
            }
        };
        let message = if leftovers.is_empty() {
            cause
        } else {
            format!(
                "{cause}; left for the background tasks: {}",
                leftovers.join("; ")
            )
        };
        saga.state = SagaState::Unwound;
        if let Err(e) = self.store.saga_update(&saga).await {
            return Err(OpError::Unwound(format!(
                "{message}; unwound, but could not log it ({e})"
            )));
        }
        Err(OpError::Unwound(message))
    }

    /// Undoes, in reverse order, every node the saga attempted: those done,
    /// and the one that failed (it may have half-happened). Each undo is
    /// idempotent.
    ///
    /// Which failures stop the unwind follows from who else can repair
    /// them. NAT and V2P removals are complete once the intent is durable
    /// (the instance's NAT rows cleared, the record back to Stopped): a
    /// switch or sled that cannot be reached now is repaired by the
    /// background tasks (dpd's pull, the V2P task), which remove guest
    /// state no record asks for. Their removals cannot fail on a switch or
    /// sled at all (a failed trigger is only logged), so a dead switch does
    /// not wedge a failed start in Starting; a removal that does report
    /// one (`OpError::Client`) is kept as a leftover rather than stopping
    /// the unwind. A VMM that cannot be destroyed and a store that cannot
    /// be written have no such safety net: they stop the unwind, leaving
    /// the instance Starting — which keeps delete refused while the VMM may
    /// be live — for a later resume.
    ///
    /// V2P_ENSURE's undo activates the V2P task once MARK_AS_STARTING's
    /// undo has put the record back to Stopped: the task reads the record,
    /// and one activated while it still says Starting would keep the
    /// mappings until its next periodic run.
    async fn undo(&self, saga: &SagaRecord) -> Result<Vec<String>, OpError> {
        let mut leftovers = Vec::new();
        let mut attempted = saga.done.clone();
        attempted.extend(saga.next_node());
        attempted.sort();
        let record = self.store.fetch(saga.instance).await?;
        let mut activate_v2p = false;
        for node in attempted.into_iter().rev() {
            tracing::debug!(saga = saga.id, instance = saga.instance, node = %node, "saga node undone");
            match node {
                // RUN's only side effect that outlives a failure is the VMM
                // running, which REGISTER's undo destroys.
                SagaNode::Run => {}
                SagaNode::Register => {
                    if let Some(vmm) = saga.vmm_id {
                        let sled = self.sled(saga.sled).await?;
                        self.destroy_vmm_if(&sled, saga.instance, vmm).await?;
                    }
                }
                SagaNode::V2pEnsure => activate_v2p = true,
                SagaNode::DpdEnsure => match self.remove_nat(&record).await {
                    Ok(()) => {}
                    Err(OpError::Client(e)) => leftovers.push(format!("NAT: {e}")),
                    Err(e) => return Err(e),
                },
                SagaNode::MarkAsStarting => {
                    let Some(generation) = saga.starting_generation else {
                        continue;
                    };
                    if crate::mutants::active(Mutant::SagaSkipsUndo) {
                        continue;
                    }
                    match self
                        .store
                        .update_if(saga.instance, generation, STOPPED)
                        .await
                    {
                        Ok(_) => {}
                        // The record has moved on from what this saga wrote
                        // (already put back by an earlier attempt at this
                        // unwind): not ours to change.
                        Err(StoreError::Conflict { .. }) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        if activate_v2p {
            match self.remove_v2p(&record).await {
                Ok(()) => {}
                Err(OpError::Client(e)) => leftovers.push(format!("V2P: {e}")),
                Err(e) => return Err(e),
            }
        }
        Ok(leftovers)
    }

    /// Stops the instance's VMM on `sled` if it is `vmm` — a 409 at
    /// registration means another VMM is there, and that one is not ours to
    /// destroy.
    async fn destroy_vmm_if(&self, sled: &SledRef, instance: u32, vmm: u64) -> Result<(), OpError> {
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
                Err(e) => return Err(e.into()),
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

pub(super) fn sled_agent_client<C: Connector>(connector: &C, sled: &SledRef) -> SledAgentClient<C> {
    SledAgentClient::new(HttpClient::new(
        connector.clone(),
        SocketAddr::new(sled.address.into(), SLED_AGENT_PORT),
    ))
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
