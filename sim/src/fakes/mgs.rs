//! Fake management gateway: `GET /local/switch-id` names the switch this
//! switch zone manages.

use http::Method;
use racksim_reconciler::mgs::{SpIdentifier, SpType};

use super::http::{ApiError, ApiRequest, ApiResponse};

/// MGS of one switch zone.
#[derive(Clone, Copy, Debug)]
pub struct MgsState {
    pub slot: u16,
}

impl MgsState {
    pub fn handle(&self, req: &ApiRequest) -> ApiResponse {
        match (req.method.clone(), req.segments().as_slice()) {
            (Method::GET, ["local", "switch-id"]) => ApiResponse::json(&SpIdentifier {
                typ: SpType::Switch,
                slot: self.slot,
            }),
            _ => ApiError::not_found_route(req).into_response(),
        }
    }
}
