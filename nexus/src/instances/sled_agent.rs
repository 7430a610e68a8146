//! Typed client of the parts of sled-agent's API instance networking needs.
//!
//! `/v2p` is exactly sled-agent's published API
//! (`reference/sled-agent-v2p-subset.json`); note that its `MacAddr` is a
//! *string* (`"A8:40:25:F0:00:01"`), unlike dpd's `{"a": [..]}` — the same
//! Rust type, two wire formats, hence [`mac_string`]. `/vmms` is a reduced
//! form of upstream's VMM API, keyed as upstream's by the VMM's (Propolis)
//! id: register, set and read the state, unregister; and a list, racksim's
//! own.
//! The wire types are those of `racksim-wire`, re-exported here.

use std::net::SocketAddr;

pub use racksim_wire::sled_agent::{
    mac_string, VirtualNetworkInterfaceHost, VmmInfo, VmmRegistration, VmmState, VmmStateRequest,
    VmmUnregisterResponse, API_VERSION, NO_SUCH_INSTANCE,
};

use racksim_reconciler::http::{ClientError, Connector, HttpClient};

/// Client of one sled-agent.
#[derive(Clone, Debug)]
pub struct SledAgentClient<C> {
    http: HttpClient<C>,
}

impl<C: Connector> SledAgentClient<C> {
    /// A client sending sled-agent's [`API_VERSION`] with every request.
    pub fn new(http: HttpClient<C>) -> Self {
        SledAgentClient {
            http: http.with_api_version(API_VERSION),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.http.addr()
    }

    /// `GET /v2p`
    pub async fn v2p_list(&self) -> Result<Vec<VirtualNetworkInterfaceHost>, ClientError> {
        self.http.get("/v2p").await
    }

    /// `PUT /v2p` (204). Creates or replaces the mapping of that virtual NIC.
    pub async fn v2p_set(&self, m: &VirtualNetworkInterfaceHost) -> Result<(), ClientError> {
        self.http.put("/v2p", m).await
    }

    /// `DELETE /v2p` with the mapping as the body (204).
    pub async fn v2p_del(&self, m: &VirtualNetworkInterfaceHost) -> Result<(), ClientError> {
        self.http.delete_with_body("/v2p", m).await
    }

    /// `PUT /vmms/{vmm}` body `{"instance_id": ..}` (204): registers VMM
    /// `vmm` (its propolis id) of `instance`, as upstream's `vmm_register`.
    /// Idempotent for the same pair; other VMMs of the instance may be
    /// registered on the sled beside it.
    pub async fn vmm_register(&self, vmm: u64, instance: u32) -> Result<(), ClientError> {
        self.http
            .put(
                &format!("/vmms/{vmm}"),
                &VmmRegistration {
                    instance_id: instance,
                },
            )
            .await
    }

    /// `PUT /vmms/{vmm}/state` (204; 404 `NO_SUCH_INSTANCE` if the sled
    /// does not have the VMM), as upstream's `vmm_put_state`. `Stopped`
    /// destroys the VMM and unregisters it.
    pub async fn vmm_put_state(&self, vmm: u64, state: VmmState) -> Result<(), ClientError> {
        self.http
            .put(&format!("/vmms/{vmm}/state"), &VmmStateRequest { state })
            .await
    }

    /// `DELETE /vmms/{vmm}`, as upstream's `vmm_unregister`: the VMM is
    /// terminated and unregistered; a VMM the sled does not have is
    /// success (the answer's `updated_runtime`, which this reduced client
    /// does not read, is then null).
    pub async fn vmm_unregister(&self, vmm: u64) -> Result<(), ClientError> {
        self.http.delete(&format!("/vmms/{vmm}")).await
    }

    /// `GET /vmms`: every VMM of the sled, by propolis id. racksim's own
    /// route (upstream's sled-agent lists no VMMs), for checks and tests.
    pub async fn vmm_list(&self) -> Result<Vec<VmmInfo>, ClientError> {
        self.http.get("/vmms").await
    }

    /// `GET /vmms/{vmm}/state`, as upstream's `vmm_get_state`: the VMM, or
    /// `None` when sled-agent answers 404 with error code
    /// [`NO_SUCH_INSTANCE`] — it has no such VMM (a rebooted sled has
    /// none).
    pub async fn vmm_get_state(&self, vmm: u64) -> Result<Option<VmmInfo>, ClientError> {
        match self.http.get(&format!("/vmms/{vmm}/state")).await {
            Ok(info) => Ok(Some(info)),
            Err(e) if e.status() == Some(404) && e.error_code() == Some(NO_SUCH_INSTANCE) => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}
