//! dpd's `FuseData`: the Tofino ASIC's fuse data, part of
//! `GET /switch/identifiers` (dpd 13.0.0's schema, field for field). The
//! fake sidecar has no fuses and sends `null`; a client reading a real
//! dpd gets them. racksim reads nothing from them.

use serde::{Deserialize, Serialize};

/// Organized fuse data from the Tofino ASIC.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct FuseData {
    /// Chip revision information.
    pub chip_rev: ChipRevision,
    /// Disabled features.
    pub disabled: DisabledFeatures,
    /// Frequency settings.
    pub frequency: FrequencySettings,
    /// Manufacturing and repair data.
    pub manufacturing: ManufacturingData,
    /// Part identification.
    pub part: PartInfo,
}

/// Chip revision derived from device_id and rev_num fuse fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct ChipRevision {
    /// Raw device ID from fuse.
    pub device_id: u16,
    /// Computed revision string (e.g., "A0", "B0", "B1").
    pub rev: String,
    /// Raw revision number from fuse.
    pub rev_num: u8,
}

/// Features disabled via fuse programming.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct DisabledFeatures {
    /// Buffer sync disabled.
    pub bsync: bool,
    /// Disabled MAUs per pipe (21 bits each).
    pub mau: [u32; 4],
    /// Packet generator disabled.
    pub pgen: bool,
    /// Disabled pipes (4-bit bitmap).
    pub pipes: u8,
    /// Disabled ports (40-bit bitmap).
    pub ports: u64,
    /// Resubmit disabled.
    pub resub: bool,
    /// Disabled speeds (64-bit bitmap).
    pub speeds: u64,
    /// Disabled traffic manager memory (32-bit bitmap).
    pub tm_mem: u32,
}

/// Frequency settings from fuse data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct FrequencySettings {
    /// Backplane port speed frequency (2 bits).
    pub bps: u8,
    /// Extended backplane frequency (4 bits).
    pub bps_ext: u8,
    /// CPU speed disabled (2 bits).
    pub cpu_speed_dis: u8,
    /// Frequency disabled.
    pub disabled: bool,
    /// PCIe disabled (2 bits).
    pub pcie_dis: u8,
    /// Packet processing speed frequency (2 bits).
    pub pps: u8,
    /// Extended packet speed frequency (4 bits).
    pub pps_ext: u8,
}

/// Manufacturing and repair data from fuse.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct ManufacturingData {
    /// Core repair applied.
    pub core_repair: bool,
    /// Die rotation.
    pub die_rotation: bool,
    /// PMRO and skew value (12 bits).
    pub pmro_and_skew: u16,
    /// Silent spin (2 bits).
    pub silent_spin: u8,
    /// Soft pipe disable (4 bits).
    pub soft_pipe_dis: u8,
    /// Tile repair applied.
    pub tile_repair: bool,
    /// Voltage scaling value (12 bits).
    pub voltage_scaling: u16,
    /// Wafer core repair applied.
    pub wf_core_repair: bool,
}

/// Part identification from fuse data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct PartInfo {
    /// Part number (13 bits).
    pub part_num: u16,
    /// Package ID (2 bits).
    pub pkg_id: u8,
    /// Fuse version (2 bits).
    pub version: u8,
}
