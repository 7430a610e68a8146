//! This crate's clients against the fakes' dropshot servers on real
//! loopback sockets (live mode's servers): the unit tests run the same
//! clients against the same state machines on an in-memory network, and
//! `racksim-fakes`' own tests speak raw HTTP to these servers.

use std::net::{Ipv4Addr, SocketAddr};

use racksim_fakes::{
    api::{serve_dpd, serve_mgs, serve_sled_agent, DpdContext, Shared, SledAgentContext},
    dpd::DpdState,
    memnet::service_target,
    mgs::MgsState,
    sled_agent::SledAgentState,
};
use racksim_reconciler::{
    dpd::{DpdClient, Ipv4Nat, MacAddr},
    http::{HttpClient, TokioConnector},
    instances::{SledAgentClient, VirtualNetworkInterfaceHost, VmmState, SLED_AGENT_API_VERSION},
    mgs::{MgsClient, SpIdentifier},
};

fn loopback() -> SocketAddr {
    SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0)
}

#[tokio::test]
async fn racksim_clients_work_against_the_dropshot_servers() {
    let ctx = DpdContext::new(DpdState::new(0));
    let server = serve_dpd(loopback(), ctx.clone()).unwrap();
    let client = DpdClient::new(HttpClient::new(TokioConnector, server.local_addr()));
    let ip = Ipv4Addr::new(198, 51, 100, 1);
    for i in 0..100u16 {
        client
            .nat_ipv4_create(ip, i * 10, i * 10 + 9, &service_target(1))
            .await
            .unwrap();
    }
    let all = client.nat_ipv4_list_all(ip, 128).await.unwrap();
    assert_eq!(all.len(), 100);
    assert_eq!(all, ctx.lock().ipv4_entries());
    let page = client.nat_ipv4_list(ip, Some(128), None).await.unwrap();
    assert_eq!(page.items.len(), 64);
    let conflict = client
        .nat_ipv4_create(ip, 5, 25, &service_target(2))
        .await
        .unwrap_err();
    assert_eq!(conflict.status(), Some(409));
    client.nat_ipv4_delete(ip, 5).await.unwrap();
    client.nat_ipv4_delete(ip, 5).await.unwrap();
    assert_eq!(client.nat_ipv4_get(ip, 5).await.unwrap(), None);
    assert_eq!(
        ctx.lock().ipv4_entries().first().copied(),
        Some(Ipv4Nat {
            external: ip,
            low: 10,
            high: 19,
            target: service_target(1)
        })
    );
    server.close().await.unwrap();

    let mgs = serve_mgs(loopback(), Shared::new(MgsState::new(1))).unwrap();
    let id = MgsClient::new(HttpClient::new(TokioConnector, mgs.local_addr()))
        .local_switch_id()
        .await
        .unwrap();
    assert_eq!(id.slot, 1);
    // Without the `api-version` header MGS refuses the request.
    let unversioned = HttpClient::new(TokioConnector, mgs.local_addr())
        .get::<SpIdentifier>("/local/switch-id")
        .await
        .unwrap_err();
    assert_eq!(unversioned.status(), Some(400));
    mgs.close().await.unwrap();

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
