//! HTTP APIs with an `Idempotency-Key` header: API Gateway HTTP APIs
//! (payload format 2.0), Lambda function URLs, REST APIs (1.0) and
//! Application Load Balancers.
//! [`HttpProcessor`] runs the handler once per caller-scoped key and
//! answers every retry with the first answer; its own error answers are
//! RFC 9457 [`Problem`]s. The guide, with the table of answers:
//! [`guide::sources::http`](crate::guide::sources::http), the repository's `docs/sources/http.md`.

mod problem;
mod request;
mod response;

pub use problem::{PROBLEM_JSON, Problem};
pub use request::{Caller, HttpRequest};
pub use response::{EventFormat, HttpEventResponse, HttpResponse};

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

#[cfg(feature = "lambda")]
use lambda_runtime::LambdaEvent;
use serde_json::{Value, json};

#[cfg(feature = "lambda")]
use crate::batch::remaining_now;
use crate::batch::whole::{self, Unfinished};
use crate::batch::{BatchError, Delivery, FailureReason, KeySelector, Keyed};
use crate::batch::{MissingKey, Prepare, Prepared, Preparing, Processor, Reading, Source};
use crate::batch::{SourceNames, StreamEvent};
use crate::config::Config;
use crate::engine::{Idempotency, Outcome};
use crate::error::{ErrorKind, HandlerError, KeyError};
use crate::key::sha256_hex;
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

/// Runs HTTP requests through the engine, keyed by their `Idempotency-Key`:
/// the one [`Processor`] over a one-record source, each request the one
/// record of its invocation.
#[derive(Debug, Clone)]
pub struct HttpProcessor {
    /// Boxed: a processor is held by value in functions' own types.
    processor: Box<Processor<Http>>,
    keep: Keep,
    replay_headers: Vec<String>,
    retry_after: Duration,
}

/// HTTP requests, a one-record source of the batch core: what it reads of a
/// request is the key header and the caller, its key material.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    header: String,
    missing_key: MissingKey,
    max_key_length: usize,
    callers: Vec<Caller>,
    lambda_principal: String,
    anonymous: Anonymous,
}

/// The engine configuration for an HTTP handler: keys under `prefix`, kept
/// [`DEFAULT_RETENTION`] (24 h; [`Config::expires_after`] or
/// `IDEMPOTENCY_EXPIRES_AFTER_SECONDS` changes it), responses stored.
pub fn config(prefix: impl Into<String>) -> Config {
    Config::with_prefix(prefix)
        .expires_after(DEFAULT_RETENTION)
        .store_responses(true)
}

impl HttpProcessor {
    /// A processor over `engine` (see [`config`]) with the defaults: key
    /// from `Idempotency-Key`, required, at most 255 characters, scoped by
    /// [`Caller::Principal`] then [`Caller::ApiKeyId`], requests without a
    /// caller refused, [`Keep::NotServerErrors`], `Retry-After: 1`.
    pub fn new(engine: Idempotency) -> Self {
        let source = Http {
            header: "idempotency-key".to_owned(),
            missing_key: MissingKey::Fail,
            max_key_length: 255,
            callers: vec![Caller::Principal, Caller::ApiKeyId],
            lambda_principal: "/principalId".to_owned(),
            anonymous: Anonymous::default(),
        };
        // The request's key material is its document: the caller's scope
        // and the key, or `null` for a request run unprotected.
        let key = KeySelector::custom(|input| match input.value {
            Value::Null => Err(KeyError::Missing("the Idempotency-Key header".to_owned())),
            material => Ok(material.clone()),
        });
        // A request has no deadline margin: it runs whatever time is left.
        let processor = Processor::with_source(engine, key, source).deadline_margin(Duration::ZERO);
        Self {
            processor: Box::new(processor),
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
        self.processor.source.header = name.to_ascii_lowercase();
        self
    }

    /// Without a key: [`MissingKey::Fail`] answers 400 (the default);
    /// [`MissingKey::RunUnprotected`] runs the handler without idempotency.
    pub fn missing_key(mut self, policy: MissingKey) -> Self {
        self.processor.source.missing_key = policy;
        self.processor.settings.missing_key = policy;
        self
    }

    /// The longest key accepted, in characters (longer: 400).
    pub fn max_key_length(mut self, chars: usize) -> Self {
        self.processor.source.max_key_length = chars;
        self
    }

    /// Where the caller's identity comes from, tried in order.
    pub fn callers(mut self, callers: impl IntoIterator<Item = Caller>) -> Self {
        self.processor.source.callers = callers.into_iter().collect();
        self
    }

    /// Where an HTTP API Lambda authorizer's context names the caller: a
    /// JSON pointer such as `/userId` (a leading `/` is added when missing;
    /// default `/principalId`).
    pub fn lambda_principal(mut self, pointer: &str) -> Self {
        let pointer = format!("/{}", pointer.strip_prefix('/').unwrap_or(pointer));
        self.processor.source.lambda_principal = pointer;
        self
    }

    /// What to do without any caller identity (default
    /// [`Anonymous::Refuse`]).
    pub fn anonymous(mut self, policy: Anonymous) -> Self {
        self.processor.source.anonymous = policy;
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
        self.processor.engine()
    }

    /// This processor for an invocation of `tenant` (its engine's
    /// [`Idempotency::for_tenant`]): what [`handle`](Self::handle) does
    /// with the invocation's `Context::tenant_id`.
    pub fn for_tenant(&self, tenant: Option<&str>) -> Self {
        Self {
            processor: Box::new(self.processor.for_tenant(tenant)),
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

    /// Handles one request as the one record of a batch: checks the key
    /// and the caller, runs `parse` (its problem is answered without
    /// touching the key), then `handler` through the engine under the
    /// caller-scoped key, and answers per the table in the guide. A
    /// terminal [`HandlerError`] is answered 422 `rejected` (kept); a
    /// retryable one, or a panic, 500 `handler-failed`.
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
        // Refused before the handler: the record fails as it is prepared,
        // and the answer is its problem.
        let checked = match self.processor.source.material(request) {
            Ok(material) => parse(request)
                .map(|input| (material, input))
                .map_err(|problem| (FailureReason::Parse(problem.to_string()), problem)),
            Err(problem) => Err((FailureReason::NotAccepted(problem.to_string()), problem)),
        };
        let (material, input, refused) = match checked {
            Ok((material, input)) => (material, Some(input), None),
            Err((reason, problem)) => (Value::Null, None, Some((reason, problem))),
        };
        let record = HttpRecord {
            id: request.request_id.clone(),
            material,
            // Same key, other request: method, path and body hash.
            fingerprint: json!({
                "method": request.method,
                "path": request.path,
                "body": sha256_hex(&request.body),
            }),
            refused: refused.as_ref().map(|(reason, _)| reason.clone()),
        };
        // The handler's full answer when kept (the record keeps fewer
        // headers), or its answer not kept.
        let answers = Answers::default();
        let handler = whole::once(|()| self.run(handler, input, &answers));
        let report = self.processor.process(record, remaining, handler).await;
        if let Some((_, problem)) = refused {
            return problem.into();
        }
        let outcome = report.records.into_iter().next().map(|r| r.outcome);
        let outcome = outcome.unwrap_or_else(|| {
            let reason = "the request was not processed".to_owned();
            Err(FailureReason::Idempotency(reason))
        });
        let Answers { first, unkept } = answers;
        let (first, unkept) = (into_inner(first), into_inner(unkept));
        self.respond(outcome, first, unkept)
    }

    /// Runs `handler` on `input` for the engine: a terminal error is the
    /// kept 422 `rejected`; an answer the [`Keep`] rule does not keep fails
    /// retryable, which releases the key (the general rule of every
    /// source), the answer itself kept aside in `answers`.
    async fn run<I, R, H, Fut>(
        &self,
        handler: H,
        input: Option<I>,
        answers: &Answers,
    ) -> Result<Staged<HttpResponse>, HandlerError>
    where
        R: IntoStaged<HttpResponse>,
        H: FnOnce(I) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let Some(input) = input else {
            // Never: a refused request fails before its handler.
            return Err(HandlerError::retryable("the request was refused"));
        };
        let staged: Staged<HttpResponse> = match handler(input).await {
            Ok(r) => r.into_staged(),
            Err(e) if e.kind() == ErrorKind::Terminal => {
                Staged::new(Problem::rejected(e.to_string()).into())
            }
            Err(e) => return Err(e),
        };
        let status = staged.response.status;
        if !self.keep.keeps(status) {
            put(&answers.unkept, staged.response);
            return Err(HandlerError::retryable(format!(
                "the handler answered {status}: not kept, the key is released"
            )));
        }
        let kept = staged.response.kept(&self.replay_headers);
        put(&answers.first, staged.response);
        Ok(Staged {
            response: kept,
            ..staged
        })
    }

    /// The answer for the record's outcome in the one failure vocabulary
    /// (`first` and `unkept` as the handler gave them): a failure is
    /// answered with its problem ([`Problem::of`]).
    fn respond(
        &self,
        result: Result<Outcome<HttpResponse>, FailureReason>,
        first: Option<HttpResponse>,
        unkept: Option<HttpResponse>,
    ) -> HttpResponse {
        let retry_after = self.retry_after.as_secs().max(1).to_string();
        let outcome = match (result, unkept) {
            (Ok(outcome), _) => outcome,
            // The handler's own answer, not kept: the key is released.
            (Err(FailureReason::Handler { .. }), Some(unkept)) => return unkept,
            (Err(reason), _) => {
                let problem = Problem::of(&reason);
                let retry = problem.status == 409 || problem.status == 503;
                let response = HttpResponse::from(problem);
                return match retry {
                    true => response.header("retry-after", retry_after),
                    false => response,
                };
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
            Outcome::Rejected { error, .. } => Problem::rejected(error.clone()).into(),
            // Never: the engine's `InProgress` and `PayloadMismatch` are
            // failures, and HTTP parks nothing.
            _ => Problem::of_handler().into(),
        };
        match outcome {
            Outcome::Replayed(_) | Outcome::Rejected { replayed: true, .. } => {
                response.header(REPLAYED_HEADER, "true")
            }
            _ => response,
        }
    }
}

/// The handler's answers kept aside while its request runs.
#[derive(Default)]
struct Answers {
    first: Mutex<Option<HttpResponse>>,
    unkept: Mutex<Option<HttpResponse>>,
}

fn put(slot: &Mutex<Option<HttpResponse>>, response: HttpResponse) {
    *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(response);
}

fn into_inner(slot: Mutex<Option<HttpResponse>>) -> Option<HttpResponse> {
    slot.into_inner().unwrap_or_else(|e| e.into_inner())
}

impl Http {
    /// The key material of `request`, scoped to its caller: `null` to run
    /// unprotected; a problem refuses the request.
    fn material(&self, request: &HttpRequest) -> Result<Value, Problem> {
        let invalid = |detail: String| {
            Problem::new(400, Problem::KEY_INVALID, "Invalid Idempotency-Key").detail(detail)
        };
        let header = &self.header;
        let mut values = request.headers.get_all(header.as_str()).iter();
        let Some(value) = values.next() else {
            return match self.missing_key {
                MissingKey::RunUnprotected => Ok(Value::Null),
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
        Ok(json!({ "caller": scope, "key": key }))
    }
}

/// The names of an HTTP request, for logs and messages.
static NAMES: SourceNames = SourceNames {
    id: "requestId",
    // The request id goes to `message_id` in the log line, as it always has.
    id_field: "message_id",
    lane_field: "lane",
    deduplication_id: "a deduplication id (HTTP requests have none)",
    no_lane: "HTTP request without a lane",
};

/// One request on its way through the pipeline: its id, its key material,
/// what payload validation hashes, or why it was refused.
#[derive(Debug)]
pub(crate) struct HttpRecord {
    id: Option<String>,
    material: Value,
    fingerprint: Value,
    refused: Option<FailureReason>,
}

impl Delivery for HttpRecord {
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    fn source(&self) -> &'static SourceNames {
        &NAMES
    }
}

impl From<HttpRecord> for StreamEvent<HttpRecord> {
    fn from(record: HttpRecord) -> Self {
        StreamEvent::parsed(vec![Ok(record)])
    }
}

impl Source for Http {
    type Event = HttpRecord;
    type Raw = HttpRecord;
    type Response = ();
    type Error = Unfinished;
    const NAMES: &'static SourceNames = &NAMES;

    /// A request is read by [`HttpProcessor::handle`], which answers a
    /// malformed one with its problem: never a batch event.
    fn parse(_: Value) -> Result<HttpRecord, BatchError> {
        Err(BatchError::WrongEvent {
            expected: "a batch (HTTP requests are handled by HttpProcessor)",
            message: "an HTTP request is not a batch".to_owned(),
        })
    }

    /// A request answered with a client error (4xx: a bad key, no caller,
    /// a malformed body, a key in use or reused) is normal operation.
    fn expected(&self, reason: &FailureReason) -> bool {
        Problem::of(reason).status < 500
    }

    /// A request is answered, never delivered again: what its answer did
    /// to the key.
    fn next(&self, reason: &FailureReason) -> &'static str {
        match reason {
            FailureReason::Handler { .. } => {
                "answered with a status that is not kept; the key is free for a retry"
            }
            _ if Problem::of(reason).status >= 500 => {
                "answered with a server error; the key is free for a retry"
            }
            _ => "answered with a client error; the key was not used",
        }
    }
}

/// Keyed on the caller-scoped key, the method, path and body hashed.
impl Prepare<()> for Http {
    type Body = ();

    fn prepare<'r>(&self, _: &Reading<'_>, record: &'r HttpRecord) -> Preparing<'r, ()> {
        if let Some(reason) = &record.refused {
            return Err(reason.clone());
        }
        let prepared = Prepared::new((), record.material.clone());
        Ok(prepared.hashed(record.fingerprint.clone()))
    }

    fn record(&self, _: HttpRecord, (): (), _: Keyed) {}
}

#[cfg(test)]
mod tests;
