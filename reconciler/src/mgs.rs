//! Client of the management gateway's `GET /local/switch-id`.
//!
//! MGS runs in each switch zone and is cabled (through the scrimlet) to one
//! sidecar. Asking it which switch it manages is the only reliable way to map
//! a switch zone's address to a slot: the addresses come from DNS, and DNS
//! says nothing about which switch is behind which address. The answer is
//! `{"type":"switch","slot":0}` (see `reference/gateway-local-switch-id-subset.json`).

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::{
    discovery::SwitchSlot,
    http::{ClientError, Connector, HttpClient},
};

/// The version of MGS's API this client is written against (`info.version`
/// of `reference/gateway-local-switch-id-subset.json`).
pub const API_VERSION: &str = "3.0.0";

/// Kind of service processor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SpType {
    Sled,
    Power,
    Switch,
}

/// `{"type": "switch", "slot": 0}`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct SpIdentifier {
    #[serde(rename = "type")]
    pub typ: SpType,
    pub slot: u16,
}

impl SpIdentifier {
    /// The switch slot this identifier names, if it names a switch in a
    /// valid slot. Anything else from `/local/switch-id` means the zone is
    /// misconfigured, and callers treat that zone as not found.
    pub fn switch_slot(&self) -> Option<SwitchSlot> {
        match self.typ {
            SpType::Switch => SwitchSlot::from_index(self.slot),
            SpType::Sled | SpType::Power => None,
        }
    }
}

/// A service processor's view of its host's power (MGS's `PowerState`):
/// `A0` is on; `A1` and `A2` are the off states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub enum PowerState {
    A0,
    A1,
    A2,
}

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
    use serde_json::json;

    use super::*;
    use crate::{
        testing::{zone_ip, FakeNet, FakeResponse},
        MGS_PORT,
    };

    #[test]
    fn sp_identifier_wire_shape() {
        let id: SpIdentifier =
            serde_json::from_value(json!({"type": "switch", "slot": 1})).unwrap();
        assert_eq!(
            id,
            SpIdentifier {
                typ: SpType::Switch,
                slot: 1
            }
        );
        assert_eq!(id.switch_slot(), Some(SwitchSlot::Switch1));
        assert_eq!(
            serde_json::to_value(SpIdentifier {
                typ: SpType::Sled,
                slot: 3
            })
            .unwrap(),
            json!({"type": "sled", "slot": 3})
        );
        assert_eq!(
            SpIdentifier {
                typ: SpType::Sled,
                slot: 0
            }
            .switch_slot(),
            None
        );
        assert_eq!(
            SpIdentifier {
                typ: SpType::Switch,
                slot: 2
            }
            .switch_slot(),
            None
        );
    }

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
