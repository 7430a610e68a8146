//! Clients progenitor generates from upstream's whole published documents
//! drive a live rack's fakes on loopback, as upstream's own code would:
//! dendrite's dpd 13.0.0, omicron's MGS 3.0.0 and sled-agent 48.0.0. Every
//! response must deserialise into the generated types, and the answers must
//! be upstream's: the tables the rack converged to, dendrite's 409 for a
//! conflicting mapping, 204s for deletes present and absent, pages with
//! tokens, and the 501 of an upstream operation the fakes do not serve.
//!
//! The rack's reconcilers run with a period of an hour here: they converge
//! the rack at start and then leave the tables alone while the test writes
//! to them.

use std::{
    net::{Ipv4Addr, Ipv6Addr},
    num::NonZeroU32,
    time::Duration,
};

use futures::TryStreamExt;
use racksim_live::{LiveOptions, LiveRack};
use racksim_upstream_clients::{dpd, mgs, sled_agent};
use serde::Serialize;
use serde_json::{json, Value};

const BOUND: Duration = Duration::from_secs(20);

async fn converged(live: &LiveRack) -> bool {
    let state = live.state().await;
    let mut want = state.desired_nat.clone();
    want.sort_by_key(|e| (e.external, e.low));
    !want.is_empty()
        && state.switches.iter().all(|s| {
            let mut have = s.nat.clone();
            have.sort_by_key(|e| (e.external, e.low));
            have == want
        })
}

async fn start_live() -> LiveRack {
    let scenario =
        racksim_live::scenario::catalogue::get("sidecar-power-cycle").expect("catalogued");
    let opts = LiveOptions {
        period: Duration::from_secs(3600),
        ..LiveOptions::default()
    };
    let live = LiveRack::start(&scenario, opts).await.unwrap();
    let deadline = tokio::time::Instant::now() + BOUND;
    while !converged(&live).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the live rack did not converge within {BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    live
}

/// `value` as JSON, to compare a generated type with racksim's own.
fn j<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap()
}

fn url(addr: &str) -> String {
    format!("http://{addr}")
}

/// The status and body of a generated client's error response.
fn error_response<T: std::fmt::Debug>(e: progenitor_error::Error<T>) -> (u16, T) {
    match e {
        progenitor_error::Error::ErrorResponse(rv) => (rv.status().as_u16(), rv.into_inner()),
        other => panic!("expected an error response, got {other:?}"),
    }
}

/// progenitor's error type, as each generated client re-exports it.
mod progenitor_error {
    pub use racksim_upstream_clients::dpd::Error;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dpd_as_dendrites_generated_client_sees_it() {
    let live = start_live().await;
    let state = live.state().await;
    let switch0 = &state.switches[0];
    let dpd = dpd::Client::new(&url(&switch0.dpd));

    // The addresses and entries, with the generated stream helpers.
    let addresses: Vec<Ipv4Addr> = dpd
        .nat_ipv4_addresses_list_stream(None)
        .try_collect()
        .await
        .unwrap();
    let mut want_addresses: Vec<Ipv4Addr> = switch0.nat.iter().map(|e| e.external).collect();
    want_addresses.sort();
    want_addresses.dedup();
    assert_eq!(addresses, want_addresses);
    let mut entries = Vec::new();
    for ip in &addresses {
        let page: Vec<dpd::types::Ipv4Nat> = dpd
            .nat_ipv4_list_stream(ip, None)
            .try_collect()
            .await
            .unwrap();
        entries.extend(page);
    }
    let mut have_nat = switch0.nat.clone();
    have_nat.sort_by_key(|e| (e.external, e.low));
    assert_eq!(j(&entries), j(&have_nat), "the converged table, as listed");

    // Pages of one, with the token passed by hand: each page holds one
    // entry and a token, the last one is empty.
    let ip: Ipv4Addr = "198.51.100.77".parse().unwrap();
    let target = |sled: u8| -> dpd::types::NatTarget {
        serde_json::from_value(json!({
            "internal_ip": format!("fd00:1122:3344:10{sled}::1"),
            "inner_mac": {"a": [0xa8, 0x40, 0x25, 0xff, 0, sled]},
            "vni": 100,
        }))
        .unwrap()
    };
    for (low, high) in [(0u16, 99u16), (100, 199), (200, 299)] {
        let created = dpd
            .nat_ipv4_create(&ip, low, high, &target(1))
            .await
            .unwrap();
        assert_eq!(created.status().as_u16(), 204);
    }
    let one = NonZeroU32::new(1);
    let mut token: Option<String> = None;
    let mut lows = Vec::new();
    loop {
        let page = dpd
            .nat_ipv4_list(&ip, one, token.as_deref())
            .await
            .unwrap()
            .into_inner();
        if page.items.is_empty() {
            assert_eq!(page.next_page, None, "an empty page ends the listing");
            break;
        }
        assert_eq!(page.items.len(), 1);
        assert!(page.next_page.is_some(), "every non-empty page has a token");
        lows.push(page.items[0].low);
        token = page.next_page;
    }
    assert_eq!(lows, [0, 100, 200]);

    // Identical create: a no-op; overlapping: dendrite's 409, typed.
    dpd.nat_ipv4_create(&ip, 0, 99, &target(1)).await.unwrap();
    let (status, error) = error_response(
        dpd.nat_ipv4_create(&ip, 50, 150, &target(2))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 409);
    assert_eq!(error.error_code.as_deref(), Some("conflicting mapping"));
    assert_eq!(error.message, "Conflict");
    let got = dpd.nat_ipv4_get(&ip, 150).await.unwrap().into_inner();
    assert_eq!(j(&got), j(&target(1)), "the entry holding port 150");
    let (status, error) = error_response(dpd.nat_ipv4_get(&ip, 300).await.unwrap_err());
    assert_eq!(
        (status, error.error_code.as_deref()),
        (404, Some("no mapping"))
    );

    // Deletes: present and absent are both 204.
    for low in [0, 100, 200, 100] {
        let deleted = dpd.nat_ipv4_delete(&ip, low).await.unwrap();
        assert_eq!(deleted.status().as_u16(), 204);
    }
    let left: Vec<dpd::types::Ipv4Nat> = dpd
        .nat_ipv4_list_stream(&ip, None)
        .try_collect()
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");

    // IPv6 too.
    let ip6: Ipv6Addr = "2001:db8::77".parse().unwrap();
    dpd.nat_ipv6_create(&ip6, 10, 20, &target(3)).await.unwrap();
    let v6: Vec<dpd::types::Ipv6Nat> = dpd
        .nat_ipv6_list_stream(&ip6, None)
        .try_collect()
        .await
        .unwrap();
    assert_eq!((v6.len(), v6[0].low, v6[0].high), (1, 10, 20));
    dpd.nat_ipv6_delete(&ip6, 10).await.unwrap();

    // The RPW's generation and trigger, and the switch's identifiers.
    let generation = dpd.nat_generation().await.unwrap().into_inner();
    assert_eq!(generation, switch0.nat_generation);
    dpd.nat_trigger_update().await.unwrap();
    let ids = dpd.switch_identifiers().await.unwrap().into_inner();
    assert_eq!(ids.slot, 0, "switch0's dpd names slot 0");
    assert_eq!((ids.lotnum, ids.fuse.is_none()), (None, true));

    // An operation upstream has and the fake does not serve: the 501 that
    // names it, not a 404 a client would take for "no such resource".
    let (status, error) = error_response(dpd.port_list().await.unwrap_err());
    assert_eq!(status, 501);
    assert_eq!(
        error.error_code.as_deref(),
        Some(racksim_fakes::upstream::ERROR_CODE)
    );
    assert!(error.message.contains("port_list"), "{}", error.message);

    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgs_and_sled_agent_as_omicrons_generated_clients_see_them() {
    let live = start_live().await;
    let state = live.state().await;

    // MGS: the switch each management gateway is attached to.
    for (i, switch) in state.switches.iter().enumerate() {
        let mgs = mgs::Client::new(&url(&switch.mgs));
        let id = mgs.sp_local_switch_id().await.unwrap().into_inner();
        assert_eq!(
            j(&id),
            json!({"type": "switch", "slot": i}),
            "{}",
            switch.switch
        );
    }
    let mgs = mgs::Client::new(&url(&state.switches[0].mgs));
    let power = mgs
        .sp_power_state_get(mgs::types::SpType::Sled, 0)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(j(&power), json!("A0"), "a running sled");
    match mgs.ignition_list().await {
        Err(mgs::Error::ErrorResponse(rv)) => {
            assert_eq!(rv.status().as_u16(), 501);
            assert_eq!(
                rv.into_inner().error_code.as_deref(),
                Some(racksim_fakes::upstream::ERROR_CODE)
            );
        }
        other => panic!("ignition_list: {other:?}"),
    }

    // sled-agent: V2P mappings set, listed as sent (MACs in upstream's
    // upper case), and deleted; deleting again is fine.
    let sled = &state.sleds[0];
    let agent = sled_agent::Client::new(&url(&sled.sled_agent));
    let mapping: sled_agent::types::VirtualNetworkInterfaceHost = serde_json::from_value(json!({
        "physical_host_ip": "fd00:1122:3344:102::1",
        "virtual_ip": "172.30.0.5",
        "virtual_mac": "A8:40:25:F0:00:05",
        "vni": 1000,
    }))
    .unwrap();
    agent.set_v2p(&mapping).await.unwrap();
    let listed = agent.list_v2p().await.unwrap().into_inner();
    assert!(
        listed.contains(&mapping),
        "the mapping as sent, in {listed:?}"
    );
    let in_state = live.state().await.sleds[0].v2p.clone();
    assert_eq!(j(&in_state), j(&listed), "what the fake holds");
    agent.del_v2p(&mapping).await.unwrap();
    agent.del_v2p(&mapping).await.unwrap();
    let listed = agent.list_v2p().await.unwrap().into_inner();
    assert!(!listed.contains(&mapping));
    match agent.inventory().await {
        Err(sled_agent::Error::ErrorResponse(rv)) => assert_eq!(rv.status().as_u16(), 501),
        other => panic!("inventory: {other:?}"),
    }
    // The VMM routes are upstream's, keyed by propolis id, but racksim's
    // propolis ids are numbers: upstream's UUID is a 400, not the 501 of an
    // operation the fake does not serve.
    let propolis: sled_agent::types::PropolisUuid =
        serde_json::from_value(json!("3f6d5e4c-1b2a-4c3d-8e9f-0a1b2c3d4e5f")).unwrap();
    match agent.vmm_unregister(&propolis).await {
        Err(sled_agent::Error::ErrorResponse(rv)) => assert_eq!(rv.status().as_u16(), 400),
        other => panic!("vmm_unregister: {other:?}"),
    }
    match agent.vmm_get_state(&propolis).await {
        Err(sled_agent::Error::ErrorResponse(rv)) => assert_eq!(rv.status().as_u16(), 400),
        other => panic!("vmm_get_state: {other:?}"),
    }

    live.stop().await;
}
