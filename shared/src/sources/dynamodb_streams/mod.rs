//! DynamoDB Streams batches on the batch core.
//!
//! A [`DynamoDbStreamsProcessor`] runs a DynamoDB Streams event's records
//! through the core pipeline with [`Ordering::StopLane`], in lanes by item:
//! DynamoDB Streams orders the changes of each item (its `Keys`, compared
//! as DynamoDB compares keys: `N "1"` and `N "1.0"` are one item), not of a
//! shard (see `record.rs`). The changes of one item run one after another
//! in stream order; different items run concurrently, under the
//! processor's concurrency bound, and their commits share the batch's
//! transactions. After a change fails, nothing later of its item runs.
//!
//! **The response is a shard checkpoint**: an event source mapping reads
//! each batch from one shard, and the partial batch response
//! ([`DynamoDbEventResponse`], `ReportBatchItemFailures` on the mapping)
//! names the lowest `SequenceNumber` among the items' first failures;
//! Lambda retries from it (with several listed, the Lambda developer guide,
//! `services-ddb-batchfailurereporting`, has Lambda take the lowest
//! sequence number as the checkpoint). So no change is applied before an
//! earlier one of its item; the changes of other items after it that
//! already committed are delivered again and replay, never applied twice.
//! Their cost: with [`PreRead::Always`](crate::batch::PreRead::Always) one
//! pre-read per batch (a stream record carries no receive count), and they
//! replay without running; without it, each runs its handler again and its
//! commit is refused by its condition.
//!
//! * The handler gets a [`DynamoDbRecord`]: `eventName`, `Keys`,
//!   `NewImage` and `OldImage` as the library's [`Item`](crate::Item)
//!   (numbers as exact decimals), the `SequenceNumber`, and whether it is a
//!   Time to Live deletion ([`DynamoDbRecord::is_ttl_deletion`]).
//! * The key is selected from the record's JSON view; the default is
//!   [`keys_and`]`("<a version attribute>")`: the item's keys, the event
//!   name and an attribute that changes with every write (see `key.rs`).
//! * A record that is not a stream record, or whose image holds an invalid
//!   value, fails alone (and stops what follows it of its item), never the
//!   batch. A record whose `Keys` cannot be read keeps the whole batch in
//!   stream order (it could be a change of any item).
//! * With [`DynamoDbStreamsProcessor::parking`], a record that can never
//!   succeed is parked ([`crate::parking`]) and its item goes on.
//!
//! ```
//! use serde_json::json;
//! use lambda_idempotency::dynamodb_streams::{
//!     DynamoDbEventResponse, DynamoDbRecord, DynamoDbStreamsProcessor, keys_and,
//!     parse_dynamodb_event,
//! };
//! use lambda_idempotency::{Config, HandlerError, Idempotency, MemoryStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("subscriptions.v1"));
//! let processor = DynamoDbStreamsProcessor::new(engine, keys_and("version"));
//! let record = |seq: &str, version: &str, plan: &str| json!({
//!     "eventID": format!("e{seq}"), "eventName": "MODIFY", "eventVersion": "1.1",
//!     "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
//!     "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/subs/stream/2026-11-30T00:00:00.000",
//!     "dynamodb": {
//!         "Keys": {"id": {"S": "sub-1"}},
//!         "NewImage": {"id": {"S": "sub-1"}, "version": {"N": version}, "plan": {"S": plan}},
//!         "SequenceNumber": seq, "SizeBytes": 40, "StreamViewType": "NEW_IMAGE",
//!     },
//! });
//! let event = parse_dynamodb_event(json!({"Records": [
//!     record("101", "1", "basic"),
//!     record("102", "2", "gold"),  // the handler refuses it: sub-1 stops here
//!     record("103", "3", "pro"),   // not run
//! ]}))
//! .expect("a DynamoDB Streams event");
//!
//! let report = processor
//!     .process(event, None, |r: DynamoDbRecord| async move {
//!         let plan = r.new_image.as_ref().and_then(|i| i["plan"].as_s()).unwrap_or_default().to_owned();
//!         if plan == "gold" {
//!             return Err(HandlerError::retryable(std::io::Error::other("no such plan yet")));
//!         }
//!         Ok(json!({"plan": plan}))
//!     })
//!     .await;
//! let response: DynamoDbEventResponse =
//!     report.response_as().expect("every failed record has a sequence number");
//! let failed: Vec<_> = response.batch_item_failures.iter()
//!     .map(|f| f.item_identifier.as_deref().unwrap_or_default()).collect();
//! assert_eq!(failed, ["102"]);
//! # }
//! ```

mod image;
mod key;
mod parse;
mod record;
mod response;
#[cfg(test)]
mod tests;

pub use aws_lambda_events::dynamodb::{EventRecord, StreamRecord, UserIdentity};
use serde_json::Value;

pub use crate::batch::StreamEvent;
pub use image::{item_json, to_item};
pub use key::{keys_and, record_json};
pub use parse::{DynamoDbStreamEvent, MalformedRecord, parse_dynamodb_event};
pub use record::{DynamoDbRecord, TTL_PRINCIPAL, is_ttl_deletion};
pub use response::{DynamoDbBatchItemFailure, DynamoDbEventResponse};

pub use crate::batch::partial_response;

#[cfg(doc)]
use crate::batch::KeySelector;
use crate::batch::parking::Ticket;
use crate::batch::{
    BatchError, BatchReport, FailureReason, Ordering, Parks, PayloadScope, Pipeline, Prepare,
    Prepared, Processor, Source, SourceNames, Within,
};
use record::{DYNAMODB_STREAMS, item_of};

/// The `eventSource` of a DynamoDB stream record.
const SOURCE: &str = "aws:dynamodb";

/// Processes DynamoDB Streams batches ([`Processor`] over
/// [`DynamoDbStreams`]): the engine plus how keys and failures are handled.
/// Build it once per execution environment; cheap to clone. Its key
/// ([`KeySelector`]) is selected from the record's JSON view
/// ([`record_json`]): by default [`keys_and`]`("<a version attribute>")`.
pub type DynamoDbStreamsProcessor = Processor<DynamoDbStreams>;

/// The DynamoDB Streams source and its settings: how each record's images
/// are keyed and hashed.
#[derive(Debug, Clone, Default)]
pub struct DynamoDbStreams {
    payload: PayloadScope,
}

impl Source for DynamoDbStreams {
    type Event = DynamoDbStreamEvent;
    type Raw = EventRecord;
    type Response = DynamoDbEventResponse;
    type Error = BatchError;
    const NAMES: &'static SourceNames = &DYNAMODB_STREAMS;

    fn parse(payload: Value) -> Result<DynamoDbStreamEvent, BatchError> {
        parse_dynamodb_event(payload)
    }

    fn ordering(&self, _: &DynamoDbStreamEvent) -> Ordering {
        Ordering::StopLane
    }

    fn records(&self, event: DynamoDbStreamEvent) -> Vec<Result<EventRecord, MalformedRecord>> {
        event.records
    }

    /// The item: its key attributes.
    fn within(&self, record: &EventRecord) -> Within {
        item_of(Some(&record.change.keys))
    }

    fn within_malformed(&self, raw: &Value) -> Within {
        let keys = raw
            .pointer("/dynamodb/Keys")
            .and_then(|k| serde_json::from_value::<serde_dynamo::Item>(k.clone()).ok());
        item_of(keys.as_ref())
    }

    fn ticket(&self, record: &EventRecord) -> Option<Ticket> {
        let raw = serde_json::to_value(record).ok()?;
        Ticket::new(SOURCE, record.event_source_arn.as_deref(), record, raw)
    }

    fn respond<T>(&self, report: &BatchReport<T>) -> Result<DynamoDbEventResponse, BatchError> {
        report.response_as()
    }
}

impl Parks for DynamoDbStreams {}

impl Prepare<DynamoDbRecord> for DynamoDbStreams {
    fn prepare(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        record: EventRecord,
    ) -> Result<Prepared<DynamoDbRecord>, FailureReason> {
        self.prepare_record(pipeline, ident, record)
    }
}

impl Processor<DynamoDbStreams> {
    /// What payload validation hashes. Default [`PayloadScope::Body`]: the
    /// record's JSON view ([`record_json`]: event name, keys, images).
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.source.payload = scope;
        self
    }
}
