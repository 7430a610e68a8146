use std::net::{IpAddr, Ipv6Addr};

use http::{Method, StatusCode};
use racksim_wire::dpd::MacAddr;
use serde_json::json;

use super::*;

fn mapping(host: u16) -> VirtualNetworkInterfaceHost {
    VirtualNetworkInterfaceHost {
        virtual_ip: IpAddr::from([172, 30, 0, 5]),
        virtual_mac: MacAddr::new([0xa8, 0x40, 0x25, 0xf0, 0, 1]),
        physical_host_ip: Ipv6Addr::new(0xfd00, 0x1122, 0x3344, host, 0, 0, 0, 1),
        vni: 1001,
    }
}

fn req(method: Method, path: &str, body: serde_json::Value) -> ApiRequest {
    ApiRequest::new(method, path, body.to_string()).versioned(SLED_AGENT_API_VERSION)
}

#[test]
fn a_put_replaces_the_mapping_of_its_virtual_nic_and_a_delete_removes_it() {
    let mut agent = SledAgentState::default();
    let m = serde_json::to_value(mapping(0x102)).unwrap();
    // sled-agent's MacAddr is a string on the wire, in upper case as
    // omicron's (`macaddr::MacAddr6`'s Display) writes it.
    assert_eq!(m["virtual_mac"], "A8:40:25:F0:00:01");
    let (r, change) = agent.handle(&req(Method::PUT, "/v2p", m.clone()));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(change, Some(SledAgentChange::V2pSet(mapping(0x102))));
    // Same mapping again: no change.
    assert_eq!(agent.handle(&req(Method::PUT, "/v2p", m)).1, None);
    // The NIC moved: the new mapping replaces the old one.
    let moved = serde_json::to_value(mapping(0x103)).unwrap();
    agent.handle(&req(Method::PUT, "/v2p", moved.clone()));
    assert_eq!(agent.v2p_list(), vec![mapping(0x103)]);
    let (r, _) = agent.handle(&req(Method::GET, "/v2p", json!(null)));
    assert_eq!(r.body.unwrap(), json!([moved]));
    // A delete names the NIC; the host it names does not matter.
    let (r, change) = agent.handle(&req(
        Method::DELETE,
        "/v2p",
        serde_json::to_value(mapping(0x102)).unwrap(),
    ));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(change, Some(SledAgentChange::V2pRemoved(mapping(0x103))));
    assert!(agent.v2p_list().is_empty());
    // Nothing left to delete: 204, no change.
    let (r, change) = agent.handle(&req(
        Method::DELETE,
        "/v2p",
        serde_json::to_value(mapping(0x102)).unwrap(),
    ));
    assert_eq!((r.status, change), (StatusCode::NO_CONTENT, None));
}

#[test]
fn bad_mappings_are_400_and_change_nothing() {
    let mut agent = SledAgentState::default();
    agent.v2p_set(mapping(0x102)).unwrap();
    let mut dpd_mac = serde_json::to_value(mapping(0x104)).unwrap();
    dpd_mac["virtual_mac"] = json!({"a": [168, 64, 37, 240, 0, 1]});
    let mut big_vni = serde_json::to_value(mapping(0x104)).unwrap();
    big_vni["vni"] = json!(1u32 << 24);
    let mut bad_ip = serde_json::to_value(mapping(0x104)).unwrap();
    bad_ip["physical_host_ip"] = json!("10.0.0.1");
    for (body, needle) in [
        (dpd_mac, "JSON"),
        (big_vni, "VNI"),
        (bad_ip, "JSON"),
        (json!("nope"), "JSON"),
    ] {
        for method in [Method::PUT, Method::DELETE] {
            let (r, change) = agent.handle(&req(method.clone(), "/v2p", body.clone()));
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{method} {body}");
            assert!(r.message().unwrap().contains(needle), "{r:?}");
            assert_eq!(change, None);
            assert_eq!(agent.v2p_list(), vec![mapping(0x102)]);
        }
    }
    let mut r = req(Method::GET, "/v2p", json!(null));
    r.api_version = None;
    assert_eq!(agent.handle(&r).0.status, StatusCode::BAD_REQUEST);
}

#[test]
fn vmms_register_once_change_state_and_are_destroyed_by_stopping() {
    let mut agent = SledAgentState::default();
    let (r, change) = agent.handle(&req(Method::PUT, "/instances/7", json!({"vmm_id": 70})));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(
        change,
        Some(SledAgentChange::VmmRegistered {
            instance: 7,
            vmm: 70
        })
    );
    assert_eq!(
        agent
            .handle(&req(Method::PUT, "/instances/7", json!({"vmm_id": 70})))
            .1,
        None
    );
    let (r, _) = agent.handle(&req(Method::PUT, "/instances/7", json!({"vmm_id": 71})));
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(agent.instances()[0].vmm_id, 70);
    let (r, change) = agent.handle(&req(
        Method::PUT,
        "/instances/7/state",
        json!({"state": "running"}),
    ));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(
        change,
        Some(SledAgentChange::VmmState {
            instance: 7,
            vmm: 70,
            state: VmmState::Running
        })
    );
    let (r, _) = agent.handle(&req(
        Method::PUT,
        "/instances/8/state",
        json!({"state": "running"}),
    ));
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let (r, _) = agent.handle(&req(Method::PUT, "/instances/x", json!({"vmm_id": 1})));
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let (_, change) = agent.handle(&req(
        Method::PUT,
        "/instances/7/state",
        json!({"state": "stopped"}),
    ));
    assert_eq!(
        change,
        Some(SledAgentChange::VmmDestroyed {
            instance: 7,
            vmm: 70
        })
    );
    assert!(agent.instances().is_empty());
}
