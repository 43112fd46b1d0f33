//! Amazon SNS on the batch core: a function subscribed to a topic, and
//! SNS notifications delivered through an SQS queue.
//!
//! **A subscribed function** is invoked asynchronously with an [`SnsEvent`]
//! (one record per invocation). An [`SnsProcessor`] runs its records
//! through the core pipeline as an [`Ordering::Unordered`] batch: the
//! `Message` is parsed (JSON, or its text as a JSON string) into the
//! handler's type, the key selected from the notification
//! ([`KeySelector::pointer`]`("/Message/event_id")` into the parsed
//! `Message`, or the SNS `MessageId`: [`KeySelector::Id`]), and the handler
//! run through the engine. [`SnsProcessor::handle`] answers `Ok(())` when
//! every notification is done, and an [`SnsError`] when one failed: the
//! invocation fails and Lambda's asynchronous retries deliver it again (see
//! [`answer`]). SNS may deliver a notification more than once and a
//! publisher may publish twice: the key makes the copies replays.
//!
//! **Through SQS** (the queue subscribed with raw message delivery off),
//! each SQS body is the SNS notification as JSON. The SQS
//! [`SqsProcessor`](crate::sqs::SqsProcessor) opens it when told to
//! ([`EnvelopeMode`](crate::envelope::EnvelopeMode)`::Unwrap(Envelopes::Sns)`;
//! by default a body is the message): the handler gets the parsed `Message`
//! as its body and the notification in
//! [`SqsRecord::envelope`](crate::sqs::SqsRecord::envelope), and the key
//! reads the same parsed `Message` (`/event_id`), or the SNS `MessageId`
//! ([`KeySelector::EventId`]: the same in every copy SNS delivers, where
//! each copy has its own SQS `messageId`). See [`crate::envelope`]. With
//! raw message delivery on, the body is the `Message` itself, an ordinary
//! body (`/event_id`).
//!
//! ```
//! use serde::Deserialize;
//! use serde_json::json;
//! use lambda_idempotency::sns::{Notification, SnsProcessor, answer, parse_sns_event};
//! use lambda_idempotency::{Config, HandlerError, Idempotency, KeySelector, MemoryStore};
//!
//! #[derive(Deserialize)]
//! struct Order { order_id: String }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("orders.v1"));
//! let processor = SnsProcessor::new(engine, KeySelector::pointer("/Message/order_id"));
//! let event = || parse_sns_event(json!({"Records": [{
//!     "EventSource": "aws:sns", "EventVersion": "1.0",
//!     "EventSubscriptionArn": "arn:aws:sns:us-east-1:123456789012:orders:5f1c",
//!     "Sns": {
//!         "Type": "Notification", "MessageId": "95df01b4-ee98-5cb9-9903-4c221d41eb5e",
//!         "TopicArn": "arn:aws:sns:us-east-1:123456789012:orders",
//!         "Message": r#"{"order_id":"ord-1"}"#, "Timestamp": "2026-12-01T00:00:00.000Z",
//!         "SignatureVersion": "1", "Signature": "EXAMPLE",
//!         "SigningCertUrl": "https://sns.us-east-1.amazonaws.com/cert.pem",
//!         "UnsubscribeUrl": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
//!         "MessageAttributes": {},
//!     },
//! }]}))
//! .expect("an SNS event");
//! let ship = |n: Notification<Order>| async move {
//!     Ok::<_, HandlerError>(json!({"shipped": n.body.order_id}))
//! };
//! let first = processor.process(event(), None, ship).await;
//! assert!(answer(&first).is_ok());
//! let again = processor.process(event(), None, ship).await; // SNS delivered it twice
//! assert!(matches!(again.records[0].outcome, Ok(lambda_idempotency::Outcome::Replayed(_))));
//! # }
//! ```

pub(crate) mod key;
mod parse;
mod record;
mod response;
#[cfg(test)]
mod tests;

pub use aws_lambda_events::sns::{MessageAttribute, SnsEvent, SnsMessage, SnsRecord};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use parse::{SNS_EVENT_SOURCE, SnsStreamEvent, parse_sns_event};
pub use record::Notification;
pub use response::{SnsError, answer};

#[cfg(doc)]
use crate::batch::KeySelector;
use crate::batch::{
    BatchError, BatchReport, FailureReason, MalformedRecord, Ordering, PayloadScope, Pipeline,
    Prepare, Prepared, Processor, Source, SourceNames,
};
use record::SNS;

/// Processes the SNS events of a function subscribed to a topic
/// ([`Processor`] over [`Sns`]): the engine plus how keys and failures are
/// handled. Build it once per execution environment; cheap to clone. Its
/// key is a business key in the `Message`
/// (`KeySelector::pointer("/Message/order_id")`), or the SNS `MessageId`
/// ([`KeySelector::Id`]).
pub type SnsProcessor = Processor<Sns>;

/// The SNS source and its settings: what payload validation hashes.
#[derive(Debug, Clone, Default)]
pub struct Sns {
    payload: PayloadScope,
}

impl Source for Sns {
    type Event = SnsStreamEvent;
    type Raw = SnsRecord;
    type Response = ();
    type Error = SnsError;
    const NAMES: &'static SourceNames = &SNS;

    fn parse(payload: Value) -> Result<SnsStreamEvent, BatchError> {
        parse_sns_event(payload)
    }

    fn ordering(&self, _: &SnsStreamEvent) -> Ordering {
        Ordering::Unordered
    }

    fn records(&self, event: SnsStreamEvent) -> Vec<Result<SnsRecord, MalformedRecord>> {
        event.records
    }

    /// SNS has no partial response: a failure fails the invocation
    /// ([`answer`]).
    fn respond<T>(&self, report: &BatchReport<T>) -> Result<(), SnsError> {
        answer(report)
    }
}

impl<M: DeserializeOwned> Prepare<Notification<M>> for Sns {
    fn prepare(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        record: SnsRecord,
    ) -> Result<Prepared<Notification<M>>, FailureReason> {
        let p = self.parse::<M>(pipeline, ident, &record)?;
        let key = p.key.clone();
        let record = Notification {
            body: p.body,
            record,
            key: p.key,
        };
        Ok(Prepared::new(record, key, p.payload))
    }
}

impl Processor<Sns> {
    /// What payload validation hashes. Default [`PayloadScope::Body`] (the
    /// parsed `Message`: the notification's `MessageId`, `Timestamp` and
    /// `Signature` differ between two publications of one business event).
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.source.payload = scope;
        self
    }
}
