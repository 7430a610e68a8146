//! Nexus's sled-agent client against the fake sled-agent's dropshot server
//! on a real loopback socket (live mode's server); the instance tests run
//! the same client against the same state machine on an in-memory network.

use std::net::{Ipv4Addr, SocketAddr};

use racksim_fakes::sled_agent::SledAgentState;
use racksim_reconciler::{
    dpd::MacAddr,
    http::{HttpClient, TokioConnector},
};
use racksim_servers::{serve_sled_agent, SledAgentContext};

use racksim_nexus::instances::{
    SledAgentClient, VirtualNetworkInterfaceHost, VmmState, SLED_AGENT_API_VERSION,
};

fn loopback() -> SocketAddr {
    SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0)
}

#[tokio::test]
async fn the_client_works_against_the_dropshot_server() {
    let agent_ctx = SledAgentContext::new(SledAgentState::default());
    let agent = serve_sled_agent(loopback(), agent_ctx.clone()).unwrap();
    let client = SledAgentClient::new(HttpClient::new(TokioConnector, agent.local_addr()));
    let m = VirtualNetworkInterfaceHost {
        virtual_ip: "172.30.0.5".parse().unwrap(),
        virtual_mac: MacAddr::new([0xa8, 0x40, 0x25, 0xf0, 0, 1]),
        physical_host_ip: "fd00:1122:3344:102::1".parse().unwrap(),
        vni: 1001,
    };
    client.v2p_set(&m).await.unwrap();
    assert_eq!(client.v2p_list().await.unwrap(), vec![m]);
    // VMMs by propolis id: two of one instance side by side.
    client.vmm_register(70, 7).await.unwrap();
    client.vmm_register(71, 7).await.unwrap();
    client.vmm_register(71, 7).await.unwrap();
    client.vmm_put_state(71, VmmState::Running).await.unwrap();
    let listed: Vec<(u64, VmmState)> = client
        .vmm_list()
        .await
        .unwrap()
        .iter()
        .map(|v| (v.vmm_id, v.state))
        .collect();
    assert_eq!(listed, [(70, VmmState::Starting), (71, VmmState::Running)]);
    assert_eq!(
        client.vmm_get_state(71).await.unwrap().unwrap().instance_id,
        7
    );
    // Unregister, then again: the VMM is gone, and that is success.
    client.vmm_unregister(71).await.unwrap();
    client.vmm_unregister(71).await.unwrap();
    assert_eq!(client.vmm_get_state(71).await.unwrap(), None);
    assert_eq!(
        client
            .vmm_put_state(71, VmmState::Running)
            .await
            .unwrap_err()
            .status(),
        Some(404)
    );
    // A propolis id that is not a number: dropshot's 400.
    let raw = HttpClient::new(TokioConnector, agent.local_addr())
        .with_api_version(SLED_AGENT_API_VERSION);
    let bad = raw
        .get::<serde_json::Value>("/vmms/not-a-number/state")
        .await
        .unwrap_err();
    assert_eq!(bad.status(), Some(400));
    assert_eq!(agent_ctx.lock().vmm_list().len(), 1);
    client.v2p_del(&m).await.unwrap();
    assert!(agent_ctx.lock().v2p_list().is_empty());
    agent.close().await.unwrap();
}
