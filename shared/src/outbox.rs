//! The transactional outbox: messages a handler publishes, exactly once.
//!
//! A handler stages messages next to its writes ([`Staged::publish`]). They
//! are stored **inside its idempotency record** (attribute `outbox`, a JSON
//! array of [`Entry`]), so they commit in the same write as the record and
//! the business writes, in every commit mode, or not at all. The
//! `outbox-relay` function reads the table's stream and publishes every
//! entry of a completed record under its stable [`Entry::id`]: a FIFO queue
//! deduplicates on it (`MessageDeduplicationId`), every SQS message carries
//! it as the `outbox_id` attribute, an EventBridge event as
//! `detail.outbox_id`, so a consumer recognises every re-publish.
//!
//! Why in the record and not in an outbox table: the record is written
//! anyway, so the entries add no item and no request to the commit (an
//! outbox table adds one item per message to the transaction, 2 write units
//! each, and a cleanup delete), and the stream carries the messages with
//! the completion that makes them due. The cost: they count towards the
//! record's 400 KB.
//!
//! [`Staged::publish`]: crate::Staged::publish

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::key::sha256_hex;

/// The SQS message attribute (and EventBridge `detail` field) carrying a
/// message's stable id.
pub const OUTBOX_ID: &str = "outbox_id";

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Destination {
    /// An SQS queue (a URL ending in `.fifo` is a FIFO queue).
    #[serde(rename = "sqs")]
    Sqs {
        /// The queue URL.
        queue_url: String,
    },
    /// An EventBridge event bus.
    #[serde(rename = "eventbridge")]
    EventBridge {
        /// The bus name or ARN.
        bus: String,
        /// The event's `source`.
        source: String,
        /// The event's `detail-type`.
        detail_type: String,
    },
}

/// A message to publish once the handler's commit lands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Where it goes.
    pub destination: Destination,
    /// The SQS body, or the EventBridge `detail` (a JSON object as text).
    pub body: String,
    /// The FIFO message group (required for FIFO queues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// String message attributes (SQS).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

impl Message {
    /// A message to the SQS queue at `queue_url`.
    pub fn sqs(queue_url: impl Into<String>, body: impl Into<String>) -> Self {
        Self {
            destination: Destination::Sqs {
                queue_url: queue_url.into(),
            },
            body: body.into(),
            group_id: None,
            attributes: BTreeMap::new(),
        }
    }

    /// An event on `bus` whose `detail` is `detail` (serialized: it must be
    /// a JSON object, checked when the handler's result is committed).
    pub fn event(
        bus: impl Into<String>,
        source: impl Into<String>,
        detail_type: impl Into<String>,
        detail: &impl Serialize,
    ) -> Result<Self, serde_json::Error> {
        Ok(Self {
            destination: Destination::EventBridge {
                bus: bus.into(),
                source: source.into(),
                detail_type: detail_type.into(),
            },
            body: serde_json::to_string(detail)?,
            group_id: None,
            attributes: BTreeMap::new(),
        })
    }

    /// Sets the FIFO message group.
    pub fn group(mut self, group_id: impl Into<String>) -> Self {
        self.group_id = Some(group_id.into());
        self
    }

    /// Adds a string message attribute (SQS).
    pub fn attribute(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.insert(name.into(), value.into());
        self
    }

    /// Why this message cannot be published, if it cannot: checked before
    /// anything commits, so a message that could never be delivered never
    /// blocks the stream.
    pub(crate) fn check(&self) -> Result<(), String> {
        match &self.destination {
            Destination::Sqs { queue_url } => {
                if queue_url.trim().is_empty() {
                    return Err("an SQS message without a queue URL".into());
                }
                if queue_url.ends_with(".fifo") && self.group_id.is_none() {
                    return Err(format!(
                        "a message to the FIFO queue {queue_url} has no group id"
                    ));
                }
                if self.attributes.contains_key(OUTBOX_ID) {
                    return Err(format!("the attribute {OUTBOX_ID} is reserved"));
                }
            }
            Destination::EventBridge { bus, .. } => {
                if bus.trim().is_empty() {
                    return Err("an event without a bus".into());
                }
                match serde_json::from_str::<serde_json::Value>(&self.body) {
                    Ok(serde_json::Value::Object(_)) => {}
                    _ => return Err("an event detail must be a JSON object".into()),
                }
            }
        }
        Ok(())
    }
}

/// A message as stored in the record, with its stable id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// `sha256(<record id>/<position>)` in hex: the same for every commit
    /// and every re-publish of this message.
    pub id: String,
    /// The message.
    #[serde(flatten)]
    pub message: Message,
}

/// The stable id of the message at `position` of the record `record_id`.
pub fn stable_id(record_id: &str, position: usize) -> String {
    sha256_hex(format!("{record_id}/{position}").as_bytes())
}

/// The stored form of `messages` for the record `record_id` (`None`
/// without messages).
pub(crate) fn encode(record_id: &str, messages: &[Message]) -> Option<String> {
    if messages.is_empty() {
        return None;
    }
    let entries: Vec<Entry> = messages
        .iter()
        .enumerate()
        .map(|(i, message)| Entry {
            id: stable_id(record_id, i),
            message: message.clone(),
        })
        .collect();
    serde_json::to_string(&entries).ok()
}

/// Reads the entries of a record's `outbox` attribute.
pub fn decode(outbox: &str) -> Result<Vec<Entry>, serde_json::Error> {
    serde_json::from_str(outbox)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_in_the_relay_format() {
        let messages = [
            Message::sqs("https://sqs.local/1/n.fifo", "hello")
                .group("acct-1")
                .attribute("k", "v"),
            Message::event(
                "default",
                "orders",
                "OrderConfirmed",
                &serde_json::json!({"order_id": "o-1"}),
            )
            .unwrap(),
        ];
        let text = encode("orders.notify#abc", &messages).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            json[0],
            serde_json::json!({
                "id": stable_id("orders.notify#abc", 0),
                "destination": {"sqs": {"queue_url": "https://sqs.local/1/n.fifo"}},
                "body": "hello",
                "group_id": "acct-1",
                "attributes": {"k": "v"},
            })
        );
        assert_eq!(
            json[1]["destination"],
            serde_json::json!({"eventbridge": {"bus": "default", "source": "orders", "detail_type": "OrderConfirmed"}})
        );
        let back = decode(&text).unwrap();
        assert_eq!(back[1].message, messages[1]);
        assert_eq!(back[0].id.len(), 64);
        assert_ne!(back[0].id, back[1].id, "positions differ");
        assert_ne!(stable_id("a#h", 0), stable_id("b#h", 0), "prefixes differ");
        assert_eq!(encode("x", &[]), None);
    }

    #[test]
    fn undeliverable_messages_are_refused() {
        assert!(Message::sqs("https://q/n.fifo", "b").check().is_err());
        assert!(
            Message::sqs("https://q/n.fifo", "b")
                .group("g")
                .check()
                .is_ok()
        );
        assert!(Message::sqs("https://q/n", "b").check().is_ok());
        assert!(Message::sqs("", "b").check().is_err());
        assert!(
            Message::sqs("https://q/n", "b")
                .attribute(OUTBOX_ID, "x")
                .check()
                .is_err()
        );
        let event = Message::event("bus", "s", "d", &serde_json::json!([1])).unwrap();
        assert!(event.check().is_err(), "detail must be an object");
    }
}
