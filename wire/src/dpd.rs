//! dendrite's (`dpd`) wire format: the NAT API and `/switch/identifiers`
//! of dpd 13.0.0, as `openapi/reference/dpd-13.0.0-nat-subset.json` has
//! them.
//!
//! A NAT entry maps an external address and an inclusive port range to a
//! [`NatTarget`]; dpd lists entries a page at a time ([`ResultsPage`]).
//! dpd's `MacAddr` is the object `{"a": [u8; 6]}` (sled-agent writes the
//! same address as a string: see [`crate::sled_agent::mac_string`]).

use std::{
    fmt,
    net::{Ipv4Addr, Ipv6Addr},
    str::FromStr,
};

use serde::{Deserialize, Serialize};

pub mod fuse;

/// The version of dpd's API these types are written against
/// (`info.version` of `reference/dpd-13.0.0-nat-subset.json`), sent as the
/// `api-version` header.
pub const API_VERSION: &str = "13.0.0";

/// The largest Geneve VNI: a VNI is a 24-bit value.
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// An EUI-48 MAC address, used for layer-2 addressing; on dpd's wire
/// `{"a":[u8;6]}`. Display as `aa:bb:cc:dd:ee:ff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct MacAddr {
    pub a: [u8; 6],
}

impl MacAddr {
    pub const fn new(a: [u8; 6]) -> Self {
        MacAddr { a }
    }
}

/// A string that is not an EUI-48 address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid MAC address {0:?}: expected six colon-separated hex octets")]
pub struct ParseMacAddrError(pub String);

impl FromStr for MacAddr {
    type Err = ParseMacAddrError;

    /// Parses `aa:bb:cc:dd:ee:ff` (case-insensitive; an octet may be written
    /// with one digit, as the OpenAPI pattern of sled-agent's `MacAddr`
    /// allows).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseMacAddrError(s.to_string());
        let mut a = [0u8; 6];
        let mut parts = s.split(':');
        for octet in &mut a {
            let part = parts.next().ok_or_else(err)?;
            if part.is_empty() || part.len() > 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err());
            }
            *octet = u8::from_str_radix(part, 16).map_err(|_| err())?;
        }
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(MacAddr { a })
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.a;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// `NatTarget { internal_ip, inner_mac, vni }`: where dpd sends traffic that
/// arrives for an external address and port range — the sled hosting the
/// zone (its underlay IPv6), the zone's OPTE port MAC, and the Geneve VNI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct NatTarget {
    pub internal_ip: Ipv6Addr,
    pub inner_mac: MacAddr,
    #[cfg_attr(feature = "schemars", schemars(with = "crate::schema::Vni"))]
    pub vni: u32,
}

/// One IPv4 NAT entry as listed by dpd.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Ipv4Nat {
    pub external: Ipv4Addr,
    pub low: u16,
    pub high: u16,
    pub target: NatTarget,
}

/// One IPv6 NAT entry as listed by dpd (same shape under `/nat/ipv6`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Ipv6Nat {
    pub external: Ipv6Addr,
    pub low: u16,
    pub high: u16,
    pub target: NatTarget,
}

/// A page of results: `{"items": [...], "next_page": "token" | null}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultsPage<T> {
    pub items: Vec<T>,
    #[serde(default)]
    pub next_page: Option<String>,
}

/// `GET /switch/identifiers`, as dpd 13.0.0 sends it: the required fields,
/// and the ASIC's manufacturing identifiers, which dendrite sends as `null`
/// when it has none (the fake sidecar has none; a client reading a real
/// dpd gets them filled in).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct SwitchIdentifiers {
    pub asic_backend: String,
    pub model: String,
    pub revision: u32,
    pub serial: String,
    #[cfg_attr(feature = "schemars", schemars(with = "crate::schema::Uuid"))]
    pub sidecar_id: String,
    pub slot: u16,
    /// Fabrication plant identifier.
    #[serde(default)]
    pub fab: Option<char>,
    /// Lot identifier.
    #[serde(default)]
    pub lot: Option<char>,
    /// Lot number (4 characters within the lot).
    #[serde(default)]
    pub lotnum: Option<[char; 4]>,
    /// Wafer number within the lot.
    #[serde(default)]
    pub wafer: Option<u8>,
    /// The die's (x, y) location on the wafer.
    #[serde(default)]
    pub wafer_loc: Option<[i16; 2]>,
    /// The ASIC's fuse data.
    #[serde(default)]
    pub fuse: Option<fuse::FuseData>,
}

/// `/switch/identifiers` before dpd 10.0.0 (`VERSION_ASIC_DETAILS`), the
/// shape without `lotnum` and `fuse` (dpd-types'
/// `v1::switch_identifiers::SwitchIdentifiers`). The fake dpd still serves
/// it to a client naming an older version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct SwitchIdentifiersV1 {
    pub sidecar_id: String,
    pub asic_backend: String,
    pub fab: Option<char>,
    pub lot: Option<char>,
    pub wafer: Option<u8>,
    pub wafer_loc: Option<[i16; 2]>,
    pub model: String,
    pub revision: u32,
    pub serial: String,
    pub slot: u16,
}

impl From<SwitchIdentifiers> for SwitchIdentifiersV1 {
    fn from(s: SwitchIdentifiers) -> Self {
        SwitchIdentifiersV1 {
            sidecar_id: s.sidecar_id,
            asic_backend: s.asic_backend,
            fab: s.fab,
            lot: s.lot,
            wafer: s.wafer,
            wafer_loc: s.wafer_loc,
            model: s.model,
            revision: s.revision,
            serial: s.serial,
            slot: s.slot,
        }
    }
}

#[cfg(test)]
mod tests;
