//! What the layer runs an invocation as: the one record of a one-record
//! [`Source`] on the one [`Processor`](crate::batch::Processor), keyed and
//! hashed by that source's own rules ([`Prepare`]): [`Json`] (a plain JSON
//! invocation, defined here), [`EventBridge`] and [`Sns`] (the sources of
//! [`crate::eventbridge`] and [`crate::sns`]).

use aws_lambda_events::eventbridge::EventBridgeEvent;
use aws_lambda_events::sns::SnsEvent;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::batch::whole::Unfinished;
use crate::batch::{BatchError, Delivery, FailureReason, Keyed, MalformedRecord};
use crate::batch::{Ordering, Prepare, Prepared, Preparing, Reading, Source};
use crate::batch::{SourceNames, StreamEvent};
use crate::sns::{Notification, SnsStreamEvent};

pub use crate::eventbridge::EventBridge;
pub use crate::sns::Sns;

/// How a one-record [`Source`] takes an invocation payload `P` for the
/// layer: its event (one record). Its key, its payload and its failures are
/// the source's own ([`Prepare`]).
pub trait Invocation<P>: Source {
    /// What the source prepares for a handler (the layer's inner service
    /// takes the whole invocation instead).
    type Record;

    /// The event of `payload`, the invocation `request_id`: one record (a
    /// payload the source cannot read is that record, failed).
    fn event(&self, payload: &P, request_id: &str) -> Self::Event;
}

/// A plain JSON invocation (a direct `Invoke`, a Step Functions task, any
/// payload type that is `Serialize`), a one-record source: the key is
/// selected from the payload as JSON
/// ([`KeySelector::pointer`](crate::KeySelector::pointer)`("/order_id")`),
/// payload validation hashes all of it, the log line names it by the Lambda
/// request id.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

/// A plain JSON invocation as the pipeline holds it: the payload as JSON
/// (or why it is not), named by its request id.
#[derive(Debug, Clone)]
pub struct JsonInvocation {
    value: Result<Value, String>,
    request_id: String,
}

static JSON: SourceNames = SourceNames {
    id: "request id",
    id_field: "message_id",
    lane_field: "group",
    deduplication_id: "a deduplication id (a JSON invocation has none)",
    no_lane: "JSON invocation without a lane",
};

impl Delivery for JsonInvocation {
    fn id(&self) -> Option<&str> {
        Some(self.request_id.as_str()).filter(|id| !id.is_empty())
    }

    fn position(&self) -> Option<&str> {
        None
    }

    fn source(&self) -> &'static SourceNames {
        &JSON
    }
}

impl Source for Json {
    type Event = JsonInvocation;
    type Raw = JsonInvocation;
    type Response = ();
    type Error = Unfinished;
    const NAMES: &'static SourceNames = &JSON;

    fn parse(payload: Value) -> Result<JsonInvocation, BatchError> {
        let request_id = String::new();
        Ok(JsonInvocation {
            value: Ok(payload),
            request_id,
        })
    }

    fn ordering(&self, _: &JsonInvocation) -> Ordering {
        Ordering::Unordered
    }
}

/// The one record of a JSON invocation (a payload that is not JSON fails
/// alone, [`FailureReason::Parse`]).
impl From<JsonInvocation> for StreamEvent<JsonInvocation> {
    fn from(event: JsonInvocation) -> Self {
        let record = match &event.value {
            Ok(_) => Ok(event),
            Err(error) => {
                let mut record = MalformedRecord::new(0, Value::Null, &JSON, "lambda");
                record.id = Some(event.request_id).filter(|id| !id.is_empty());
                record.error = format!("the payload is not JSON: {error}");
                Err(record)
            }
        };
        StreamEvent::parsed(vec![record])
    }
}

/// Keyed on the payload as JSON, all of it hashed.
impl Prepare<Value> for Json {
    type Body = Value;

    fn prepare<'r>(&self, _: &Reading<'_>, record: &'r JsonInvocation) -> Preparing<'r, Value> {
        let value = record.value.clone().map_err(FailureReason::Parse)?;
        Ok(Prepared::new(value.clone(), value))
    }

    fn record(&self, _: JsonInvocation, value: Value, _: Keyed) -> Value {
        value
    }
}

impl<P: Serialize> Invocation<P> for Json {
    type Record = Value;

    fn event(&self, payload: &P, request_id: &str) -> JsonInvocation {
        let value = serde_json::to_value(payload).map_err(|e| e.to_string());
        let request_id = request_id.to_owned();
        JsonInvocation { value, request_id }
    }
}

/// An EventBridge event invoking the function, with the rules of
/// [`EventBridgeProcessor`](crate::eventbridge::EventBridgeProcessor): the
/// key from the envelope ([`KeySelector::Id`](crate::KeySelector::Id): the
/// event `id`; `pointer("/detail/order_id")`), payload validation on the
/// `detail`. [`EventPayload`](crate::eventbridge::EventPayload) keeps the
/// numbers beyond `f64` exact.
impl Invocation<crate::eventbridge::EventPayload> for EventBridge {
    type Record = EventBridgeEvent<Value>;

    fn event(&self, payload: &crate::eventbridge::EventPayload, _: &str) -> Self::Event {
        payload.clone()
    }
}

impl<D: Serialize + DeserializeOwned> Invocation<EventBridgeEvent<D>> for EventBridge {
    type Record = EventBridgeEvent<Value>;

    fn event(&self, payload: &EventBridgeEvent<D>, _: &str) -> Self::Event {
        let value = serde_json::to_value(payload);
        (value.unwrap_or_else(|e| Value::String(e.to_string()))).into()
    }
}

impl Invocation<Value> for EventBridge {
    type Record = EventBridgeEvent<Value>;

    fn event(&self, payload: &Value, _: &str) -> Self::Event {
        payload.clone().into()
    }
}

/// An SNS event invoking the function (one notification per invocation),
/// with the rules of [`SnsProcessor`](crate::sns::SnsProcessor): the key
/// from the notification with its `Message` parsed
/// (`pointer("/Message/order_id")`, or [`KeySelector::Id`](crate::KeySelector::Id):
/// the `MessageId`), payload validation on the parsed `Message`.
impl Invocation<SnsEvent> for Sns {
    type Record = Notification<Value>;

    fn event(&self, payload: &SnsEvent, _: &str) -> SnsStreamEvent {
        if let [_] = payload.records.as_slice() {
            return payload.clone().into();
        }
        let names = <Sns as Source>::NAMES;
        let mut record = MalformedRecord::new(0, Value::Null, names, crate::sns::SNS_EVENT_SOURCE);
        record.error = format!(
            "an SNS event invoking a function holds one notification; this one holds {}",
            payload.records.len()
        );
        SnsStreamEvent {
            records: vec![Err(record)],
        }
    }
}
