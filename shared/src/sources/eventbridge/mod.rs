//! EventBridge events invoking the function directly (asynchronous
//! invocation): [`EventBridgeProcessor`]. The guide: [`guide::sources::eventbridge`](crate::guide::sources::eventbridge), the repository's `docs/sources/eventbridge.md`.

use std::future::Future;
use std::time::{Duration, Instant};

#[cfg(feature = "lambda")]
use crate::batch::remaining_now;
#[cfg(feature = "lambda")]
use lambda_runtime::LambdaEvent;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

pub use aws_lambda_events::eventbridge::EventBridgeEvent;

pub use crate::batch::EventError;
use crate::batch::envelope::looks_like_eventbridge;
use crate::batch::json_type;
use crate::batch::{EventKeys, IdField, KeySelector, MissingKey, PayloadKind, PayloadScope};
use crate::engine::{Idempotency, Outcome};
use crate::{error::HandlerError, key::exact_material, write::IntoStaged};

/// What [`EventBridgeProcessor::handle`] returns for an event that is done
/// (Lambda ignores it; a local run prints it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EventResponse<T> {
    /// The handler's response: run now, replayed, or run unprotected.
    Done(T),
    /// `{"rejected": "..."}`: a recorded terminal error; the event is done.
    Rejected {
        /// The recorded error.
        rejected: String,
    },
    /// `{"duplicate": true}`: a redelivery of an event whose response was
    /// not kept.
    Duplicate {
        /// Always `true`.
        duplicate: bool,
    },
}

/// Parses an invocation payload as an EventBridge event, rejecting other
/// shapes (an SQS batch, garbage) with a clear error.
pub fn parse_event(value: &Value) -> Result<EventBridgeEvent<Value>, EventError> {
    let wrong = |m: String| Err(not_eventbridge(m));
    let Some(object) = value.as_object() else {
        return wrong(format!("expected a JSON object, got {}", json_type(value)));
    };
    if object.contains_key("Records") {
        return wrong(
            "it has a Records array: this is an SQS (or SNS, S3) batch; is the function wired to \
             the right trigger?"
                .to_owned(),
        );
    }
    let mut missing = vec!["detail-type", "source", "detail"];
    missing.retain(|k| !object.contains_key(*k));
    if !missing.is_empty() {
        return wrong(format!("missing {}", missing.join(", ")));
    }
    if !looks_like_eventbridge(value) {
        return wrong("detail-type and source must be strings".to_owned());
    }
    EventBridgeEvent::<Value>::deserialize(value)
        .or_else(|e| wrong(format!("malformed envelope: {e}")))
}

/// An invocation payload as Lambda delivers it, kept as its JSON text
/// ([`EventBridgeProcessor::handle`] takes it), so that keys and payload
/// hashes read a number that `f64` cannot hold as its exact text. `From` an
/// event already parsed: its numbers are what that parse left.
#[derive(Debug, Clone)]
pub struct EventPayload {
    value: Value,
    text: Option<Box<RawValue>>,
}

impl EventPayload {
    /// The payload of a JSON text; an error when it is not JSON.
    pub fn from_text(text: impl Into<String>) -> Result<Self, serde_json::Error> {
        Self::from_raw(RawValue::from_string(text.into())?)
    }

    fn from_raw(raw: Box<RawValue>) -> Result<Self, serde_json::Error> {
        let (value, text) = (serde_json::from_str(raw.get())?, Some(raw));
        Ok(Self { value, text })
    }

    /// The event, checked ([`parse_event`]'s errors), and the key material:
    /// the envelope as received, numbers that `f64` cannot hold as their
    /// exact text.
    pub(crate) fn parse(&self) -> Result<(EventBridgeEvent<Value>, Value), EventError> {
        let event = parse_event(&self.value)?;
        let exact = (self.text.as_ref()).and_then(|t| exact_material(t.get(), &self.value));
        Ok((event, exact.unwrap_or_else(|| self.value.clone())))
    }
}

impl EventPayload {
    /// The event with its `detail` as `D`, by the one rule of
    /// [`PayloadKind`]: parsed from the JSON text (its numbers exact) when
    /// `D` wants JSON; the `detail`'s JSON text as delivered when `D` takes
    /// text, its bytes when `D` takes bytes.
    fn typed<D: Serialize + DeserializeOwned>(
        &self,
        material: &Value,
    ) -> Result<EventBridgeEvent<D>, serde_json::Error> {
        let kind = PayloadKind::of::<D>();
        if kind == PayloadKind::Json {
            return match &self.text {
                Some(text) => serde_json::from_str(text.get()),
                None => EventBridgeEvent::<D>::deserialize(material),
            };
        }
        #[derive(Deserialize)]
        struct Detail<'a> {
            #[serde(borrow)]
            detail: &'a RawValue,
        }
        let detail = match &self.text {
            Some(text) => serde_json::from_str::<Detail<'_>>(text.get())?
                .detail
                .get()
                .to_owned(),
            None => serde_json::to_string(&self.value["detail"])?,
        };
        let mut event = self.value.clone();
        event["detail"] = match kind {
            PayloadKind::Text => Value::String(detail),
            _ => Value::Array(detail.bytes().map(Value::from).collect()),
        };
        EventBridgeEvent::<D>::deserialize(&event)
    }
}

impl From<Value> for EventPayload {
    fn from(value: Value) -> Self {
        Self { value, text: None }
    }
}

impl From<EventBridgeEvent<Value>> for EventPayload {
    fn from(event: EventBridgeEvent<Value>) -> Self {
        let value = serde_json::to_value(event).unwrap_or_else(|e| e.to_string().into());
        Self::from(value)
    }
}

impl<'de> Deserialize<'de> for EventPayload {
    fn deserialize<De: serde::Deserializer<'de>>(deserializer: De) -> Result<Self, De::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Self::from_raw(raw).map_err(serde::de::Error::custom)
    }
}

/// Runs EventBridge events through the engine.
#[derive(Debug, Clone)]
pub struct EventBridgeProcessor {
    keys: EventKeys,
    accept: Option<(String, String)>,
}

impl EventBridgeProcessor {
    /// A processor keyed by the event id ([`KeySelector::Id`]).
    pub fn new(engine: Idempotency) -> Self {
        let keys = EventKeys::new(engine, KeySelector::Id);
        Self { keys, accept: None }
    }

    /// Where the key comes from. Default [`KeySelector::Id`] (the event
    /// `id`); a pointer resolves against the envelope (`/detail/order_id`).
    pub fn key(mut self, key: KeySelector) -> Self {
        self.keys.key = key;
        self
    }

    /// What to do without a key. Default [`MissingKey::Fail`].
    pub fn missing_key(mut self, policy: MissingKey) -> Self {
        self.keys.missing_key = policy;
        self
    }

    /// What payload validation hashes ([`PayloadScope::Body`]: the `detail`).
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.keys.payload = scope;
        self
    }

    /// Accepts only events with this `source` and `detail-type`; any other
    /// fails with [`EventError::WrongEvent`] (permanent) before its key is
    /// claimed. Default: every event.
    pub fn accept(mut self, source: impl Into<String>, detail_type: impl Into<String>) -> Self {
        self.accept = Some((source.into(), detail_type.into()));
        self
    }

    /// The engine.
    pub fn engine(&self) -> &Idempotency {
        &self.keys.engine
    }

    /// This processor for an invocation of `tenant` (its engine's
    /// [`Idempotency::for_tenant`]): what [`handle`](Self::handle) does
    /// with the invocation's `Context::tenant_id`.
    pub fn for_tenant(&self, tenant: Option<&str>) -> Self {
        let mut this = self.clone();
        this.keys = this.keys.for_tenant(tenant);
        this
    }

    /// Handles one invocation ([`process`](Self::process) with its remaining
    /// time): the response for a done event; an `Err` fails the invocation
    /// (Lambda delivers the event again, then to the on-failure destination).
    #[cfg(feature = "lambda")]
    pub async fn handle<D, T, R, H, Fut>(
        &self,
        event: LambdaEvent<EventPayload>,
        handler: H,
    ) -> Result<EventResponse<T>, lambda_runtime::Error>
    where
        D: Serialize + DeserializeOwned,
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: FnOnce(EventBridgeEvent<D>) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let (payload, ctx) = event.into_parts();
        let this =
            crate::tenant::scoped(self, ctx.tenant_id.as_deref(), |p, t| p.for_tenant(Some(t)));
        let outcome = (this.process(payload, remaining_now(&ctx), handler)).await?;
        Ok(match outcome {
            Outcome::Rejected { error, .. } => EventResponse::Rejected { rejected: error },
            Outcome::Replayed(None) => EventResponse::Duplicate { duplicate: true },
            Outcome::Executed(t) | Outcome::Replayed(Some(t)) | Outcome::Unprotected(t) => {
                EventResponse::Done(t)
            }
            other => return Err(format!("unexpected outcome {}", other.label()).into()),
        })
    }

    /// Handles one event, an [`EventPayload`] or an event already parsed:
    /// checks it ([`parse_event`]'s errors), parses `detail` into `D`,
    /// selects the key and runs `handler` through the engine, logged and
    /// counted. An engine `InProgress` or `PayloadMismatch` is an `Err`.
    pub async fn process<D, T, R, H, Fut>(
        &self,
        payload: impl Into<EventPayload>,
        remaining: Option<Duration>,
        handler: H,
    ) -> Result<Outcome<T>, EventError>
    where
        D: Serialize + DeserializeOwned,
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: FnOnce(EventBridgeEvent<D>) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let payload = payload.into();
        let (event, material) = payload.parse()?;
        let start = Instant::now();
        let event_id = (event.id.filter(|id| !id.is_empty())).unwrap_or("(no id)".into());
        let checked = match &self.accept {
            Some((source, detail_type))
                if event.source != *source || event.detail_type != *detail_type =>
            {
                Err(EventError::WrongEvent {
                    event_id: event_id.clone(),
                    found_source: event.source,
                    found_detail_type: event.detail_type,
                    expected_source: source.clone(),
                    expected_detail_type: detail_type.clone(),
                })
            }
            _ => payload
                .typed::<D>(&material)
                .map_err(|e| EventError::BadDetail {
                    event_id: event_id.clone(),
                    expected: std::any::type_name::<D>(),
                    error: e.to_string(),
                }),
        };
        let body = &material["detail"];
        let checked = checked.map(|typed| (&material, None, body, || handler(typed)));
        let unit = (event_id.as_str(), IdField::EventId);
        self.keys.run(unit, start, remaining, checked).await
    }
}

/// A payload that is not an EventBridge event.
fn not_eventbridge(message: impl ToString) -> EventError {
    let (expected, message) = ("an EventBridge", message.to_string());
    EventError::InvalidEvent { expected, message }
}

#[cfg(test)]
mod tests;
