//! Instance operations of the control plane: create, start (three ways),
//! stop, delete, and saga recovery.
//!
//! See the [module documentation](super) for why there are three start
//! implementations and why the saga's conditional `MARK_AS_STARTING` closes
//! the instance-start networking issue's start/delete race.
//!
//! One [`InstanceOps`], three files, one concept each:
//!
//! * here, the operations as an API caller sees them — what each refuses,
//!   in which order it writes the record and acts, and the lookups every
//!   step shares;
//! * [`saga`], the start saga: its nodes, its log, its unwind and its
//!   recovery after a crash, which follow steno's rules and would drown
//!   the operations around them;
//! * [`networking`], ensuring and removing an instance's NAT entries and
//!   V2P mappings, the one place where the start implementations' eras
//!   differ in how they reach switches and sleds.

use std::{net::SocketAddr, sync::Arc};

use serde::Serialize;
use tokio::sync::Notify;

use super::{
    DpdNotify, InstanceRecord, InstanceState, InstanceStore, NodeFailure, Propagation,
    RuntimeUpdate, SledAgentClient, SledRef, StartImpl, StoreError, SwitchLookup, VmmState,
    SLED_AGENT_PORT,
};
use racksim_reconciler::{
    discovery::{SwitchSlot, SwitchZoneResolver},
    dpd::DpdClient,
    http::{ClientError, Connector, HttpClient},
};

mod networking;
mod saga;
mod switches;

pub use switches::SwitchZoneDns;

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
    /// stuck for good ([`SagaState::Stuck`](super::SagaState::Stuck)).
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
    /// The record says the instance runs, but names no VMM.
    #[error("instance {0} has no VMM")]
    NoVmm(u32),
    /// A boundary switch whose dpd the switch lookup did not find (its
    /// zone is not in DNS, or did not say which switch it is): Nexus's
    /// "unable to find dendrite client".
    #[error("unable to find dendrite client for {0}")]
    NoDpdClient(SwitchSlot),
}

impl From<ClientError> for OpError {
    fn from(e: ClientError) -> Self {
        OpError::Client(e.to_string())
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
    /// Whether a dpd that cannot be told of new NAT rows fails the step.
    dpd_notify: DpdNotify,
    /// Whether a dpd that cannot be told of removed NAT rows fails the
    /// step (before omicron #10389) or is logged.
    remove_notify: DpdNotify,
    /// How NAT changes reach the switches, and V2P changes the sleds.
    nat: Propagation,
    v2p: Propagation,
    /// Internal DNS, where the switch lookup starts ([`switches`]).
    dns: Option<SwitchZoneDns>,
    /// How the switch zones are told apart ([`SwitchLookup`]).
    switch_lookup: SwitchLookup,
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
            dpd_notify: DpdNotify::default(),
            remove_notify: DpdNotify::default(),
            nat: Propagation::of(imp),
            v2p: Propagation::of(imp),
            dns: None,
            switch_lookup: SwitchLookup::default(),
        }
    }

    /// Operations that find the boundary switches' dpds through `dns`
    /// (without it, every lookup of the switches fails, as Nexus's does
    /// when internal DNS cannot be read).
    pub fn with_switch_zones<R: SwitchZoneResolver>(mut self, dns: R) -> Self {
        self.dns = Some(SwitchZoneDns::new(dns));
        self
    }

    /// Operations whose switch lookup is `lookup`'s era's.
    pub fn with_switch_lookup(mut self, lookup: SwitchLookup) -> Self {
        self.switch_lookup = lookup;
        self
    }

    /// Operations whose NAT changes reach the switches by `nat` and whose
    /// V2P changes reach the sleds by `v2p` (by default, what the start
    /// implementation's era did: [`Propagation::of`]).
    pub fn with_propagation(mut self, nat: Propagation, v2p: Propagation) -> Self {
        self.nat = nat;
        self.v2p = v2p;
        self
    }

    /// Operations whose NAT ensure treats a dpd that cannot be told as
    /// `notify`'s era did ([`DpdNotify`]).
    pub fn with_dpd_notify(mut self, notify: DpdNotify) -> Self {
        self.dpd_notify = notify;
        self
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

    /// Operations whose NAT removals treat a dpd that cannot be told as
    /// `notify`'s era did: `Fatal` is `instance_delete_dpd_config` before
    /// omicron #10389, which tried every dpd and returned the first error.
    pub fn with_remove_notify(mut self, notify: DpdNotify) -> Self {
        self.remove_notify = notify;
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
    /// * inline: ensure NAT and V2P ("mappings made at create"), register
    ///   and run a VMM, mark Running (conditional on the fetched generation).
    /// * naive / saga: mark Stopped, then [`InstanceOps::start`].
    pub async fn create(&self, id: u32, sled: u32) -> Result<InstanceRecord, OpError> {
        let record = self.store.fetch(id).await?;
        if record.state != InstanceState::Creating {
            return Err(refused(&record, "create"));
        }
        // Its external IP comes from the pool at create, as in upstream's
        // create saga (a store whose records have theirs from the start
        // does nothing here); an exhausted pool fails the create, and the
        // instance stays Creating.
        let record = self.store.allocate_external_ips(&record).await?;
        let sled_ref = self.sled(sled).await?;
        match self.imp {
            StartImpl::Inline => {
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
            StartImpl::Inline => self.start_unprotected(id, sled, false).await,
            StartImpl::Naive => self.start_unprotected(id, sled, true).await,
            StartImpl::Saga => self.start_saga(id, sled).await,
        }
    }

    /// Inline (`ensure == false`: no NAT, no V2P — the instance-start networking issue's bug) and naive
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

    /// Stop a Running instance.
    ///
    /// * inline / naive: destroy the VMM, mark Stopped, then — as Nexus's
    ///   Propolis-generation-change handler did — ensure NAT and V2P for the
    ///   sled the instance ran on. That is why the instance-start networking issue's start/stop/start
    ///   workaround works: under inline the mappings are kept while
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
        // Upstream's stop asks for the instance's active VMM by its
        // propolis id (`instance_request_state` → `vmm_put_state`).
        let vmm = record.vmm.ok_or(OpError::NoVmm(id))?;
        // Naive and saga (today's control plane, with its instance
        // watcher): the record says Stopping before the VMM is destroyed,
        // as upstream's instance is Stopping while its VMM winds down, and
        // forgets the VMM as soon as the sled has destroyed it, as
        // upstream's VMM row is Destroyed once sled-agent says so — before
        // the network clean-up. So the watcher (which watches Running and
        // Stopping records with a VMM) cannot mistake the VMM this stop
        // destroys for one that died, fail the instance and have
        // reincarnation start what the operator stopped (the model did,
        // found by `racksim fuzz`, standard seed 245). Inline keeps seed
        // 002's order: its era had no watcher. Simplified: upstream writes
        // nothing before the sled answers (`instance_request_state` writes
        // `vmm_put_state`'s answer), so a stop whose Nexus dies before the
        // sled hears of it leaves upstream's instance Running, and this
        // record Stopping for good (`docs/fidelity.md`, "Nexus's tasks").
        let record = match self.imp {
            StartImpl::Inline => record,
            StartImpl::Naive | StartImpl::Saga => self.mark_stopping(&record, record.vmm).await?,
        };
        match self
            .sled_agent(&sled_ref)
            .vmm_put_state(vmm, VmmState::Stopped)
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
            StartImpl::Inline | StartImpl::Naive => {
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
    /// If a removal fails (the NAT rows cannot be cleared; for inline, a
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
        // Only now may another instance get its address: upstream's delete
        // saga deallocates the external IP after its dendrite-config node
        // has removed the NAT rows.
        self.store.release_external_ips(id).await?;
        Ok(deleted)
    }

    async fn register_and_run(&self, sled: &SledRef, id: u32, vmm: u64) -> Result<(), OpError> {
        let agent = self.sled_agent(sled);
        agent.vmm_register(vmm, id).await?;
        agent.vmm_put_state(vmm, VmmState::Running).await?;
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
pub(in crate::instances) fn sled_agent_client<C: Connector>(
    connector: &C,
    sled: &SledRef,
) -> SledAgentClient<C> {
    SledAgentClient::new(
        HttpClient::new(
            connector.clone(),
            SocketAddr::new(sled.address.into(), SLED_AGENT_PORT),
        )
        .with_timeouts(
            Some(NEXUS_SLED_AGENT_TIMEOUT),
            Some(NEXUS_SLED_AGENT_TIMEOUT),
        ),
    )
}
