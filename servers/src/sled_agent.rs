//! sled-agent's API as dropshot serves it: the [`SledAgentApi`] trait
//! (`/v2p` as sled-agent publishes it, and a reduced form of its
//! `/vmms/{propolis_id}` API), [`SledAgentImpl`] over the [`SledAgentState`] state machine, its
//! OpenAPI document and its server.

use std::net::SocketAddr;

use dropshot::{
    HttpError, HttpResponseOk, HttpResponseUpdatedNoContent, HttpServer, Path, RequestContext,
    TypedBody,
};
use racksim_wire::sled_agent::{
    VirtualNetworkInterfaceHost, VmmInfo, VmmRegistration, VmmStateRequest, VmmUnregisterResponse,
    API_VERSION as SLED_AGENT_API_VERSION,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::{
    context::Shared,
    server::{document, start, ServeError},
};
use racksim_fakes::{
    sled_agent::{SledAgentChange, SledAgentState},
    upstream::Service,
};

/// Path of `/vmms/{propolis_id}`: racksim's propolis ids are numbers
/// (upstream's are UUIDs), so anything else is a 400.
#[derive(Deserialize, JsonSchema)]
pub struct VmmPath {
    pub propolis_id: u64,
}

/// sled-agent's V2P API (sled-agent 48.0.0) and a reduced form of its VMM
/// API, keyed by propolis id.
#[dropshot::api_description]
pub trait SledAgentApi {
    type Context;

    /// List v2p mappings present on sled
    #[endpoint { method = GET, path = "/v2p" }]
    async fn list_v2p(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<Vec<VirtualNetworkInterfaceHost>>, HttpError>;

    /// Create a mapping from a virtual NIC to a physical host
    #[endpoint { method = PUT, path = "/v2p" }]
    async fn set_v2p(
        rqctx: RequestContext<Self::Context>,
        body: TypedBody<VirtualNetworkInterfaceHost>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;

    /// Delete a mapping from a virtual NIC to a physical host
    #[endpoint { method = DELETE, path = "/v2p" }]
    async fn del_v2p(
        rqctx: RequestContext<Self::Context>,
        body: TypedBody<VirtualNetworkInterfaceHost>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;

    /// List the VMMs on this sled, by propolis id. racksim's own route
    /// (upstream's sled-agent lists no VMMs), for checks and tests.
    #[endpoint { method = GET, path = "/vmms" }]
    async fn vmm_list(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<Vec<VmmInfo>>, HttpError>;

    /// The state of a VMM (404 `NO_SUCH_INSTANCE` without it).
    #[endpoint { method = GET, path = "/vmms/{propolis_id}/state" }]
    async fn vmm_get_state(
        rqctx: RequestContext<Self::Context>,
        path: Path<VmmPath>,
    ) -> Result<HttpResponseOk<VmmInfo>, HttpError>;

    /// Register a VMM for an instance (idempotent for the same pair; other
    /// VMMs of the instance may be registered beside it).
    #[endpoint { method = PUT, path = "/vmms/{propolis_id}" }]
    async fn vmm_register(
        rqctx: RequestContext<Self::Context>,
        path: Path<VmmPath>,
        body: TypedBody<VmmRegistration>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;

    /// Unregister a VMM, terminating it (a VMM the sled does not have is
    /// success, `updated_runtime` null).
    #[endpoint { method = DELETE, path = "/vmms/{propolis_id}" }]
    async fn vmm_unregister(
        rqctx: RequestContext<Self::Context>,
        path: Path<VmmPath>,
    ) -> Result<HttpResponseOk<VmmUnregisterResponse>, HttpError>;

    /// Set the state of a VMM (`stopped` destroys and unregisters it).
    #[endpoint { method = PUT, path = "/vmms/{propolis_id}/state" }]
    async fn vmm_put_state(
        rqctx: RequestContext<Self::Context>,
        path: Path<VmmPath>,
        body: TypedBody<VmmStateRequest>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;
}

/// The service a fault's answer names.
const SERVICE: &str = "sled-agent";

/// The context of a fake sled-agent server.
pub type SledAgentContext = Shared<SledAgentState, SledAgentChange>;

/// [`SledAgentApi`] served by [`SledAgentState`].
pub enum SledAgentImpl {}

impl SledAgentApi for SledAgentImpl {
    type Context = SledAgentContext;

    async fn list_v2p(
        rqctx: RequestContext<SledAgentContext>,
    ) -> Result<HttpResponseOk<Vec<VirtualNetworkInterfaceHost>>, HttpError> {
        let v2p = rqctx.context().read(SERVICE, |a| Ok(a.v2p_list())).await?;
        Ok(HttpResponseOk(v2p))
    }

    async fn set_v2p(
        rqctx: RequestContext<SledAgentContext>,
        body: TypedBody<VirtualNetworkInterfaceHost>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        let m = body.into_inner();
        rqctx.context().update(SERVICE, |a| a.v2p_set(m)).await?;
        Ok(HttpResponseUpdatedNoContent())
    }

    async fn del_v2p(
        rqctx: RequestContext<SledAgentContext>,
        body: TypedBody<VirtualNetworkInterfaceHost>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        let m = body.into_inner();
        rqctx.context().update(SERVICE, |a| a.v2p_del(&m)).await?;
        Ok(HttpResponseUpdatedNoContent())
    }

    async fn vmm_list(
        rqctx: RequestContext<SledAgentContext>,
    ) -> Result<HttpResponseOk<Vec<VmmInfo>>, HttpError> {
        let vmms = rqctx.context().read(SERVICE, |a| Ok(a.vmm_list())).await?;
        Ok(HttpResponseOk(vmms))
    }

    async fn vmm_get_state(
        rqctx: RequestContext<SledAgentContext>,
        path: Path<VmmPath>,
    ) -> Result<HttpResponseOk<VmmInfo>, HttpError> {
        let id = path.into_inner().propolis_id;
        let vmm = rqctx.context().read(SERVICE, |a| a.state(id)).await?;
        Ok(HttpResponseOk(vmm))
    }

    async fn vmm_register(
        rqctx: RequestContext<SledAgentContext>,
        path: Path<VmmPath>,
        body: TypedBody<VmmRegistration>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        let id = path.into_inner().propolis_id;
        let reg = body.into_inner();
        let register = |a: &mut SledAgentState| a.register(id, reg);
        rqctx.context().update(SERVICE, register).await?;
        Ok(HttpResponseUpdatedNoContent())
    }

    async fn vmm_unregister(
        rqctx: RequestContext<SledAgentContext>,
        path: Path<VmmPath>,
    ) -> Result<HttpResponseOk<VmmUnregisterResponse>, HttpError> {
        let id = path.into_inner().propolis_id;
        let mut answer = None;
        let unregister = |a: &mut SledAgentState| {
            let (response, change) = a.unregister(id);
            answer = Some(response);
            Ok(change)
        };
        rqctx.context().update(SERVICE, unregister).await?;
        Ok(HttpResponseOk(answer.unwrap_or(VmmUnregisterResponse {
            updated_runtime: None,
        })))
    }

    async fn vmm_put_state(
        rqctx: RequestContext<SledAgentContext>,
        path: Path<VmmPath>,
        body: TypedBody<VmmStateRequest>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        let id = path.into_inner().propolis_id;
        let want = body.into_inner();
        let set_state = |a: &mut SledAgentState| a.set_state(id, want);
        rqctx.context().update(SERVICE, set_state).await?;
        Ok(HttpResponseUpdatedNoContent())
    }
}

/// Title of sled-agent's published API, as in its OpenAPI document.
pub const SLED_AGENT_TITLE: &str = "Oxide Sled Agent API";

/// The OpenAPI document of the fake sled-agent.
pub fn sled_agent_openapi() -> serde_json::Value {
    let api =
        sled_agent_api_mod::stub_api_description().expect("the sled-agent API is well formed");
    document(api, SLED_AGENT_TITLE, SLED_AGENT_API_VERSION)
}

/// Serves a fake sled-agent on `bind`.
pub fn serve_sled_agent(
    bind: SocketAddr,
    context: SledAgentContext,
) -> Result<HttpServer<SledAgentContext>, ServeError> {
    let api = sled_agent_api_mod::api_description::<SledAgentImpl>()
        .map_err(|e| ServeError(format!("sled-agent API: {e}")))?;
    start(
        api,
        context,
        bind,
        SLED_AGENT_API_VERSION,
        Service::SledAgent,
    )
}
