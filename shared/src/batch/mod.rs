//! The source-neutral core: one delivery model, one pipeline and one
//! processor for every batch source.
//!
//! * [`Source`] is what a source states: its Lambda event and how it splits
//!   into records (each parsed on its own), each record's [`Delivery`] (id,
//!   lane, position, body, attributes), its [`Ordering`], and how its
//!   response is built from the failures. [`Prepare`] turns one record into
//!   what the handler takes.
//! * [`Processor`] is the one processor over any source: `handle`,
//!   `process` and the builders are written once. `SqsProcessor` is
//!   `Processor<Sqs>`, `KinesisProcessor` is `Processor<Kinesis>`, and so on.
//! * [`KeySelector`] / [`KeyInput`] / [`MissingKey`] say where a record's
//!   idempotency key comes from, for every source alike; [`PayloadScope`]
//!   what payload validation hashes; [`envelope`] when a body is an
//!   EventBridge event or an SNS notification to open.
//! * [`Pipeline`] runs a batch: in-batch duplicates coalesced, the pre-read
//!   ([`PreRead`]), lanes cut by the [`Ordering`] (and by key within a lane:
//!   [`Within`]), bounded concurrency, panics isolated, one log line per
//!   record, the batch line and the metric counts.
//! * [`parking`]: on the ordered streams, a record that can never succeed
//!   ([`FailureReason::is_terminal`]) is parked and its lane goes on.
//! * [`BatchReport`] holds every record's [`RecordResult`] (an
//!   [`Outcome`](crate::Outcome) or a [`FailureReason`]) and builds any source's partial
//!   batch response ([`PartialResponse`]).
//!
//! The sources are one folder each under `shared/src/sources/`: SQS
//! ([`crate::sqs`]), Kinesis ([`crate::kinesis`]), DynamoDB Streams
//! ([`crate::dynamodb_streams`]), Kafka ([`crate::kafka`]) and SNS
//! ([`crate::sns`]) implement [`Source`]; EventBridge
//! ([`crate::eventbridge`]) and HTTP ([`crate::http`]) are single-event
//! sources that share the keys, the log line and the counts.
//!
//! # Adding a source
//!
//! One folder `shared/src/sources/<source>/`, laid out like `kinesis/`:
//! `mod.rs` (the source's settings struct, `impl Source`, `impl
//! Prepare<YourRecord<M>>`, `pub type <Source>Processor = Processor<..>` and
//! its own builders on `impl Processor<..>`), `parse.rs` (the event,
//! rejecting other payloads with [`BatchError::WrongEvent`]), `record.rs`
//! (`impl Delivery` for the raw record, its `static` [`SourceNames`], the
//! record the handler takes), `key.rs` (decode, parse and key one record
//! with [`Pipeline::key_of`]), `response.rs` ([`PartialResponse`] for its
//! response type) and `tests.rs`. Outside it: `pub mod <source>;` in
//! `sources/mod.rs` and the name in `lib.rs`'s `pub use sources::{..}`.
//!
//! Every source reports the engine's [`Outcome`](crate::Outcome) for what is done
//! (`Executed`, `Replayed`, `Rejected`, `Unprotected`; `Parked` for a
//! stream record set aside by [`parking`]) and a [`FailureReason`] for what
//! must be delivered again or ends in the DLQ: an engine `InProgress` or
//! `PayloadMismatch` is always reported as a failure.

pub(crate) mod delivery;
pub mod envelope;
mod event;
pub(crate) mod key;
pub(crate) mod lanes;
mod log;
pub(crate) mod malformed;
pub mod parking;
pub(crate) mod pipeline;
mod processor;
pub(crate) mod report;
pub(crate) mod settings;
mod slot;
mod source;

pub use delivery::{Attribute, Delivery, IdField, LaneField, Ordering, SourceNames, Within};
pub use event::EventError;
pub(crate) use event::{EventKeys, finish_event};
pub use key::{KeyFn, KeyInput, KeySelector, MissingKey, PayloadScope};
pub(crate) use log::{Failure, Unit, finish_one};
pub use malformed::{MalformedRecord, StreamEvent};
pub use pipeline::Pipeline;
pub use processor::{Parks, Processor};
pub(crate) use report::json_type;
pub use report::{
    BatchError, BatchReport, FailureReason, PartialResponse, RecordResult, partial_response,
};
pub(crate) use settings::millis;
#[cfg(feature = "lambda")]
pub(crate) use settings::remaining_now;
pub use settings::{DEFAULT_CONCURRENCY, DEFAULT_DEADLINE_MARGIN, PreRead};
pub use slot::Prepared;
pub use source::{Prepare, Source};
