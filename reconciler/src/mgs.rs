//! Client of the management gateway's `GET /local/switch-id`.
//!
//! MGS runs in each switch zone and is cabled (through the scrimlet) to one
//! sidecar. Asking it which switch it manages is the only reliable way to map
//! a switch zone's address to a slot: the addresses come from DNS, and DNS
//! says nothing about which switch is behind which address. The answer is
//! `{"type":"switch","slot":0}` (see `reference/gateway-local-switch-id-subset.json`).
//! The wire types are those of `racksim-wire`, re-exported here.

use std::net::SocketAddr;

pub use racksim_wire::mgs::{PowerState, SpIdentifier, SpType, API_VERSION};

use crate::http::{ClientError, Connector, HttpClient};

/// Client of one MGS.
#[derive(Clone, Debug)]
pub struct MgsClient<C> {
    http: HttpClient<C>,
}

impl<C: Connector> MgsClient<C> {
    /// A client sending MGS's [`API_VERSION`] with every request.
    pub fn new(http: HttpClient<C>) -> Self {
        MgsClient {
            http: http.with_api_version(API_VERSION),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.http.addr()
    }

    /// `GET /local/switch-id`: which switch this MGS manages.
    pub async fn local_switch_id(&self) -> Result<SpIdentifier, ClientError> {
        self.http.get("/local/switch-id").await
    }

    /// `GET /sp/sled/{slot}/power-state` (`sp_power_state_get`): whether
    /// the sled in cubby `slot` is powered on. Nexus's instance watcher
    /// asks it about a sled whose sled-agent it cannot reach.
    pub async fn sled_power_state(&self, slot: u16) -> Result<PowerState, ClientError> {
        self.http.get(&format!("/sp/sled/{slot}/power-state")).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        testing::{zone_ip, FakeNet, FakeResponse},
        MGS_PORT,
    };

    #[tokio::test(start_paused = true)]
    async fn local_switch_id_against_fake() {
        let net = FakeNet::new();
        net.add_switch_zone(zone_ip(7), 1);
        let addr = SocketAddr::new(zone_ip(7).into(), MGS_PORT);
        let client = MgsClient::new(HttpClient::new(net.connector(), addr));
        assert_eq!(client.addr(), addr);
        assert_eq!(
            client.local_switch_id().await.unwrap(),
            SpIdentifier {
                typ: SpType::Switch,
                slot: 1
            }
        );
        net.fail(
            zone_ip(7),
            MGS_PORT,
            "GET",
            "/local/switch-id",
            Some(FakeResponse::error(503, "no SP")),
        );
        assert_eq!(
            client.local_switch_id().await.unwrap_err().status(),
            Some(503)
        );
        assert_eq!(
            net.requests(zone_ip(7), MGS_PORT),
            vec!["GET /local/switch-id"; 2]
        );
    }
}
