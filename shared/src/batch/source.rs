//! What an event source is to the pipeline: the [`Source`] trait, and
//! [`Prepare`], how one of its records becomes what a handler takes;
//! [`Processor`](super::Processor) does the rest, once for every source.

use std::fmt;

use serde_json::Value;

use super::delivery::{Delivery, Ordering, SourceNames, Within};
use super::malformed::MalformedRecord;
use super::parking::Ticket;
use super::pipeline::Pipeline;
use super::report::{BatchError, BatchReport, FailureReason};
use super::slot::Prepared;
use crate::parking::Parking;

/// One event source of the batch pipeline (SQS, Kinesis, DynamoDB Streams,
/// Kafka, SNS); its value holds the source's own settings.
pub trait Source: fmt::Debug + Clone + Send + Sync + 'static {
    /// The invocation as parsed.
    type Event;
    /// One record as Lambda delivered it.
    type Raw: Delivery;
    /// The invocation's answer: the partial batch response.
    type Response;
    /// Why the answer fails the invocation instead (Lambda retries it).
    type Error: std::error::Error + Send + Sync + 'static;

    /// The source's names, for logs, metrics and errors.
    const NAMES: &'static SourceNames;

    /// Parses an invocation payload, rejecting other sources' events
    /// ([`BatchError::WrongEvent`]).
    fn parse(payload: Value) -> Result<Self::Event, BatchError>;

    /// How the records of `event` keep their order.
    fn ordering(&self, event: &Self::Event) -> Ordering;

    /// The records of `event` in batch order, each parsed on its own: one
    /// that did not parse is a [`MalformedRecord`], which fails alone.
    fn records(&self, event: Self::Event) -> Vec<Result<Self::Raw, MalformedRecord>>;

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

    /// The invocation's answer to `report`.
    fn respond<T>(&self, report: &BatchReport<T>) -> Result<Self::Response, Self::Error>;
}

/// How a [`Source`] turns one of its records into `Rec`, what the handler
/// takes: parsed, keyed ([`Pipeline::key_of`]), its payload to hash.
pub trait Prepare<Rec>: Source {
    /// Prepares `record` (its log name `ident`), or says why it fails.
    fn prepare(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        record: Self::Raw,
    ) -> Result<Prepared<Rec>, FailureReason>;
}
