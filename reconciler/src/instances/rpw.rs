//! Background tasks ("reliable persistent workflows") for instance
//! networking: one activation each; the caller runs them periodically.
//!
//! They make the database the source of truth. Whatever an operation did or
//! failed to do — a start that crashed, a switch that restarted with an
//! empty table, a delete whose removals failed — the next activation
//! converges each switch and sled to what the records say.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    time::Duration,
};

use serde::Serialize;
use tokio::time::Instant;

use super::{
    instance_v2p_mappings, ops::sled_agent_client, InstanceState, InstanceStore, StoreError,
    VirtualNetworkInterfaceHost, GUEST_VNI,
};
use crate::{
    dpd::DpdClient,
    http::{Connector, HttpClient},
    nat::{reconcile_switch, NatReconcileOutcome, Scope},
};

/// Longest time [`InstanceNatSync`] trusts an unchanged `(dpd generation,
/// table version)` pair before reconciling a switch anyway.
///
/// The generation check catches a dpd that restarted *after* pulling from
/// Nexus (its generation drops back to zero), but not one whose generation
/// was already zero — or a table cleared without a restart. A full read of
/// the instance NAT entries every few minutes bounds how long such a loss
/// can go unnoticed, at the cost of a few listing requests.
pub const NAT_FULL_RESYNC_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// What happened on one switch in one activation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum SwitchSyncOutcome {
    /// Neither the switch's NAT generation nor the table version has changed
    /// since the last successful reconciliation.
    UpToDate,
    Reconciled(NatReconcileOutcome),
    /// The switch could not be asked for its generation.
    Failed(String),
}

/// The memo of one switch's last successful reconciliation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SyncMemo {
    dpd_generation: i64,
    table_version: u64,
    at: Instant,
}

/// The instance-NAT background task: per boundary switch, reconciles the
/// guest-VNI entries with the store's instance NAT table, skipping switches
/// whose state is known to match.
///
/// It remembers, per dpd address, the dpd NAT generation (`/rpw/nat/gen`)
/// and the table version of its last *converged* reconciliation. If both
/// are unchanged (and the memo is younger than [`NAT_FULL_RESYNC_INTERVAL`])
/// the switch is skipped; otherwise it is reconciled with
/// [`Scope::Vni`]`(`[`GUEST_VNI`]`)`, so entries of deleted or moved
/// instances are removed too. A switch whose reconciliation did not fully
/// converge is not memoised and is retried next time.
#[derive(Clone, Debug, Default)]
pub struct InstanceNatSync {
    memo: BTreeMap<SocketAddr, SyncMemo>,
}

impl InstanceNatSync {
    pub fn new() -> Self {
        Self::default()
    }

    /// One activation. Fails only if the store cannot be read; switch
    /// failures are in the per-switch outcomes (sorted by address).
    pub async fn activate<C: Connector, S: InstanceStore>(
        &mut self,
        connector: &C,
        store: &S,
    ) -> Result<BTreeMap<SocketAddr, SwitchSyncOutcome>, StoreError> {
        let switches: BTreeSet<SocketAddr> = store.boundary_switches().await?.into_iter().collect();
        let (table_version, rows) = store.nat_all().await?;
        let desired: Vec<_> = rows
            .into_iter()
            .filter(|e| e.target.vni == GUEST_VNI)
            .collect();
        // Forget switches that are no longer boundary switches: if one comes
        // back it must be reconciled from scratch.
        self.memo.retain(|addr, _| switches.contains(addr));

        let mut outcomes = BTreeMap::new();
        for addr in switches {
            let dpd = DpdClient::new(HttpClient::new(connector.clone(), addr));
            let dpd_generation = match dpd.nat_generation().await {
                Ok(g) => g,
                Err(e) => {
                    self.memo.remove(&addr);
                    outcomes.insert(addr, SwitchSyncOutcome::Failed(e.to_string()));
                    continue;
                }
            };
            let now = Instant::now();
            let fresh = self.memo.get(&addr).is_some_and(|m| {
                m.dpd_generation == dpd_generation
                    && m.table_version == table_version
                    && now.duration_since(m.at) < NAT_FULL_RESYNC_INTERVAL
            });
            if fresh {
                outcomes.insert(addr, SwitchSyncOutcome::UpToDate);
                continue;
            }
            let outcome = reconcile_switch(&dpd, &desired, &Scope::Vni(GUEST_VNI)).await;
            if outcome.is_converged() {
                self.memo.insert(
                    addr,
                    SyncMemo {
                        dpd_generation,
                        table_version,
                        at: now,
                    },
                );
            } else {
                self.memo.remove(&addr);
            }
            outcomes.insert(addr, SwitchSyncOutcome::Reconciled(outcome));
        }
        Ok(outcomes)
    }
}

/// What one activation of [`v2p_sync`] did on one sled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct V2pSledOutcome {
    pub unchanged: usize,
    pub removed: usize,
    pub added: usize,
    pub failures: Vec<String>,
}

/// One activation of the V2P background task.
///
/// Desired state per sled: for every instance that is Running (or Starting
/// with a sled), each NIC in [`GUEST_VNI`] mapped to its sled's address — on
/// every sled other than its own. Per sled (sorted by id, independently):
/// list, delete the guest-VNI mappings that are not desired (first, so that
/// a mapping to an instance's old sled is gone before the new one is put),
/// then put the missing ones. A sled whose listing fails is `Err`; other
/// failures are recorded and the rest carries on.
pub async fn v2p_sync<C: Connector, S: InstanceStore>(
    connector: &C,
    store: &S,
) -> Result<BTreeMap<u32, Result<V2pSledOutcome, String>>, StoreError> {
    let sleds: BTreeMap<u32, _> = store
        .sleds()
        .await?
        .into_iter()
        .map(|s| (s.id, s))
        .collect();
    let instances = store.instances().await?;

    // (hosting sled, mapping) for every mapping that should exist somewhere.
    let mut placed: BTreeSet<(u32, VirtualNetworkInterfaceHost)> = BTreeSet::new();
    for instance in &instances {
        let Some(sled_id) = instance.sled else {
            continue;
        };
        if !matches!(
            instance.state,
            InstanceState::Running | InstanceState::Starting
        ) {
            continue;
        }
        // An instance placed on a sled the store does not list cannot be
        // mapped (there is no address to map it to).
        let Some(sled) = sleds.get(&sled_id) else {
            continue;
        };
        for m in instance_v2p_mappings(instance, sled.address) {
            if m.vni == GUEST_VNI {
                placed.insert((sled_id, m));
            }
        }
    }

    let mut outcomes = BTreeMap::new();
    for (&id, sled) in &sleds {
        let desired: BTreeSet<VirtualNetworkInterfaceHost> = placed
            .iter()
            .filter(|(host, _)| *host != id)
            .map(|(_, m)| *m)
            .collect();
        let agent = sled_agent_client(connector, sled);
        let current: BTreeSet<VirtualNetworkInterfaceHost> = match agent.v2p_list().await {
            Ok(list) => list.into_iter().filter(|m| m.vni == GUEST_VNI).collect(),
            Err(e) => {
                outcomes.insert(id, Err(format!("listing V2P mappings: {e}")));
                continue;
            }
        };
        let mut outcome = V2pSledOutcome {
            unchanged: current.intersection(&desired).count(),
            removed: 0,
            added: 0,
            failures: Vec::new(),
        };
        for extra in current.difference(&desired) {
            match agent.v2p_del(extra).await {
                Ok(()) => outcome.removed += 1,
                Err(e) if e.status() == Some(404) => outcome.removed += 1,
                Err(e) => outcome.failures.push(format!("removing {extra}: {e}")),
            }
        }
        for missing in desired.difference(&current) {
            match agent.v2p_set(missing).await {
                Ok(()) => outcome.added += 1,
                Err(e) => outcome.failures.push(format!("adding {missing}: {e}")),
            }
        }
        outcomes.insert(id, Ok(outcome));
    }
    Ok(outcomes)
}
