//! Fake internal DNS, reduced to what discovery needs: the addresses each
//! service is advertised at (`GET /srv/{service}` answers
//! `{"addresses": [..]}`). Real internal DNS speaks DNS, not HTTP; the
//! lookup is simplified, so it is not versioned either.

use std::{collections::BTreeMap, net::Ipv6Addr};

use http::{Method, StatusCode};

use crate::http::{ApiError, ApiRequest, ApiResponse};

/// The records of the zone: service name → addresses, in the order given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InternalDns {
    pub services: BTreeMap<String, Vec<Ipv6Addr>>,
}

impl InternalDns {
    pub fn handle(&self, req: &ApiRequest) -> ApiResponse {
        let segs = req.segments();
        let segs: Vec<&str> = segs.iter().map(|s| &**s).collect();
        match (req.method.clone(), segs.as_slice()) {
            (Method::GET, ["srv", service]) => match self.services.get(*service) {
                Some(addresses) => {
                    ApiResponse::json(&serde_json::json!({ "addresses": addresses }))
                }
                None => ApiError::new(
                    StatusCode::NOT_FOUND,
                    Some("ObjectNotFound"),
                    format!("no records for service {service:?}"),
                )
                .into_response(),
            },
            _ => ApiError::not_found_route(req).into_response(),
        }
    }
}

#[cfg(test)]
mod tests;
