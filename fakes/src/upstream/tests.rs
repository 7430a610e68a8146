use super::*;

/// The fake sled-agent's list of VMMs: racksim's own (upstream lists no
/// VMMs), see `docs/upstream-endpoints.md`.
const RACKSIM_ONLY: [(&str, &str); 1] = [("GET", "/vmms")];

#[test]
fn every_served_operation_is_upstreams_with_its_operation_id() {
    for service in Service::ALL {
        let upstream = upstream_operations(service);
        assert!(upstream.len() > 20, "{service:?}: {}", upstream.len());
        for op in served_operations(service) {
            if service == Service::SledAgent
                && RACKSIM_ONLY.contains(&(op.method.as_str(), op.path.as_str()))
            {
                assert!(!upstream.iter().any(|u| u.path == op.path));
                continue;
            }
            let up = upstream
                .iter()
                .find(|u| u.method == op.method && u.path == op.path)
                .unwrap_or_else(|| panic!("{service:?} serves {op:?}, upstream has no such"));
            assert_eq!(up.operation_id, op.operation_id, "{service:?} {op:?}");
        }
        let unserved = unserved_operations(service).len();
        let served = served_operations(service).len();
        assert!(unserved + served >= upstream.len(), "{service:?}");
    }
}

#[test]
fn unrouted_requests_get_the_501_the_405_or_the_404() {
    let req = |m: Method, p: &str| ApiRequest::new(m, p, "");
    let e = unrouted(Service::Dpd, &req(Method::GET, "/ports/qsfp0/links"));
    assert_eq!(e.status, http::StatusCode::NOT_IMPLEMENTED);
    assert_eq!(e.error_code.as_deref(), Some(ERROR_CODE));
    assert!(
        e.message.contains("/ports/{port_id}/links"),
        "{}",
        e.message
    );
    assert!(e.message.contains("link_list"), "{}", e.message);
    let e = unrouted(Service::Dpd, &req(Method::PATCH, "/nat/ipv4"));
    assert_eq!(e.status, http::StatusCode::METHOD_NOT_ALLOWED);
    let e = unrouted(Service::Dpd, &req(Method::GET, "/nat/ipv4/1.2.3.4/5/6/7"));
    assert_eq!(
        (e.status, e.error_code, e.message.as_str()),
        (http::StatusCode::NOT_FOUND, None, "Not Found")
    );
}

#[test]
fn the_endpoints_page_lists_what_the_fakes_serve() {
    let page = include_str!("../../../docs/upstream-endpoints.md");
    let want = endpoints_markdown();
    assert!(
        page.contains(&want),
        "docs/upstream-endpoints.md is out of date; its tables must be:\n{want}"
    );
}
