//! The part of Nexus's internal API dpd's NAT RPW calls:
//! `GET /nat/ipv4/changeset/{from_gen}?limit=N`, the instance NAT changes
//! after generation `from_gen` (at most `limit`, oldest first). Served two
//! ways over one store call: [`handle`] for the simulation's server
//! (framework-neutral requests, parsed strictly as dropshot would), and
//! `racksim-servers`' `NexusInternalApi` for live mode's dropshot server.

use crate::instances::InstanceStore;
use http::{Method, StatusCode};
use racksim_fakes::http::{ApiError, ApiRequest, ApiResponse};

/// Answers one request to the internal API.
pub async fn handle<S: InstanceStore>(store: &S, req: &ApiRequest) -> ApiResponse {
    let (from_gen, limit) = match changeset_request(req) {
        Ok(params) => params,
        Err(e) => return e.into_response(),
    };
    match store.nat_changeset(from_gen, limit).await {
        Ok(changes) => ApiResponse::json(&changes),
        Err(e) => ApiError::unavailable(format!("database: {e}")).into_response(),
    }
}

/// Parses `GET /nat/ipv4/changeset/{from_gen}?limit=N` strictly, as
/// dropshot would: `from_gen` an `i64`, `limit` a `u32`, both required.
pub fn changeset_request(req: &ApiRequest) -> Result<(i64, u32), ApiError> {
    let segments = req.segments();
    let [nat, ipv4, changeset, from_gen] = &segments[..] else {
        return Err(ApiError::not_found_route(req));
    };
    if (&**nat, &**ipv4, &**changeset) != ("nat", "ipv4", "changeset") {
        return Err(ApiError::not_found_route(req));
    }
    if req.method != Method::GET {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            Some("MethodNotAllowed"),
            format!("{} not allowed on {}", req.method, req.path),
        ));
    }
    let from_gen: i64 = from_gen.parse().map_err(|e| {
        ApiError::bad_request(format!("bad path parameter from_gen {from_gen:?}: {e}"))
    })?;
    let limit = req
        .query("limit")
        .ok_or_else(|| ApiError::bad_request("missing query parameter limit"))?;
    let limit: u32 = limit
        .parse()
        .map_err(|e| ApiError::bad_request(format!("bad query parameter limit {limit:?}: {e}")))?;
    Ok((from_gen, limit))
}

#[cfg(test)]
mod tests;
