//! MGS's API as dropshot serves it: the [`MgsApi`] trait
//! (`/local/switch-id` and a sled's power state, as MGS publishes them),
//! [`MgsImpl`] over the [`MgsState`] state machine, its OpenAPI document
//! and its server. MGS makes no changes, but it can be made to show a
//! fault (live mode's `mgs-errors` and `mgs-hang`), so its context is a
//! [`MgsContext`].

use std::net::SocketAddr;

use dropshot::{HttpError, HttpResponseOk, HttpServer, Path, RequestContext};
use racksim_wire::mgs::{self, SpIdentifier};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::{
    context::Shared,
    http_error,
    server::{document, start, ServeError},
};
use racksim_fakes::{mgs::MgsState, upstream::Service};

/// The management gateway's `/local/switch-id` (MGS 3.0.0).
#[dropshot::api_description]
pub trait MgsApi {
    type Context;

    /// Get the identifier for the switch this MGS instance is connected to.
    #[endpoint { method = GET, path = "/local/switch-id" }]
    async fn sp_local_switch_id(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<SpIdentifier>, HttpError>;

    /// Get the current power state of a sled via its SP.
    #[endpoint { method = GET, path = "/sp/{type}/{slot}/power-state" }]
    async fn sp_power_state_get(
        rqctx: RequestContext<Self::Context>,
        path: Path<SpPath>,
    ) -> Result<HttpResponseOk<mgs::PowerState>, HttpError>;
}

/// Path of `/sp/{type}/{slot}/...`.
#[derive(Deserialize, JsonSchema)]
pub struct SpPath {
    #[serde(rename = "type")]
    pub typ: mgs::SpType,
    pub slot: u16,
}

/// What the MGS server holds: the state machine and the fault it shows.
/// MGS changes nothing, so it has no changes to observe.
pub type MgsContext = Shared<MgsState, ()>;

/// [`MgsApi`] served by [`MgsState`].
pub enum MgsImpl {}

impl MgsApi for MgsImpl {
    type Context = MgsContext;

    async fn sp_local_switch_id(
        rqctx: RequestContext<MgsContext>,
    ) -> Result<HttpResponseOk<SpIdentifier>, HttpError> {
        let ctx = rqctx.context();
        ctx.meet_fault("MGS").await?;
        let id = ctx.lock().local_switch_id();
        Ok(HttpResponseOk(id))
    }

    async fn sp_power_state_get(
        rqctx: RequestContext<MgsContext>,
        path: Path<SpPath>,
    ) -> Result<HttpResponseOk<mgs::PowerState>, HttpError> {
        let ctx = rqctx.context();
        ctx.meet_fault("MGS").await?;
        let SpPath { typ, slot } = path.into_inner();
        match typ {
            mgs::SpType::Sled => {
                let state = ctx.lock().sled_power_state(slot).map_err(http_error)?;
                Ok(HttpResponseOk(state))
            }
            // The fake knows only its rack's sleds (see `racksim_fakes::mgs`).
            mgs::SpType::Switch | mgs::SpType::Power => {
                Err(http_error(racksim_fakes::http::ApiError::new(
                    http::StatusCode::NOT_FOUND,
                    Some("SpDoesNotExist"),
                    format!("the fake MGS reports power only for sleds, not {typ:?} {slot}"),
                )))
            }
        }
    }
}

/// Title of MGS's published API, as in its OpenAPI document.
pub const MGS_TITLE: &str = "Oxide Management Gateway Service API";

/// The OpenAPI document of the fake MGS.
pub fn mgs_openapi() -> serde_json::Value {
    let api = mgs_api_mod::stub_api_description().expect("the MGS API is well formed");
    document(api, MGS_TITLE, mgs::API_VERSION)
}

/// Serves a fake MGS on `bind`.
pub fn serve_mgs(bind: SocketAddr, mgs: MgsContext) -> Result<HttpServer<MgsContext>, ServeError> {
    let api = mgs_api_mod::api_description::<MgsImpl>()
        .map_err(|e| ServeError(format!("MGS API: {e}")))?;
    start(api, mgs, bind, mgs::API_VERSION, Service::Mgs)
}
