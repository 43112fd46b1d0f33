//! Amazon SNS on the adapter core: a function subscribed to a topic, and
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
//! [`BatchProcessor`](crate::batch::BatchProcessor) opens it when told to
//! ([`EnvelopeMode`](crate::batch::EnvelopeMode)`::Unwrap(Envelopes::Sns)`;
//! by default a body is the message): the handler gets the parsed `Message`
//! as its body and the notification in
//! [`SqsRecord::envelope`](crate::batch::SqsRecord::envelope), and the key
//! reads the same parsed `Message` (`/event_id`), or the SNS `MessageId`
//! ([`KeySelector::EventId`]: the same in every copy SNS delivers, where
//! each copy has its own SQS `messageId`). See [`crate::envelope`]. With
//! raw message delivery on, the body is the `Message` itself, an ordinary
//! body (`/event_id`).
//!
//! ```
//! use serde::Deserialize;
//! use serde_json::json;
//! use shared::sns::{Notification, SnsProcessor, answer, parse_sns_event};
//! use shared::{Config, HandlerError, Idempotency, KeySelector, MemoryStore};
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
//! assert!(matches!(again.records[0].outcome, Ok(shared::Outcome::Replayed(_))));
//! # }
//! ```

pub(crate) mod key;
mod parse;
mod record;
mod response;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::time::{Duration, Instant};

pub use aws_lambda_events::sns::{MessageAttribute, SnsEvent, SnsMessage, SnsRecord};
#[cfg(feature = "lambda")]
use lambda_runtime::LambdaEvent;
use serde::Serialize;
use serde::de::DeserializeOwned;
#[cfg(feature = "lambda")]
use serde_json::Value;

pub use parse::{SNS_EVENT_SOURCE, parse_sns_event};
pub use record::Notification;
pub use response::{SnsError, answer};

use crate::adapter::delivery::Ids;
use crate::adapter::pipeline::{Prepared, Slot, guard};
#[cfg(feature = "lambda")]
use crate::adapter::remaining_now;
use crate::adapter::settings::Settings;
use crate::adapter::{BatchReport, FailureReason, KeySelector, Ordering, PayloadScope};
use crate::engine::Idempotency;
use crate::error::HandlerError;
use crate::write::IntoStaged;
use key::MessageRules;
use record::SNS;

/// Processes the SNS events of a function subscribed to a topic: the
/// engine plus how keys and failures are handled. Build it once per
/// execution environment; cheap to clone.
#[derive(Debug, Clone)]
pub struct SnsProcessor {
    settings: Settings,
    /// How each notification's `Message` is parsed and keyed.
    rules: MessageRules,
}

crate::adapter::settings::batch_settings!(SnsProcessor);

impl SnsProcessor {
    /// A processor over `engine` taking each notification's key from `key`:
    /// a business key in the `Message` (`KeySelector::pointer("/Message/order_id")`),
    /// or the SNS `MessageId` ([`KeySelector::Id`]).
    pub fn new(engine: Idempotency, key: KeySelector) -> Self {
        Self {
            settings: Settings::new(engine, key),
            rules: MessageRules {
                payload: PayloadScope::default(),
            },
        }
    }

    /// What payload validation hashes. Default [`PayloadScope::Body`] (the
    /// parsed `Message`: the notification's `MessageId`, `Timestamp` and
    /// `Signature` differ between two publications of one business event).
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.rules.payload = scope;
        self
    }

    /// Handles one invocation: parses the SNS event, runs [`process`] with
    /// the invocation's remaining time, and answers ([`answer`]): `Ok(())`
    /// when every notification is done; an `Err` fails the invocation so
    /// that Lambda's asynchronous retry delivers the event again: a
    /// notification failed ([`SnsError`]), or the payload is not an SNS
    /// event.
    ///
    /// [`process`]: SnsProcessor::process
    #[cfg(feature = "lambda")]
    pub async fn handle<M, T, R, H, Fut>(
        &self,
        event: LambdaEvent<Value>,
        handler: H,
    ) -> Result<(), lambda_runtime::Error>
    where
        M: DeserializeOwned,
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(Notification<M>) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let (payload, ctx) = event.into_parts();
        let event = parse_sns_event(payload)?;
        let report = self.process(event, remaining_now(&ctx), handler).await;
        Ok(answer(&report)?)
    }

    /// Processes `event`: each notification's `Message` is parsed into
    /// `M`, its key selected, and `handler` run through the engine. Never
    /// fails as a whole: per-notification failures are in the report.
    ///
    /// `remaining` is the invocation's remaining time at the call (`None`:
    /// unknown); each lease is capped by what is left when its notification
    /// starts. `T` is the response recorded and replayed to duplicates.
    pub async fn process<M, T, R, H, Fut>(
        &self,
        event: SnsEvent,
        remaining: Option<Duration>,
        handler: H,
    ) -> BatchReport<T>
    where
        M: DeserializeOwned,
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(Notification<M>) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let started = Instant::now();
        let pipeline = self.settings.pipeline(Ordering::Unordered, &SNS);
        let slots: Vec<_> = event
            .records
            .into_iter()
            .enumerate()
            .map(|(index, record)| {
                let ids = Ids::of(&record);
                let ident = ids.ident(index, SNS.id);
                let prepared = match guard(|| self.rules.parse::<M>(&pipeline, &ident, &record)) {
                    Ok(Ok(p)) => Ok(Prepared {
                        record: Notification {
                            body: p.body,
                            record,
                            key: p.key.clone(),
                        },
                        key: p.key,
                        payload: p.payload,
                    }),
                    Ok(Err(reason)) => Err(reason),
                    Err(panic) => Err(FailureReason::Panic(format!(
                        "preparing notification {ident} (Message deserializer) panicked: {panic}"
                    ))),
                };
                Slot::new(index, ident, ids, prepared)
            })
            .collect();
        pipeline.run(slots, started, remaining, handler).await
    }
}
