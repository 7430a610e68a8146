//! The control plane's database, in memory: instance records with
//! generation-checked (conditional) updates, the instance NAT table with a
//! version, and the saga log. Each method is one transaction, applied under
//! the world's lock after a small simulated round trip, so concurrent
//! operations interleave at transaction boundaries as they would against a
//! real database. The state lives in the world, so it survives Nexus.

use std::{net::SocketAddr, time::Duration};

use racksim_reconciler::{
    instances::{
        InstanceRecord, InstanceState, InstanceStore, NatEntryView, RuntimeUpdate, SagaRecord,
        SledRef, StoreError,
    },
    nat::NatEntry,
    DPD_PORT,
};

use crate::{trace::Kind, world::World};

/// Simulated round trip of one database transaction.
pub const DB_LATENCY: Duration = Duration::from_millis(5);

/// The database as Nexus's code sees it.
#[derive(Clone, Debug)]
pub struct SimStore {
    world: World,
    /// The host Nexus runs on, for trace lines.
    host: String,
}

impl SimStore {
    pub fn new(world: World, host: &str) -> Self {
        SimStore {
            world,
            host: host.to_string(),
        }
    }

    async fn round_trip(&self) {
        tokio::time::sleep(DB_LATENCY).await;
    }
}

fn state_name(s: InstanceState) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{s:?}"))
}

impl InstanceStore for SimStore {
    async fn fetch(&self, id: u32) -> Result<InstanceRecord, StoreError> {
        self.round_trip().await;
        self.world.lock().control_plane.db.fetch(id)
    }

    async fn update_if(
        &self,
        id: u32,
        expected_generation: u64,
        update: RuntimeUpdate,
    ) -> Result<InstanceRecord, StoreError> {
        self.round_trip().await;
        let now = turmoil::sim_elapsed().unwrap_or_default();
        let (before, after) = {
            let mut st = self.world.lock();
            let (before, after) = st
                .control_plane
                .db
                .update_if(id, expected_generation, update)?;
            if after.state == InstanceState::Running {
                if before != InstanceState::Running {
                    st.control_plane.running_since.insert(id, now);
                }
            } else {
                st.control_plane.running_since.remove(&id);
            }
            st.version += 1;
            (before, after)
        };
        let sled = after
            .sled
            .map(|s| format!(" on {}", self.world.sled(s as usize).name))
            .unwrap_or_default();
        self.world.record(
            self.world
                .line(
                    &self.host,
                    Kind::Instance,
                    format!(
                        "db: {} {} -> {}{sled} (generation {})",
                        after.name,
                        state_name(before),
                        state_name(after.state),
                        after.generation
                    ),
                )
                .field("instance", &after.name)
                .field("state", state_name(after.state)),
        );
        Ok(after)
    }

    async fn sleds(&self) -> Result<Vec<SledRef>, StoreError> {
        self.round_trip().await;
        let st = self.world.lock();
        Ok(st
            .sleds
            .specs
            .iter()
            .enumerate()
            .filter(|(i, _)| !st.sleds.retired.contains(i))
            .map(|(i, s)| SledRef {
                id: i as u32,
                address: s.address,
            })
            .collect())
    }

    async fn boundary_switches(&self) -> Result<Vec<SocketAddr>, StoreError> {
        self.round_trip().await;
        let st = self.world.lock();
        Ok(self
            .world
            .rack()
            .switches
            .iter()
            .filter(|s| s.uplinked)
            .filter_map(|s| st.switches.addresses.get(&s.slot))
            .map(|addr| SocketAddr::new((*addr).into(), DPD_PORT))
            .collect())
    }

    async fn next_id(&self) -> Result<u64, StoreError> {
        self.round_trip().await;
        Ok(self.world.lock().control_plane.db.next_id())
    }

    async fn nat_set_instance(&self, id: u32, entries: Vec<NatEntry>) -> Result<(), StoreError> {
        self.round_trip().await;
        let mut st = self.world.lock();
        st.control_plane.db.nat.set_instance(id, &entries);
        // A change of the world: the checks look again now.
        st.version += 1;
        Ok(())
    }

    async fn nat_clear_instance(&self, id: u32) -> Result<(), StoreError> {
        self.round_trip().await;
        let mut st = self.world.lock();
        st.control_plane.db.nat.clear_instance(id);
        st.version += 1;
        Ok(())
    }

    async fn nat_changeset(
        &self,
        from_gen: i64,
        limit: u32,
    ) -> Result<Vec<NatEntryView>, StoreError> {
        self.round_trip().await;
        Ok(self
            .world
            .lock()
            .control_plane
            .db
            .nat
            .changeset(from_gen, limit))
    }

    async fn note_auto_restart(&self, id: u32, at: Duration) -> Result<(), StoreError> {
        self.round_trip().await;
        // Not read by the checks: no version bump needed.
        self.world.lock().control_plane.db.note_auto_restart(id, at)
    }

    async fn instances(&self) -> Result<Vec<InstanceRecord>, StoreError> {
        self.round_trip().await;
        Ok(self
            .world
            .lock()
            .control_plane
            .db
            .instances
            .values()
            .cloned()
            .collect())
    }

    async fn saga_create(&self, saga: &SagaRecord) -> Result<(), StoreError> {
        self.round_trip().await;
        self.world
            .lock()
            .control_plane
            .db
            .saga_create(saga, &self.host);
        let (name, sled) = (
            self.world.instance_name(saga.instance),
            self.world.sled(saga.sled as usize).name,
        );
        self.world.record(
            self.world
                .line(
                    &self.host,
                    Kind::Saga,
                    format!("saga {}: start {name} on {sled}: created", saga.id),
                )
                .field("saga", saga.id)
                .field("instance", &name),
        );
        Ok(())
    }

    async fn saga_update(&self, saga: &SagaRecord) -> Result<(), StoreError> {
        self.round_trip().await;
        let before = self
            .world
            .lock()
            .control_plane
            .db
            .sagas
            .insert(saga.id, saga.clone());
        let mut news: Vec<String> = saga
            .done
            .iter()
            .filter(|n| !before.as_ref().is_some_and(|b| b.done.contains(n)))
            .map(|n| format!("{n} done"))
            .collect();
        news.extend(
            saga.undone
                .iter()
                .filter(|n| !before.as_ref().is_some_and(|b| b.undone.contains(n)))
                .map(|n| format!("{n} undone")),
        );
        let changed = before.as_ref().map(|b| &b.state) != Some(&saga.state);
        if changed {
            // With what failed, for the states after a failure: a stuck
            // saga's line says which undo failed and why.
            news.push(saga.state.to_string());
        }
        if !news.is_empty() {
            let mut text = format!("saga {}: {}", saga.id, news.join(", "));
            if changed {
                // A failure's error may name addresses.
                text = self.world.name_addrs(&text);
            }
            let mut line = self
                .world
                .line(&self.host, Kind::Saga, text)
                .field("saga", saga.id)
                .field("instance", self.world.instance_name(saga.instance));
            if changed {
                // The HTML report marks a stuck saga by this field.
                line = line.field("state", saga.state.name());
            }
            self.world.record(line);
        }
        Ok(())
    }

    /// Only this Nexus's sagas: as upstream, a Nexus recovers the sagas
    /// whose executor it is, so two Nexus never run one saga; a saga whose
    /// Nexus is gone waits for it to return. Simplified: upstream reassigns
    /// the sagas of an expunged Nexus; here the sagas of a Nexus zone that
    /// a config change removed or moved wait until a Nexus runs on that
    /// sled again.
    async fn sagas_unfinished(&self) -> Result<Vec<SagaRecord>, StoreError> {
        self.round_trip().await;
        Ok(self
            .world
            .lock()
            .control_plane
            .db
            .sagas_unfinished(&self.host))
    }
}
