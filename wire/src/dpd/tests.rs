//! dpd's types read and written exactly as the reference document has them.

use serde_json::json;

use super::*;

const TARGET: NatTarget = NatTarget {
    internal_ip: Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x101, 0, 0, 0, 1),
    inner_mac: MacAddr::new([0xa8, 0x40, 0x25, 0xff, 0x00, 0x01]),
    vni: 100,
};

#[test]
fn nat_target_wire_shape() {
    assert_eq!(
        serde_json::to_value(TARGET).unwrap(),
        json!({
            "internal_ip": "fd00:1122:3344:101::1",
            "inner_mac": {"a": [168, 64, 37, 255, 0, 1]},
            "vni": 100,
        })
    );
    assert_eq!(TARGET.inner_mac.to_string(), "a8:40:25:ff:00:01");
}

#[test]
fn mac_parses_its_display_form_and_rejects_garbage() {
    let mac = MacAddr::new([0xa8, 0x40, 0x25, 0xf0, 0x00, 0x01]);
    assert_eq!("a8:40:25:f0:00:01".parse::<MacAddr>(), Ok(mac));
    assert_eq!("A8:40:25:F0:0:1".parse::<MacAddr>(), Ok(mac));
    assert_eq!(mac.to_string().parse::<MacAddr>(), Ok(mac));
    for bad in [
        "",
        "a8:40:25:f0:00",
        "a8:40:25:f0:00:01:02",
        "a8:40:25:f0::01",
        "a8:40:25:f0:00:001",
        "a8:40:25:f0:00:0g",
        "a8-40-25-f0-00-01",
    ] {
        assert_eq!(
            bad.parse::<MacAddr>(),
            Err(ParseMacAddrError(bad.to_string())),
            "{bad:?}"
        );
    }
}

#[test]
fn pages_parse_exactly_as_the_reference() {
    let page: ResultsPage<Ipv4Nat> = serde_json::from_value(json!({
        "items": [{
            "external": "198.51.100.1",
            "low": 0,
            "high": 65535,
            "target": {
                "internal_ip": "fd00:1122:3344:101::1",
                "inner_mac": {"a": [168, 64, 37, 255, 0, 1]},
                "vni": 100
            }
        }],
        "next_page": null
    }))
    .unwrap();
    assert_eq!(
        page,
        ResultsPage {
            items: vec![Ipv4Nat {
                external: Ipv4Addr::new(198, 51, 100, 1),
                low: 0,
                high: 65535,
                target: TARGET,
            }],
            next_page: None,
        }
    );
    // `next_page` is optional in the schema (only `items` is required).
    let page: ResultsPage<Ipv4Addr> =
        serde_json::from_value(json!({"items": ["198.51.100.7"]})).unwrap();
    assert_eq!(page.items, vec![Ipv4Addr::new(198, 51, 100, 7)]);
    assert_eq!(page.next_page, None);
    let page: ResultsPage<Ipv4Addr> =
        serde_json::from_value(json!({"items": [], "next_page": "abc="})).unwrap();
    assert_eq!(page.next_page.as_deref(), Some("abc="));
}

#[test]
fn switch_identifiers_ignores_optional_fields() {
    let ids: SwitchIdentifiers = serde_json::from_value(json!({
        "asic_backend": "tofino_asic",
        "fab": null,
        "fuse": null,
        "lot": "A",
        "lotnum": ["1", "2", "3", "4"],
        "model": "913-0000006",
        "revision": 4,
        "serial": "BRM42220036",
        "sidecar_id": "c3a87d6f-0b5a-4bb1-9e8c-6f0c1b7a0d11",
        "slot": 1,
        "wafer": 3,
        "wafer_loc": [1, -2]
    }))
    .unwrap();
    assert_eq!(ids.slot, 1);
    assert_eq!(ids.model, "913-0000006");
}
