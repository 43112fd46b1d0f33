//! What an event source is to the pipeline: the [`Source`] trait, and
//! [`Prepare`], how one of its records becomes what a handler takes;
//! [`Processor`](super::Processor) does the rest, once for every source.

use std::borrow::Cow;
use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::delivery::{Delivery, Ordering, SourceNames, Within};
use super::envelope::Envelope;
use super::malformed::{MalformedRecord, StreamEvent};
use super::parking::Ticket;
use super::payload::{self, PayloadKind};
use super::pipeline::Pipeline;
use super::report::{BatchError, BatchReport, FailureReason, PartialResponse};
use super::whole::Unfinished;
use crate::key::IdempotencyKey;
use crate::parking::Parking;

/// One event source of the batch pipeline (SQS, Kinesis, DynamoDB Streams,
/// Kafka, SNS, or a source of your own); its value holds the source's own
/// settings. What it states is its own: its event and how it parses
/// ([`parse_stream`](super::parse_stream) for a `Records` array), its
/// ordering, its names and its answer; [`Prepare`] makes its records what a
/// handler takes.
pub trait Source: fmt::Debug + Clone + Send + Sync + 'static {
    /// The invocation as parsed: a [`StreamEvent`] of its records, or what
    /// becomes one.
    type Event: Into<StreamEvent<Self::Raw>>;
    /// One record as Lambda delivered it.
    type Raw: Delivery;
    /// The invocation's answer: the partial batch response, or `()` when
    /// the invocation answers for the whole batch ([`Answer`]).
    type Response: Answer<Self::Error>;
    /// Why the answer fails the invocation instead (Lambda retries it).
    type Error: std::error::Error + Send + Sync + 'static;

    /// The source's names, for logs, metrics and errors.
    const NAMES: &'static SourceNames;

    /// Parses an invocation payload, rejecting other sources' events
    /// ([`BatchError::WrongEvent`]).
    fn parse(payload: Value) -> Result<Self::Event, BatchError>;

    /// How its records keep their order when that is the same for every
    /// event. Default [`Ordering::Unordered`].
    const ORDERING: Ordering = Ordering::Unordered;

    /// How the records of `event` keep their order. Default
    /// [`ORDERING`](Self::ORDERING).
    fn ordering(&self, _event: &Self::Event) -> Ordering {
        Self::ORDERING
    }

    /// The records of `event` in batch order, each parsed on its own: one
    /// that did not parse is a [`MalformedRecord`], which fails alone.
    /// Default: the [`StreamEvent`]'s records.
    fn records(&self, event: Self::Event) -> Vec<Result<Self::Raw, MalformedRecord>> {
        event.into().records
    }

    /// What `record` keeps its order with inside its lane. Default: the lane.
    fn within(&self, _record: &Self::Raw) -> Within {
        Within::Lane
    }

    /// What a record that did not parse (`raw`) keeps its order with.
    fn within_malformed(&self, _raw: &Value) -> Within {
        Within::Lane
    }

    /// What `record` is parked as when it can never succeed
    /// ([`Processor::parking`](super::Processor::parking)). Default: none.
    fn ticket(&self, _record: &Self::Raw) -> Option<Ticket> {
        None
    }

    /// Where a record that can never be prepared (it does not decode, parse
    /// or key: it fails before its handler) is parked when the processor
    /// has no parking of its own. Default `None`: it fails as any record
    /// does.
    fn unprepared_parking(&self) -> Option<&'static dyn Parking> {
        None
    }

    /// Whether a record failing for `reason` is part of this source's
    /// normal operation: its log line is then a warning, not an error.
    /// Default: another invocation holds its key, or it was skipped behind
    /// a failure.
    fn expected(&self, reason: &FailureReason) -> bool {
        super::log::Failure::expected(reason)
    }

    /// What the log line of a record that failed for `reason` says happens
    /// next. Default: it will be delivered again.
    fn next(&self, reason: &FailureReason) -> &'static str {
        super::log::Failure::next(reason)
    }

    /// The invocation's answer to `report`.
    /// Default: the answer of the response's type ([`Answer`]).
    fn respond<T>(&self, report: &BatchReport<T>) -> Result<Self::Response, Self::Error> {
        Self::Response::answer(report)
    }
}

/// How an invocation is answered from its report, by the answer's type:
/// a partial batch response ([`PartialResponse`]: each record to deliver
/// again named; [`BatchError`] when one cannot be), or `()`, the
/// whole-batch answer of a source without partial responses (SNS,
/// EventBridge, Amazon MQ: [`Unfinished`] while a record is not done, so
/// the whole invocation is delivered again).
pub trait Answer<E>: Sized {
    /// The answer to `report`.
    fn answer<T>(report: &BatchReport<T>) -> Result<Self, E>;
}

impl<P: PartialResponse> Answer<BatchError> for P {
    fn answer<T>(report: &BatchReport<T>) -> Result<P, BatchError> {
        report.response_as()
    }
}

impl Answer<Unfinished> for () {
    fn answer<T>(report: &BatchReport<T>) -> Result<(), Unfinished> {
        super::whole::answer(report)
    }
}

/// How a [`Source`] turns one of its records into `Rec`, what the handler
/// takes, in two steps around its key: [`prepare`](Self::prepare) reads the
/// record (the handler's body, the document the key selector reads, an
/// envelope, the payload as delivered); the pipeline then keys it, decides
/// what payload validation hashes and hands the key to
/// [`record`](Self::record), which makes the handler's record.
///
/// ```
/// use lambda_idempotency::batch::{Keyed, Prepare, Prepared, Preparing, Reading};
/// # use lambda_idempotency::batch::{BatchReport, Delivery, Source, SourceNames};
/// # use lambda_idempotency::batch::{BatchError, StreamEvent};
/// # use serde_json::Value;
/// # #[derive(Debug, Clone)]
/// # struct Job { id: String, data: Vec<u8> }
/// # static NAMES: SourceNames = SourceNames { id: "jobId", id_field: "job_id",
/// #     lane_field: "queue", deduplication_id: "none", no_lane: "no queue" };
/// # impl Delivery for Job {
/// #     fn id(&self) -> Option<&str> { Some(&self.id) }
/// #     fn source(&self) -> &'static SourceNames { &NAMES }
/// # }
/// # #[derive(Debug, Clone, Default)]
/// # struct Jobs;
/// # impl Source for Jobs {
/// #     type Event = StreamEvent<Job>;
/// #     type Raw = Job;
/// #     type Response = ();
/// #     type Error = lambda_idempotency::batch::Unfinished;
/// #     const NAMES: &'static SourceNames = &NAMES;
/// #     fn parse(_: Value) -> Result<Self::Event, BatchError> { unimplemented!() }
/// # }
/// /// What a handler of `Jobs` takes.
/// pub struct JobRecord<M> {
///     pub body: M,
///     pub job: Job,
///     pub key: Option<lambda_idempotency::IdempotencyKey>,
/// }
///
/// impl<M: serde::de::DeserializeOwned> Prepare<JobRecord<M>> for Jobs {
///     type Body = M;
///
///     fn prepare<'r>(&self, at: &Reading<'_>, job: &'r Job) -> Preparing<'r, M> {
///         // JSON, text or bytes, by the handler's type.
///         Prepared::from_payload(at.ident(), "data", Some(job.data.as_slice()))
///     }
///
///     fn record(&self, job: Job, body: M, keyed: Keyed) -> JobRecord<M> {
///         JobRecord { body, job, key: keyed.key }
///     }
/// }
/// ```
pub trait Prepare<Rec>: Source {
    /// What [`prepare`](Self::prepare) keeps of a record for
    /// [`record`](Self::record): the handler's parsed body, usually.
    type Body;

    /// Reads `record` ([`Reading`]: its log name, whether its document is
    /// read at all): its body, its document, its envelope and payload, or
    /// why it fails (its record alone).
    fn prepare<'r>(&self, at: &Reading<'_>, record: &'r Self::Raw) -> Preparing<'r, Self::Body>;

    /// The handler's record: `record` as delivered, the `body`
    /// [`prepare`](Self::prepare) read, and its key and envelope
    /// ([`Keyed`]).
    fn record(&self, record: Self::Raw, body: Self::Body, keyed: Keyed) -> Rec;
}

/// What [`Prepare::prepare`] answers: what the source read of a record, or
/// why it fails.
pub type Preparing<'r, B> = Result<Prepared<'r, B>, FailureReason>;

/// One record as [`Prepare::prepare`] reads it: its name for messages, and
/// what the batch reads of it.
#[derive(Clone, Copy)]
pub struct Reading<'a> {
    pub(crate) ident: &'a str,
    pub(crate) pipeline: &'a Pipeline<'a>,
}

impl fmt::Debug for Reading<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reading")
            .field("ident", &self.ident)
            .finish()
    }
}

impl<'a> Reading<'a> {
    /// The record's name in messages: its id, or a description of a record
    /// without one (`record #3 (no messageId)`).
    pub fn ident(&self) -> &'a str {
        self.ident
    }

    /// The record's document from `build`, only when the key selector or
    /// payload validation reads it (JSON `null` otherwise): for a source
    /// whose document costs to build.
    pub fn document(&self, build: impl FnOnce() -> Value) -> Value {
        self.pipeline.document(build)
    }
}

/// What a [`Source`] reads of one of its records ([`Prepare::prepare`]):
/// its body `B`, the document the key selector reads, the envelope it came
/// in and its payload as delivered. The pipeline keys it and hashes it
/// ([`Processor::payload`](super::Processor::payload)), one rule for every
/// source.
#[derive(Debug)]
#[must_use]
pub struct Prepared<'r, B> {
    pub(crate) body: B,
    pub(crate) document: Value,
    pub(crate) envelope: Option<Envelope>,
    pub(crate) payload: Option<Cow<'r, [u8]>>,
    pub(crate) hashed: Option<Value>,
}

impl<'r, B> Prepared<'r, B> {
    /// `body` with its `document`: what the key selector reads
    /// ([`KeyInput::value`](crate::KeyInput::value)) and payload validation
    /// hashes ([`Processor::payload`](super::Processor::payload)).
    pub fn new(body: B, document: Value) -> Self {
        Self {
            body,
            document,
            envelope: None,
            payload: None,
            hashed: None,
        }
    }

    /// Payload validation hashes `hashed` instead of the document (an SNS
    /// notification is keyed on the notification, its `Message` hashed).
    pub fn hashed(mut self, hashed: Value) -> Self {
        self.hashed = Some(hashed);
        self
    }

    /// The envelope the body was opened from ([`KeyInput::envelope`](crate::KeyInput::envelope)),
    /// given back in [`Keyed::envelope`].
    pub fn with_envelope(mut self, envelope: Option<Envelope>) -> Self {
        self.envelope = envelope;
        self
    }

    /// The payload as delivered, for a handler that takes text or bytes
    /// ([`KeyInput::payload`](crate::KeyInput::payload)).
    pub fn with_payload(mut self, payload: impl Into<Cow<'r, [u8]>>) -> Self {
        self.payload = Some(payload.into());
        self
    }

    /// The same with its body mapped by `f`.
    pub fn map<C>(self, f: impl FnOnce(B) -> C) -> Prepared<'r, C> {
        Prepared {
            body: f(self.body),
            document: self.document,
            envelope: self.envelope,
            payload: self.payload,
            hashed: self.hashed,
        }
    }
}

impl<'r, M: DeserializeOwned> Prepared<'r, M> {
    /// A record's payload (`bytes`, its `what` in errors: `data`, `value`;
    /// `None`: a tombstone, JSON `null`) read as `M` by the one rule of
    /// [`PayloadKind`]: parsed as JSON when `M` wants JSON (the document
    /// keeps the exact text of numbers `f64` cannot hold), else taken as
    /// text or bytes (the document is the payload as a base64 JSON string,
    /// the payload itself goes to [`KeyInput::payload`](crate::KeyInput::payload)).
    pub fn from_payload(
        ident: &str,
        what: &str,
        bytes: Option<impl Into<Cow<'r, [u8]>>>,
    ) -> Result<Self, FailureReason> {
        let parse = FailureReason::Parse;
        let type_name = std::any::type_name::<M>();
        let Some(bytes) = bytes.map(Into::into) else {
            let body = M::deserialize(&Value::Null).map_err(|e| {
                parse(format!(
                    "record {ident} is a tombstone (no {what}), which does not parse as \
                     {type_name}: {e}"
                ))
            })?;
            return Ok(Self::new(body, Value::Null));
        };
        let kind = PayloadKind::of::<M>();
        if kind != PayloadKind::Json {
            let body = payload::decode::<M>(kind, &bytes, what, ident)?;
            return Ok(Self::new(body, payload::document(&bytes)).with_payload(bytes));
        }
        let text = std::str::from_utf8(&bytes).map_err(|e| {
            parse(format!(
                "{what} of record {ident} is not UTF-8 (so not JSON, which the handler's \
                 type {type_name} takes: type it String or lambda_idempotency::Bytes to \
                 take text or bytes): {e}"
            ))
        })?;
        let value: Value = serde_json::from_str(text).map_err(|e| {
            parse(format!(
                "{what} of record {ident} is not JSON, which the handler's type \
                 {type_name} takes (type it String or lambda_idempotency::Bytes to take \
                 text or bytes): {e}"
            ))
        })?;
        let body: M = serde_json::from_str(text).map_err(|e| {
            parse(format!(
                "{what} of record {ident} does not parse as {type_name}: {e}"
            ))
        })?;
        let document = crate::key::exact_material(text, &value).unwrap_or(value);
        Ok(Self::new(body, document))
    }
}

/// What the pipeline gives [`Prepare::record`] besides the record and its
/// body.
#[derive(Debug)]
#[non_exhaustive]
pub struct Keyed {
    /// The record's idempotency key (`None`: it runs unprotected).
    pub key: Option<IdempotencyKey>,
    /// The envelope [`Prepared::with_envelope`] named.
    pub envelope: Option<Envelope>,
}

#[cfg(test)]
mod tests;
