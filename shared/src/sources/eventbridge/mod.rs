//! EventBridge events invoking the function directly (asynchronous
//! invocation): [`EventBridgeProcessor`]. The guide: [`guide::sources::eventbridge`](crate::guide::sources::eventbridge), the repository's `docs/sources/eventbridge.md`.

use std::future::Future;
use std::time::Duration;

#[cfg(feature = "lambda")]
use crate::batch::remaining_now;
#[cfg(feature = "lambda")]
use lambda_runtime::LambdaEvent;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

pub use aws_lambda_events::eventbridge::EventBridgeEvent;

use crate::batch::envelope::looks_like_eventbridge;
use crate::batch::whole::{self, Unfinished};
use crate::batch::{BatchError, Delivery, FailureReason, KeySelector, Keyed};
use crate::batch::{MalformedRecord, MissingKey, Ordering, PayloadKind, PayloadScope};
use crate::batch::{Prepare, Prepared, Preparing, Processor, Reading, Source, SourceNames};
use crate::batch::{StreamEvent, json_type};
use crate::engine::{Idempotency, Outcome};
use crate::{error::HandlerError, key::exact_material, write::IntoStaged};

/// The `source` of a record that is not an EventBridge event, for its
/// parking ticket.
const EVENT_SOURCE: &str = "aws.events";

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
/// shapes (an SQS batch, garbage) with a clear error
/// ([`BatchError::WrongEvent`], `errorType` `InvalidEvent`).
pub fn parse_event(value: &Value) -> Result<EventBridgeEvent<Value>, BatchError> {
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
    pub(crate) fn parse(&self) -> Result<(EventBridgeEvent<Value>, Value), BatchError> {
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

/// The names of an EventBridge event, for logs and messages.
static NAMES: SourceNames = SourceNames {
    id: "id",
    id_field: "event_id",
    lane_field: "group",
    deduplication_id: "a deduplication id (EventBridge events have none)",
    no_lane: "EventBridge event without a lane",
};

/// EventBridge invoking the function, a one-record source of the batch
/// core: one event per invocation, answered whole ([`Unfinished`]).
#[derive(Debug, Clone, Default)]
pub struct EventBridge {
    accept: Option<(String, String)>,
}

/// One EventBridge event on its way through the pipeline: checked, with its
/// key material (the envelope as received, numbers that `f64` cannot hold
/// as their exact text).
#[derive(Debug)]
pub struct EventRecord {
    payload: EventPayload,
    material: Value,
    event: EventBridgeEvent<Value>,
}

impl Delivery for EventRecord {
    fn id(&self) -> Option<&str> {
        self.event.id.as_deref().filter(|id| !id.is_empty())
    }

    fn event_id(&self) -> Option<&str> {
        self.id()
    }

    fn position(&self) -> Option<&str> {
        None
    }

    fn source(&self) -> &'static SourceNames {
        &NAMES
    }
}

impl Source for EventBridge {
    type Event = EventPayload;
    type Raw = EventRecord;
    type Response = ();
    type Error = Unfinished;
    const NAMES: &'static SourceNames = &NAMES;

    /// An EventBridge event ([`parse_event`]'s errors), as every source
    /// rejects another's event. (Given to [`Processor::process`] as it is,
    /// a payload that is not one fails as its one record,
    /// [`FailureReason::Parse`].)
    fn parse(payload: Value) -> Result<EventPayload, BatchError> {
        parse_event(&payload)?;
        Ok(EventPayload::from(payload))
    }

    fn ordering(&self, _: &EventPayload) -> Ordering {
        Ordering::Unordered
    }
}

/// The one record of an invocation: the event, or a payload that is not
/// an EventBridge event (it fails alone, [`FailureReason::Parse`]).
impl From<EventPayload> for StreamEvent<EventRecord> {
    fn from(payload: EventPayload) -> Self {
        let record = match payload.parse() {
            Ok((event, material)) => Ok(EventRecord {
                payload,
                material,
                event,
            }),
            Err(error) => {
                let id = payload.value.get("id").and_then(Value::as_str);
                let id = id.map(str::to_owned);
                let mut record = MalformedRecord::new(0, payload.value, &NAMES, EVENT_SOURCE);
                (record.id, record.error) = (id, error.to_string());
                Err(record)
            }
        };
        StreamEvent::parsed(vec![record])
    }
}

/// Keyed on the envelope as received ([`KeySelector::Id`]: its `id`), the
/// `detail` hashed.
impl<D: Serialize + DeserializeOwned> Prepare<EventBridgeEvent<D>> for EventBridge {
    type Body = EventBridgeEvent<D>;

    fn prepare<'r>(&self, at: &Reading<'_>, record: &'r EventRecord) -> Preparing<'r, Self::Body> {
        let ident = at.ident();
        let event = &record.event;
        if let Some((source, detail_type)) = &self.accept
            && (event.source != *source || event.detail_type != *detail_type)
        {
            return Err(FailureReason::NotAccepted(format!(
                "event {ident}: expected detail-type {detail_type:?} from source {source:?}, got \
                 detail-type {:?} from source {:?}: is the EventBridge rule's pattern right?",
                event.detail_type, event.source
            )));
        }
        let typed = record.payload.typed::<D>(&record.material).map_err(|e| {
            FailureReason::Parse(format!(
                "event {ident}: detail does not parse as {}: {e}",
                std::any::type_name::<D>()
            ))
        })?;
        let detail = record.material.get("detail").cloned();
        let prepared = Prepared::new(typed, record.material.clone());
        Ok(prepared.hashed(detail.unwrap_or(Value::Null)))
    }

    fn record(&self, _: EventRecord, event: EventBridgeEvent<D>, _: Keyed) -> EventBridgeEvent<D> {
        event
    }
}

/// Runs EventBridge events through the engine: the one [`Processor`] over
/// the one-record source [`EventBridge`], its answer the event's
/// [`Outcome`] or [`Unfinished`].
#[derive(Debug, Clone)]
pub struct EventBridgeProcessor {
    processor: Processor<EventBridge>,
}

impl EventBridgeProcessor {
    /// A processor keyed by the event id ([`KeySelector::Id`]).
    pub fn new(engine: Idempotency) -> Self {
        let source = EventBridge::default();
        let processor = Processor::with_source(engine, KeySelector::Id, source);
        Self { processor }
    }

    /// Where the key comes from. Default [`KeySelector::Id`] (the event
    /// `id`); a pointer resolves against the envelope (`/detail/order_id`).
    pub fn key(mut self, key: KeySelector) -> Self {
        self.processor.settings.key = key;
        self
    }

    /// What to do without a key. Default [`MissingKey::Fail`].
    pub fn missing_key(mut self, policy: MissingKey) -> Self {
        self.processor = self.processor.missing_key(policy);
        self
    }

    /// What payload validation hashes ([`PayloadScope::Body`]: the `detail`).
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.processor = self.processor.payload(scope);
        self
    }

    /// Accepts only events with this `source` and `detail-type`; any other
    /// fails with [`FailureReason::NotAccepted`] (permanent) before its key
    /// is claimed. Default: every event.
    pub fn accept(mut self, source: impl Into<String>, detail_type: impl Into<String>) -> Self {
        self.processor.source.accept = Some((source.into(), detail_type.into()));
        self
    }

    /// The engine.
    pub fn engine(&self) -> &Idempotency {
        self.processor.engine()
    }

    /// The processor it runs on (its other builders: the deadline margin,
    /// record logs).
    pub fn processor(&self) -> &Processor<EventBridge> {
        &self.processor
    }

    /// This processor for an invocation of `tenant` (its engine's
    /// [`Idempotency::for_tenant`]): what [`handle`](Self::handle) does
    /// with the invocation's `Context::tenant_id`.
    pub fn for_tenant(&self, tenant: Option<&str>) -> Self {
        let processor = self.processor.for_tenant(tenant);
        Self { processor }
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
        // Not an EventBridge event: the invocation fails before any record
        // (`BatchError::WrongEvent`), as with every source's `handle`.
        payload.parse()?;
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

    /// Handles one event, an [`EventPayload`] or an event already parsed,
    /// as the one record of a batch: checks it ([`parse_event`]'s errors),
    /// parses `detail` into `D`, selects the key and runs `handler` through
    /// the engine, logged and counted. A failure (an engine `InProgress` or
    /// `PayloadMismatch` too) is an [`Unfinished`] naming its
    /// [`FailureReason`].
    pub async fn process<D, T, R, H, Fut>(
        &self,
        payload: impl Into<EventPayload>,
        remaining: Option<Duration>,
        handler: H,
    ) -> Result<Outcome<T>, Unfinished>
    where
        D: Serialize + DeserializeOwned,
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: FnOnce(EventBridgeEvent<D>) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let handler = whole::once(handler);
        let report = (self.processor).process(payload.into(), remaining, handler);
        whole::single(report.await)
    }
}

/// A payload that is not an EventBridge event.
fn not_eventbridge(message: impl ToString) -> BatchError {
    let (expected, message) = ("an EventBridge", message.to_string());
    BatchError::WrongEvent { expected, message }
}

#[cfg(test)]
mod tests;
