//! What a failed request reports, and what a server's error body says.

use http::StatusCode;
use hyper_util::client::legacy::{self};
use serde::Deserialize;

/// Why a request failed. Serializable so it can live inside a status.
///
/// Addresses are rendered as the `SocketAddr` string (`[fd00::2]:12224`):
/// an error must say *which* switch zone failed, because the two switches'
/// outcomes are reported side by side.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClientError {
    #[error("connecting to {addr}: {message}")]
    Connect { addr: String, message: String },
    #[error("request to {addr} timed out after {after_ms} ms")]
    Timeout { addr: String, after_ms: u64 },
    #[error("{method} {path} on {addr}: HTTP {status}: {message}")]
    Status {
        addr: String,
        method: String,
        path: String,
        status: u16,
        message: String,
        /// The dropshot error body's `error_code`, if it had one: what a
        /// caller tells one 404 from another by (sled-agent's
        /// `NO_SUCH_INSTANCE`).
        error_code: Option<String>,
    },
    #[error("{method} {path} on {addr}: {message}")]
    Protocol {
        addr: String,
        method: String,
        path: String,
        message: String,
    },
}

impl ClientError {
    /// HTTP status of the error, if the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            ClientError::Connect { .. }
            | ClientError::Timeout { .. }
            | ClientError::Protocol { .. } => None,
        }
    }

    /// The server's `error_code`, if it answered with one.
    pub fn error_code(&self) -> Option<&str> {
        match self {
            ClientError::Status { error_code, .. } => error_code.as_deref(),
            ClientError::Connect { .. }
            | ClientError::Timeout { .. }
            | ClientError::Protocol { .. } => None,
        }
    }
}

/// The error body of a dropshot server (dpd and MGS are both dropshot
/// servers). Only `message` is used: it is the human-readable part, while
/// `request_id` differs on every run and would make statuses (and traces)
/// non-reproducible.
#[derive(Deserialize)]
pub(super) struct DropshotError {
    #[allow(dead_code)]
    request_id: Option<String>,
    #[serde(default)]
    pub(super) error_code: Option<String>,
    pub(super) message: String,
}

/// An error and its causes, without hyper-util's own wrapper ("client
/// error (SendRequest)"), which says nothing the causes do not: for
/// example "connection closed before message completed", or
/// "connection error: connection reset".
pub(super) fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut current = Some(e);
    while let Some(err) = current {
        if err.downcast_ref::<legacy::Error>().is_none() {
            parts.push(err.to_string());
        }
        current = err.source();
    }
    if parts.is_empty() {
        e.to_string()
    } else {
        parts.join(": ")
    }
}

/// The message to report for a non-2xx answer: dropshot's `message` when the
/// body is a dropshot error, else the body text, else the status' reason.
pub(super) fn error_message(status: StatusCode, body: &[u8]) -> String {
    if let Ok(err) = serde_json::from_slice::<DropshotError>(body) {
        return err.message;
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("no reason given")
            .to_string()
    } else {
        text.to_string()
    }
}
