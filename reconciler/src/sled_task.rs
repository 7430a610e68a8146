//! The zone-start NAT issue's per-sled NAT task, as a [`task::Reconciler`](crate::task::Reconciler).
//!
//! Each sled reconciles the NAT entries of the service zones *it hosts* on
//! every switch zone it can find *now*. Compared with [`crate::legacy`]:
//!
//! * zone start never waits for it: the zone starts, and the task programs
//!   its entry on the next activation;
//! * discovery happens on every activation, so a switch that was missing
//!   (madrid), has been replaced at a new address, or has restarted with an
//!   empty table is picked up by the next periodic activation;
//! * each switch is reconciled independently and concurrently: one dead or
//!   hanging switch (bounded by the request timeout) does not delay the
//!   other;
//! * the whole entry is compared (target, MAC, VNI, range), not just the
//!   internal IP.
//!
//! The scope is [`Scope::ExternalRanges`] of the desired entries: a sled
//! owns the external (IP, port range) of each of its zones, so it removes
//! any other entry overlapping them (e.g. one pointing at the zone's
//! previous sled) but never touches another sled's entries — not even on
//! a shared address: two boundary NTP zones on different sleds share one
//! source-NAT IP on disjoint port ranges, and owning by IP alone would have
//! each sled delete the other's entry on every activation. An empty config therefore has nothing
//! to manage and reports [`SledNatStatus::NoNatEntriesConfig`].

use std::{
    collections::{BTreeMap, BTreeSet},
    net::{Ipv6Addr, SocketAddr},
};

use serde::Serialize;

use crate::{
    discovery::{DiscoveryError, SwitchSlot, SwitchZoneResolver},
    dpd::DpdClient,
    http::{Connector, HttpClient},
    nat::{reconcile_switch, ExternalRange, NatEntry, NatReconcileOutcome, Scope},
    task::{ActivationReason, ActivationStatus, Reconciler},
    DPD_PORT,
};

/// The per-sled reconciler: a connector to reach dpd, and a resolver to find
/// the switch zones.
#[derive(Clone, Debug)]
pub struct SledNatReconciler<C, Res> {
    connector: C,
    resolver: Res,
}

impl<C: Connector, Res: SwitchZoneResolver> SledNatReconciler<C, Res> {
    pub fn new(connector: C, resolver: Res) -> Self {
        SledNatReconciler {
            connector,
            resolver,
        }
    }
}

/// Outcome of one activation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum SledNatStatus {
    /// This sled hosts no zone with external connectivity.
    NoNatEntriesConfig,
    DiscoveryFailed {
        error: DiscoveryError,
    },
    /// One outcome per switch zone found now, keyed by its address; each reconciled independently and concurrently.
    Reconciled {
        switches: BTreeMap<Ipv6Addr, SwitchNatStatus>,
    },
}

/// Outcome on one switch zone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SwitchNatStatus {
    /// From dpd's `/switch/identifiers`; `None` if that failed. Informational
    /// only: the reconcile is attempted regardless.
    pub slot: Option<SwitchSlot>,
    pub outcome: NatReconcileOutcome,
}

/// `switch0: unchanged 1; switch1: unchanged 0, created 1` (a switch whose
/// slot is unknown is named by its address).
impl std::fmt::Display for SledNatStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SledNatStatus::NoNatEntriesConfig => f.write_str("no NAT entries configured"),
            SledNatStatus::DiscoveryFailed { error } => write!(f, "discovery failed: {}", error.0),
            SledNatStatus::Reconciled { switches } if switches.is_empty() => {
                f.write_str("no switch zones found")
            }
            SledNatStatus::Reconciled { switches } => {
                for (i, (addr, s)) in switches.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    match s.slot {
                        Some(slot) => write!(f, "{slot}: {}", s.outcome)?,
                        None => write!(f, "{addr}: {}", s.outcome)?,
                    }
                }
                Ok(())
            }
        }
    }
}

/// Failed: discovery did, or some switch's table could not be read or
/// written in full.
impl ActivationStatus for SledNatStatus {
    fn failed(&self) -> bool {
        match self {
            SledNatStatus::NoNatEntriesConfig => false,
            SledNatStatus::DiscoveryFailed { .. } => true,
            SledNatStatus::Reconciled { switches } => {
                switches.values().any(|s| !s.outcome.is_converged())
            }
        }
    }
}

impl<C: Connector, Res: SwitchZoneResolver> Reconciler for SledNatReconciler<C, Res> {
    const NAME: &'static str = "sled-task";
    /// The NAT entries of this sled's zones.
    type Config = Vec<NatEntry>;
    type Status = SledNatStatus;

    async fn reconcile(
        &mut self,
        config: &Vec<NatEntry>,
        _reason: ActivationReason,
    ) -> SledNatStatus {
        if config.is_empty() {
            return SledNatStatus::NoNatEntriesConfig;
        }
        let zones = match switch_zones(&self.resolver).await {
            Ok(zones) => zones,
            Err(error) => return SledNatStatus::DiscoveryFailed { error },
        };
        let scope = &owned_scope(config);
        // join_all, not spawn: the work stays inside this activation (and is
        // cancelled with it), and futures are polled in address order.
        let results = futures::future::join_all(zones.into_iter().map(|address| {
            let dpd = DpdClient::new(HttpClient::new(
                self.connector.clone(),
                SocketAddr::new(address.into(), DPD_PORT),
            ));
            async move {
                let slot = dpd
                    .switch_identifiers()
                    .await
                    .ok()
                    .and_then(|ids| SwitchSlot::from_index(ids.slot));
                let outcome = reconcile_switch(&dpd, config, scope).await;
                (address, SwitchNatStatus { slot, outcome })
            }
        }))
        .await;
        SledNatStatus::Reconciled {
            switches: results.into_iter().collect(),
        }
    }
}

/// The switch zones an activation reconciles: every one discovery finds
/// now, once each, in address order.
#[cfg_attr(feature = "mutants", racksim_mutants::mutant(FirstSwitchOnly))]
async fn switch_zones<Res: SwitchZoneResolver>(
    resolver: &Res,
) -> Result<BTreeSet<Ipv6Addr>, DiscoveryError> {
    Ok(resolver.switch_zones().await?.into_iter().collect())
}

/// What a sled owns on a switch: the external (IP, port range) of each of
/// its zones (see the module documentation for why not the IP alone).
#[cfg_attr(feature = "mutants", racksim_mutants::mutant(OwnByIp))]
fn owned_scope(config: &[NatEntry]) -> Scope {
    Scope::ExternalRanges(config.iter().map(ExternalRange::of).collect())
}

#[cfg(test)]
mod tests;
