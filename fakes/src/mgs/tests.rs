use http::{Method, StatusCode};

use super::*;

#[test]
fn names_its_switch_to_a_versioned_request_only() {
    let mgs = MgsState::new(1);
    let req = ApiRequest::new(Method::GET, "/local/switch-id", "");
    let r = mgs.handle(&req.clone().versioned(API_VERSION));
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.json_value().unwrap(),
        serde_json::json!({"type": "switch", "slot": 1})
    );
    let r = mgs.handle(&req);
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.message().unwrap().contains("api-version"));
    let r = mgs.handle(&ApiRequest::new(Method::GET, "/local/nope", "").versioned(API_VERSION));
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}
