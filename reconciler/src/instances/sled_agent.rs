//! Typed client of the parts of sled-agent's API instance networking needs.
//!
//! `/v2p` is exactly sled-agent's published API
//! (`reference/sled-agent-v2p-subset.json`); note that its `MacAddr` is a
//! *string* (`"A8:40:25:F0:00:01"`), unlike dpd's `{"a": [..]}` — the same
//! Rust type, two wire formats, hence [`mac_string`]. `/instances` is this
//! project's reduced instance API (register a VMM, set its state, list).
//! The wire types are those of `racksim-wire`, re-exported here.

use std::net::SocketAddr;

pub use racksim_wire::sled_agent::{
    mac_string, VirtualNetworkInterfaceHost, VmmInfo, VmmRegistration, VmmState, VmmStateRequest,
    API_VERSION, NO_SUCH_INSTANCE,
};

use crate::http::{ClientError, Connector, HttpClient};

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

    /// `PUT /instances/{instance}` body `{"vmm_id": ..}` (204; 409 if another
    /// VMM is registered for the instance). Idempotent for the same VMM.
    pub async fn instance_register(&self, instance: u32, vmm_id: u64) -> Result<(), ClientError> {
        self.http
            .put(
                &format!("/instances/{instance}"),
                &VmmRegistration { vmm_id },
            )
            .await
    }

    /// `PUT /instances/{instance}/state` (204; 404 if no VMM is registered).
    /// `Stopped` destroys the VMM.
    pub async fn instance_set_state(
        &self,
        instance: u32,
        state: VmmState,
    ) -> Result<(), ClientError> {
        self.http
            .put(
                &format!("/instances/{instance}/state"),
                &VmmStateRequest { state },
            )
            .await
    }

    /// `GET /instances`
    pub async fn instances(&self) -> Result<Vec<VmmInfo>, ClientError> {
        self.http.get("/instances").await
    }

    /// `GET /instances/{instance}/state`: the VMM this sled runs for the
    /// instance, or `None` when sled-agent answers 404 with error code
    /// [`NO_SUCH_INSTANCE`] — it has no VMM for it (a rebooted sled has
    /// none). Upstream's `vmm_get_state` is keyed by the VMM's (Propolis)
    /// id; this reduced API is keyed by the instance, and the caller
    /// compares the VMM id.
    pub async fn instance_state(&self, instance: u32) -> Result<Option<VmmInfo>, ClientError> {
        match self.http.get(&format!("/instances/{instance}/state")).await {
            Ok(info) => Ok(Some(info)),
            Err(e) if e.status() == Some(404) && e.error_code() == Some(NO_SUCH_INSTANCE) => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}
