//! HTTP APIs with an `Idempotency-Key` header: API Gateway HTTP APIs
//! (payload format 2.0), Lambda function URLs, REST APIs (1.0) and
//! Application Load Balancers.
//! [`HttpProcessor`] runs the handler once per caller-scoped key and
//! answers every retry with the first answer; its own error answers are
//! RFC 9457 [`Problem`]s. The guide, with the table of answers:
//! the repository's `docs/sources/http.md`.

mod problem;
mod request;
mod response;

pub use problem::{PROBLEM_JSON, Problem};
pub use request::{Caller, HttpRequest};
pub use response::{EventFormat, HttpEventResponse, HttpResponse};

use std::future::Future;
use std::time::{Duration, Instant};

#[cfg(feature = "lambda")]
use lambda_runtime::LambdaEvent;
use serde_json::json;

#[cfg(feature = "lambda")]
use crate::batch::remaining_now;
use crate::batch::report::record_outcome;
use crate::batch::{Failure, FailureReason, MissingKey, Unit, millis};
use crate::config::Config;
use crate::engine::{Idempotency, Outcome};
use crate::error::{ErrorKind, HandlerError};
use crate::key::{IdempotencyKey, sha256_hex};
use crate::write::{IntoStaged, Staged};

/// The header a replayed answer carries (`true`).
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
/// How long a key and its answer are kept by default: 24 hours.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);
/// The environment variable [`HttpProcessor::callers_from_env`] reads for
/// [`Anonymous`]: `refuse` or `share-one-scope`.
pub const ANONYMOUS_ENV: &str = "IDEMPOTENCY_ANONYMOUS_CALLERS";
/// The environment variable [`HttpProcessor::callers_from_env`] reads for
/// [`HttpProcessor::lambda_principal`]: a JSON pointer.
pub const LAMBDA_PRINCIPAL_ENV: &str = "IDEMPOTENCY_LAMBDA_AUTHORIZER_PRINCIPAL";

/// Which of the handler's answers are kept with the key (replayed to
/// retries); the others release it, so a retry runs the handler again.
/// 408, 425 and 429 (they ask for the same request again) are never kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Keep {
    /// Everything but 5xx (a failure to answer), 408, 425 and 429.
    #[default]
    NotServerErrors,
    /// Only 1xx-3xx: a 4xx releases the key too.
    SuccessOnly,
}

impl Keep {
    /// Whether an answer of `status` is kept with the key (the one rule).
    pub fn keeps(self, status: u16) -> bool {
        let limit = match self {
            Keep::NotServerErrors => 500,
            Keep::SuccessOnly => 400,
        };
        status < limit && !matches!(status, 408 | 425 | 429)
    }
}

/// What to do with a request that carries no caller identity at all: no
/// authorizer block, and no other [`Caller`] source names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Anonymous {
    /// Answer 401 `no-caller` without running the handler (the default).
    #[default]
    Refuse,
    /// All such requests are one caller, sharing one key scope: only for an
    /// API whose clients may read each other's answers.
    ShareOneScope,
}

impl std::str::FromStr for Anonymous {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "refuse" => Ok(Anonymous::Refuse),
            "share-one-scope" => Ok(Anonymous::ShareOneScope),
            other => Err(format!(
                "{ANONYMOUS_ENV}={other:?} is neither `refuse` nor `share-one-scope`"
            )),
        }
    }
}

/// Runs HTTP requests through the engine, keyed by their `Idempotency-Key`.
#[derive(Debug, Clone)]
pub struct HttpProcessor {
    engine: Idempotency,
    header: String,
    missing_key: MissingKey,
    max_key_length: usize,
    callers: Vec<Caller>,
    lambda_principal: String,
    anonymous: Anonymous,
    keep: Keep,
    replay_headers: Vec<String>,
    retry_after: Duration,
}

/// The engine configuration for an HTTP handler: keys under `prefix`, kept
/// [`DEFAULT_RETENTION`] (24 h; [`Config::expires_after`] or
/// `IDEMPOTENCY_EXPIRES_AFTER_SECONDS` changes it), responses stored.
pub fn config(prefix: impl Into<String>) -> Config {
    Config::with_prefix(prefix)
        .expires_after(DEFAULT_RETENTION)
        .store_responses(true)
}

/// An answer, and how it ended for the log line and the metrics.
type Answer = (HttpResponse, Result<Outcome<HttpResponse>, Refused>);

impl HttpProcessor {
    /// A processor over `engine` (see [`config`]) with the defaults: key
    /// from `Idempotency-Key`, required, at most 255 characters, scoped by
    /// [`Caller::Principal`] then [`Caller::ApiKeyId`], requests without a
    /// caller refused, [`Keep::NotServerErrors`], `Retry-After: 1`.
    pub fn new(engine: Idempotency) -> Self {
        Self {
            engine,
            header: "idempotency-key".to_owned(),
            missing_key: MissingKey::Fail,
            max_key_length: 255,
            callers: vec![Caller::Principal, Caller::ApiKeyId],
            lambda_principal: "/principalId".to_owned(),
            anonymous: Anonymous::default(),
            keep: Keep::default(),
            replay_headers: [
                "content-type",
                "content-language",
                "content-location",
                "location",
                "etag",
                "last-modified",
                "cache-control",
                "link",
            ]
            .map(str::to_owned)
            .to_vec(),
            retry_after: Duration::from_secs(1),
        }
    }

    /// The key header's name (case-insensitive).
    pub fn header(mut self, name: &str) -> Self {
        self.header = name.to_ascii_lowercase();
        self
    }

    /// Without a key: [`MissingKey::Fail`] answers 400 (the default);
    /// [`MissingKey::RunUnprotected`] runs the handler without idempotency.
    pub fn missing_key(mut self, policy: MissingKey) -> Self {
        self.missing_key = policy;
        self
    }

    /// The longest key accepted, in characters (longer: 400).
    pub fn max_key_length(mut self, chars: usize) -> Self {
        self.max_key_length = chars;
        self
    }

    /// Where the caller's identity comes from, tried in order.
    pub fn callers(mut self, callers: impl IntoIterator<Item = Caller>) -> Self {
        self.callers = callers.into_iter().collect();
        self
    }

    /// Where an HTTP API Lambda authorizer's context names the caller: a
    /// JSON pointer such as `/userId` (a leading `/` is added when missing;
    /// default `/principalId`).
    pub fn lambda_principal(mut self, pointer: &str) -> Self {
        self.lambda_principal = format!("/{}", pointer.strip_prefix('/').unwrap_or(pointer));
        self
    }

    /// What to do without any caller identity (default
    /// [`Anonymous::Refuse`]).
    pub fn anonymous(mut self, policy: Anonymous) -> Self {
        self.anonymous = policy;
        self
    }

    /// [`anonymous`](Self::anonymous) from [`ANONYMOUS_ENV`] and
    /// [`lambda_principal`](Self::lambda_principal) from
    /// [`LAMBDA_PRINCIPAL_ENV`], each when set; an unknown value is an
    /// error (the function does not start).
    pub fn callers_from_env(mut self) -> Result<Self, String> {
        if let Ok(v) = std::env::var(ANONYMOUS_ENV) {
            self = self.anonymous(v.parse()?);
        }
        match std::env::var(LAMBDA_PRINCIPAL_ENV) {
            Ok(v) if v.trim().is_empty() => Err(format!("{LAMBDA_PRINCIPAL_ENV} is set but empty")),
            Ok(v) => Ok(self.lambda_principal(v.trim())),
            Err(_) => Ok(self),
        }
    }

    /// Which answers are kept.
    pub fn keep(mut self, policy: Keep) -> Self {
        self.keep = policy;
        self
    }

    /// Also keeps response header `name` for replay.
    pub fn replay_header(mut self, name: &str) -> Self {
        self.replay_headers.push(name.to_ascii_lowercase());
        self
    }

    /// The `Retry-After` of a 409 (whole seconds, at least 1).
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = after;
        self
    }

    /// The engine.
    pub fn engine(&self) -> &Idempotency {
        &self.engine
    }

    /// This processor for an invocation of `tenant` (its engine's
    /// [`Idempotency::for_tenant`]): what [`handle`](Self::handle) does
    /// with the invocation's `Context::tenant_id`.
    pub fn for_tenant(&self, tenant: Option<&str>) -> Self {
        Self {
            engine: self.engine.for_tenant(tenant),
            ..self.clone()
        }
    }

    /// Handles one invocation: [`process`](HttpProcessor::process) on the
    /// event's request (HTTP API, function URL, REST API or load balancer)
    /// with the invocation's remaining time, answered in the event's shape.
    /// Errors are answered, not raised.
    #[cfg(feature = "lambda")]
    pub async fn handle<I, R, P, H, Fut>(
        &self,
        event: LambdaEvent<serde_json::Value>,
        parse: P,
        handler: H,
    ) -> Result<HttpEventResponse, lambda_runtime::Error>
    where
        R: IntoStaged<HttpResponse>,
        P: FnOnce(&HttpRequest) -> Result<I, Problem>,
        H: FnOnce(I) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let (payload, ctx) = event.into_parts();
        let remaining = remaining_now(&ctx);
        let this =
            crate::tenant::scoped(self, ctx.tenant_id.as_deref(), |p, t| p.for_tenant(Some(t)));
        let format = EventFormat::of(&payload).unwrap_or(EventFormat::HttpApi);
        Ok(match HttpRequest::from_event(payload) {
            Ok(request) => this
                .process(&request, remaining, parse, handler)
                .await
                .render(request.format),
            Err(problem) => {
                tracing::warn!(error = %problem, "malformed HTTP event");
                HttpResponse::from(problem).render(format)
            }
        })
    }

    /// Handles one request: checks the key and the caller, runs `parse`
    /// (its problem is answered without touching the key), then `handler`
    /// through the engine under the caller-scoped key, and answers per the
    /// table in the guide. A terminal [`HandlerError`] is answered 422
    /// `rejected` (kept); a retryable one, or a panic, 500 `handler-failed`.
    pub async fn process<I, R, P, H, Fut>(
        &self,
        request: &HttpRequest,
        remaining: Option<Duration>,
        parse: P,
        handler: H,
    ) -> HttpResponse
    where
        R: IntoStaged<HttpResponse>,
        P: FnOnce(&HttpRequest) -> Result<I, Problem>,
        H: FnOnce(I) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let start = Instant::now();
        let key = self.key(request);
        let (response, outcome) = match &key {
            Ok(key) => {
                self.answer(request, key.as_ref(), remaining, parse, handler)
                    .await
            }
            Err(problem) => refuse(problem.clone(), None),
        };
        let key = key.as_ref().ok().and_then(Option::as_ref);
        let unit = Unit {
            noun: "request",
            id: request.request_id.as_deref(),
            key: key.map(IdempotencyKey::hash),
            tenant: self.engine.tenant(),
            ..Unit::default()
        };
        let latency = millis(start.elapsed());
        crate::batch::finish_one(&self.engine, &unit, outcome.as_ref(), latency);
        response
    }

    /// The key of `request`, scoped to its caller: `Ok(None)` to run
    /// unprotected.
    fn key(&self, request: &HttpRequest) -> Result<Option<IdempotencyKey>, Problem> {
        let invalid = |detail: String| {
            Problem::new(400, Problem::KEY_INVALID, "Invalid Idempotency-Key").detail(detail)
        };
        let header = &self.header;
        let mut values = request.headers.get_all(header.as_str()).iter();
        let Some(value) = values.next() else {
            return match self.missing_key {
                MissingKey::RunUnprotected => Ok(None),
                MissingKey::Fail => Err(Problem::new(
                    400,
                    Problem::KEY_MISSING,
                    "Idempotency-Key missing",
                )
                .detail(format!(
                    "this operation requires an {header} header: a unique value (a UUID) \
                     per operation, the same on every retry of it"
                ))),
            };
        };
        if values.next().is_some() {
            return Err(invalid(format!("more than one {header} header")));
        }
        let text = std::str::from_utf8(value.as_bytes())
            .map_err(|_| invalid(format!("the {header} header is not UTF-8")))?
            .trim();
        // One key, never a list: HTTP APIs (2.0) and function URLs join a
        // header sent twice into one value with commas.
        if text.contains(',') {
            return Err(invalid(format!(
                "the {header} header holds a comma: one key is expected (a header sent twice \
                 arrives joined with commas)"
            )));
        }
        // The IETF draft sends the key as a structured-field string ("...").
        let key = text
            .strip_prefix('"')
            .and_then(|k| k.strip_suffix('"'))
            .unwrap_or(text);
        if key.is_empty() {
            return Err(invalid(format!("the {header} header is empty")));
        }
        let length = key.chars().count();
        if length > self.max_key_length {
            return Err(invalid(format!(
                "the {header} header is {length} characters long, over the limit of {}",
                self.max_key_length
            )));
        }
        let scope = request
            .caller(&self.callers, &self.lambda_principal, self.anonymous)
            .map_err(|why| {
                Problem::new(401, Problem::NO_CALLER, "Caller not identified").detail(format!(
                    "idempotency keys are scoped to the caller, and {why}"
                ))
            })?;
        self.engine
            .key(&json!({ "caller": scope, "key": key }))
            .map(Some)
            .map_err(|e| invalid(e.to_string()))
    }

    /// Parses the request and runs the handler under `key`.
    async fn answer<I, R, P, H, Fut>(
        &self,
        request: &HttpRequest,
        key: Option<&IdempotencyKey>,
        remaining: Option<Duration>,
        parse: P,
        handler: H,
    ) -> Answer
    where
        R: IntoStaged<HttpResponse>,
        P: FnOnce(&HttpRequest) -> Result<I, Problem>,
        H: FnOnce(I) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let input = match parse(request) {
            Ok(input) => input,
            Err(problem) => return refuse(problem, None),
        };
        // Same key, other request: method, path and body hash.
        let fingerprint = json!({
            "method": request.method,
            "path": request.path,
            "body": sha256_hex(&request.body),
        });
        // The handler's full answer when kept (the record keeps fewer
        // headers), or its answer not kept.
        let (mut first, mut unkept) = (None, None);
        let (first_out, unkept_out) = (&mut first, &mut unkept);
        let result = self
            .engine
            .run(key, Some(&fingerprint), remaining, move || async move {
                let staged: Staged<HttpResponse> = match handler(input).await {
                    Ok(r) => r.into_staged(),
                    Err(e) if e.kind() == ErrorKind::Terminal => {
                        Staged::new(rejected(e.to_string()).into())
                    }
                    Err(e) => return Err(e),
                };
                let status = staged.response.status;
                if !self.keep.keeps(status) {
                    *unkept_out = Some(staged.response);
                    return Err(HandlerError::retryable(format!(
                        "the handler answered {status}: not kept, the key is released"
                    )));
                }
                let kept = staged.response.kept(&self.replay_headers);
                *first_out = Some(staged.response);
                Ok(Staged {
                    response: kept,
                    ..staged
                })
            })
            .await;
        self.respond(record_outcome(result), first, unkept)
    }

    /// The answer for the engine's result in the one failure vocabulary
    /// (`first` and `unkept` as the handler gave them): a failure is
    /// answered with its problem ([`Problem::of`]).
    fn respond(
        &self,
        result: Result<Outcome<HttpResponse>, FailureReason>,
        first: Option<HttpResponse>,
        unkept: Option<HttpResponse>,
    ) -> Answer {
        let retry_after = self.retry_after.as_secs().max(1).to_string();
        let outcome = match result {
            Ok(outcome) => outcome,
            // The handler's own answer, not kept: the key is released.
            Err(FailureReason::Handler { message, .. }) if unkept.is_some() => {
                let response = unkept.unwrap_or_else(|| Problem::of_handler().into());
                let (status, error) = (response.status, message);
                let refused = Refused {
                    status,
                    error,
                    released: true,
                };
                return (response, Err(refused));
            }
            Err(reason) => {
                let problem = Problem::of(&reason);
                let retry = problem.status == 409 || problem.status == 503;
                // A key in use or reused is the engine's outcome in the
                // log line and the counts, as in every source.
                let logged = match &reason {
                    FailureReason::InProgress {
                        lease_expires_at_ms,
                    } => Ok(Outcome::InProgress {
                        lease_expires_at_ms: *lease_expires_at_ms,
                    }),
                    FailureReason::PayloadMismatch => Ok(Outcome::PayloadMismatch),
                    _ => refuse(problem.clone(), Some(reason.to_string())).1,
                };
                let response = HttpResponse::from(problem);
                let response = match retry {
                    true => response.header("retry-after", retry_after),
                    false => response,
                };
                return (response, logged);
            }
        };
        let response = match &outcome {
            Outcome::Executed(kept) | Outcome::Unprotected(kept) => {
                first.unwrap_or_else(|| kept.clone())
            }
            Outcome::Replayed(Some(kept)) => kept.clone(),
            Outcome::Replayed(None) => {
                Problem::new(409, Problem::RESPONSE_NOT_KEPT, "Already processed")
                    .detail("a request with this key was processed, and its response was not kept")
                    .into()
            }
            Outcome::Rejected { error, .. } => rejected(error.clone()).into(),
            // Never: the engine's `InProgress` and `PayloadMismatch` are
            // failures ([`record_outcome`]), and HTTP parks nothing.
            other => {
                let reason = format!("unexpected outcome {}", other.label());
                return refuse(Problem::of_handler(), Some(reason));
            }
        };
        match outcome {
            Outcome::Replayed(_) | Outcome::Rejected { replayed: true, .. } => {
                (response.header(REPLAYED_HEADER, "true"), Ok(outcome))
            }
            _ => (response, Ok(outcome)),
        }
    }
}

/// The answer to a request the handler refused (a terminal error): 422.
fn rejected(detail: String) -> Problem {
    Problem::rejected(detail)
}

/// `problem` answered without a kept outcome; `error` (default: the
/// problem) for the log line.
fn refuse(problem: Problem, error: Option<String>) -> Answer {
    let refused = Refused {
        status: problem.status,
        error: error.unwrap_or_else(|| problem.to_string()),
        released: problem.status >= 500,
    };
    (problem.into(), Err(refused))
}

/// A request answered without a kept outcome: refused before the handler
/// (a bad key, a malformed body), failed (a 5xx), or answered with what is
/// not kept; the last two release the key.
#[derive(Debug)]
struct Refused {
    status: u16,
    error: String,
    released: bool,
}

impl Failure for Refused {
    fn in_progress(&self) -> bool {
        false
    }

    fn expected(&self) -> bool {
        self.status < 500
    }

    fn retryable(&self) -> Option<bool> {
        Some(self.released)
    }

    fn next(&self) -> &'static str {
        if self.status >= 500 {
            "answered with a server error; the key is free for a retry"
        } else if self.released {
            "answered with a status that is not kept; the key is free for a retry"
        } else {
            "answered with a client error; the key was not used"
        }
    }

    fn describe(&self) -> String {
        format!("{}: {}", self.status, self.error)
    }
}

#[cfg(test)]
mod tests;
