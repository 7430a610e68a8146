//! How a sled finds switch zones.
//!
//! In a rack, switch zones are advertised in internal DNS; their underlay
//! addresses are the `::2` of their scrimlets' sled subnets. The set changes
//! at runtime — a scrimlet loses its sidecar, a scrimlet is replaced and its
//! switch zone comes back at a new address — so nothing here caches: every
//! caller asks again when it needs an answer. DNS only says *where* switch
//! zones are, not *which* switch each manages; that comes from MGS
//! ([`crate::mgs`]) or dpd's `/switch/identifiers`.

use std::{future::Future, net::Ipv6Addr};

pub use racksim_wire::mgs::SwitchSlot;
use serde::{Deserialize, Serialize};

/// Internal DNS lookup of the switch zones currently advertised (their underlay
/// IPv6 addresses; dpd and MGS listen on DPD_PORT / MGS_PORT there).
/// The order of the returned list is the resolver's; callers sort if they care.
pub trait SwitchZoneResolver: Clone + Send + Sync + 'static {
    fn switch_zones(&self) -> impl Future<Output = Result<Vec<Ipv6Addr>, DiscoveryError>> + Send;
}

/// Why discovery failed (e.g. internal DNS unreachable). A string: resolvers
/// are pluggable and their errors are only ever reported, never matched on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{0}")]
pub struct DiscoveryError(pub String);

/// A resolver with a fixed answer: for tools, live mode pointed at known
/// addresses, and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StaticResolver(pub Vec<Ipv6Addr>);

impl SwitchZoneResolver for StaticResolver {
    async fn switch_zones(&self) -> Result<Vec<Ipv6Addr>, DiscoveryError> {
        Ok(self.0.clone())
    }
}

#[cfg(test)]
mod tests;
