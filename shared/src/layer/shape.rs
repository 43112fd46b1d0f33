//! How the layer reads an invocation: the document a [`KeySelector`] reads,
//! the delivery (for [`KeySelector::Id`] and attributes), and the body that
//! payload validation hashes. One [`Shape`] per kind of invocation, with
//! the same rules as the source's processor.
//!
//! [`KeySelector`]: crate::KeySelector
//! [`KeySelector::Id`]: crate::KeySelector::Id

use aws_lambda_events::eventbridge::EventBridgeEvent;
use aws_lambda_events::sns::{SnsEvent, SnsRecord};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::batch::IdField;
use crate::batch::delivery::Delivery;
use crate::batch::envelope::open_message;
use crate::sources::eventbridge::{EventPayload, parse_event};
use crate::sources::sns::material;

use crate::batch::EventError;

/// What the layer read from one invocation's payload.
#[non_exhaustive]
pub struct Reading {
    /// What the key is selected from ([`KeyInput::value`](crate::KeyInput::value)).
    pub document: Value,
    /// What [`PayloadScope::Body`](crate::PayloadScope::Body) hashes for
    /// payload validation.
    pub body: Value,
    /// The delivered record, when the invocation carries one (an SNS
    /// notification): [`KeySelector::Id`](crate::KeySelector::Id) and
    /// [`KeySelector::MessageAttribute`](crate::KeySelector::MessageAttribute)
    /// read it.
    pub delivery: Option<Box<dyn Delivery + Send + Sync>>,
    /// The event's id for the log line (`None`: the Lambda request id).
    pub id: Option<String>,
    /// The log field of `id`.
    pub id_field: IdField,
}

impl Reading {
    /// A reading whose key document is `document` and whose validated body
    /// is `body`; no delivery, logged under the Lambda request id.
    pub fn new(document: Value, body: Value) -> Self {
        Self {
            document,
            body,
            delivery: None,
            id: None,
            id_field: IdField::MessageId,
        }
    }
}

impl std::fmt::Debug for Reading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reading")
            .field("document", &self.document)
            .field("body", &self.body)
            .field("delivery", &self.delivery.as_ref().and_then(|d| d.id()))
            .field("id", &self.id)
            .finish()
    }
}

/// How an invocation payload `P` is read for its key and its payload hash.
///
/// The crate's shapes: [`Json`] (any payload, as its JSON), [`EventBridge`]
/// (an EventBridge event invoking the function) and [`Sns`] (an SNS event
/// invoking the function). Implement it for a payload of your own.
pub trait Shape<P>: Clone + Send + Sync + 'static {
    /// Reads `payload`; an `Err` ([`EventError::InvalidEvent`]) fails the
    /// invocation before any key is claimed.
    fn read(&self, payload: &P) -> Result<Reading, EventError>;
}

/// A plain JSON invocation (a direct `Invoke`, a Step Functions task, any
/// payload type that is `Serialize`): the key is selected from the payload
/// as JSON ([`KeySelector::pointer`](crate::KeySelector::pointer)`("/order_id")`),
/// and payload validation hashes all of it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

impl<P: Serialize> Shape<P> for Json {
    fn read(&self, payload: &P) -> Result<Reading, EventError> {
        let document = serde_json::to_value(payload)
            .map_err(|e| invalid("a JSON", format!("the payload is not JSON: {e}")))?;
        Ok(Reading::new(document.clone(), document))
    }
}

/// An EventBridge event invoking the function, with the rules of
/// [`EventBridgeProcessor`](crate::eventbridge::EventBridgeProcessor): the
/// key from the envelope ([`KeySelector::Id`](crate::KeySelector::Id): the
/// event `id`; `pointer("/detail/order_id")`), payload validation on the
/// `detail`. For [`EventPayload`] (numbers beyond `f64` keep their exact
/// text), [`EventBridgeEvent<D>`] and a [`Value`] checked to be an
/// EventBridge event.
#[derive(Debug, Clone, Copy, Default)]
pub struct EventBridge;

/// The reading of an EventBridge envelope `material`.
fn eventbridge_reading(material: Value) -> Reading {
    let body = material.get("detail").cloned().unwrap_or(Value::Null);
    let id = material
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Reading {
        id,
        id_field: IdField::EventId,
        ..Reading::new(material, body)
    }
}

fn not_eventbridge(error: impl std::fmt::Display) -> EventError {
    invalid("an EventBridge", error.to_string())
}

/// A payload that is not the `expected` event.
fn invalid(expected: &'static str, message: String) -> EventError {
    EventError::InvalidEvent { expected, message }
}

impl Shape<EventPayload> for EventBridge {
    fn read(&self, payload: &EventPayload) -> Result<Reading, EventError> {
        let (_, material) = payload.parse().map_err(not_eventbridge)?;
        Ok(eventbridge_reading(material))
    }
}

impl<D: Serialize + DeserializeOwned> Shape<EventBridgeEvent<D>> for EventBridge {
    fn read(&self, payload: &EventBridgeEvent<D>) -> Result<Reading, EventError> {
        let material = serde_json::to_value(payload).map_err(not_eventbridge)?;
        Ok(eventbridge_reading(material))
    }
}

impl Shape<Value> for EventBridge {
    fn read(&self, payload: &Value) -> Result<Reading, EventError> {
        parse_event(payload).map_err(not_eventbridge)?;
        Ok(eventbridge_reading(payload.clone()))
    }
}

/// An SNS event invoking the function (one notification per invocation),
/// with the rules of [`SnsProcessor`](crate::sns::SnsProcessor): the key
/// from the notification with its `Message` parsed
/// (`pointer("/Message/order_id")`, or [`KeySelector::Id`](crate::KeySelector::Id):
/// the `MessageId`), payload validation on the parsed `Message`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sns;

impl Shape<SnsEvent> for Sns {
    fn read(&self, payload: &SnsEvent) -> Result<Reading, EventError> {
        let [record] = payload.records.as_slice() else {
            return Err(invalid(
                "an SNS",
                format!(
                    "an SNS event invoking a function holds one notification; this one holds {}",
                    payload.records.len()
                ),
            ));
        };
        sns_reading(record)
    }
}

fn sns_reading(record: &SnsRecord) -> Result<Reading, EventError> {
    let id = record.sns.message_id.clone();
    let opened = open_message::<Value>(&format!("notification {id}"), &record.sns.message)
        .map_err(|e| invalid("an SNS", e.to_string()))?;
    let notification = serde_json::to_value(&record.sns)
        .map_err(|e| invalid("an SNS", format!("the SNS notification {id}: {e}")))?;
    Ok(Reading {
        delivery: Some(Box::new(record.clone())),
        id: Some(id),
        id_field: IdField::MessageId,
        ..Reading::new(material(notification, &opened.document), opened.document)
    })
}
