//! `inventory`: reserves stock for `OrderPlaced` events from EventBridge
//! (rule: `source` = `shop.orders`, `detail-type` = `OrderPlaced`) exactly
//! once per event id, whatever EventBridge and Lambda's asynchronous retries
//! redeliver.
//!
//! The effect, a conditional decrement (`stock >= quantity`), is not
//! naturally idempotent. Refusals are final business outcomes: not enough
//! stock, or an unknown SKU, is recorded as the event's outcome
//! ([`TerminalErrors::Record`]) and replayed to redeliveries without touching
//! the stock again; the function returns `Ok` (`{"rejected": ...}`) so Lambda
//! does not retry it. An event in progress elsewhere, or a retryable failure,
//! is an `Err`: Lambda delivers the event again. A malformed event (wrong
//! source or detail-type, a `detail` that does not parse, an empty id or a
//! zero quantity) is an `Err` that retrying cannot fix: it ends in the
//! on-failure destination.

pub mod stock;

use lambda_runtime::LambdaEvent;
use serde::de::{Error as _, Unexpected};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use shared::eventbridge::{EventBridgeEvent, EventBridgeProcessor, EventOutcome};
use shared::{Config, HandlerError, Idempotency, TerminalErrors};
use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;

pub use stock::{DynamoDbStock, MemoryStock, Reserve, SAMPLE_STOCK, Stock};

/// Environment variable naming the stock table.
pub const STOCK_TABLE_ENV: &str = "STOCK_TABLE";
/// The `source` of the events this function handles.
pub const SOURCE: &str = "shop.orders";
/// The `detail-type` of the events this function handles.
pub const DETAIL_TYPE: &str = "OrderPlaced";

/// The `detail` of an `OrderPlaced` event. Deserialization rejects empty ids
/// and a zero quantity, so such an event fails as a bad detail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderPlaced {
    /// The order.
    #[serde(deserialize_with = "non_empty")]
    pub order_id: String,
    /// The stock-keeping unit to reserve.
    #[serde(deserialize_with = "non_empty")]
    pub sku: String,
    /// How many units (at least 1).
    pub quantity: NonZeroU32,
}

fn non_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let s = String::deserialize(deserializer)?;
    if s.trim().is_empty() {
        return Err(D::Error::invalid_value(
            Unexpected::Str(&s),
            &"a non-empty string",
        ));
    }
    Ok(s)
}

/// A reservation made: recorded, and replayed to redeliveries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// The order.
    pub order_id: String,
    /// The SKU.
    pub sku: String,
    /// Units reserved.
    pub reserved: u32,
    /// Stock left right after this reservation.
    pub remaining: i64,
}

/// The function's response (what a local run prints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Response {
    /// `{"order_id","sku","reserved","remaining"}`: reserved now, or the
    /// recorded reservation replayed to a redelivery.
    Reserved(Reservation),
    /// `{"rejected": "insufficient stock ..."}`: a recorded refusal (now or
    /// replayed). The event is done; Lambda does not retry it.
    Rejected {
        /// Why.
        rejected: String,
    },
    /// `{"duplicate": true}`: a redelivery of an event whose response was
    /// not kept (not with [`App::config`], which keeps responses).
    Duplicate {
        /// Always `true`.
        duplicate: bool,
    },
}

/// An event this function is not wired for (permanent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrongEvent {
    /// The event's `source`.
    pub source: String,
    /// The event's `detail-type`.
    pub detail_type: String,
}

impl fmt::Display for WrongEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "expected detail-type {DETAIL_TYPE:?} from source {SOURCE:?}, got detail-type {:?} \
             from source {:?}: is the EventBridge rule's pattern right? (permanent)",
            self.detail_type, self.source
        )
    }
}

impl std::error::Error for WrongEvent {}

/// Reserves the stock of one order: the business logic, free of Lambda.
/// Not enough stock and an unknown SKU are terminal errors.
pub async fn reserve_stock(
    stock: &dyn Stock,
    order: &OrderPlaced,
) -> Result<Reservation, HandlerError> {
    if order.order_id.trim().is_empty() {
        return Err(HandlerError::terminal("order_id is empty"));
    }
    if order.sku.trim().is_empty() {
        return Err(HandlerError::terminal("sku is empty"));
    }
    let quantity = order.quantity.get();
    match stock.reserve(&order.sku, quantity).await? {
        Reserve::Reserved { remaining } => Ok(Reservation {
            order_id: order.order_id.clone(),
            sku: order.sku.clone(),
            reserved: quantity,
            remaining,
        }),
        Reserve::Insufficient { available } => Err(HandlerError::terminal(format!(
            "insufficient stock for {}: {quantity} requested, {available} available (order {})",
            order.sku, order.order_id
        ))),
        Reserve::UnknownSku => Err(HandlerError::terminal(format!(
            "unknown sku {} (order {})",
            order.sku, order.order_id
        ))),
    }
}

/// The function: its engine and stock table, built once per execution
/// environment.
#[derive(Debug, Clone)]
pub struct App {
    processor: EventBridgeProcessor,
    stock: Arc<dyn Stock>,
}

impl App {
    /// The function over the given engine and stock, keyed by the event id.
    pub fn new(engine: Idempotency, stock: Arc<dyn Stock>) -> Self {
        Self {
            processor: EventBridgeProcessor::new(engine),
            stock,
        }
    }

    /// Engine configuration: keys under `inventory.reserve`, kept 24 h (past
    /// EventBridge's and Lambda's retries), terminal errors recorded.
    pub fn config() -> Config {
        Config::with_prefix("inventory.reserve")
            .expires_after(std::time::Duration::from_secs(24 * 60 * 60))
            .on_terminal_error(TerminalErrors::Record)
    }

    /// From the environment: DynamoDB for each table whose variable is set
    /// (`IDEMPOTENCY_TABLE`, `STOCK_TABLE`, honouring `AWS_ENDPOINT_URL`),
    /// in-memory stores otherwise (local runs: the stock starts as
    /// [`SAMPLE_STOCK`]).
    pub async fn from_env() -> Self {
        let idempotency = shared::TableConfig::from_env();
        let stock = std::env::var(STOCK_TABLE_ENV)
            .ok()
            .filter(|t| !t.trim().is_empty());
        let sdk = match (&idempotency, &stock) {
            (None, None) => None,
            _ => Some(shared::aws_sdk_config().await),
        };
        let engine = match (idempotency, &sdk) {
            (Some(table), Some(sdk)) => Idempotency::new(
                shared::DynamoDbStore::new(aws_sdk_dynamodb::Client::new(sdk), table),
                Self::config(),
            ),
            _ => {
                tracing::warn!("IDEMPOTENCY_TABLE not set: idempotency records kept in memory");
                Idempotency::new(shared::MemoryStore::new(), Self::config())
            }
        };
        let stock: Arc<dyn Stock> = match (stock, &sdk) {
            (Some(table), Some(sdk)) => Arc::new(DynamoDbStock::new(
                aws_sdk_dynamodb::Client::new(sdk),
                table,
            )),
            _ => {
                tracing::warn!(
                    sample = ?SAMPLE_STOCK,
                    "STOCK_TABLE not set: stock kept in memory, seeded with sample levels"
                );
                Arc::new(MemoryStock::sample())
            }
        };
        Self::new(engine, stock)
    }

    /// The stock table.
    pub fn stock(&self) -> &dyn Stock {
        &*self.stock
    }

    /// Handles one EventBridge event. `Ok` when the event is done (reserved,
    /// replayed, or a recorded refusal); `Err` to have Lambda deliver it
    /// again (in progress elsewhere, a retryable failure) or, for a malformed
    /// event, to send it to the on-failure destination after the retries.
    /// The error is a [`WrongEvent`] or a [`shared::EventError`].
    pub async fn handle(
        &self,
        event: LambdaEvent<Value>,
    ) -> Result<Response, lambda_runtime::Error> {
        let (payload, ctx) = event.into_parts();
        let event = shared::parse_event(payload)?;
        if event.source != SOURCE || event.detail_type != DETAIL_TYPE {
            return Err(WrongEvent {
                source: event.source,
                detail_type: event.detail_type,
            }
            .into());
        }
        let remaining =
            shared::batch::remaining_time(&ctx, shared::Clock::now_ms(&shared::SystemClock));
        let stock = &*self.stock;
        let outcome =
            self.processor
                .process(
                    event,
                    remaining,
                    |e: EventBridgeEvent<OrderPlaced>| async move {
                        reserve_stock(stock, &e.detail).await
                    },
                )
                .await?;
        match outcome {
            EventOutcome::Executed(r)
            | EventOutcome::Replayed(Some(r))
            | EventOutcome::Unprotected(r) => Ok(Response::Reserved(r)),
            EventOutcome::Replayed(None) => Ok(Response::Duplicate { duplicate: true }),
            EventOutcome::Rejected { error, .. } => Ok(Response::Rejected { rejected: error }),
            other => Err(format!("unexpected outcome {other:?}").into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use serde_json::json;
    use shared::{ErrorKind, EventError, MemoryStore};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use tokio::sync::Notify;

    fn order_placed() -> Value {
        serde_json::from_str(include_str!("../../../events/inventory-order-placed.json")).unwrap()
    }

    fn insufficient() -> Value {
        serde_json::from_str(include_str!(
            "../../../events/inventory-insufficient-stock.json"
        ))
        .unwrap()
    }

    fn app_over(stock: Arc<dyn Stock>) -> App {
        let engine = Idempotency::new(MemoryStore::new(), App::config().disabled(false));
        App::new(engine, stock)
    }

    async fn invoke(app: &App, event: Value) -> Result<Response, lambda_runtime::Error> {
        let ctx = shared::runtime::local_context(1, std::time::Duration::from_secs(30));
        app.handle(LambdaEvent::new(event, ctx)).await
    }

    fn reserved(order_id: &str, reserved: u32, remaining: i64) -> Response {
        Response::Reserved(Reservation {
            order_id: order_id.into(),
            sku: "SKU-RED-MUG".into(),
            reserved,
            remaining,
        })
    }

    #[test]
    fn responses_serialize_as_documented() {
        assert_eq!(
            serde_json::to_value(reserved("ord-1", 2, 98)).unwrap(),
            json!({"order_id": "ord-1", "sku": "SKU-RED-MUG", "reserved": 2, "remaining": 98})
        );
        assert_eq!(
            serde_json::to_value(Response::Rejected {
                rejected: "no".into()
            })
            .unwrap(),
            json!({"rejected": "no"})
        );
    }

    #[tokio::test]
    async fn reserves_once_and_replays_the_reservation() {
        let stock = Arc::new(MemoryStock::sample());
        let app = app_over(stock.clone());
        let first = invoke(&app, order_placed()).await.unwrap();
        assert_eq!(first, reserved("ord-1001", 2, 98));
        for _redelivery in 0..3 {
            assert_eq!(invoke(&app, order_placed()).await.unwrap(), first);
        }
        assert_eq!(stock.level("SKU-RED-MUG").await.unwrap(), Some(98));
        // Another event for the same SKU is another reservation.
        let mut next = order_placed();
        next["id"] = json!("0f0f0f0f-0000-4000-8000-000000000001");
        next["detail"]["order_id"] = json!("ord-1002");
        assert_eq!(
            invoke(&app, next).await.unwrap(),
            reserved("ord-1002", 2, 96)
        );
    }

    #[tokio::test]
    async fn insufficient_stock_is_recorded_and_replayed_without_touching_stock() {
        let stock = Arc::new(MemoryStock::sample());
        let app = app_over(stock.clone());
        let first = invoke(&app, insufficient()).await.unwrap();
        let expected = Response::Rejected {
            rejected: "insufficient stock for SKU-RED-MUG: 1000 requested, 100 available \
                       (order ord-1004)"
                .into(),
        };
        assert_eq!(first, expected);
        // Restocked since: the redelivery still replays the recorded refusal.
        stock.set_level("SKU-RED-MUG", 5000);
        assert_eq!(invoke(&app, insufficient()).await.unwrap(), expected);
        assert_eq!(stock.level("SKU-RED-MUG").await.unwrap(), Some(5000));
    }

    #[tokio::test]
    async fn unknown_sku_is_recorded() {
        let stock = Arc::new(MemoryStock::sample());
        let app = app_over(stock.clone());
        let mut event = order_placed();
        event["detail"]["sku"] = json!("SKU-NOPE");
        for _ in 0..2 {
            assert_eq!(
                invoke(&app, event.clone()).await.unwrap(),
                Response::Rejected {
                    rejected: "unknown sku SKU-NOPE (order ord-1001)".into()
                }
            );
        }
        assert_eq!(stock.level("SKU-NOPE").await.unwrap(), None);
    }

    #[tokio::test]
    async fn wrong_events_are_clear_errors() {
        let stock = Arc::new(MemoryStock::sample());
        let app = app_over(stock.clone());
        for (field, value) in [("source", "shop.payments"), ("detail-type", "OrderShipped")] {
            let mut event = order_placed();
            event[field] = json!(value);
            let err = invoke(&app, event).await.unwrap_err();
            let wrong = err.downcast_ref::<WrongEvent>().expect("a WrongEvent");
            let message = wrong.to_string();
            assert!(message.contains(value), "{message}");
            assert!(
                message.contains("\"OrderPlaced\" from source \"shop.orders\""),
                "{message}"
            );
        }
        let sqs: Value =
            serde_json::from_str(include_str!("../../../events/orders-standard.json")).unwrap();
        let err = invoke(&app, sqs).await.unwrap_err();
        assert!(
            matches!(
                err.downcast_ref::<EventError>(),
                Some(EventError::NotAnEventBridgeEvent(_))
            ),
            "{err}"
        );
        assert_eq!(stock.level("SKU-RED-MUG").await.unwrap(), Some(100));
    }

    #[tokio::test]
    async fn malformed_details_are_permanent_errors() {
        let stock = Arc::new(MemoryStock::sample());
        let app = app_over(stock.clone());
        for (field, value, expected) in [
            ("quantity", json!(0), "nonzero"),
            ("quantity", json!(-2), "nonzero"),
            ("quantity", json!("two"), "invalid type"),
            ("sku", json!(" "), "a non-empty string"),
            ("order_id", json!(""), "a non-empty string"),
        ] {
            let mut event = order_placed();
            event["detail"][field] = value.clone();
            let err = invoke(&app, event).await.unwrap_err();
            match err.downcast_ref::<EventError>() {
                Some(e @ EventError::BadDetail { .. }) => assert!(!e.is_retryable()),
                other => panic!("{field}={value}: {other:?}"),
            }
            assert!(err.to_string().contains(expected), "{field}={value}: {err}");
        }
        assert_eq!(stock.level("SKU-RED-MUG").await.unwrap(), Some(100));
    }

    #[tokio::test]
    async fn empty_fields_are_terminal() {
        let stock = MemoryStock::sample();
        let quantity = NonZeroU32::MIN;
        for (order_id, sku, expected) in [
            ("", "SKU-RED-MUG", "order_id is empty"),
            ("ord-1", " ", "sku is empty"),
        ] {
            let order = OrderPlaced {
                order_id: order_id.into(),
                sku: sku.into(),
                quantity,
            };
            let err = reserve_stock(&stock, &order).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Terminal);
            assert_eq!(err.to_string(), expected);
        }
    }

    /// Stock whose first reservation waits for `release` (a slow table),
    /// counting reservations.
    #[derive(Debug)]
    struct Gated {
        inner: MemoryStock,
        entered: Notify,
        release: Notify,
        calls: AtomicUsize,
        fail_first: bool,
    }

    impl Gated {
        fn new(fail_first: bool) -> Self {
            Self {
                inner: MemoryStock::sample(),
                entered: Notify::new(),
                release: Notify::new(),
                calls: AtomicUsize::new(0),
                fail_first,
            }
        }
    }

    #[async_trait]
    impl Stock for Gated {
        async fn reserve(&self, sku: &str, quantity: u32) -> Result<Reserve, HandlerError> {
            if self.calls.fetch_add(1, SeqCst) == 0 {
                self.entered.notify_one();
                self.release.notified().await;
                if self.fail_first {
                    return Err(HandlerError::retryable("stock table throttled"));
                }
            }
            self.inner.reserve(sku, quantity).await
        }

        async fn level(&self, sku: &str) -> Result<Option<i64>, HandlerError> {
            self.inner.level(sku).await
        }
    }

    #[tokio::test]
    async fn a_concurrent_delivery_is_in_progress_and_retried() {
        let stock = Arc::new(Gated::new(false));
        let app = app_over(stock.clone());
        let (first, second) = tokio::join!(invoke(&app, order_placed()), async {
            // While the first delivery is inside the stock call...
            stock.entered.notified().await;
            let second = invoke(&app, order_placed()).await;
            stock.release.notify_one();
            second
        });
        assert_eq!(first.unwrap(), reserved("ord-1001", 2, 98));
        let err = second.unwrap_err();
        match err.downcast_ref::<EventError>() {
            Some(e @ EventError::InProgress { .. }) => assert!(e.is_retryable()),
            other => panic!("{other:?}"),
        }
        // Lambda's retry replays the reservation.
        assert_eq!(
            invoke(&app, order_placed()).await.unwrap(),
            reserved("ord-1001", 2, 98)
        );
        assert_eq!(stock.calls.load(SeqCst), 1);
        assert_eq!(stock.level("SKU-RED-MUG").await.unwrap(), Some(98));
    }

    #[tokio::test]
    async fn a_retryable_failure_is_an_error_and_the_retry_reserves() {
        let stock = Arc::new(Gated::new(true));
        let app = app_over(stock.clone());
        stock.release.notify_one(); // the permit is stored: no waiting
        let err = invoke(&app, order_placed()).await.unwrap_err();
        match err.downcast_ref::<EventError>() {
            Some(e @ EventError::Handler { .. }) => assert!(e.is_retryable()),
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("throttled"), "{err}");
        assert_eq!(
            invoke(&app, order_placed()).await.unwrap(),
            reserved("ord-1001", 2, 98)
        );
        assert_eq!(stock.calls.load(SeqCst), 2);
    }
}
