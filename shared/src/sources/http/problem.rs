//! RFC 9457 problem details (`application/problem+json`): the body of every
//! error answer the HTTP adapter gives itself.

use serde::{Deserialize, Serialize};

use super::response::HttpResponse;
use crate::batch::FailureReason;
use crate::error::ErrorKind;

/// The media type of a problem details body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// An RFC 9457 problem: `type`, `title`, `status` and an optional `detail`.
///
/// The adapter's own problem types are the `Problem::*` constants (URNs, so
/// they resolve nowhere and mean the same everywhere); a handler may use its
/// own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{status} {title}{}", detail.as_ref().map(|d| format!(": {d}")).unwrap_or_default())]
#[non_exhaustive]
pub struct Problem {
    /// A URI identifying the problem type.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the problem type (the same for every occurrence).
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// This occurrence, explained for the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Problem {
    /// A required `Idempotency-Key` header is missing (400).
    pub const KEY_MISSING: &'static str = "urn:idempotency:problem:key-missing";
    /// The key is empty, too long, holds a comma or is given twice (400).
    pub const KEY_INVALID: &'static str = "urn:idempotency:problem:key-invalid";
    /// The key was used with another request (method, path or body) (422).
    pub const KEY_REUSED: &'static str = "urn:idempotency:problem:key-reused";
    /// A request with the same key is still being processed (409).
    pub const IN_PROGRESS: &'static str = "urn:idempotency:problem:in-progress";
    /// No caller identified (401).
    pub const NO_CALLER: &'static str = "urn:idempotency:problem:no-caller";
    /// A duplicate of a request whose response was not kept (409).
    pub const RESPONSE_NOT_KEPT: &'static str = "urn:idempotency:problem:response-not-kept";
    /// The invocation is not an HTTP event, or its body does not decode (400).
    pub const MALFORMED_REQUEST: &'static str = "urn:idempotency:problem:malformed-request";
    /// The handler refused the request (a terminal error) (422).
    pub const REJECTED: &'static str = "urn:idempotency:problem:rejected";
    /// The handler failed; the key was released, retry with it (500).
    pub const HANDLER_FAILED: &'static str = "urn:idempotency:problem:handler-failed";
    /// The idempotency store could not be reached; retry with the key (503).
    pub const UNAVAILABLE: &'static str = "urn:idempotency:problem:unavailable";

    /// A problem of type `kind` with `status` and `title`.
    pub fn new(status: u16, kind: impl Into<String>, title: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            title: title.into(),
            status,
            detail: None,
        }
    }

    /// A malformed request (400): the body is not what the operation takes.
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(400, Self::MALFORMED_REQUEST, "Malformed request").detail(detail)
    }

    /// The handler refused the request (a terminal error): 422 `rejected`.
    pub fn rejected(detail: impl Into<String>) -> Self {
        Self::new(422, Self::REJECTED, "Request rejected").detail(detail)
    }

    /// The request failed and nothing was kept: 500 `handler-failed`.
    pub fn of_handler() -> Self {
        Self::new(500, Self::HANDLER_FAILED, "Request failed")
            .detail("the request failed and nothing was kept; retry it with the same key")
    }

    /// The answer to a request that failed for `reason`, the one failure
    /// vocabulary of every source ([`FailureReason`]): a request that is
    /// not what the operation takes 400, a key in use 409 (with
    /// `Retry-After`), a key reused or a refusal 422, a handler failure or
    /// panic 500, the store or the engine unavailable, or no time left, 503
    /// (with `Retry-After`).
    pub fn of(reason: &FailureReason) -> Self {
        match reason {
            FailureReason::Parse(detail) | FailureReason::NotAccepted(detail) => {
                Self::bad_request(detail.clone())
            }
            FailureReason::BodyTooLarge { .. } | FailureReason::BadSignature(_) => {
                Self::bad_request(reason.to_string())
            }
            FailureReason::Key(error) => {
                Self::new(400, Self::KEY_INVALID, "Invalid Idempotency-Key")
                    .detail(error.to_string())
            }
            FailureReason::InProgress { .. } => {
                Self::new(409, Self::IN_PROGRESS, "Request in progress").detail(
                    "a request with this key is being processed; retry after the Retry-After \
                     delay with the same key",
                )
            }
            FailureReason::PayloadMismatch => {
                Self::new(422, Self::KEY_REUSED, "Idempotency-Key reused").detail(
                    "this key was used with another request (method, path or body); use a new \
                     key for a new request",
                )
            }
            FailureReason::Handler {
                message,
                kind: ErrorKind::Terminal,
            } => Self::rejected(message.clone()),
            FailureReason::Store(_)
            | FailureReason::Idempotency(_)
            | FailureReason::OutOfTime { .. } => {
                Self::new(503, Self::UNAVAILABLE, "Service unavailable")
                    .detail("retry the request with the same key")
            }
            FailureReason::DuplicateOf { reason, .. } => Self::of(reason),
            _ => Self::of_handler(),
        }
    }

    /// Sets the detail.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}

/// The problem as a response: its status, `Content-Type:
/// application/problem+json`, the JSON body.
impl From<Problem> for HttpResponse {
    fn from(problem: Problem) -> Self {
        HttpResponse::json(problem.status, &problem).header("content-type", PROBLEM_JSON)
    }
}
