//! Which dpd is which boundary switch: Nexus's `dpd_clients`
//! (`nexus/src/app/mod.rs`), as every instance operation that tells the
//! switches of a NAT change looks it up.
//!
//! Two facts come from two places. The *boundary switches* are the
//! database's (the switches with an uplink configured,
//! [`InstanceStore::boundary_switches`]). Where their dpds are comes from
//! internal DNS, which lists the switch zones but not which switch each
//! one manages; that takes one more question per zone, asked of its MGS
//! before omicron #8914 and of its dpd since ([`SwitchLookup`]). A
//! boundary switch whose zone could not be identified has no client: the
//! notify reports it, and the caller's era decides whether that fails the
//! step ([`DpdNotify`](crate::instances::DpdNotify)).
//!
//! Nothing is cached, as upstream: every notify asks DNS and the zones
//! again, so a zone that moved (a replaced scrimlet) or came back is found
//! at once.

use std::{
    collections::BTreeMap,
    fmt,
    future::Future,
    net::{Ipv6Addr, SocketAddr},
    pin::Pin,
    sync::Arc,
};

use super::{InstanceOps, OpError};
use crate::instances::{history::SWITCH_LOOKUP_RETRY, InstanceStore, SwitchLookup};
use racksim_reconciler::{
    discovery::{DiscoveryError, SwitchSlot, SwitchZoneResolver},
    dpd::DpdClient,
    http::{Connector, HttpClient},
    mgs::MgsClient,
    DPD_PORT, MGS_PORT,
};

type Lookup = dyn Fn() -> Pin<Box<dyn Future<Output = Result<Vec<Ipv6Addr>, DiscoveryError>> + Send>>
    + Send
    + Sync;

/// Internal DNS's answer for the switch zones, as instance operations ask
/// it: any [`SwitchZoneResolver`], behind one type so that the operations'
/// type does not carry the resolver's.
#[derive(Clone)]
pub struct SwitchZoneDns(Arc<Lookup>);

impl SwitchZoneDns {
    pub fn new<R: SwitchZoneResolver>(resolver: R) -> Self {
        SwitchZoneDns(Arc::new(move || {
            let resolver = resolver.clone();
            Box::pin(async move { resolver.switch_zones().await })
        }))
    }

    /// The switch zones DNS lists now, in its order.
    pub async fn switch_zones(&self) -> Result<Vec<Ipv6Addr>, DiscoveryError> {
        (self.0)().await
    }
}

impl fmt::Debug for SwitchZoneDns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SwitchZoneDns")
    }
}

/// Each boundary switch with its dpd's address, or `None` where the
/// lookup could not identify its zone. Sorted by slot.
pub(in crate::instances) type BoundaryDpds = Vec<(SwitchSlot, Option<SocketAddr>)>;

impl<C: Connector, S: InstanceStore> InstanceOps<C, S> {
    /// The boundary switches, each with the dpd the lookup found for it.
    /// Fails if the database or DNS cannot be read; under
    /// [`SwitchLookup::MgsRetry`] it does not return while a listed zone's
    /// MGS does not answer.
    pub(in crate::instances) async fn boundary_dpds(&self) -> Result<BoundaryDpds, OpError> {
        let boundary = self.boundary_switches().await?;
        let clients = self.dpd_clients().await?;
        Ok(boundary
            .into_iter()
            .map(|slot| (slot, clients.get(&slot).copied()))
            .collect())
    }

    /// The database's boundary switches, by slot, each once.
    pub(in crate::instances) async fn boundary_switches(&self) -> Result<Vec<SwitchSlot>, OpError> {
        let mut boundary = self.store.boundary_switches().await?;
        boundary.sort();
        boundary.dedup();
        Ok(boundary)
    }

    /// `dpd_clients`: the dpd of every switch zone DNS lists whose slot the
    /// era's lookup learned.
    pub(in crate::instances) async fn dpd_clients(
        &self,
    ) -> Result<BTreeMap<SwitchSlot, SocketAddr>, OpError> {
        match self.switch_lookup {
            SwitchLookup::Dpd => self.slots_from_dpds().await,
            SwitchLookup::MgsRetry => self.slots_from_mgs_until_all_answer().await,
        }
    }

    async fn switch_zones(&self) -> Result<Vec<Ipv6Addr>, OpError> {
        let Some(dns) = &self.dns else {
            return Err(OpError::Client(
                "failed to get dpd clients: no internal DNS configured".to_string(),
            ));
        };
        dns.switch_zones()
            .await
            .map_err(|e| OpError::Client(format!("failed to get dpd clients: {e}")))
    }

    /// Since omicron #8914: each zone's dpd says which switch it drives;
    /// one that fails is logged and left out.
    async fn slots_from_dpds(&self) -> Result<BTreeMap<SwitchSlot, SocketAddr>, OpError> {
        let mut found = BTreeMap::new();
        for zone in self.switch_zones().await? {
            let addr = SocketAddr::new(zone.into(), DPD_PORT);
            let dpd = DpdClient::new(HttpClient::new(self.connector.clone(), addr));
            match dpd.switch_identifiers().await {
                Ok(ids) => match SwitchSlot::from_index(ids.slot) {
                    Some(slot) => {
                        found.insert(slot, addr);
                    }
                    None => tracing::warn!(dpd = %addr, slot = ids.slot, "unexpected switch slot"),
                },
                Err(e) => tracing::error!(
                    dpd = %addr,
                    error = %e,
                    "failed to determine switch slot for dendrite"
                ),
            }
        }
        Ok(found)
    }

    /// Before omicron #8914: each zone's MGS says which switch it manages,
    /// and one that fails sends the whole lookup, DNS included, round
    /// again after [`SWITCH_LOOKUP_RETRY`], without end.
    async fn slots_from_mgs_until_all_answer(
        &self,
    ) -> Result<BTreeMap<SwitchSlot, SocketAddr>, OpError> {
        let mut round = 0u64;
        loop {
            round += 1;
            let mut found = BTreeMap::new();
            let mut failed = None;
            for zone in self.switch_zones().await? {
                let mgs = MgsClient::new(HttpClient::new(
                    self.connector.clone(),
                    SocketAddr::new(zone.into(), MGS_PORT),
                ));
                match mgs.local_switch_id().await {
                    Ok(id) => {
                        if let Some(slot) = SwitchSlot::from_index(id.slot) {
                            found.insert(slot, SocketAddr::new(zone.into(), DPD_PORT));
                        }
                    }
                    Err(e) => {
                        failed = Some((zone, e));
                        break;
                    }
                }
            }
            let Some((zone, e)) = failed else {
                return Ok(found);
            };
            // Upstream warns at every round; one warning per lookup says
            // the same, and a trace of a zone down for minutes stays
            // readable.
            if round == 1 {
                tracing::warn!(
                    "failed to map switch zone addr {zone}: {e}; retrying every {}s until it answers",
                    SWITCH_LOOKUP_RETRY.as_secs()
                );
            } else {
                tracing::debug!(
                    "failed to map switch zone addr {zone}: {e}; retrying (round {round})"
                );
            }
            tokio::time::sleep(SWITCH_LOOKUP_RETRY).await;
        }
    }
}
