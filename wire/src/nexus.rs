//! Nexus's instance NAT changeset, as dpd's NAT RPW reads it
//! (`GET /nat/ipv4/changeset/{from_gen}` of Nexus's internal API).
//!
//! The simulated Nexus serves it; the fake dpd applies it as dendrite's
//! RPW does.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use crate::dpd::{Ipv4Nat, MacAddr, NatTarget};

/// One change of the instance NAT table as Nexus serves it to dpd
/// (`GET /nat/ipv4/changeset/{from_gen}`): the entry, and the table version
/// at which it was added — or, if `deleted`, removed — as `gen`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct NatEntryView {
    pub external_address: Ipv4Addr,
    pub first_port: u16,
    pub last_port: u16,
    pub sled_address: Ipv6Addr,
    #[cfg_attr(feature = "schemars", schemars(with = "crate::schema::Vni"))]
    pub vni: u32,
    pub mac: MacAddr,
    pub gen: i64,
    pub deleted: bool,
}

impl NatEntryView {
    /// Where the entry sends traffic: the sled, the NIC's MAC, the VNI.
    pub fn target(&self) -> NatTarget {
        NatTarget {
            internal_ip: self.sled_address,
            inner_mac: self.mac,
            vni: self.vni,
        }
    }

    /// The entry as dpd lists it.
    pub fn to_dpd(&self) -> Ipv4Nat {
        Ipv4Nat {
            external: self.external_address,
            low: self.first_port,
            high: self.last_port,
            target: self.target(),
        }
    }
}
