//! Test-only in-memory [`InstanceStore`].
//!
//! Every method yields once before its transaction, so that concurrent
//! operations in one test interleave at store calls as they would against a
//! real database. A test can also *hold* an operation at a chosen point
//! ([`MemStore::hold_at`]) to force one precise interleaving.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard},
};

use tokio::sync::Notify;

use super::{
    InstanceRecord, InstanceStore, NatEntryView, NatTable, RuntimeUpdate, SagaRecord, SledRef,
    StoreError,
};
use racksim_reconciler::nat::NatEntry;

/// Where [`MemStore::hold_at`] can stop an operation (the first call only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HoldPoint {
    /// Before `nat_set_instance` (the first step of "ensure NAT").
    NatSet,
    /// Before `update_if`.
    UpdateIf,
    /// Before `nat_clear_instance` (the first step of "remove NAT").
    NatClear,
}

struct Hold {
    point: HoldPoint,
    reached: Arc<Notify>,
    release: Arc<Notify>,
}

#[derive(Default)]
pub(super) struct MemState {
    pub instances: BTreeMap<u32, InstanceRecord>,
    pub sleds: Vec<SledRef>,
    /// The boundary switches (the fake network's zones say where).
    pub switches: Vec<racksim_reconciler::discovery::SwitchSlot>,
    pub last_id: u64,
    pub nat: NatTable,
    pub sagas: BTreeMap<u64, SagaRecord>,
    /// Every saga record written, in order.
    pub saga_history: Vec<SagaRecord>,
    /// While set, `nat_clear_instance` fails with this message (the
    /// database unreachable): the one undo action a test can make fail.
    pub fail_nat_clear: Option<String>,
    /// While set, `vmm_registered` (REGISTER's `notify_vmm_updated`)
    /// fails with this message.
    pub fail_vmm_registered: Option<String>,
    holds: Vec<Hold>,
}

#[derive(Clone, Default)]
pub(super) struct MemStore {
    state: Arc<Mutex<MemState>>,
}

impl MemStore {
    pub fn lock(&self) -> MutexGuard<'_, MemState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn insert(&self, record: InstanceRecord) {
        self.lock().instances.insert(record.id, record);
    }

    pub fn get(&self, id: u32) -> InstanceRecord {
        self.lock().instances[&id].clone()
    }

    pub fn saga(&self, id: u64) -> SagaRecord {
        self.lock().sagas[&id].clone()
    }

    /// The live rows of the instance NAT table, sorted.
    pub fn nat_rows(&self) -> Vec<NatEntry> {
        self.lock().nat.live()
    }

    /// Holds the first operation that reaches `point` until `release` is
    /// notified; `reached` is notified when it gets there.
    pub fn hold_at(&self, point: HoldPoint) -> (Arc<Notify>, Arc<Notify>) {
        let reached = Arc::new(Notify::new());
        let release = Arc::new(Notify::new());
        self.lock().holds.push(Hold {
            point,
            reached: reached.clone(),
            release: release.clone(),
        });
        (reached, release)
    }

    async fn enter(&self, point: Option<HoldPoint>) {
        tokio::task::yield_now().await;
        let hold = {
            let mut state = self.lock();
            state
                .holds
                .iter()
                .position(|h| Some(h.point) == point)
                .map(|i| state.holds.remove(i))
        };
        if let Some(hold) = hold {
            hold.reached.notify_one();
            hold.release.notified().await;
        }
    }
}

impl InstanceStore for MemStore {
    async fn fetch(&self, id: u32) -> Result<InstanceRecord, StoreError> {
        self.enter(None).await;
        self.lock()
            .instances
            .get(&id)
            .cloned()
            .ok_or(StoreError::NotFound(id))
    }

    async fn update_if(
        &self,
        id: u32,
        expected_generation: u64,
        update: RuntimeUpdate,
    ) -> Result<InstanceRecord, StoreError> {
        self.enter(Some(HoldPoint::UpdateIf)).await;
        let mut state = self.lock();
        let record = state
            .instances
            .get_mut(&id)
            .ok_or(StoreError::NotFound(id))?;
        record.update_if(expected_generation, update)?;
        Ok(record.clone())
    }

    async fn sleds(&self) -> Result<Vec<SledRef>, StoreError> {
        self.enter(None).await;
        Ok(self.lock().sleds.clone())
    }

    async fn boundary_switches(
        &self,
    ) -> Result<Vec<racksim_reconciler::discovery::SwitchSlot>, StoreError> {
        self.enter(None).await;
        Ok(self.lock().switches.clone())
    }

    async fn next_id(&self) -> Result<u64, StoreError> {
        self.enter(None).await;
        let mut state = self.lock();
        state.last_id += 1;
        Ok(state.last_id)
    }

    async fn nat_set_instance(&self, id: u32, entries: Vec<NatEntry>) -> Result<(), StoreError> {
        self.enter(Some(HoldPoint::NatSet)).await;
        // The unique index's refusal (a table in NatConflict::Fatal's era).
        self.lock().nat.try_set_instance(id, &entries)?;
        Ok(())
    }

    async fn nat_clear_instance(&self, id: u32) -> Result<(), StoreError> {
        self.enter(Some(HoldPoint::NatClear)).await;
        let mut state = self.lock();
        if let Some(e) = &state.fail_nat_clear {
            return Err(StoreError::Unavailable(e.clone()));
        }
        state.nat.clear_instance(id);
        Ok(())
    }

    async fn vmm_registered(&self, _id: u32, _vmm: u64) -> Result<(), StoreError> {
        self.enter(None).await;
        match &self.lock().fail_vmm_registered {
            Some(e) => Err(StoreError::Unavailable(e.clone())),
            None => Ok(()),
        }
    }

    async fn nat_changeset(
        &self,
        from_gen: i64,
        limit: u32,
    ) -> Result<Vec<NatEntryView>, StoreError> {
        self.enter(None).await;
        Ok(self.lock().nat.changeset(from_gen, limit))
    }

    async fn note_auto_restart(&self, id: u32, at: std::time::Duration) -> Result<(), StoreError> {
        self.enter(None).await;
        let mut state = self.lock();
        let record = state
            .instances
            .get_mut(&id)
            .ok_or(StoreError::NotFound(id))?;
        record.auto_restart.note_restart(at);
        Ok(())
    }

    async fn instances(&self) -> Result<Vec<InstanceRecord>, StoreError> {
        self.enter(None).await;
        Ok(self.lock().instances.values().cloned().collect())
    }

    async fn saga_create(&self, saga: &SagaRecord) -> Result<(), StoreError> {
        self.enter(None).await;
        let mut state = self.lock();
        if state.sagas.contains_key(&saga.id) {
            return Err(StoreError::Unavailable(format!("saga {} exists", saga.id)));
        }
        state.sagas.insert(saga.id, saga.clone());
        state.saga_history.push(saga.clone());
        Ok(())
    }

    async fn saga_update(&self, saga: &SagaRecord) -> Result<(), StoreError> {
        self.enter(None).await;
        let mut state = self.lock();
        if !state.sagas.contains_key(&saga.id) {
            return Err(StoreError::Unavailable(format!("no saga {}", saga.id)));
        }
        state.sagas.insert(saga.id, saga.clone());
        state.saga_history.push(saga.clone());
        Ok(())
    }

    async fn sagas_unfinished(&self) -> Result<Vec<SagaRecord>, StoreError> {
        self.enter(None).await;
        Ok(self
            .lock()
            .sagas
            .values()
            .filter(|s| s.state.is_unfinished())
            .cloned()
            .collect())
    }
}
