//! sled-agent's wire format: `/v2p` exactly as sled-agent 48.0.0 publishes
//! it (`openapi/reference/sled-agent-v2p-subset.json`), and `/vmms`, a
//! reduced form of upstream's VMM API keyed as upstream's is, by the VMM's
//! (Propolis) id — here a number, not a UUID: register a VMM, set and read
//! its state, unregister it — plus a list of them, racksim's own.
//!
//! sled-agent's `MacAddr` is a *string* (`"A8:40:25:F0:00:01"`), unlike
//! dpd's `{"a": [..]}`: the same Rust type, two wire formats, hence
//! [`mac_string`].

use std::net::{IpAddr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use crate::dpd::MacAddr;

/// The version of sled-agent's API these types are written against
/// (`info.version` of `reference/sled-agent-v2p-subset.json`).
pub const API_VERSION: &str = "48.0.0";

/// Serde `with` module: a [`MacAddr`] as sled-agent's `"AA:BB:CC:DD:EE:FF"`
/// string. Omicron's `MacAddr` writes itself through `macaddr::MacAddr6`'s
/// `Display`, in upper case, so that is what sled-agent lists; either case
/// is read.
pub mod mac_string {
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    use crate::dpd::MacAddr;

    pub fn serialize<S: Serializer>(mac: &MacAddr, serializer: S) -> Result<S::Ok, S::Error> {
        let [a, b, c, d, e, f] = mac.a;
        serializer.collect_str(&format_args!(
            "{a:02X}:{b:02X}:{c:02X}:{d:02X}:{e:02X}:{f:02X}"
        ))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<MacAddr, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(D::Error::custom)
    }
}

/// A mapping from a virtual NIC to a physical host (sled-agent's
/// `VirtualNetworkInterfaceHost`). Its identity on a sled is
/// `(vni, virtual_ip)`: a sled holds at most one mapping per virtual IP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct VirtualNetworkInterfaceHost {
    pub virtual_ip: IpAddr,
    #[serde(with = "mac_string")]
    #[cfg_attr(feature = "schemars", schemars(with = "crate::schema::MacString"))]
    pub virtual_mac: MacAddr,
    pub physical_host_ip: Ipv6Addr,
    #[cfg_attr(feature = "schemars", schemars(with = "crate::schema::Vni"))]
    pub vni: u32,
}

impl VirtualNetworkInterfaceHost {
    /// Whether `self` and `other` are mappings of the same virtual NIC
    /// (whatever host each says it is on).
    pub fn same_nic(&self, other: &VirtualNetworkInterfaceHost) -> bool {
        self.vni == other.vni && self.virtual_ip == other.virtual_ip
    }
}

impl std::fmt::Display for VirtualNetworkInterfaceHost {
    /// `10.0.0.5 (a8:40:25:f0:00:01, vni 1001) -> fd00:1122:3344:102::1`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}, vni {}) -> {}",
            self.virtual_ip, self.virtual_mac, self.vni, self.physical_host_ip
        )
    }
}

/// `PUT /vmms/{propolis_id}` body: the reduced form of upstream's
/// `InstanceEnsureBody`, of which it keeps only the instance the VMM is
/// for (the VMM's id is the path's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct VmmRegistration {
    pub instance_id: u32,
}

/// State of a VMM on a sled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum VmmState {
    Starting,
    Running,
    Stopped,
}

/// `PUT /vmms/{propolis_id}/state` body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct VmmStateRequest {
    pub state: VmmState,
}

/// One element of `GET /vmms`, and `GET /vmms/{propolis_id}/state`'s
/// answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct VmmInfo {
    pub instance_id: u32,
    pub vmm_id: u64,
    pub state: VmmState,
}

/// `DELETE /vmms/{propolis_id}`'s answer (upstream's
/// `VmmUnregisterResponse`, its runtime state reduced to [`VmmInfo`]): the
/// VMM as unregistering left it, or `None` if the sled had no such VMM —
/// which is success, not an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct VmmUnregisterResponse {
    pub updated_runtime: Option<VmmInfo>,
}

/// The `error_code` of sled-agent's 404 for a VMM it does not have
/// (omicron's `sled-agent` `Error::NoSuchVmm` → `NO_SUCH_INSTANCE`), which
/// the instance watcher takes as "this VMM is gone".
pub const NO_SUCH_INSTANCE: &str = "NO_SUCH_INSTANCE";
