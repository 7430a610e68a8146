use std::net::Ipv6Addr;

use http::{Method, StatusCode};

use super::*;

#[test]
fn answers_a_services_addresses_in_order_and_404_for_others() {
    let zones = vec![
        Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x102, 0, 0, 0, 2),
        Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x101, 0, 0, 0, 2),
    ];
    let dns = InternalDns {
        services: [("dendrite".to_string(), zones.clone())]
            .into_iter()
            .collect(),
    };
    let r = dns.handle(&ApiRequest::new(Method::GET, "/srv/dendrite", ""));
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.json_value().unwrap(),
        serde_json::json!({"addresses": ["fd00:1122:3344:102::2", "fd00:1122:3344:101::2"]})
    );
    let r = dns.handle(&ApiRequest::new(Method::GET, "/srv/nexus", ""));
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.message().unwrap().contains("nexus"));
    let r = dns.handle(&ApiRequest::new(Method::PUT, "/srv/dendrite", ""));
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}
