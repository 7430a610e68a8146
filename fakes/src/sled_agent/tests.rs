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
    assert_eq!(r.json_value().unwrap(), json!([moved]));
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
    let (r, change) = agent.handle(&req(Method::PUT, "/vmms/70", json!({"instance_id": 7})));
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(
        change,
        Some(SledAgentChange::VmmRegistered {
            instance: 7,
            vmm: 70
        })
    );
    // The same pair again: idempotent.
    let (r, change) = agent.handle(&req(Method::PUT, "/vmms/70", json!({"instance_id": 7})));
    assert_eq!((r.status, change), (StatusCode::NO_CONTENT, None));
    // The same propolis id for another instance: upstream's
    // `PropolisAlreadyRegistered`, a 500; nothing changes.
    let (r, change) = agent.handle(&req(Method::PUT, "/vmms/70", json!({"instance_id": 8})));
    assert_eq!(
        (r.status, change),
        (StatusCode::INTERNAL_SERVER_ERROR, None)
    );
    assert_eq!(agent.vmm_list().len(), 1);
    let (r, change) = agent.handle(&req(
        Method::PUT,
        "/vmms/70/state",
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
    let (r, _) = agent.handle(&req(Method::GET, "/vmms/70/state", json!(null)));
    assert_eq!(
        r.json_value().unwrap(),
        json!({"instance_id": 7, "vmm_id": 70, "state": "running"})
    );
    // A VMM the sled does not have: 404 NO_SUCH_INSTANCE, to a state
    // change and to a read.
    for method in [Method::PUT, Method::GET] {
        let (r, _) = agent.handle(&req(
            method.clone(),
            "/vmms/71/state",
            json!({"state": "running"}),
        ));
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{method}");
        assert_eq!(r.error_code(), Some(NO_SUCH_INSTANCE), "{method}");
    }
    // Stopping destroys and unregisters the VMM.
    let (_, change) = agent.handle(&req(
        Method::PUT,
        "/vmms/70/state",
        json!({"state": "stopped"}),
    ));
    assert_eq!(
        change,
        Some(SledAgentChange::VmmDestroyed {
            instance: 7,
            vmm: 70
        })
    );
    assert!(agent.vmm_list().is_empty());
    let (r, _) = agent.handle(&req(Method::GET, "/vmms/70/state", json!(null)));
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[test]
fn a_second_vmm_of_an_instance_is_registered_beside_the_first_and_both_are_listed() {
    let mut agent = SledAgentState::default();
    for vmm in [70, 71] {
        let (r, change) = agent.handle(&req(
            Method::PUT,
            &format!("/vmms/{vmm}"),
            json!({"instance_id": 7}),
        ));
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        assert_eq!(
            change,
            Some(SledAgentChange::VmmRegistered { instance: 7, vmm })
        );
    }
    agent.handle(&req(Method::PUT, "/vmms/9", json!({"instance_id": 3})));
    let (r, _) = agent.handle(&req(Method::GET, "/vmms", json!(null)));
    assert_eq!(r.status, StatusCode::OK);
    // By propolis id.
    assert_eq!(
        r.json_value().unwrap(),
        json!([
            {"instance_id": 3, "vmm_id": 9, "state": "starting"},
            {"instance_id": 7, "vmm_id": 70, "state": "starting"},
            {"instance_id": 7, "vmm_id": 71, "state": "starting"},
        ])
    );
    let of_7: Vec<u64> = agent.vmms_of(7).map(|v| v.vmm_id).collect();
    assert_eq!(of_7, [70, 71]);
    // Each is driven by its own id.
    agent.handle(&req(
        Method::PUT,
        "/vmms/71/state",
        json!({"state": "running"}),
    ));
    assert_eq!(agent.state(70).unwrap().state, VmmState::Starting);
    assert_eq!(agent.state(71).unwrap().state, VmmState::Running);
}

#[test]
fn unregister_terminates_a_vmm_and_is_success_for_one_the_sled_does_not_have() {
    let mut agent = SledAgentState::default();
    agent.handle(&req(Method::PUT, "/vmms/70", json!({"instance_id": 7})));
    agent.handle(&req(Method::PUT, "/vmms/71", json!({"instance_id": 7})));
    agent.handle(&req(
        Method::PUT,
        "/vmms/71/state",
        json!({"state": "running"}),
    ));
    // A running VMM is terminated; its last state is answered.
    let (r, change) = agent.handle(&req(Method::DELETE, "/vmms/71", json!(null)));
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.json_value().unwrap(),
        json!({"updated_runtime": {"instance_id": 7, "vmm_id": 71, "state": "stopped"}})
    );
    assert_eq!(
        change,
        Some(SledAgentChange::VmmDestroyed {
            instance: 7,
            vmm: 71
        })
    );
    // The other VMM of the instance stays.
    assert_eq!(agent.vmm_list().len(), 1);
    assert_eq!(agent.vmm_list()[0].vmm_id, 70);
    // Absent (never registered, or already gone): 200, nothing to report.
    for path in ["/vmms/71", "/vmms/5"] {
        let (r, change) = agent.handle(&req(Method::DELETE, path, json!(null)));
        assert_eq!(r.status, StatusCode::OK, "{path}");
        assert_eq!(
            r.json_value().unwrap(),
            json!({"updated_runtime": null}),
            "{path}"
        );
        assert_eq!(change, None, "{path}");
    }
    assert_eq!(agent.vmm_list().len(), 1);
}

#[test]
fn a_bad_propolis_id_is_400_on_every_vmm_route() {
    let mut agent = SledAgentState::default();
    for (method, path) in [
        (Method::PUT, "/vmms/x"),
        (Method::PUT, "/vmms/-1"),
        (Method::DELETE, "/vmms/x"),
        (Method::GET, "/vmms/x/state"),
        (
            Method::PUT,
            "/vmms/3f6d5e4c-0000-0000-0000-000000000000/state",
        ),
    ] {
        let (r, change) = agent.handle(&req(
            method.clone(),
            path,
            json!({"instance_id": 7, "state": "running"}),
        ));
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{method} {path}");
        assert!(
            r.message().unwrap().contains("propolis id"),
            "{method} {path}: {r:?}"
        );
        assert_eq!(change, None);
    }
    // A register body in the old form (no `instance_id`) is a 400 too.
    let (r, _) = agent.handle(&req(Method::PUT, "/vmms/70", json!({"vmm_id": 70})));
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(agent.vmm_list().is_empty());
}

#[test]
fn the_old_instance_routes_are_gone() {
    let mut agent = SledAgentState::default();
    let (r, _) = agent.handle(&req(Method::PUT, "/instances/7", json!({"vmm_id": 70})));
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let (r, _) = agent.handle(&req(Method::GET, "/instances", json!(null)));
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(agent.vmm_list().is_empty());
}
