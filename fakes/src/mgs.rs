//! Fake management gateway: `GET /local/switch-id` names the switch this
//! switch zone manages (`sp_local_switch_id`).

use http::Method;
use racksim_reconciler::mgs::{SpIdentifier, SpType, API_VERSION};

use crate::http::{ApiError, ApiRequest, ApiResponse};

/// MGS of one switch zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MgsState {
    pub slot: u16,
}

impl MgsState {
    /// The answer of `GET /local/switch-id`.
    pub fn local_switch_id(&self) -> SpIdentifier {
        SpIdentifier {
            typ: SpType::Switch,
            slot: self.slot,
        }
    }

    /// Serves one request (the servers that are not dropshot).
    pub fn handle(&self, req: &ApiRequest) -> ApiResponse {
        if let Err(e) = req.check_version(API_VERSION) {
            return e.into_response();
        }
        let segs = req.segments();
        match (
            req.method.clone(),
            segs.iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .as_slice(),
        ) {
            (Method::GET, ["local", "switch-id"]) => ApiResponse::json(&self.local_switch_id()),
            _ => ApiError::not_found_route(req).into_response(),
        }
    }
}

#[cfg(test)]
mod tests;
