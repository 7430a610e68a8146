//! [`NexusStore`]: the one implementation of the instance code's
//! [`InstanceStore`] over the control plane's [`Db`](crate::Db). Each
//! method is one transaction, run under the host's lock after the host's
//! round trip, so concurrent operations interleave at transaction
//! boundaries as they would against a real database. Writes are told to
//! the host ([`NexusHost::wrote`]) and traced.

use std::time::Duration;

use racksim_reconciler::{discovery::SwitchSlot, nat::NatEntry};

use crate::instances::{
    InstanceRecord, InstanceStore, NatEntryView, NatTable, RuntimeUpdate, SagaRecord, SledRef,
    StoreError,
};

use crate::{Event, Lane, NexusHost, Write};

/// The database as one Nexus's code sees it.
#[derive(Clone, Debug)]
pub struct NexusStore<H> {
    host: H,
}

impl<H: NexusHost> NexusStore<H> {
    pub fn new(host: H) -> Self {
        NexusStore { host }
    }

    pub fn host(&self) -> &H {
        &self.host
    }
}

impl<H: NexusHost> InstanceStore for NexusStore<H> {
    async fn fetch(&self, id: u32) -> Result<InstanceRecord, StoreError> {
        self.host.round_trip().await?;
        self.host.db(|db| db.fetch(id))
    }

    async fn update_if(
        &self,
        id: u32,
        expected_generation: u64,
        update: RuntimeUpdate,
    ) -> Result<InstanceRecord, StoreError> {
        self.host.round_trip().await?;
        let (before, after) = self
            .host
            .db(|db| db.update_if(id, expected_generation, update))?;
        self.host.wrote(Write::Record {
            before,
            after: &after,
        });
        let sled = after
            .sled
            .map(|s| format!(" on {}", self.host.sled_name(s)))
            .unwrap_or_default();
        self.host.record(
            Event::new(
                Lane::Instance,
                format!(
                    "db: {} {before} -> {}{sled} (generation {})",
                    after.name, after.state, after.generation
                ),
            )
            .field("instance", &after.name)
            .field("state", after.state),
        );
        Ok(after)
    }

    async fn sleds(&self) -> Result<Vec<SledRef>, StoreError> {
        self.host.round_trip().await?;
        Ok(self.host.sleds())
    }

    async fn boundary_switches(&self) -> Result<Vec<SwitchSlot>, StoreError> {
        self.host.round_trip().await?;
        Ok(self.host.boundary_switches())
    }

    async fn next_id(&self) -> Result<u64, StoreError> {
        self.host.round_trip().await?;
        Ok(self.host.db(|db| db.next_id()))
    }

    async fn nat_set_instance(&self, id: u32, entries: Vec<NatEntry>) -> Result<(), StoreError> {
        self.host.sequence_round_trip().await?;
        let what = format!("{}'s NAT row", self.host.instance_name(id));
        // The unique index's refusal ends the statements (the ones before
        // it stay committed, as upstream's separate statements do).
        let mut refused = None;
        nat_statements(&self.host, &what, |nat| {
            match nat.try_begin_set_instance(id, &entries) {
                Ok(v) => v.map(|v| (v, ())),
                Err(e) => {
                    refused = Some(e);
                    None
                }
            }
        })
        .await;
        self.host.wrote(Write::Nat);
        if let Some(e) = refused {
            self.host.record(
                Event::new(
                    Lane::Instance,
                    format!("db: {}: {e}", self.host.instance_name(id)),
                )
                .field("instance", self.host.instance_name(id)),
            );
            return Err(e);
        }
        Ok(())
    }

    async fn allocate_external_ips(
        &self,
        record: &InstanceRecord,
    ) -> Result<InstanceRecord, StoreError> {
        // Without a pool the record has its address from the start: no
        // transaction, so runs without a pool take the time they took.
        if self.host.db(|db| db.ip_pool.is_none()) || !record.external_ips.is_empty() {
            return Ok(record.clone());
        }
        self.host.round_trip().await?;
        let name = self.host.instance_name(record.id);
        let (result, pool) = self
            .host
            .db(|db| (db.allocate_external_ip(record.id), db.ip_pool));
        let pool = pool.map(|p| p.to_string()).unwrap_or_default();
        let text = match &result {
            Ok(r) => {
                let ips: Vec<String> = r.external_ips.iter().map(|ip| ip.ip.to_string()).collect();
                format!(
                    "db: {name} takes external IP {} from pool {pool}",
                    ips.join(", ")
                )
            }
            Err(e) => format!("db: {name} gets no external IP: {e}"),
        };
        self.host
            .record(Event::new(Lane::Instance, text).field("instance", &name));
        result
    }

    async fn release_external_ips(&self, id: u32) -> Result<(), StoreError> {
        if self.host.db(|db| db.ip_pool.is_none()) {
            return Ok(());
        }
        self.host.round_trip().await?;
        let released = self.host.db(|db| db.release_external_ips(id))?;
        if !released.is_empty() {
            let name = self.host.instance_name(id);
            let ips: Vec<String> = released.iter().map(|ip| ip.to_string()).collect();
            self.host.record(
                Event::new(
                    Lane::Instance,
                    format!(
                        "db: {name}'s external IP {} back in the pool",
                        ips.join(", ")
                    ),
                )
                .field("instance", &name),
            );
        }
        Ok(())
    }

    async fn nat_clear_instance(&self, id: u32) -> Result<(), StoreError> {
        self.host.sequence_round_trip().await?;
        let what = format!("{}'s NAT row removal", self.host.instance_name(id));
        nat_statements(&self.host, &what, |nat| {
            nat.begin_set_instance(id, &[]).map(|v| (v, ()))
        })
        .await;
        self.host.wrote(Write::Nat);
        Ok(())
    }

    /// `notify_vmm_updated` after REGISTER: upstream's
    /// `vmm_and_migration_update_runtime`, a transaction run in
    /// `transaction_retry_wrapper` (omicron `nexus/db-queries/src/db/
    /// datastore/vmm.rs`), which retries a retryable error (`40001`) after
    /// a backoff drawn in `0..50 ms`, at most [`RETRY_ATTEMPTS`] attempts in
    /// all, and then fails. The model keeps no VMM record: the statement is
    /// here for its wait and its failure. Simplified: it takes no time of
    /// its own ([`NexusHost::faults`], not a round trip), so a run without
    /// a database fault keeps the timing it had before the statement was
    /// modelled.
    async fn vmm_registered(&self, id: u32, vmm: u64) -> Result<(), StoreError> {
        let mut attempt = 1;
        loop {
            match self.host.faults().await {
                Ok(()) => return Ok(()),
                Err(e) if attempt >= RETRY_ATTEMPTS => {
                    let name = self.host.instance_name(id);
                    self.host.record(
                        Event::new(
                            Lane::Instance,
                            format!(
                                "db: {name}'s VMM {vmm} runtime update failed after {attempt} attempts: {e}"
                            ),
                        )
                        .field("instance", &name),
                    );
                    return Err(e);
                }
                Err(_) => {
                    attempt += 1;
                    tokio::time::sleep(self.host.retry_backoff()).await;
                }
            }
        }
    }

    async fn nat_changeset(
        &self,
        from_gen: i64,
        limit: u32,
    ) -> Result<Vec<NatEntryView>, StoreError> {
        self.host.round_trip().await?;
        Ok(self.host.db(|db| db.nat.changeset(from_gen, limit)))
    }

    async fn note_auto_restart(&self, id: u32, at: Duration) -> Result<(), StoreError> {
        self.host.round_trip().await?;
        // Not read by the simulation's checks: the host need not hear.
        self.host.db(|db| db.note_auto_restart(id, at))
    }

    async fn instances(&self) -> Result<Vec<InstanceRecord>, StoreError> {
        self.host.round_trip().await?;
        Ok(self.host.db(|db| {
            db.instances
                .values()
                .map(|r| InstanceRecord::clone(r))
                .collect()
        }))
    }

    async fn saga_create(&self, saga: &SagaRecord) -> Result<(), StoreError> {
        self.host.round_trip().await?;
        let sec = self.host.name().to_string();
        self.host.db(|db| db.saga_create(saga, &sec));
        let (name, sled) = (
            self.host.instance_name(saga.instance),
            self.host.sled_name(saga.sled),
        );
        self.host.record(
            Event::new(
                Lane::Saga,
                format!("saga {}: start {name} on {sled}: created", saga.id),
            )
            .field("saga", saga.id)
            .field("instance", &name),
        );
        Ok(())
    }

    /// Retried until it lands, as upstream's saga log writes are
    /// (`SecStore::record_event` and `saga_update` in omicron
    /// `nexus/db-queries/src/db/sec_store.rs`: `backoff_saga_operation`
    /// "retries forever" on `retry_policy_internal_service`, 250 ms
    /// growing ×1.5 to at most 3 min). Simplified: the backoff's 50 %
    /// randomisation is left out.
    async fn saga_update(&self, saga: &SagaRecord) -> Result<(), StoreError> {
        let mut backoff = SAGA_LOG_BACKOFF_INITIAL;
        while let Err(e) = self.host.round_trip().await {
            self.host.record(
                Event::new(
                    Lane::Saga,
                    format!(
                        "saga {}: log write failed ({e}); retrying in {}",
                        saga.id,
                        fmt_window(backoff)
                    ),
                )
                .field("saga", saga.id)
                .field("instance", self.host.instance_name(saga.instance)),
            );
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 3 / 2).min(SAGA_LOG_BACKOFF_MAX);
        }
        let before = self.host.db(|db| db.sagas.insert(saga.id, saga.clone()));
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
                text = self.host.names(&text);
            }
            let mut event = Event::new(Lane::Saga, text)
                .field("saga", saga.id)
                .field("instance", self.host.instance_name(saga.instance));
            if changed {
                // The HTML report marks a stuck saga by this field.
                event = event.field("state", saga.state.name());
            }
            self.host.record(event);
        }
        Ok(())
    }

    /// Only this Nexus's sagas: as upstream, a Nexus recovers the sagas
    /// whose executor it is, so two Nexus never run one saga; a saga whose
    /// Nexus is gone waits for it to return. Simplified: upstream reassigns
    /// the sagas of an expunged Nexus; here they wait until a Nexus of the
    /// same name runs again.
    async fn sagas_unfinished(&self) -> Result<Vec<SagaRecord>, StoreError> {
        self.host.round_trip().await?;
        let sec = self.host.name().to_string();
        Ok(self.host.db(|db| db.sagas_unfinished(&sec)))
    }
}

/// How many attempts upstream's `RetryHelper` makes of a retryable
/// transaction (omicron `nexus/db-queries/src/transaction_retry.rs`,
/// `MAX_RETRY_ATTEMPTS`).
pub const RETRY_ATTEMPTS: u32 = 10;
/// The widest wait between two attempts (`MAX_RETRY_BACKOFF`; the wait is
/// uniform below it).
pub const RETRY_BACKOFF_MAX: Duration = Duration::from_millis(50);
/// The saga log's first retry interval (`retry_policy_internal_service`).
pub const SAGA_LOG_BACKOFF_INITIAL: Duration = Duration::from_millis(250);
/// Its longest.
pub const SAGA_LOG_BACKOFF_MAX: Duration = Duration::from_secs(180);

/// Runs NAT statements one after another until `next` begins none, and
/// returns what each statement that changed a row reported. Each is one
/// implicit transaction, as upstream's (`ensure_nat_entry`, `nat_delete`):
/// `next` draws its version from the sequence at once
/// ([`NatTable::begin_set_instance`]) — the caller's round trip was the
/// sequence's ([`NexusHost::sequence_round_trip`]), which a stall does not
/// hold — and its write then goes to the table's range. With no stall in
/// progress it commits in the same step, and nothing is traced. While the
/// database stalls ([`NexusHost::stalled`]) the write waits for the stall
/// to end, its version drawn and invisible to readers, and commits after
/// it ([`NatTable::commit`]): a reader released before it reads past the
/// row. If the caller's future is dropped meanwhile (a crash), the
/// statement never wrote: its version is burnt ([`NatTable::abort`]).
///
/// [`NatTable::begin_set_instance`]: crate::instances::NatTable::begin_set_instance
/// [`NatTable::commit`]: crate::instances::NatTable::commit
/// [`NatTable::abort`]: crate::instances::NatTable::abort
pub async fn nat_statements<H: NexusHost, T>(
    host: &H,
    what: &str,
    mut next: impl FnMut(&mut NatTable) -> Option<(i64, T)>,
) -> Vec<T> {
    let mut out = Vec::new();
    while let Some((version, t)) = host.db(|db| next(&mut db.nat)) {
        if !host.stalled() {
            if host.db(|db| db.nat.commit(version)) {
                out.push(t);
            }
            continue;
        }
        host.record(
            Event::new(
                Lane::Instance,
                format!(
                    "db: {what} drew NAT version {version}; its write waits for the stalled range (invisible to readers)"
                ),
            )
            .field("nat_version", version),
        );
        let pending = Pending {
            host: host.clone(),
            version: Some(version),
        };
        host.stall().await;
        let text = if pending.commit() {
            out.push(t);
            host.wrote(Write::Nat);
            format!("db: {what} at NAT version {version} committed (visible)")
        } else {
            format!(
                "db: {what} at NAT version {version} met a newer write of the row: retried, nothing left to do (version {version} unused)"
            )
        };
        host.record(Event::new(Lane::Instance, text).field("nat_version", version));
    }
    out
}

/// `1.234ms`, `250µs`.
pub(crate) fn fmt_window(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.3}s", d.as_secs_f64())
    } else if d >= Duration::from_millis(1) {
        format!("{:.3}ms", d.as_secs_f64() * 1000.0)
    } else {
        format!("{}µs", d.as_micros())
    }
}
/// A statement between its `nextval` and its write: aborted if dropped.
struct Pending<H: NexusHost> {
    host: H,
    version: Option<i64>,
}

impl<H: NexusHost> Pending<H> {
    fn commit(mut self) -> bool {
        self.version
            .take()
            .is_some_and(|v| self.host.db(|db| db.nat.commit(v)))
    }
}

impl<H: NexusHost> Drop for Pending<H> {
    fn drop(&mut self) {
        if let Some(v) = self.version.take() {
            self.host.db(|db| db.nat.abort(v));
        }
    }
}

#[cfg(test)]
mod tests;
