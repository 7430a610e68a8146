//! Which sled-agent requests take a service time: classified by route and
//! body.

use http::Method;
use racksim_fakes::http::ApiRequest;
use racksim_sim::services::sled_agent::{operation, Operation};

fn op(method: Method, path: &str, body: &str) -> Option<Operation> {
    operation(&ApiRequest::new(
        method,
        path,
        bytes::Bytes::from(body.to_string()),
    ))
}

#[test]
fn requests_are_classified_by_route_and_state() {
    for base in ["/vmms/3", "/vmms/3f6d"] {
        let state = format!("{base}/state");
        assert_eq!(
            op(Method::PUT, base, r#"{"vmm_id":3}"#),
            Some(Operation::Register)
        );
        assert_eq!(
            op(Method::PUT, &state, r#"{"state":"running"}"#),
            Some(Operation::Run)
        );
        assert_eq!(
            op(Method::PUT, &state, r#"{"state":"stopped"}"#),
            Some(Operation::Stop)
        );
        // Anything else is answered at once.
        assert_eq!(op(Method::PUT, &state, r#"{"state":"reboot"}"#), None);
        assert_eq!(op(Method::PUT, &state, "not json"), None);
        assert_eq!(op(Method::GET, &state, ""), None);
    }
    assert_eq!(
        op(Method::DELETE, "/vmms/3f6d", ""),
        Some(Operation::Unregister)
    );
    assert_eq!(op(Method::GET, "/vmms", ""), None);
    // racksim's reduced API before propolis ids is not served.
    assert_eq!(op(Method::PUT, "/instances/7", r#"{"vmm_id":3}"#), None);
    assert_eq!(op(Method::PUT, "/v2p", "{}"), None);
    assert_eq!(op(Method::GET, "/timesync", ""), None);
}
