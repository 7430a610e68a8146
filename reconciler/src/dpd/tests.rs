//! The dpd client against the fake dpd: paths, pages, versions.

use std::net::Ipv6Addr;

use serde_json::json;

use super::*;
use crate::{testing::FakeNet, DPD_PORT};

fn target() -> NatTarget {
    NatTarget {
        internal_ip: "fd00:1122:3344:101::1".parse().unwrap(),
        inner_mac: MacAddr::new([0xa8, 0x40, 0x25, 0xff, 0x00, 0x01]),
        vni: 100,
    }
}

#[test]
fn paths_and_query_encoding() {
    assert_eq!(paged("/nat/ipv4", None, None), "/nat/ipv4");
    assert_eq!(paged("/nat/ipv4", Some(128), None), "/nat/ipv4?limit=128");
    assert_eq!(
        paged("/nat/ipv4/198.51.100.1", Some(5), Some("a+b/c= &d")),
        "/nat/ipv4/198.51.100.1?limit=5&page_token=a%2Bb%2Fc%3D%20%26d"
    );
}

fn dpd(net: &FakeNet, zone: Ipv6Addr) -> DpdClient<crate::testing::FakeConnector> {
    DpdClient::new(HttpClient::new(
        net.connector(),
        SocketAddr::new(zone.into(), DPD_PORT),
    ))
}

#[tokio::test(start_paused = true)]
async fn create_get_list_delete_round_trip() {
    let net = FakeNet::new();
    let zone: Ipv6Addr = "fd00:1122:3344:101::2".parse().unwrap();
    net.add_switch_zone(zone, 0);
    let client = dpd(&net, zone);
    let ip = Ipv4Addr::new(198, 51, 100, 1);

    assert_eq!(client.nat_ipv4_get(ip, 0).await.unwrap(), None);
    client
        .nat_ipv4_create(ip, 0, 16383, &target())
        .await
        .unwrap();
    // Lookup by any port inside the range finds it.
    assert_eq!(client.nat_ipv4_get(ip, 0).await.unwrap(), Some(target()));
    assert_eq!(client.nat_ipv4_get(ip, 100).await.unwrap(), Some(target()));
    assert_eq!(client.nat_ipv4_get(ip, 16384).await.unwrap(), None);
    assert_eq!(client.nat_ipv4_addresses_all(128).await.unwrap(), vec![ip]);
    assert_eq!(
        client.nat_ipv4_list_all(ip, 128).await.unwrap(),
        vec![Ipv4Nat {
            external: ip,
            low: 0,
            high: 16383,
            target: target()
        }]
    );
    assert_eq!(client.switch_identifiers().await.unwrap().slot, 0);
    client.nat_ipv4_delete(ip, 0).await.unwrap();
    assert_eq!(client.nat_ipv4_get(ip, 0).await.unwrap(), None);
    // Nothing covers port 0 any more: dpd clears nothing and says 204.
    client.nat_ipv4_delete(ip, 0).await.unwrap();

    assert_eq!(
        net.requests(zone, DPD_PORT),
        vec![
            "GET /nat/ipv4/198.51.100.1/0",
            "PUT /nat/ipv4/198.51.100.1/0/16383",
            "GET /nat/ipv4/198.51.100.1/0",
            "GET /nat/ipv4/198.51.100.1/100",
            "GET /nat/ipv4/198.51.100.1/16384",
            "GET /nat/ipv4?limit=128",
            // The fake, like dropshot, returns a token after every
            // non-empty page; the final page is empty.
            "GET /nat/ipv4?limit=128&page_token=198.51.100.1",
            "GET /nat/ipv4/198.51.100.1?limit=128",
            "GET /nat/ipv4/198.51.100.1?limit=128&page_token=0",
            "GET /switch/identifiers",
            "DELETE /nat/ipv4/198.51.100.1/0",
            "GET /nat/ipv4/198.51.100.1/0",
            "DELETE /nat/ipv4/198.51.100.1/0",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn list_all_follows_pages() {
    let net = FakeNet::new();
    let zone: Ipv6Addr = "fd00:1122:3344:101::2".parse().unwrap();
    net.add_switch_zone(zone, 1);
    let ip = Ipv4Addr::new(198, 51, 100, 9);
    for i in 0..7u16 {
        net.insert_nat(
            zone,
            Ipv4Nat {
                external: ip,
                low: i * 10,
                high: i * 10 + 9,
                target: target(),
            },
        );
    }
    let client = dpd(&net, zone);
    let first = client.nat_ipv4_list(ip, Some(3), None).await.unwrap();
    assert_eq!(first.items.len(), 3);
    let token = first.next_page.expect("a full page has a next page");
    let second = client
        .nat_ipv4_list(ip, Some(3), Some(&token))
        .await
        .unwrap();
    assert_eq!(
        second.items.iter().map(|e| e.low).collect::<Vec<_>>(),
        vec![30, 40, 50]
    );

    let all = client.nat_ipv4_list_all(ip, 3).await.unwrap();
    assert_eq!(
        all.iter().map(|e| e.low).collect::<Vec<_>>(),
        vec![0, 10, 20, 30, 40, 50, 60]
    );
    // 3 + 3 + 1 + an empty last page.
    let pages = net
        .requests(zone, DPD_PORT)
        .into_iter()
        .filter(|r| r.starts_with("GET /nat/ipv4/198.51.100.9?limit=3"))
        .count();
    assert_eq!(pages, 2 + 4);
}

#[tokio::test(start_paused = true)]
async fn every_request_names_dpds_api_version() {
    let net = FakeNet::new();
    let zone: Ipv6Addr = "fd00:1122:3344:101::2".parse().unwrap();
    net.add_switch_zone(zone, 0);
    let addr = SocketAddr::new(zone.into(), DPD_PORT);
    // Like every Oxide internal API, dpd refuses a request that does
    // not say which version of the API it is written against.
    let raw = HttpClient::new(net.connector(), addr);
    let err = raw.get::<i64>("/rpw/nat/gen").await.unwrap_err();
    assert_eq!(err.status(), Some(400));
    assert!(err.to_string().contains("api-version"), "{err}");
    let client = dpd(&net, zone);
    assert_eq!(client.http.api_version(), Some("13.0.0"));
    assert_eq!(client.nat_generation().await.unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_repeated_page_token_is_an_error_not_a_loop() {
    let net = FakeNet::new();
    let addr = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), DPD_PORT);
    net.set_custom(addr, |_m, _p, _b| {
        crate::testing::FakeResponse::json(200, json!({"items": [], "next_page": "same"}))
    });
    let client = DpdClient::new(HttpClient::new(net.connector(), addr));
    match client.nat_ipv4_addresses_all(128).await.unwrap_err() {
        ClientError::Protocol { message, .. } => assert!(message.contains("same"), "{message}"),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn reset_clears_the_table_and_the_generation_is_dpds() {
    let net = FakeNet::new();
    let zone: Ipv6Addr = "fd00:1122:3344:101::2".parse().unwrap();
    net.add_switch_zone(zone, 0);
    net.insert_nat(
        zone,
        Ipv4Nat {
            external: Ipv4Addr::new(198, 51, 100, 1),
            low: 0,
            high: 16383,
            target: target(),
        },
    );
    assert_eq!(net.nat(zone).len(), 1);
    dpd(&net, zone).nat_ipv4_reset().await.unwrap();
    assert!(net.nat(zone).is_empty(), "the reset cleared the table");
    net.with_dpd(zone, |d| d.set_generation(7));
    assert_eq!(dpd(&net, zone).nat_generation().await.unwrap(), 7);
}
