//! Ensure and remove: an instance's NAT entries on the boundary switches
//! and its V2P mappings on the other sleds.
//!
//! Every operation that starts, stops, moves or deletes an instance ends
//! with one of these four steps, and they differ only by era
//! ([`Propagation`](crate::instances::Propagation), chosen for NAT and for
//! V2P on its own): today's control plane hands the work to the
//! background tasks, the instance-start networking issue's pushed it
//! inline. By default naive and saga propagate in the background and
//! inline inline; a run may choose otherwise (e.g. saga starts with V2P
//! pushed inline, as between omicron #3873 and #5568). Kept together, the
//! two eras can be read side by side.
//!
//! In the background, as Omicron does today:
//!
//! * *ensure NAT*: write the instance's rows to the versioned NAT table
//!   ([`NatTable`](crate::instances::NatTable)), then trigger every boundary switch's dpd
//!   (`POST /rpw/nat/trigger`) so that it pulls the change now rather than
//!   at its next periodic run. A trigger that fails is logged, not returned
//!   (since omicron #8914; before it, the first failure failed the step:
//!   [`DpdNotify`](crate::instances::DpdNotify)):
//!   the rows are the intent, and dpd pulls them within 30 s anyway.
//! * *remove NAT*: clear the rows (soft-deleted at new versions, so a dpd
//!   pulling from an older generation learns of the removal), then trigger
//!   every boundary dpd likewise.
//! * *ensure V2P* and *remove V2P*: activate the V2P background task
//!   ([`v2p_sync`](crate::instances::v2p_sync)) through the handle given with
//!   [`InstanceOps::with_v2p_task`]. It derives every sled's mappings from
//!   the instance records, so an activation must follow the record change
//!   it is about (stop and unwind activate after writing the record).
//!   Without a handle nothing is activated and the task's periodic run
//!   picks the change up.
//!
//! Only the database write can fail one of these steps; a switch or sled
//! that cannot be reached is the background tasks' to repair.
//!
//! Inline, as in the instance-start networking issue's time, before either task:
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
//!   because the instance's sled is not always known (a inline instance is
//!   stopped with its mappings kept and its sled cleared) and sled-agent
//!   deletes by the whole mapping.
//!
//! The rows inline writes are never pulled in a rack of its time (dpd had
//! no NAT RPW then); they keep the database the same in every
//! implementation. Inline's inline steps visit every switch and sled even
//! after a failure (the others should not be left behind), then fail with
//! every error seen.

use std::{collections::BTreeSet, future::Future};

use super::{InstanceOps, OpError};
use crate::instances::{
    instance_nat_entries, instance_v2p_mappings, DpdNotify, InstanceRecord, InstanceStore,
    Propagation, SledAgentClient, SledRef, SwitchLookup,
};
use racksim_reconciler::{
    dpd::DpdClient,
    http::{ClientError, Connector},
    nat::{create_entry, delete_entry, get_entry, NatEntry},
};

impl<C: Connector, S: InstanceStore> InstanceOps<C, S> {
    pub(super) async fn ensure_nat(
        &self,
        record: &InstanceRecord,
        sled: &SledRef,
    ) -> Result<(), OpError> {
        let entries = instance_nat_entries(record, sled.address);
        self.store
            .nat_set_instance(record.id, entries.clone())
            .await?;
        if self.nat == Propagation::Background {
            return match self.dpd_notify {
                DpdNotify::Logged => self.trigger_dpds(record.id).await,
                DpdNotify::Fatal => self.trigger_dpds_or_fail(record.id).await,
            };
        }
        let entries = &entries;
        self.on_boundary_dpds(|dpd| async move {
            let mut failures = Vec::new();
            for entry in entries {
                if let Err(e) = ensure_nat_entry(&dpd, entry).await {
                    failures.push(e.to_string());
                }
            }
            failures
        })
        .await
    }

    pub(super) async fn remove_nat(&self, record: &InstanceRecord) -> Result<(), OpError> {
        self.store.nat_clear_instance(record.id).await?;
        if self.nat == Propagation::Background {
            return self.notify_removal(record.id).await;
        }
        let keys: BTreeSet<_> = record
            .external_ips
            .iter()
            .map(|ip| (ip.ip, ip.first_port))
            .collect();
        let keys = &keys;
        self.on_boundary_dpds(|dpd| async move {
            let mut failures = Vec::new();
            for &(ip, first_port) in keys {
                match dpd.nat_ipv4_delete(ip, first_port).await {
                    Ok(()) => {}
                    Err(e) if e.status() == Some(404) => {}
                    Err(e) => failures.push(e.to_string()),
                }
            }
            failures
        })
        .await
    }

    /// The inline NAT paths' loop: `each` acts on every boundary switch's
    /// dpd in turn and answers what failed there; a switch the lookup found
    /// no dpd for is a failure too. Fails with all of them once every
    /// switch has been tried.
    async fn on_boundary_dpds<Each: Future<Output = Vec<String>>>(
        &self,
        mut each: impl FnMut(DpdClient<C>) -> Each,
    ) -> Result<(), OpError> {
        let mut failures = Vec::new();
        for (slot, addr) in self.boundary_dpds().await? {
            let Some(addr) = addr else {
                failures.push(OpError::NoDpdClient(slot).to_string());
                continue;
            };
            failures.extend(each(self.dpd(addr)).await);
        }
        client_failures(failures)
    }

    /// Tells every boundary switch's dpd to pull the NAT changes now, as
    /// Nexus's `notify_dendrite_nat_state`: a trigger that fails is logged
    /// (dpd's own periodic pull, or its pull from generation 0 after a
    /// restart, catches up), but a boundary switch the lookup found no dpd
    /// for is an error, returned after every other switch was told. Only
    /// the caller's era decides whether that error fails the step: since
    /// omicron #8914 (ensure) and #10389 (removal) it is logged.
    pub(in crate::instances) async fn trigger_dpds(&self, instance: u32) -> Result<(), OpError> {
        let result = self.notify_dendrite_nat_state(instance, false).await;
        if let Err(e) = &result {
            tracing::warn!(
                instance,
                "error encountered when notifying dendrite: {e}; it will pull the changes on its own"
            );
        }
        Ok(())
    }

    /// `notify_dendrite_nat_state`: for each boundary switch, the dpd the
    /// lookup found is triggered (a failed trigger is logged); a switch
    /// with none is the error returned, after the others (or, with
    /// `fail_fast`, before them: upstream's ensure before omicron #8914
    /// stopped at the first). Today the lookup runs once; before #8914
    /// upstream ran it again for each boundary switch, inside the loop.
    async fn notify_dendrite_nat_state(
        &self,
        instance: u32,
        fail_fast: bool,
    ) -> Result<(), OpError> {
        let boundary = self.boundary_switches().await?;
        let per_switch = self.switch_lookup == SwitchLookup::MgsRetry;
        let mut clients = if per_switch {
            Default::default()
        } else {
            self.dpd_clients().await?
        };
        let mut first = None;
        for slot in boundary {
            if per_switch {
                clients = self.dpd_clients().await?;
            }
            let Some(&addr) = clients.get(&slot) else {
                first.get_or_insert(OpError::NoDpdClient(slot));
                if fail_fast {
                    break;
                }
                continue;
            };
            if let Err(e) = self.dpd(addr).nat_trigger_update().await {
                tracing::warn!(
                    instance,
                    dpd = %addr,
                    error = %e,
                    "failed to notify dpd of instance NAT changes; it will pull them on its own"
                );
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Tells every boundary dpd that `instance`'s rows were removed. Today
    /// (since omicron #10389) an error of the notify is logged, as for an
    /// ensure. Before it, `instance_delete_dpd_config` returned it, so the
    /// stop's update saga (and a delete, and the start saga's DPD_ENSURE
    /// undo) failed while one boundary switch's dpd could not be found
    /// (#10343).
    pub(in crate::instances) async fn notify_removal(&self, instance: u32) -> Result<(), OpError> {
        if self.remove_notify == DpdNotify::Logged {
            return self.trigger_dpds(instance).await;
        }
        self.notify_dendrite_nat_state(instance, false).await
    }

    /// Upstream's ensure before omicron #8914: `instance_ensure_dpd_config`
    /// called the notify with `fail_fast` and `?`, so the first boundary
    /// switch without a dpd failed the step and the switches after it were
    /// not told.
    async fn trigger_dpds_or_fail(&self, instance: u32) -> Result<(), OpError> {
        self.notify_dendrite_nat_state(instance, true).await
    }

    /// Naive and saga: activate the V2P task (it reads the record, so call
    /// this after the record change it should see). Inline: push inline.
    pub(super) async fn ensure_v2p(
        &self,
        record: &InstanceRecord,
        target: &SledRef,
    ) -> Result<(), OpError> {
        if self.v2p == Propagation::Background {
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
    /// inline removes inline.
    pub(super) async fn remove_v2p(&self, record: &InstanceRecord) -> Result<(), OpError> {
        if self.v2p == Propagation::Background {
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

    pub(in crate::instances) fn activate_v2p_task(&self) {
        if let Some(task) = &self.v2p_task {
            task.notify_one();
        }
    }
}

/// Makes one switch hold exactly `entry` at `(ip, first_port)`.
async fn ensure_nat_entry<C: Connector>(
    dpd: &DpdClient<C>,
    entry: &NatEntry,
) -> Result<(), ClientError> {
    match get_entry(dpd, entry).await? {
        Some(target) if target == entry.target => return Ok(()),
        Some(_) => match delete_entry(dpd, entry).await {
            Ok(()) => {}
            Err(e) if e.status() == Some(404) => {}
            Err(e) => return Err(e),
        },
        None => {}
    }
    create_entry(dpd, entry).await
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

/// Several failures of one ensure/remove step as one error.
fn client_failures<E: ToString>(failures: Vec<E>) -> Result<(), OpError> {
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
