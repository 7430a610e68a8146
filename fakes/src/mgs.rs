//! Fake management gateway: `GET /local/switch-id` names the switch this
//! switch zone manages (`sp_local_switch_id`), and `GET
//! /sp/sled/{slot}/power-state` (`sp_power_state_get`) says whether a sled
//! is powered on.
//!
//! Simplified: the simulated rack has no control of one sled's power (its
//! faults are host crashes, a crashed host OS is still powered on, and a
//! rack power-off takes MGS down too), so every sled of the rack answers
//! `A0`; a slot beyond the rack's sleds is a 404, as for an SP MGS does not
//! know.

use http::Method;
use racksim_wire::mgs::{PowerState, SpIdentifier, SpType, API_VERSION};

use crate::http::{ApiError, ApiRequest, ApiResponse};

/// Sled cubbies in an Oxide rack: an MGS knows the SP of each.
pub const RACK_SLED_SLOTS: u16 = 32;

/// MGS of one switch zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MgsState {
    pub slot: u16,
    /// Sled slots whose SP this MGS knows (`0..sleds`); usually
    /// [`RACK_SLED_SLOTS`].
    pub sleds: u16,
}

impl MgsState {
    /// The MGS of the switch in `slot`, knowing every sled cubby of a rack.
    pub fn new(slot: u16) -> Self {
        MgsState {
            slot,
            sleds: RACK_SLED_SLOTS,
        }
    }

    /// The answer of `GET /local/switch-id`.
    pub fn local_switch_id(&self) -> SpIdentifier {
        SpIdentifier {
            typ: SpType::Switch,
            slot: self.slot,
        }
    }

    /// The answer of `GET /sp/sled/{slot}/power-state`.
    pub fn sled_power_state(&self, slot: u16) -> Result<PowerState, ApiError> {
        if slot < self.sleds {
            Ok(PowerState::A0)
        } else {
            Err(ApiError::new(
                http::StatusCode::NOT_FOUND,
                Some("SpDoesNotExist"),
                format!("no sled SP in slot {slot}"),
            ))
        }
    }

    /// Serves one request (the servers that are not dropshot).
    pub fn handle(&self, req: &ApiRequest) -> ApiResponse {
        if let Err(e) = req.check_version(API_VERSION) {
            return e.into_response();
        }
        let segs = req.segments();
        let segs: Vec<&str> = segs.iter().map(|s| &**s).collect();
        match (req.method.clone(), segs.as_slice()) {
            (Method::GET, ["local", "switch-id"]) => ApiResponse::json(&self.local_switch_id()),
            (Method::GET, ["sp", "sled", slot, "power-state"]) => match slot.parse::<u16>() {
                Ok(slot) => match self.sled_power_state(slot) {
                    Ok(p) => ApiResponse::json(&p),
                    Err(e) => e.into_response(),
                },
                Err(_) => ApiError::bad_request(format!("invalid slot {slot:?}")).into_response(),
            },
            _ => crate::upstream::unrouted(crate::upstream::Service::Mgs, req).into_response(),
        }
    }
}

#[cfg(test)]
mod tests;
