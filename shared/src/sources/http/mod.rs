//! HTTP APIs with an `Idempotency-Key` header: API Gateway HTTP APIs
//! (payload format 2.0), Lambda function URLs and REST APIs (1.0).
//! [`HttpProcessor`] runs the handler once per caller-scoped key and
//! answers every retry with the first answer; its own error answers are
//! RFC 9457 [`Problem`]s. The guide, with the table of answers:
//! [docs/sources/http.md].
//!
//! [docs/sources/http.md]: https://github.com/lambda-idempotency/lambda-idempotency/blob/main/docs/sources/http.md

mod problem;
mod request;
mod response;

pub use problem::{PROBLEM_JSON, Problem};
use request::Identity;
pub use request::{Caller, HttpRequest};
pub use response::{EventFormat, HttpEventResponse, HttpResponse};

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[cfg(feature = "lambda")]
use lambda_runtime::LambdaEvent;
use serde_json::json;

#[cfg(feature = "lambda")]
use crate::batch::remaining_now;
use crate::batch::{Failure, MissingKey, Unit, millis};
use crate::config::Config;
use crate::engine::{Idempotency, Outcome};
use crate::error::{Error, ErrorKind, HandlerError, report};
use crate::key::{IdempotencyKey, sha256_hex};
use crate::write::{IntoStaged, Staged};

/// The default key header (matched case-insensitively).
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// The header a replayed answer carries (`true`).
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
/// How long a key and its answer are kept by default: 24 hours.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);
/// The longest key accepted by default, in characters.
pub const DEFAULT_MAX_KEY_LENGTH: usize = 255;
/// The headers of a response kept for replay by default.
pub const DEFAULT_REPLAY_HEADERS: [&str; 8] = [
    "content-type",
    "content-language",
    "content-location",
    "location",
    "etag",
    "last-modified",
    "cache-control",
    "link",
];

/// The answers that ask the client to send the same request again later
/// (408 Request Timeout, 425 Too Early, 429 Too Many Requests): never kept
/// with the key under any [`Keep`], or the retry they ask for would only
/// replay them.
pub const RETRY_LATER_STATUSES: [u16; 3] = [408, 425, 429];

/// The environment variable [`HttpProcessor::callers_from_env`] reads for
/// [`Anonymous`]: `refuse` or `share-one-scope`.
pub const ANONYMOUS_ENV: &str = "IDEMPOTENCY_ANONYMOUS_CALLERS";
/// The environment variable [`HttpProcessor::callers_from_env`] reads for
/// [`HttpProcessor::lambda_principal`]: a JSON pointer.
pub const LAMBDA_PRINCIPAL_ENV: &str = "IDEMPOTENCY_LAMBDA_AUTHORIZER_PRINCIPAL";
/// Where an HTTP API Lambda authorizer's context names the caller by
/// default: its `principalId` key.
pub const DEFAULT_LAMBDA_PRINCIPAL: &str = "/principalId";

/// Which of the handler's answers are kept with the key (replayed to
/// retries); the others release it, so a retry runs the handler again.
/// [`RETRY_LATER_STATUSES`] are never kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Keep {
    /// Everything but 5xx and [`RETRY_LATER_STATUSES`]: successes and
    /// business refusals (4xx) are answers; a 5xx is a failure to answer,
    /// and a 408, 425 or 429 asks for the same request again.
    #[default]
    NotServerErrors,
    /// Only 1xx-3xx: a 4xx releases the key too.
    SuccessOnly,
}

impl Keep {
    /// Whether an answer of `status` is kept with the key (the one rule).
    pub fn keeps(self, status: u16) -> bool {
        if RETRY_LATER_STATUSES.contains(&status) {
            return false;
        }
        match self {
            Keep::NotServerErrors => status < 500,
            Keep::SuccessOnly => status < 400,
        }
    }
}

/// What to do with a request that carries no caller identity at all: no
/// authorizer block, and no other [`Caller`] source names one. (A request
/// whose authorizer block names no caller is always refused.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Anonymous {
    /// Answer 401 `no-caller` without running the handler (the default).
    #[default]
    Refuse,
    /// Every such request is one and the same caller: they all share one
    /// key scope, so any client that sends another's key and body gets
    /// that client's kept answer. Only for an API without authorization
    /// whose clients may read each other's answers.
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

/// What the handler wrapper saw, for the answer: the full first response,
/// or the answer not kept (a 5xx).
#[derive(Default)]
struct Seen {
    first: Option<HttpResponse>,
    unkept: Option<HttpResponse>,
}

impl HttpProcessor {
    /// A processor over `engine` (see [`config`]) with the defaults: key
    /// from `Idempotency-Key`, required, at most 255 characters, scoped by
    /// [`Caller::Principal`] (a Lambda authorizer's context read at
    /// [`DEFAULT_LAMBDA_PRINCIPAL`]) then [`Caller::ApiKeyId`], requests
    /// without a caller refused ([`Anonymous::Refuse`]),
    /// [`Keep::NotServerErrors`], `Retry-After: 1`.
    pub fn new(engine: Idempotency) -> Self {
        Self {
            engine,
            header: IDEMPOTENCY_KEY_HEADER.to_owned(),
            missing_key: MissingKey::Fail,
            max_key_length: DEFAULT_MAX_KEY_LENGTH,
            callers: vec![Caller::Principal, Caller::ApiKeyId],
            lambda_principal: DEFAULT_LAMBDA_PRINCIPAL.to_owned(),
            anonymous: Anonymous::default(),
            keep: Keep::default(),
            replay_headers: DEFAULT_REPLAY_HEADERS.map(str::to_owned).to_vec(),
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

    /// Where an HTTP API Lambda authorizer's context
    /// (`requestContext.authorizer.lambda`: what a simple response returns
    /// as `context`) names the caller: a JSON pointer such as `/userId`
    /// (a leading `/` is added when missing). Default
    /// [`DEFAULT_LAMBDA_PRINCIPAL`]. Without a value there (nor a
    /// `principalId` beside the context), the request is refused 401.
    pub fn lambda_principal(mut self, pointer: &str) -> Self {
        self.lambda_principal = if pointer.starts_with('/') {
            pointer.to_owned()
        } else {
            format!("/{pointer}")
        };
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
    pub fn callers_from_env(self) -> Result<Self, String> {
        let this = match std::env::var(ANONYMOUS_ENV) {
            Ok(v) => self.anonymous(v.parse()?),
            Err(_) => self,
        };
        Ok(match std::env::var(LAMBDA_PRINCIPAL_ENV) {
            Ok(v) if v.trim().is_empty() => {
                return Err(format!("{LAMBDA_PRINCIPAL_ENV} is set but empty"));
            }
            Ok(v) => this.lambda_principal(v.trim()),
            Err(_) => this,
        })
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

    /// Handles one invocation: reads the request from the event (HTTP API,
    /// function URL or REST API), runs [`process`](HttpProcessor::process)
    /// with the invocation's remaining time, and returns the answer in the
    /// event's shape. Every request gets an HTTP answer: errors are
    /// answered, not raised.
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
        let format = payload
            .get("httpMethod")
            .map_or(EventFormat::HttpApi, |_| EventFormat::RestApi);
        Ok(match HttpRequest::from_event(payload) {
            Ok(request) => self
                .process(&request, remaining, parse, handler)
                .await
                .render(request.format),
            Err(problem) => {
                tracing::warn!(error = %problem, "malformed HTTP event");
                problem.into_response().render(format)
            }
        })
    }

    /// Handles one request: checks the key and the caller, runs `parse`
    /// (its problem is answered without touching the key), then `handler`
    /// through the engine under the caller-scoped key, and answers per the
    /// table in the guide.
    ///
    /// The handler answers with an [`HttpResponse`], alone or
    /// [`Staged`] with writes that commit with the key's record. A
    /// terminal [`HandlerError`] is answered 422 `rejected` (a kept 4xx); a
    /// retryable one, or a panic, 500 `handler-failed` (the key released).
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
        let mut key = None;
        let (response, failure) = self
            .answer(request, remaining, parse, handler, &mut key)
            .await;
        let unit = Unit {
            noun: "request",
            id: request.request_id.as_deref(),
            key: key.as_ref().map(IdempotencyKey::hash),
            ..Unit::default()
        };
        let latency = millis(start.elapsed());
        match &failure {
            Ok(outcome) => {
                crate::batch::finish_one(&self.engine, &unit, Ok::<_, &Refused>(outcome), latency);
            }
            Err(refused) => {
                crate::batch::finish_one::<(), _>(&self.engine, &unit, Err(refused), latency)
            }
        }
        response
    }

    /// The key of `request`: `Ok(None)` to run unprotected.
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
        let no_caller = |why: &str| {
            Problem::new(401, Problem::NO_CALLER, "Caller not identified").detail(format!(
                "idempotency keys are scoped to the caller, and {why}"
            ))
        };
        let scope = match request.identity(&self.callers, &self.lambda_principal) {
            Identity::Caller(scope) => scope,
            Identity::Unresolved(why) => {
                return Err(no_caller(&format!(
                    "this request's authorizer names none: {why}"
                )));
            }
            Identity::Anonymous => match self.anonymous {
                Anonymous::ShareOneScope => "anonymous".to_owned(),
                Anonymous::Refuse => {
                    return Err(no_caller("this request carries no caller identity"));
                }
            },
        };
        self.engine
            .key(&json!({ "caller": scope, "key": key }))
            .map(Some)
            .map_err(|e| invalid(e.to_string()))
    }

    async fn answer<I, R, P, H, Fut>(
        &self,
        request: &HttpRequest,
        remaining: Option<Duration>,
        parse: P,
        handler: H,
        key_out: &mut Option<IdempotencyKey>,
    ) -> (HttpResponse, Result<Outcome<()>, Refused>)
    where
        R: IntoStaged<HttpResponse>,
        P: FnOnce(&HttpRequest) -> Result<I, Problem>,
        H: FnOnce(I) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let key = match self.key(request) {
            Ok(key) => key,
            Err(problem) => return Refused::answer(problem, None),
        };
        *key_out = key.clone();
        let input = match parse(request) {
            Ok(input) => input,
            Err(problem) => return Refused::answer(problem, None),
        };
        // Same key, other request: method, path and body hash.
        let fingerprint = json!({
            "method": request.method,
            "path": request.path,
            "body": sha256_hex(&request.body),
        });
        let seen = Mutex::new(Seen::default());
        let keep = self.keep;
        let replay_headers = &self.replay_headers;
        let result = self
            .engine
            .run(key.as_ref(), Some(&fingerprint), remaining, || async {
                let staged: Staged<HttpResponse> = match handler(input).await {
                    Ok(r) => r.into_staged(),
                    Err(e) if e.kind() == ErrorKind::Terminal => {
                        Staged::new(rejected(e.to_string()).into_response())
                    }
                    Err(e) => return Err(e),
                };
                let status = staged.response.status;
                let mut seen = lock(&seen);
                if !keep.keeps(status) {
                    seen.unkept = Some(staged.response);
                    return Err(HandlerError::retryable(format!(
                        "the handler answered {status}: not kept, the key is released"
                    )));
                }
                let kept = staged.response.kept(replay_headers);
                seen.first = Some(staged.response);
                Ok(Staged {
                    response: kept,
                    writes: staged.writes,
                    messages: staged.messages,
                })
            })
            .await;
        let seen = seen.into_inner().unwrap_or_else(|p| p.into_inner());
        self.respond(result, seen)
    }

    /// The answer for the engine's result.
    fn respond(
        &self,
        result: Result<Outcome<HttpResponse>, Error>,
        seen: Seen,
    ) -> (HttpResponse, Result<Outcome<()>, Refused>) {
        let done = |o: Outcome<()>| Ok(o);
        let failed = || {
            Problem::new(500, Problem::HANDLER_FAILED, "Request failed")
                .detail("the request failed and nothing was kept; retry it with the same key")
        };
        let retry_after = self.retry_after.as_secs().max(1).to_string();
        match result {
            Ok(Outcome::Executed(kept)) => {
                (seen.first.unwrap_or(kept), done(Outcome::Executed(())))
            }
            Ok(Outcome::Unprotected(kept)) => {
                (seen.first.unwrap_or(kept), done(Outcome::Unprotected(())))
            }
            Ok(Outcome::Replayed(Some(kept))) => (
                kept.header(REPLAYED_HEADER, "true"),
                done(Outcome::Replayed(Some(()))),
            ),
            Ok(Outcome::Replayed(None)) => (
                Problem::new(409, Problem::RESPONSE_NOT_KEPT, "Already processed")
                    .detail("a request with this key was processed, and its response was not kept")
                    .into_response()
                    .header(REPLAYED_HEADER, "true"),
                done(Outcome::Replayed(None)),
            ),
            Ok(Outcome::Rejected { error, replayed }) => {
                let response = rejected(error.clone()).into_response();
                let response = if replayed {
                    response.header(REPLAYED_HEADER, "true")
                } else {
                    response
                };
                (response, done(Outcome::Rejected { error, replayed }))
            }
            Ok(Outcome::InProgress {
                lease_expires_at_ms,
            }) => {
                let response = Problem::new(409, Problem::IN_PROGRESS, "Request in progress")
                    .detail(
                        "a request with this key is being processed; retry after the \
                         Retry-After delay with the same key",
                    )
                    .into_response()
                    .header("retry-after", retry_after);
                (
                    response,
                    done(Outcome::InProgress {
                        lease_expires_at_ms,
                    }),
                )
            }
            Ok(Outcome::PayloadMismatch) => (
                Problem::new(422, Problem::KEY_REUSED, "Idempotency-Key reused")
                    .detail(
                        "this key was used with another request (method, path or body); use a \
                         new key for a new request",
                    )
                    .into_response(),
                done(Outcome::PayloadMismatch),
            ),
            // Never from the engine (stream sources park, not HTTP).
            Ok(Outcome::Parked { reason, .. }) => Refused::answer(failed(), Some(reason)),
            Err(Error::Handler(e)) => match seen.unkept {
                Some(response) => {
                    let status = response.status;
                    (response, Err(Refused::released(status, e.to_string())))
                }
                None if e.kind() == ErrorKind::Terminal => {
                    Refused::answer(rejected(e.to_string()), Some(e.to_string()))
                }
                None => Refused::answer(failed(), Some(e.to_string())),
            },
            Err(e) if e.is_retryable() => {
                let (response, refused) = Refused::answer(
                    Problem::new(503, Problem::UNAVAILABLE, "Service unavailable")
                        .detail("retry the request with the same key"),
                    Some(report(&e)),
                );
                (response.header("retry-after", retry_after), refused)
            }
            Err(e) => Refused::answer(
                Problem::new(500, Problem::HANDLER_FAILED, "Request failed"),
                Some(report(&e)),
            ),
        }
    }
}

/// The answer to a request the handler refused (a terminal error): 422.
fn rejected(detail: String) -> Problem {
    Problem::new(422, Problem::REJECTED, "Request rejected").detail(detail)
}

fn lock<V>(m: &Mutex<V>) -> std::sync::MutexGuard<'_, V> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A request answered without a kept outcome: refused before the handler
/// (a bad key, a malformed body) or failed (a 5xx, the key released), or
/// answered with what is not kept (the key released).
#[derive(Debug)]
struct Refused {
    status: u16,
    error: Option<String>,
    released: bool,
}

impl Refused {
    fn new(status: u16, error: Option<String>) -> Self {
        Self {
            status,
            error,
            released: status >= 500,
        }
    }

    /// The handler's own answer, not kept: the key was released.
    fn released(status: u16, error: String) -> Self {
        Self {
            status,
            error: Some(error),
            released: true,
        }
    }

    fn answer(
        problem: Problem,
        error: Option<String>,
    ) -> (HttpResponse, Result<Outcome<()>, Refused>) {
        let status = problem.status;
        let error = error.or_else(|| Some(problem.to_string()));
        (problem.into_response(), Err(Self::new(status, error)))
    }
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
        format!(
            "{}: {}",
            self.status,
            self.error.as_deref().unwrap_or("no detail")
        )
    }
}

#[cfg(test)]
mod tests;
