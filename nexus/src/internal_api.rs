//! The part of Nexus's internal API dpd's NAT RPW calls:
//! `GET /nat/ipv4/changeset/{from_gen}?limit=N`, the instance NAT changes
//! after generation `from_gen` (at most `limit`, oldest first). Served two
//! ways over one store call: [`handle`] for the simulation's server
//! (framework-neutral requests, parsed strictly as dropshot would), and
//! [`NexusInternalApi`] for live mode's dropshot server ([`server`]).

use std::net::SocketAddr;

use crate::instances::{InstanceStore, NatEntryView};
use dropshot::{
    ConfigDropshot, ConfigLogging, ConfigLoggingLevel, HttpError, HttpResponseOk, HttpServer, Path,
    Query, RequestContext, ServerBuilder,
};
use http::{Method, StatusCode};
use racksim_fakes::http::{ApiError, ApiRequest, ApiResponse};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::{NexusHost, NexusStore};

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
    if (nat.as_str(), ipv4.as_str(), changeset.as_str()) != ("nat", "ipv4", "changeset") {
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

/// `GET /nat/ipv4/changeset/{from_gen}`'s path.
#[derive(Deserialize, JsonSchema)]
pub struct ChangesetPath {
    pub from_gen: i64,
}

/// Its query.
#[derive(Deserialize, JsonSchema)]
pub struct ChangesetQuery {
    pub limit: u32,
}

/// The part of Nexus's internal API dpd's NAT RPW calls, for dropshot.
#[dropshot::api_description]
pub trait NexusInternalApi {
    type Context;

    /// The instance NAT changes after generation `from_gen`, oldest first.
    #[endpoint { method = GET, path = "/nat/ipv4/changeset/{from_gen}" }]
    async fn ipv4_nat_changeset(
        rqctx: RequestContext<Self::Context>,
        path: Path<ChangesetPath>,
        query: Query<ChangesetQuery>,
    ) -> Result<HttpResponseOk<Vec<NatEntryView>>, HttpError>;
}

/// The dropshot implementation over one Nexus's store.
pub struct DropshotImpl<H>(std::marker::PhantomData<H>);

impl<H: NexusHost> NexusInternalApi for DropshotImpl<H> {
    type Context = NexusStore<H>;

    async fn ipv4_nat_changeset(
        rqctx: RequestContext<NexusStore<H>>,
        path: Path<ChangesetPath>,
        query: Query<ChangesetQuery>,
    ) -> Result<HttpResponseOk<Vec<NatEntryView>>, HttpError> {
        let changes = rqctx
            .context()
            .nat_changeset(path.into_inner().from_gen, query.into_inner().limit)
            .await
            .map_err(|e| HttpError::for_unavail(None, format!("database: {e}")))?;
        Ok(HttpResponseOk(changes))
    }
}

/// Starts a dropshot server of the internal API over `store` on `bind`.
pub fn server<H: NexusHost>(
    store: NexusStore<H>,
    bind: SocketAddr,
) -> Result<HttpServer<NexusStore<H>>, String> {
    let api =
        nexus_internal_api_mod::api_description::<DropshotImpl<H>>().map_err(|e| e.to_string())?;
    let log = ConfigLogging::StderrTerminal {
        level: ConfigLoggingLevel::Critical,
    }
    .to_logger("racksim-nexus")
    .map_err(|e| e.to_string())?;
    ServerBuilder::new(api, store, log)
        .config(ConfigDropshot {
            bind_address: bind,
            ..Default::default()
        })
        .start()
        .map_err(|e| format!("Nexus internal API: {e}"))
}

#[cfg(test)]
mod tests;
