//! The start saga: MARK_AS_STARTING, DPD_ENSURE, V2P_ENSURE, REGISTER and
//! RUN, each logged as it succeeds; a failure unwinds the nodes that
//! completed, latest first; a control plane that restarts resumes what a
//! crash interrupted.
//!
//! Why a saga closes the instance-start networking issue's start/delete race is the [instances
//! module's](crate::instances) story; this file is how the saga runs. It
//! follows steno's rules (which node a resume re-runs, when an undo runs,
//! when a saga is stuck) and omicron's start saga
//! (`nexus/src/app/sagas/instance_start.rs`) for what each node and each
//! undo does, and says where the model simplifies them.

use super::{refused, running, sled_agent_client, InstanceOps, OpError, ResumedSaga, STOPPED};
use crate::instances::{
    InstanceRecord, InstanceState, InstanceStore, NodeFailure, RuntimeUpdate, SagaNode, SagaRecord,
    SagaState, StoreError, VmmState,
};
use racksim_reconciler::http::Connector;

impl<C: Connector, S: InstanceStore> InstanceOps<C, S> {
    #[cfg_attr(
        feature = "mutants",
        racksim_mutants::mutant(StartWithoutConditionalTransition)
    )]
    pub(super) async fn start_saga(&self, id: u32, sled: u32) -> Result<InstanceRecord, OpError> {
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
                    .vmm_register(vmm, saga.instance)
                    .await?;
                // Upstream's `instance_ensure_registered` then records the
                // state the sled answered (`notify_vmm_updated(..).await?`):
                // a database error here fails REGISTER after the sled
                // registered the VMM — and steno does not undo a failed
                // node, so the registration stays (as a lost reply's does).
                self.store.vmm_registered(saga.instance, vmm).await?;
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
                    .vmm_put_state(vmm, VmmState::Running)
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
    /// so it is in the trace) and the undo succeeds. The undo is
    /// upstream's: `instance_ensure_unregistered` → `vmm_unregister` of the
    /// saga's propolis id (`DELETE /vmms/{propolis_id}`), which terminates
    /// the VMM whatever its state and leaves any other VMM of the instance
    /// alone. sled-agent's `ensure_unregistered` succeeds for a VMM it
    /// does not have, so a sled-agent error is a failure to serve
    /// (unreachable, timed out, a 5xx), and none fails this undo. Only the
    /// database can fail it (upstream: the sled-client
    /// lookup, an `Other` error) — which makes the saga stuck.
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
        if let Err(e) = self.sled_agent(&sled).vmm_unregister(vmm).await {
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
}
