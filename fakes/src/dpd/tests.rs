use std::net::Ipv6Addr;

use http::{Method, StatusCode};
use racksim_wire::dpd::{Ipv4Nat, Ipv6Nat, MacAddr, ResultsPage};

use super::*;

fn target(n: u8) -> NatTarget {
    NatTarget {
        internal_ip: Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x101, 0, 0, 0, 1),
        inner_mac: MacAddr::new([0xa8, 0x40, 0x25, 0xff, 0, n]),
        vni: 100,
    }
}

fn req(method: Method, path: &str, body: &str) -> ApiRequest {
    ApiRequest::new(method, path, body.to_string()).versioned(API_VERSION)
}

fn put(dpd: &mut DpdState, path: &str, t: NatTarget) -> (ApiResponse, Option<NatChange>) {
    dpd.handle(&req(Method::PUT, path, &serde_json::to_string(&t).unwrap()))
}

/// The dpd of switch `slot` with one entry, `PUT` at `path` to `target(1)`.
fn dpd_with_entry(slot: u16, path: &str) -> DpdState {
    let mut dpd = DpdState::new(slot);
    let (r, _) = put(&mut dpd, path, target(1));
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{path}");
    dpd
}

#[test]
fn create_is_idempotent_and_overlap_is_dendrites_conflict() {
    let mut dpd = DpdState::new(0);
    let (r, change) = put(&mut dpd, "/nat/ipv4/198.51.100.1/100/199", target(1));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(matches!(change, Some(NatChange::Created(_))));
    // The same entry again: success, no change.
    let (r, change) = put(&mut dpd, "/nat/ipv4/198.51.100.1/100/199", target(1));
    assert_eq!((r.status, change), (StatusCode::NO_CONTENT, None));
    let before = dpd.ipv4_entries();
    // Overlapping range, or the same range with another target: 409 with
    // dendrite's body, and the table as it was.
    for (path, t) in [
        ("/nat/ipv4/198.51.100.1/150/300", target(1)),
        ("/nat/ipv4/198.51.100.1/100/199", target(2)),
        ("/nat/ipv4/198.51.100.1/0/100", target(1)),
    ] {
        let (r, change) = put(&mut dpd, path, t);
        assert_eq!(r.status, StatusCode::CONFLICT, "{path}");
        assert_eq!(r.error_code(), Some("conflicting mapping"));
        assert_eq!(r.message(), Some("Conflict"));
        assert!(change.is_none());
        assert_eq!(dpd.ipv4_entries(), before);
    }
    // A disjoint range on the same address is fine.
    let (r, _) = put(&mut dpd, "/nat/ipv4/198.51.100.1/200/299", target(2));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(dpd.ipv4_entries().len(), 2);
}

#[test]
fn get_finds_the_covering_entry_and_delete_of_an_absent_one_is_204() {
    let mut dpd = dpd_with_entry(0, "/nat/ipv4/198.51.100.1/100/199");
    let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv4/198.51.100.1/150", ""));
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.json_value().unwrap(),
        serde_json::to_value(target(1)).unwrap()
    );
    let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv4/198.51.100.1/200", ""));
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error_code(), Some("no mapping"));
    let (r, change) = dpd.handle(&req(Method::DELETE, "/nat/ipv4/198.51.100.1/199", ""));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(matches!(change, Some(NatChange::Deleted(e)) if e.low == 100 && e.high == 199));
    // Nothing covers it any more: still 204, nothing changes.
    let (r, change) = dpd.handle(&req(Method::DELETE, "/nat/ipv4/198.51.100.1/150", ""));
    assert_eq!((r.status, change), (StatusCode::NO_CONTENT, None));
    assert!(dpd.ipv4_entries().is_empty());
}

fn lows(r: &ApiResponse) -> (Vec<u16>, Option<String>) {
    let page: ResultsPage<Ipv4Nat> = serde_json::from_value(r.json_value().unwrap()).unwrap();
    (page.items.iter().map(|e| e.low).collect(), page.next_page)
}

#[test]
fn pages_hold_at_most_64_and_every_non_empty_page_has_a_token() {
    let mut dpd = DpdState::new(0);
    for i in 0..100u16 {
        put(
            &mut dpd,
            &format!("/nat/ipv4/198.51.100.1/{i}/{i}"),
            target(1),
        );
    }
    // Asked for more than 64 (or nothing: dropshot's default of 100), dpd
    // returns 64.
    for query in ["?limit=1000", ""] {
        let (r, _) = dpd.handle(&req(
            Method::GET,
            &format!("/nat/ipv4/198.51.100.1{query}"),
            "",
        ));
        let (items, next) = lows(&r);
        assert_eq!(items, (0..64).collect::<Vec<_>>(), "{query:?}");
        assert_eq!(next.as_deref(), Some("63"));
    }
    let (r, _) = dpd.handle(&req(
        Method::GET,
        "/nat/ipv4/198.51.100.1?limit=64&page_token=63",
        "",
    ));
    let (items, next) = lows(&r);
    assert_eq!(items, (64..100).collect::<Vec<_>>());
    // Not a full page, but not empty: a token still.
    assert_eq!(next.as_deref(), Some("99"));
    let (r, _) = dpd.handle(&req(
        Method::GET,
        "/nat/ipv4/198.51.100.1?page_token=99",
        "",
    ));
    assert_eq!(lows(&r), (vec![], None));
}

#[test]
fn ipv6_tokens_are_percent_decoded() {
    let mut dpd = DpdState::new(0);
    let addrs: Vec<Ipv6Addr> = (1..=3u16)
        .map(|i| Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i))
        .collect();
    for a in &addrs {
        put(&mut dpd, &format!("/nat/ipv6/{a}/0/65535"), target(1));
    }
    let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv6?limit=2", ""));
    let page: ResultsPage<Ipv6Addr> = serde_json::from_value(r.json_value().unwrap()).unwrap();
    assert_eq!(page.items, addrs[..2]);
    let token = page.next_page.unwrap();
    assert_eq!(token, "fd00::2");
    // A client encodes the token's colons; the server decodes them.
    let (r, _) = dpd.handle(&req(
        Method::GET,
        "/nat/ipv6?limit=2&page_token=fd00%3A%3A2",
        "",
    ));
    let page: ResultsPage<Ipv6Addr> = serde_json::from_value(r.json_value().unwrap()).unwrap();
    assert_eq!(page.items, addrs[2..]);
    // And a percent-encoded address in the path.
    let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv6/fd00%3A%3A3", ""));
    let page: ResultsPage<Ipv6Nat> = serde_json::from_value(r.json_value().unwrap()).unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(dpd.get(addrs[0], 80).map(|e| e.low), Some(0));
}

#[test]
fn bad_requests_get_a_clear_400_and_change_nothing() {
    let mut dpd = dpd_with_entry(0, "/nat/ipv4/198.51.100.1/0/9");
    let before = dpd.ipv4_entries();
    let good = serde_json::to_string(&target(1)).unwrap();
    let big_vni = serde_json::to_string(&NatTarget {
        vni: 1 << 24,
        ..target(1)
    })
    .unwrap();
    for (method, path, body, needle) in [
        (Method::GET, "/nat/ipv4?limit=0", "", "limit"),
        (Method::GET, "/nat/ipv4?limit=many", "", "limit"),
        (Method::GET, "/nat/ipv4?page_token=nope", "", "page token"),
        (Method::GET, "/nat/ipv4/not-an-ip", "", "ipv4"),
        (Method::GET, "/nat/ipv4/198.51.100.1/70000", "", "low"),
        (Method::PUT, "/nat/ipv4/198.51.100.1/10/20", "", "JSON"),
        (
            Method::PUT,
            "/nat/ipv4/198.51.100.1/10/20",
            "{\"internal_ip\":1}",
            "JSON",
        ),
        (
            Method::PUT,
            "/nat/ipv4/198.51.100.1/10/99999",
            good.as_str(),
            "high",
        ),
        (
            Method::PUT,
            "/nat/ipv4/198.51.100.300/10/20",
            good.as_str(),
            "ipv4",
        ),
        (
            Method::PUT,
            "/nat/ipv4/198.51.100.1/20/10",
            good.as_str(),
            "invalid port range",
        ),
        (
            Method::PUT,
            "/nat/ipv4/198.51.100.1/10/20",
            big_vni.as_str(),
            "VNI",
        ),
        (
            Method::PUT,
            "/nat/ipv6/fd00::1/20/10",
            good.as_str(),
            "invalid port range",
        ),
        (Method::DELETE, "/nat/ipv4/198.51.100.1/x", "", "low"),
    ] {
        let (r, change) = dpd.handle(&req(method.clone(), path, body));
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{method} {path}");
        let message = r.message().unwrap();
        assert!(message.contains(needle), "{method} {path}: {message}");
        assert!(change.is_none());
        assert_eq!(dpd.ipv4_entries(), before, "{method} {path}");
        assert!(dpd.entries::<Ipv6Addr>().is_empty());
    }
    let (r, _) = dpd.handle(&req(Method::GET, "/nat/ipv5", ""));
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[test]
fn requests_without_a_supported_api_version_are_refused() {
    let mut dpd = DpdState::new(0);
    let body = serde_json::to_string(&target(1)).unwrap();
    let path = "/nat/ipv4/198.51.100.1/0/9";
    for (version, needle) in [
        (None, "missing expected header \"api-version\""),
        (Some("thirteen"), "bad value for header"),
        (Some("14.0.0"), "does not support this API version"),
    ] {
        let mut r = ApiRequest::new(Method::PUT, path, body.clone());
        r.api_version = version.map(str::to_string);
        let (resp, change) = dpd.handle(&r);
        assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{version:?}");
        assert!(resp.message().unwrap().contains(needle), "{resp:?}");
        assert!(change.is_none());
        assert!(dpd.ipv4_entries().is_empty());
    }
    // An older version is served (dropshot serves every version up to the
    // server's).
    let (resp, _) = dpd.handle(&ApiRequest::new(Method::PUT, path, body).versioned("12.0.0"));
    assert_eq!(resp.status, StatusCode::NO_CONTENT);
}

#[test]
fn reset_empties_the_table_and_identifiers_name_the_slot() {
    let mut dpd = dpd_with_entry(1, "/nat/ipv4/198.51.100.1/0/65535");
    let (r, change) = dpd.handle(&req(Method::DELETE, "/nat/ipv4", ""));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(change, Some(NatChange::Reset { removed: 1 }));
    assert!(dpd.ipv4_entries().is_empty());
    let (r, _) = dpd.handle(&req(Method::GET, "/switch/identifiers", ""));
    let ids = r.json_value().unwrap();
    assert_eq!(ids["slot"], 1);
    // dendrite sends the ASIC's manufacturing identifiers, null when it has
    // none: the keys are there.
    for key in ["fab", "lot", "lotnum", "wafer", "wafer_loc", "fuse"] {
        assert_eq!(ids.get(key), Some(&serde_json::Value::Null), "{key}: {ids}");
    }
    dpd.set_generation(7);
    let (r, _) = dpd.handle(&req(Method::GET, "/rpw/nat/gen", ""));
    assert_eq!(r.json_value().unwrap(), serde_json::json!(7));
    let (r, _) = dpd.handle(&req(Method::POST, "/rpw/nat/trigger", ""));
    assert_eq!(
        (r.status, r.json_value()),
        (StatusCode::OK, Some(serde_json::Value::Null))
    );
}

/// The shared IPv4 listing (`ipv4_entries_shared`, what the simulation's
/// checks read) follows every change of the table: an API create, delete
/// and reset, a planted entry. Between changes it is the same allocation.
#[test]
fn the_shared_listing_follows_every_change() {
    let mut dpd = DpdState::new(0);
    let agrees = |dpd: &DpdState, what: &str| {
        assert_eq!(*dpd.ipv4_entries_shared(), dpd.ipv4_entries()[..], "{what}");
    };
    agrees(&dpd, "empty");
    let (r, _) = put(&mut dpd, "/nat/ipv4/198.51.100.1/100/199", target(1));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    agrees(&dpd, "after a create");
    let (a, b) = (dpd.ipv4_entries_shared(), dpd.ipv4_entries_shared());
    assert!(
        std::sync::Arc::ptr_eq(&a, &b),
        "no change between two reads: one list"
    );
    assert_eq!(a.len(), 1);
    dpd.ipv4_plant(Ipv4Nat {
        external: "198.51.100.2".parse().unwrap(),
        low: 0,
        high: 99,
        target: target(2),
    });
    agrees(&dpd, "after a plant");
    assert_eq!(dpd.ipv4_entries_shared().len(), 2);
    let (r, _) = dpd.handle(&req(Method::DELETE, "/nat/ipv4/198.51.100.1/150", ""));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    agrees(&dpd, "after a delete");
    assert_eq!(dpd.ipv4_entries_shared().len(), 1);
    let (r, _) = dpd.handle(&req(Method::DELETE, "/nat/ipv4", ""));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    agrees(&dpd, "after a reset");
    assert!(dpd.ipv4_entries_shared().is_empty());
    // Whether the table was listed does not show in its `Debug` (a trace
    // of a run must not depend on when the checks looked).
    let (mut read, mut unread) = (DpdState::new(0), DpdState::new(0));
    for d in [&mut read, &mut unread] {
        let (r, _) = put(d, "/nat/ipv4/198.51.100.1/100/199", target(1));
        assert_eq!(r.status, StatusCode::NO_CONTENT);
    }
    read.ipv4_entries_shared();
    assert_eq!(format!("{read:?}"), format!("{unread:?}"));
}
