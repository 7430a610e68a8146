//! sled-agent's API as dropshot serves it: the [`SledAgentApi`] trait
//! (`/v2p` as sled-agent publishes it, and racksim's reduced instance
//! API), [`SledAgentImpl`] over the [`SledAgentState`] state machine, its
//! OpenAPI document and its server.

use std::net::SocketAddr;

use dropshot::{
    HttpError, HttpResponseOk, HttpResponseUpdatedNoContent, HttpServer, Path, RequestContext,
    TypedBody,
};
use racksim_wire::sled_agent::{
    VirtualNetworkInterfaceHost, VmmInfo, VmmRegistration, VmmStateRequest,
    API_VERSION as SLED_AGENT_API_VERSION,
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    context::Shared,
    server::{document, start, ServeError},
};
use crate::{
    sled_agent::{SledAgentChange, SledAgentState},
    upstream::Service,
};

/// Path of `/instances/{instance_id}`.
#[derive(Deserialize, JsonSchema)]
pub struct InstancePath {
    pub instance_id: u32,
}

/// sled-agent's V2P API (sled-agent 48.0.0) and racksim's reduced instance
/// API.
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

    /// List the VMMs on this sled (racksim's reduced instance API).
    #[endpoint { method = GET, path = "/instances" }]
    async fn instances_list(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<Vec<VmmInfo>>, HttpError>;

    /// The state of an instance's VMM (404 `NO_SUCH_INSTANCE` without one).
    #[endpoint { method = GET, path = "/instances/{instance_id}/state" }]
    async fn instance_get_state(
        rqctx: RequestContext<Self::Context>,
        path: Path<InstancePath>,
    ) -> Result<HttpResponseOk<VmmInfo>, HttpError>;

    /// Register a VMM for an instance (idempotent for the same VMM).
    #[endpoint { method = PUT, path = "/instances/{instance_id}" }]
    async fn instance_register(
        rqctx: RequestContext<Self::Context>,
        path: Path<InstancePath>,
        body: TypedBody<VmmRegistration>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError>;

    /// Set the state of an instance's VMM (`stopped` destroys it).
    #[endpoint { method = PUT, path = "/instances/{instance_id}/state" }]
    async fn instance_put_state(
        rqctx: RequestContext<Self::Context>,
        path: Path<InstancePath>,
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

    async fn instances_list(
        rqctx: RequestContext<SledAgentContext>,
    ) -> Result<HttpResponseOk<Vec<VmmInfo>>, HttpError> {
        let vmms = rqctx.context().read(SERVICE, |a| Ok(a.instances())).await?;
        Ok(HttpResponseOk(vmms))
    }

    async fn instance_get_state(
        rqctx: RequestContext<SledAgentContext>,
        path: Path<InstancePath>,
    ) -> Result<HttpResponseOk<VmmInfo>, HttpError> {
        let id = path.into_inner().instance_id;
        let vmm = rqctx.context().read(SERVICE, |a| a.state(id)).await?;
        Ok(HttpResponseOk(vmm))
    }

    async fn instance_register(
        rqctx: RequestContext<SledAgentContext>,
        path: Path<InstancePath>,
        body: TypedBody<VmmRegistration>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        let id = path.into_inner().instance_id;
        let reg = body.into_inner();
        let register = |a: &mut SledAgentState| a.register(id, reg);
        rqctx.context().update(SERVICE, register).await?;
        Ok(HttpResponseUpdatedNoContent())
    }

    async fn instance_put_state(
        rqctx: RequestContext<SledAgentContext>,
        path: Path<InstancePath>,
        body: TypedBody<VmmStateRequest>,
    ) -> Result<HttpResponseUpdatedNoContent, HttpError> {
        let id = path.into_inner().instance_id;
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
