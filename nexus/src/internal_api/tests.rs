use http::{Method, StatusCode};
use racksim_fakes::http::ApiRequest;

use super::changeset_request;

fn parse(method: Method, path: &str) -> Result<(i64, u32), StatusCode> {
    changeset_request(&ApiRequest::new(method, path, "")).map_err(|e| e.status)
}

#[test]
fn changeset_requests_are_parsed_strictly() {
    assert_eq!(
        parse(Method::GET, "/nat/ipv4/changeset/0?limit=100"),
        Ok((0, 100))
    );
    assert_eq!(
        parse(Method::GET, "/nat/ipv4/changeset/42/?limit=7"),
        Ok((42, 7))
    );
    for bad in [
        "/nat/ipv4/changeset/x?limit=100",
        "/nat/ipv4/changeset/1.5?limit=100",
        "/nat/ipv4/changeset/1",
        "/nat/ipv4/changeset/1?limit=",
        "/nat/ipv4/changeset/1?limit=-1",
        "/nat/ipv4/changeset/1?limit=4294967296",
    ] {
        assert_eq!(
            parse(Method::GET, bad),
            Err(StatusCode::BAD_REQUEST),
            "{bad}"
        );
    }
    assert_eq!(
        parse(Method::POST, "/nat/ipv4/changeset/0?limit=1"),
        Err(StatusCode::METHOD_NOT_ALLOWED)
    );
    assert_eq!(
        parse(Method::GET, "/nat/ipv4/changes/0?limit=1"),
        Err(StatusCode::NOT_FOUND)
    );
}
