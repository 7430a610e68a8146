//! How a sled finds switch zones.
//!
//! In a rack, switch zones are advertised in internal DNS; their underlay
//! addresses are the `::2` of their scrimlets' sled subnets. The set changes
//! at runtime — a scrimlet loses its sidecar, a scrimlet is replaced and its
//! switch zone comes back at a new address — so nothing here caches: every
//! caller asks again when it needs an answer. DNS only says *where* switch
//! zones are, not *which* switch each manages; that comes from MGS
//! ([`crate::mgs`]) or dpd's `/switch/identifiers`.

use std::{fmt, future::Future, net::Ipv6Addr, str::FromStr};

use serde::{Deserialize, Serialize};

/// Switch slot: `switch0` / `switch1`. Display "switch0". serde as "switch0".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SwitchSlot {
    #[serde(rename = "switch0")]
    Switch0,
    #[serde(rename = "switch1")]
    Switch1,
}

impl SwitchSlot {
    /// Both slots, in order.
    pub const ALL: [SwitchSlot; 2] = [SwitchSlot::Switch0, SwitchSlot::Switch1];

    /// The slot with MGS's / dpd's numeric index (0 or 1).
    pub fn from_index(i: u16) -> Option<Self> {
        match i {
            0 => Some(SwitchSlot::Switch0),
            1 => Some(SwitchSlot::Switch1),
            _ => None,
        }
    }

    pub fn index(self) -> u16 {
        match self {
            SwitchSlot::Switch0 => 0,
            SwitchSlot::Switch1 => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SwitchSlot::Switch0 => "switch0",
            SwitchSlot::Switch1 => "switch1",
        }
    }
}

impl fmt::Display for SwitchSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SwitchSlot {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SwitchSlot::ALL
            .into_iter()
            .find(|slot| slot.as_str() == s)
            .ok_or_else(|| format!("unknown switch slot {s:?} (expected switch0 or switch1)"))
    }
}

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
