//! Framework-neutral request, response and error types of the fakes.
//!
//! Each fake's state machine has a `handle(&ApiRequest) -> ApiResponse`
//! router used by the servers that are not dropshot (the simulation's hyper
//! server on turmoil sockets, and [`crate::memnet`]); `racksim-servers` serves the
//! same state machines with dropshot. Both answer alike: errors use dropshot's
//! body (`request_id`, optional `error_code`, `message`), query strings and
//! path segments are percent-decoded, and a request without the
//! [`API_VERSION_HEADER`] is a 400, as dropshot's
//! `ClientSpecifiesVersionInHeader` policy has it for every Oxide internal API.

use std::{borrow::Cow, collections::BTreeMap};

use bytes::Bytes;
use http::{Method, StatusCode};
pub use racksim_wire::API_VERSION_HEADER;
use serde::{de::DeserializeOwned, Serialize};

/// A parsed request.
#[derive(Clone, Debug)]
pub struct ApiRequest {
    pub method: Method,
    /// The path as sent (`segments` decodes it).
    pub path: String,
    /// Query parameters, percent-decoded.
    pub query: BTreeMap<String, String>,
    /// The `api-version` header, if any.
    pub api_version: Option<String>,
    pub body: Bytes,
}

impl ApiRequest {
    /// A request without an `api-version` header (see [`Self::versioned`]).
    /// Malformed percent escapes are kept as they are: the route's own
    /// parsing then rejects the value with a 400 naming it.
    pub fn new(method: Method, path_and_query: &str, body: impl Into<Bytes>) -> Self {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let query = query
            .split('&')
            .filter(|kv| !kv.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (percent_decode(k), percent_decode(v))
            })
            .collect();
        ApiRequest {
            method,
            path: path.to_string(),
            query,
            api_version: None,
            body: body.into(),
        }
    }

    /// With an `api-version` header.
    pub fn versioned(mut self, version: impl Into<String>) -> Self {
        self.api_version = Some(version.into());
        self
    }

    /// Path segments, percent-decoded, without the empty ones
    /// (`/nat/ipv4/` == `/nat/ipv4`). A segment with no escape is borrowed
    /// from the path: every request is routed by its segments, and most
    /// have none.
    pub fn segments(&self) -> Vec<Cow<'_, str>> {
        self.path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| {
                if s.contains('%') {
                    Cow::Owned(percent_decode(s))
                } else {
                    Cow::Borrowed(s)
                }
            })
            .collect()
    }

    pub fn query(&self, key: &str) -> Option<&str> {
        self.query.get(key).map(String::as_str)
    }

    /// dropshot's `ClientSpecifiesVersionInHeader` with no default: the
    /// header must be there, be a semantic version, and not be newer than
    /// the server's `latest`. Returns the version, which routes the request.
    pub fn check_version(&self, latest: &str) -> Result<semver::Version, ApiError> {
        let latest: semver::Version = latest.parse().expect("servers name a valid version");
        let Some(raw) = &self.api_version else {
            return Err(ApiError::bad_request(format!(
                "missing expected header {API_VERSION_HEADER:?}"
            )));
        };
        let v: semver::Version = raw.parse().map_err(|e| {
            ApiError::bad_request(format!(
                "bad value for header {API_VERSION_HEADER:?}: {e}: {raw}"
            ))
        })?;
        if v > latest {
            return Err(ApiError::bad_request(format!(
                "server does not support this API version: {v}"
            )));
        }
        Ok(v)
    }

    /// The JSON body as `T`, or a 400 saying why not.
    pub fn json_body<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("unable to parse JSON body: {e}")))
    }
}

/// A response: a status and an optional JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiResponse {
    pub status: StatusCode,
    pub body: Option<Body>,
}

/// A response's JSON body.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// A handler's value, serialized once as dropshot serializes it: its
    /// fields in declaration order. (Through a `serde_json::Value` first,
    /// every object's keys came out sorted, and every response was
    /// serialized twice.)
    Json(Bytes),
    /// dropshot's error body (`HttpErrorResponseBody`), whose
    /// `request_id` the server that sends it fills in.
    Error {
        error_code: Option<String>,
        message: String,
    },
}

/// dropshot's `HttpErrorResponseBody`, its fields in its order.
#[derive(Serialize)]
struct ErrorBody<'a> {
    request_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_code: Option<&'a str>,
    message: &'a str,
}

impl Body {
    /// The bytes sent, with `request_id` in an error body (formatted only
    /// there: a success body, most of a run's, is sent as it is).
    pub fn to_bytes(&self, request_id: impl std::fmt::Display) -> Bytes {
        match self {
            Body::Json(bytes) => bytes.clone(),
            Body::Error {
                error_code,
                message,
            } => Bytes::from(
                serde_json::to_vec(&ErrorBody {
                    request_id: &request_id.to_string(),
                    error_code: error_code.as_deref(),
                    message,
                })
                .expect("an error body serializes"),
            ),
        }
    }
}

impl ApiResponse {
    pub fn json<T: Serialize>(value: &T) -> Self {
        ApiResponse {
            status: StatusCode::OK,
            body: Some(Body::Json(Bytes::from(
                serde_json::to_vec(value).expect("fake responses serialize"),
            ))),
        }
    }

    pub fn no_content() -> Self {
        ApiResponse {
            status: StatusCode::NO_CONTENT,
            body: None,
        }
    }

    /// The body as JSON (an error's with an empty `request_id`), for
    /// callers that look inside it rather than send it.
    pub fn json_value(&self) -> Option<serde_json::Value> {
        let bytes = self.body.as_ref()?.to_bytes("");
        Some(serde_json::from_slice(&bytes).expect("a fake's body is JSON"))
    }

    /// The `error_code` of an error body, if any.
    pub fn error_code(&self) -> Option<&str> {
        match self.body.as_ref()? {
            Body::Error { error_code, .. } => error_code.as_deref(),
            Body::Json(_) => None,
        }
    }

    /// The `message` of an error body, if any.
    pub fn message(&self) -> Option<&str> {
        match self.body.as_ref()? {
            Body::Error { message, .. } => Some(message),
            Body::Json(_) => None,
        }
    }
}

/// An error in dropshot's terms: a status, an optional machine-readable
/// code and a message. `racksim_servers::http_error` turns it into a `dropshot::HttpError`
/// with the same fields, so both servers send the same body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub error_code: Option<String>,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, error_code: Option<&str>, message: impl Into<String>) -> Self {
        ApiError {
            status,
            error_code: error_code.map(str::to_string),
            message: message.into(),
        }
    }

    /// dropshot's `for_bad_request(None, message)`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, None, message)
    }

    /// dropshot's `for_client_error_with_status(code, status)`: the message
    /// is the status' reason phrase, the detail is in `error_code`. dendrite
    /// answers a conflicting NAT entry this way (`"conflicting mapping"`,
    /// `"Conflict"`), and a missing one (`"no mapping"`, `"Not Found"`).
    pub fn with_status(status: StatusCode, error_code: &str) -> Self {
        ApiError::new(
            status,
            Some(error_code),
            status.canonical_reason().unwrap_or("error"),
        )
    }

    /// What dropshot answers for a path it has no route for at the
    /// request's version: a 404 whose body says only "Not Found" (dropshot
    /// keeps "no route found" and "route has no handlers for version" as
    /// internal messages, for its log).
    pub fn not_found_route(_req: &ApiRequest) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, None, "Not Found")
    }

    /// What dropshot answers for a path it routes with other methods only.
    pub fn method_not_allowed() -> Self {
        ApiError::new(StatusCode::METHOD_NOT_ALLOWED, None, "Method Not Allowed")
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, None, message)
    }

    pub fn into_response(self) -> ApiResponse {
        ApiResponse {
            status: self.status,
            body: Some(Body::Error {
                error_code: self.error_code,
                message: self.message,
            }),
        }
    }
}

/// Decodes `%XX` escapes (and leaves a malformed one as it is).
pub fn percent_decode(s: &str) -> String {
    // Most segments have no escape at all: copy them as they are (every
    // request's path is decoded, so this is on the simulation's hot path).
    if !s.contains('%') {
        return s.to_owned();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(u8::try_from(h * 16 + l).expect("two hex digits fit a byte"));
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests;
