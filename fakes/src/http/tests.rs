use http::Method;

use super::*;

#[test]
fn query_and_path_are_percent_decoded() {
    let r = ApiRequest::new(
        Method::GET,
        "/nat/ipv6/fd00%3A%3A1?page_token=a%2Bb%3D&limit=5",
        "",
    );
    assert_eq!(r.segments(), ["nat", "ipv6", "fd00::1"]);
    assert_eq!(r.query("page_token"), Some("a+b="));
    assert_eq!(r.query("limit"), Some("5"));
    // A malformed escape is kept as it is, for the route to reject.
    assert_eq!(percent_decode("100%"), "100%");
    assert_eq!(percent_decode("%zz%41"), "%zzA");
}

#[test]
fn errors_have_dropshots_body() {
    let r = ApiError::with_status(StatusCode::CONFLICT, "conflicting mapping").into_response();
    assert_eq!(
        r.json_value().unwrap(),
        serde_json::json!({"request_id": "", "error_code": "conflicting mapping", "message": "Conflict"})
    );
    // No code: no `error_code` key, as dropshot skips it.
    let r = ApiError::bad_request("bad").into_response();
    assert_eq!(
        r.json_value().unwrap(),
        serde_json::json!({"request_id": "", "message": "bad"})
    );
}
