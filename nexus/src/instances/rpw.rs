//! The V2P background task (an RPW, "reliable persistent workflow"): one
//! activation; the caller runs it periodically and whenever an operation
//! activates it.
//!
//! It makes the database the source of truth. Whatever an operation did or
//! failed to do — a start that crashed, a sled that restarted with no
//! mappings, a delete whose removals failed — the next activation converges
//! each sled to what the records say.
//!
//! Instance NAT has no Nexus-side task: as upstream, Nexus writes versioned
//! rows ([`super::NatTable`]) and triggers each dpd, and dpd pulls the
//! changes since its own generation (every 30 s and on trigger).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{
    instance_v2p_mappings, ops::sled_agent_client, InstanceState, InstanceStore, StoreError,
    VirtualNetworkInterfaceHost, GUEST_VNI,
};
use racksim_reconciler::http::Connector;

/// What one activation of [`v2p_sync`] did on one sled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct V2pSledOutcome {
    pub unchanged: usize,
    pub removed: usize,
    pub added: usize,
    pub failures: Vec<String>,
}

/// One activation of the V2P background task, as omicron's
/// `V2PManager::activate` (b848b6df).
///
/// Desired state: one set for every sled, as upstream's. It holds each
/// guest-VNI NIC ([`GUEST_VNI`]) of every instance whose record names an
/// active VMM on a sled the store lists, mapped to that sled's address.
/// Upstream reads them from the NICs joined to their instance's active
/// VMM, whatever the VMM's state (`DataStore::v2p_mappings`). Here that is
/// an instance Running, Starting with a sled, or Stopping while its
/// record still names the VMM being destroyed. So a sled is also given the
/// mappings of its own instances, which no sled needs to reach them but
/// upstream puts all the same, and a stopping instance keeps its mappings
/// until its VMM is gone. Per sled (sorted by id, independently): list,
/// delete the guest-VNI mappings that are not desired (first, so that a
/// mapping to an instance's old sled is gone before the new one is put),
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

    let mut desired: BTreeSet<VirtualNetworkInterfaceHost> = BTreeSet::new();
    for instance in &instances {
        let Some(sled_id) = instance.sled else {
            continue;
        };
        let active_vmm = match instance.state {
            InstanceState::Running | InstanceState::Starting => true,
            InstanceState::Stopping => instance.vmm.is_some(),
            _ => false,
        };
        if !active_vmm {
            continue;
        }
        // An instance placed on a sled the store does not list cannot be
        // mapped (there is no address to map it to).
        let Some(sled) = sleds.get(&sled_id) else {
            continue;
        };
        desired.extend(
            instance_v2p_mappings(instance, sled.address)
                .into_iter()
                .filter(|m| m.vni == GUEST_VNI),
        );
    }

    let mut outcomes = BTreeMap::new();
    for (&id, sled) in &sleds {
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
