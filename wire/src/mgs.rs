//! The management gateway's (MGS) wire format: `GET /local/switch-id` and
//! a sled's power state (MGS 3.0.0, as
//! `openapi/reference/gateway-local-switch-id-subset.json` has them), and
//! the [`SwitchSlot`] a switch's identifier names.
//!
//! MGS runs in each switch zone and is cabled (through the scrimlet) to one
//! sidecar: its `{"type":"switch","slot":0}` is how a switch zone's address
//! is mapped to a switch.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The version of MGS's API these types are written against
/// (`info.version` of `reference/gateway-local-switch-id-subset.json`).
pub const API_VERSION: &str = "3.0.0";

/// Kind of service processor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SpType {
    Sled,
    Power,
    Switch,
}

/// `{"type": "switch", "slot": 0}`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct SpIdentifier {
    #[serde(rename = "type")]
    pub typ: SpType,
    pub slot: u16,
}

impl SpIdentifier {
    /// The switch slot this identifier names, if it names a switch in a
    /// valid slot. Anything else from `/local/switch-id` means the zone is
    /// misconfigured, and callers treat that zone as not found.
    pub fn switch_slot(&self) -> Option<SwitchSlot> {
        match self.typ {
            SpType::Switch => SwitchSlot::from_index(self.slot),
            SpType::Sled | SpType::Power => None,
        }
    }
}

/// A service processor's view of its host's power (MGS's `PowerState`):
/// `A0` is on; `A1` and `A2` are the off states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub enum PowerState {
    A0,
    A1,
    A2,
}

/// Switch slot: `switch0` / `switch1`. Display "switch0". serde as "switch0"
/// (sled-agent's `SwitchSlot` schema); MGS and dpd number it 0 and 1.
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
}

enum_names!(SwitchSlot {
    Switch0 => "switch0",
    Switch1 => "switch1",
});

impl FromStr for SwitchSlot {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SwitchSlot::from_name(s)
            .ok_or_else(|| format!("unknown switch slot {s:?} (expected switch0 or switch1)"))
    }
}

#[cfg(test)]
mod tests;
