//! Fake internal DNS, reduced to what discovery needs: the switch zones
//! (dendrite instances) it currently advertises. A plan step can hide a switch
//! zone, as happened on madrid.

use http::Method;

use super::http::{ApiError, ApiRequest, ApiResponse};
use crate::{net::SrvAnswer, world::World};

pub fn handle(world: &World, req: &ApiRequest) -> ApiResponse {
    match (req.method.clone(), req.segments().as_slice()) {
        (Method::GET, ["srv", "dendrite"]) => {
            let st = world.lock();
            let addresses = st
                .switch_zones
                .iter()
                .filter(|(slot, _)| !st.hidden.contains(slot))
                .map(|(_, addr)| *addr)
                .collect();
            ApiResponse::json(&SrvAnswer { addresses })
        }
        (Method::GET, ["srv", service]) => ApiError::new(
            http::StatusCode::NOT_FOUND,
            "ObjectNotFound",
            format!("no records for service {service:?}"),
        )
        .into_response(),
        _ => ApiError::not_found_route(req).into_response(),
    }
}
