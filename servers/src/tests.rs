use http::StatusCode;
use racksim_fakes::http::ApiError;

use super::http_error;

#[test]
fn a_refusal_keeps_its_status_code_and_message_on_dropshot() {
    let e = http_error(ApiError::with_status(StatusCode::NOT_FOUND, "no mapping"));
    assert_eq!(e.status_code.as_u16(), 404);
    assert_eq!(e.error_code.as_deref(), Some("no mapping"));
    assert_eq!(e.external_message, "Not Found");
    let e = http_error(ApiError::new(
        StatusCode::from_u16(299).unwrap(),
        None,
        "odd",
    ));
    assert_eq!(e.status_code.as_u16(), 500, "not an error status: a 500");
}
