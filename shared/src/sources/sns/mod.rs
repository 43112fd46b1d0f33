//! Amazon SNS on the batch core: [`SnsProcessor`] for a function subscribed
//! to a topic (no partial response: [`answer`]); notifications delivered
//! through SQS are [`crate::envelope`]s, and so are a FIFO topic's, always (a
//! FIFO topic delivers only to SQS queues, never to a function). The guide:
//! [`guide::sources::sns`](crate::guide::sources::sns), the repository's `docs/sources/sns.md`.

pub use aws_lambda_events::sns::{MessageAttribute, SnsEvent, SnsMessage, SnsRecord};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::batch::envelope::open_message;
use crate::batch::malformed::{Salvage, StreamEvent, parse_stream};
use crate::batch::{Attribute, BatchError, Delivery, FailureReason, Keyed};
use crate::batch::{PayloadKind, Prepare, Prepared, Preparing, Reading};
use crate::batch::{Processor, Source, SourceNames, Unfinished};
use crate::key::IdempotencyKey;

/// The `EventSource` of the records of an SNS event.
pub const SNS_EVENT_SOURCE: &str = "aws:sns";

/// Processes the SNS events of a function subscribed to a topic
/// ([`Processor`] over [`Sns`]).
pub type SnsProcessor = Processor<Sns>;

/// The SNS source (it has no settings of its own).
#[derive(Debug, Clone, Default)]
pub struct Sns;

/// SNS records: named by their `MessageId`.
static SALVAGE: Salvage = Salvage {
    names: SourceNames {
        id: "MessageId",
        id_field: "message_id",
        lane_field: "group",
        deduplication_id: "a deduplication id (SNS notifications invoking a function have none)",
        no_lane: "SNS record without a lane",
    },
    expected: "an SNS",
    event_source: SNS_EVENT_SOURCE,
    event_source_fields: &["EventSource"],
    event_source_optional: false,
    noun: "an SNS record",
    id: "/Sns/MessageId",
    lane: |_| None,
};

/// An SNS event as parsed: each record parsed on its own.
pub type SnsStreamEvent = StreamEvent<SnsRecord>;

impl From<SnsEvent> for SnsStreamEvent {
    fn from(event: SnsEvent) -> Self {
        Self::new(event.records)
    }
}

/// Parses an invocation payload as an SNS event: a `Records` array whose
/// items all have `EventSource` `aws:sns`.
pub fn parse_sns_event(value: Value) -> Result<SnsStreamEvent, BatchError> {
    parse_stream(value, &SALVAGE)
}

impl Source for Sns {
    type Event = SnsStreamEvent;
    type Raw = SnsRecord;
    type Response = ();
    type Error = Unfinished;
    const NAMES: &'static SourceNames = &SALVAGE.names;

    fn parse(payload: Value) -> Result<SnsStreamEvent, BatchError> {
        parse_sns_event(payload)
    }
}

/// A notification was not done: the invocation fails so that Lambda's
/// asynchronous retry delivers it again (the whole-batch answer,
/// [`Unfinished`]).
pub type SnsError = Unfinished;

pub use crate::batch::whole::answer;

impl Delivery for SnsRecord {
    fn id(&self) -> Option<&str> {
        Some(self.sns.message_id.as_str()).filter(|id| !id.is_empty())
    }

    fn event_id(&self) -> Option<&str> {
        self.id()
    }

    fn position(&self) -> Option<&str> {
        None
    }

    fn body(&self) -> Option<&[u8]> {
        Some(self.sns.message.as_bytes())
    }

    /// `String`, `Number` and `String.Array` values are text.
    fn attribute(&self, name: &str) -> Option<Attribute<'_>> {
        let attr = self.sns.message_attributes.get(name)?;
        Some(match attr.data_type.as_str() {
            "Binary" => Attribute::Binary,
            _ => Attribute::Text(&attr.value),
        })
    }

    fn source(&self) -> &'static SourceNames {
        &SALVAGE.names
    }
}

/// One SNS notification as the handler sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Notification<M> {
    /// The `Message`: parsed as JSON when `M` wants JSON (a `Message` that
    /// is not JSON is read as a JSON string), as delivered when `M` takes
    /// text or bytes ([`PayloadKind`]).
    pub body: M,
    /// The record as Lambda delivered it (`Sns`: `MessageId`, `TopicArn`,
    /// `Subject`, `Timestamp`, `MessageAttributes`, the raw `Message`).
    pub record: SnsRecord,
    /// The notification's idempotency key (`None` when running
    /// unprotected).
    pub key: Option<IdempotencyKey>,
}

impl<M> Notification<M> {
    /// A notification (handler unit tests).
    pub fn new(body: M, record: SnsRecord) -> Self {
        Self {
            body,
            record,
            key: None,
        }
    }
}

/// The key material of a notification invoking the function:
/// `notification` (its JSON) with its `Message` replaced by the parsed
/// `message`, one rule with an SQS body ([`crate::envelope`]).
pub(crate) fn material(mut notification: Value, message: &Value) -> Value {
    if let Some(slot) = notification.get_mut("Message") {
        *slot = message.clone();
    }
    notification
}

impl<M: DeserializeOwned> Prepare<Notification<M>> for Sns {
    type Body = M;

    /// Keyed on the notification with its `Message` parsed (`material`);
    /// the `Message` is hashed.
    fn prepare<'r>(&self, at: &Reading<'_>, record: &'r SnsRecord) -> Preparing<'r, M> {
        let ident = at.ident();
        let opened = open_message::<M>(&format!("notification {ident}"), &record.sns.message)?;
        let notification = serde_json::to_value(&record.sns).map_err(|e| {
            FailureReason::Parse(format!("the SNS notification {ident} is not JSON: {e}"))
        })?;
        let material = material(notification, &opened.document);
        let prepared = Prepared::new(opened.body, material).hashed(opened.document);
        Ok(match PayloadKind::of::<M>() {
            PayloadKind::Json => prepared,
            _ => prepared.with_payload(record.sns.message.as_bytes()),
        })
    }

    fn record(&self, record: SnsRecord, body: M, keyed: Keyed) -> Notification<M> {
        let mut notification = Notification::new(body, record);
        notification.key = keyed.key;
        notification
    }
}

#[cfg(test)]
mod tests;
