//! The reconciler's clients against the fakes' dropshot servers on real
//! loopback sockets (live mode's servers); Nexus's sled-agent client is
//! tried the same way in `sled_agent_client.rs`. The reconciler's unit
//! tests run the same clients against the same state machines on an
//! in-memory network, and `dropshot_live.rs` speaks raw HTTP to these
//! servers.

use std::net::{Ipv4Addr, SocketAddr};

use racksim_fakes::{dpd::DpdState, memnet::service_target, mgs::MgsState};
use racksim_reconciler::{
    dpd::{DpdClient, Ipv4Nat},
    http::{HttpClient, TokioConnector},
    mgs::{MgsClient, SpIdentifier},
};
use racksim_servers::{serve_dpd, serve_mgs, DpdContext, Shared};

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
}
