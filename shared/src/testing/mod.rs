//! A test kit for the tests of a function built on this crate (feature
//! `testing`, for `[dev-dependencies]`):
//!
//! - [`events`]: every source's events as Lambda delivers them (SQS
//!   standard and FIFO, SNS, Kinesis, DynamoDB Streams, Kafka, EventBridge),
//!   and [`HttpEvent`], one HTTP request as an HTTP API, a function URL, a
//!   REST API or a load balancer delivers it;
//! - [`FaultStore`]: any [`Store`] with faults injected
//!   where a test says: errors, lost answers (the write happened, the caller
//!   got an error), delays, requests held at a [`Gate`];
//! - [`invoke`] and [`invoke_file`] (feature `lambda`): a handler invoked
//!   locally on an event or an event file, as the function's `--event` run
//!   invokes it;
//! - [`FailedIds`]: the ids of the records any response or error says
//!   failed (what Lambda delivers again);
//! - [`outbox`]: the messages a record staged for publishing.
//!
//! A handler tested end to end: a batch delivered twice over a store whose
//! first commit's answer is lost.
//!
//! ```
//! # #[cfg(feature = "lambda")] {
//! use lambda_idempotency::sqs::{SqsProcessor, SqsRecord};
//! use lambda_idempotency::testing::{FailedIds, Fault, FaultStore, Msg, Op, invoke, sqs_event};
//! use lambda_idempotency::{Config, HandlerError, Idempotency, KeySelector, MemoryStore};
//! use serde_json::{Value, json};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let store = FaultStore::new(MemoryStore::new());
//! let engine = Idempotency::new(store.clone(), Config::with_prefix("shipping"));
//! let processor = SqsProcessor::new(engine, KeySelector::pointer("/shipment_id"));
//! let handler = |r: SqsRecord<Value>| async move { Ok::<_, HandlerError>(r.body) };
//!
//! let body = |id: &str| json!({"shipment_id": id}).to_string();
//! let event = sqs_event("shipments", &[Msg::new("m-1", body("s-1")), Msg::new("m-2", body("s-2"))]);
//! // The first commit is written, and its answer lost.
//! store.inject(Op::Commit, Fault::LostAnswer);
//! let answer = invoke(|e| processor.handle(e, handler), &event).await;
//! assert_eq!(answer.failed_ids(), ["m-1"], "m-1 is delivered again");
//! // Its redelivery finds the record it wrote and replays it.
//! let answer = invoke(|e| processor.handle(e, handler), &event).await;
//! assert!(answer.failed_ids().is_empty());
//! assert_eq!(store.injected(Op::Commit), 1);
//! # }
//! # }
//! ```

pub mod events;
mod failed;
mod faults;
mod http;
#[cfg(feature = "lambda")]
mod invoke;
#[cfg(test)]
mod tests;

pub use events::{
    Change, Kafka, KafkaRecord, Msg, Notification, dynamodb_stream_event, eventbridge_event,
    kafka_event, kinesis_event, sns_event, sqs_event, typed,
};
pub use failed::{FailedIds, WHOLE_EVENT};
pub use faults::{Fault, FaultStore, Gate, Op};
pub use http::{DEFAULT_CALLER, HttpEvent};
#[cfg(feature = "lambda")]
pub use invoke::{TIMEOUT, invoke, invoke_file};

use crate::error::StoreError;
use crate::key::IdempotencyKey;
use crate::outbox::Entry;
use crate::store::Store;

/// The messages the record of `key` staged for publishing (its outbox), in
/// order; none without a record or an outbox.
pub async fn outbox<S: Store + ?Sized>(
    store: &S,
    key: &IdempotencyKey,
) -> Result<Vec<Entry>, StoreError> {
    let Some(record) = store.get(key.as_str()).await? else {
        return Ok(Vec::new());
    };
    match record.outbox.as_deref() {
        None => Ok(Vec::new()),
        Some(text) => crate::outbox::decode(text).map_err(|e| StoreError::Corrupt {
            id: record.id.clone(),
            reason: format!("its outbox does not decode: {e}"),
        }),
    }
}
