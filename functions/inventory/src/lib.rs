//! `inventory`: reserves stock for `OrderPlaced` events from EventBridge
//! (rule: `source` = `shop.orders`, `detail-type` = `OrderPlaced`) exactly
//! once per event id, whatever EventBridge and Lambda's asynchronous retries
//! redeliver.
//!
//! The effect, a conditional decrement (`stock >= quantity`), is not
//! naturally idempotent. It is staged ([`StockTable::reserve_write`]) and
//! committed **in the same `TransactWriteItems` as the event's idempotency
//! record** ([`COMMIT_MODE`]): the stock and the record can never disagree
//! (no crash window between them), and a new event costs one request.
//!
//! A refusal is a final business outcome: when the decrement's condition
//! fails, the refusal says which from the stock item as it stood (returned
//! with the cancelled transaction: "unknown SKU", or "insufficient stock"
//! with the level available; see [`stock::refusal`]), is recorded as the
//! event's outcome
//! ([`TerminalErrors::Record`]) and replayed to redeliveries without touching
//! the stock again; the function returns `Ok` (`{"rejected": ...}`) so Lambda
//! does not retry it. A retryable failure (throttling, a conflicting
//! transaction), or with [`CommitMode::Fenced`] an event in progress
//! elsewhere, is an `Err`: Lambda delivers the event again. A malformed event
//! (wrong source or detail-type, a `detail` that does not parse, an empty id
//! or a zero quantity) is an `Err` that retrying cannot fix: it ends in the
//! on-failure destination.

pub mod stock;

use lambda_idempotency::eventbridge::{
    EventBridgeEvent, EventBridgeProcessor, EventPayload, EventResponse,
};
use lambda_idempotency::{
    CommitMode, Config, HandlerError, Idempotency, config::TerminalErrors, write::Staged,
};
use lambda_runtime::LambdaEvent;
use serde::de::{Error as _, Unexpected};
use serde::{Deserialize, Deserializer, Serialize};
use std::num::NonZeroU32;
use std::time::Duration;

pub use stock::{LOCAL_STOCK_TABLE, SAMPLE_STOCK, StockTable};

/// How long an event's record lives by default: the longest an event can
/// still arrive — the rule's retries (1 h) or Lambda's asynchronous retries
/// (6 h), then 14 days in the rule's DLQ or the on-failure queue, from
/// which an operator may send it again — plus a day of margin.
pub const RECORD_LIFETIME: Duration = Duration::from_secs(15 * 24 * 60 * 60);

/// Environment variable naming the stock table.
pub const STOCK_TABLE_ENV: &str = "STOCK_TABLE";
/// The stock table, as [`lambda_idempotency::Backend::from_env`] reads it.
pub const STOCK: lambda_idempotency::backend::TableEnv =
    lambda_idempotency::backend::TableEnv::new(STOCK_TABLE_ENV, LOCAL_STOCK_TABLE);
/// The `source` of the events this function handles.
pub const SOURCE: &str = "shop.orders";
/// The `detail-type` of the events this function handles.
pub const DETAIL_TYPE: &str = "OrderPlaced";

/// How the reservation commits with the idempotency record: optimistic.
///
/// The function's only effect is the staged stock decrement, and staging it
/// is pure computation, so nothing needs the claim that
/// [`CommitMode::Fenced`] takes first (a conditional `PutItem`) to protect
/// it. Optimistic mode sends one `TransactWriteItems` whose record `Put`
/// carries the claim condition: **1 request per new event** instead of 2.
/// Two concurrent deliveries of one event may both stage the decrement;
/// exactly one transaction commits, and the other finds the completed
/// record (its condition fails, the decrement is cancelled with it) and
/// replays it: both invocations succeed, with no in-progress error and no
/// Lambda retry. A crash before the commit leaves nothing behind, so the
/// retry starts clean. A duplicate costs one (cancelled) transaction; a
/// refusal costs the cancelled transaction and the `PutItem` recording it.
///
/// Were the function to gain an effect outside DynamoDB (a message, an API
/// call), it would need [`CommitMode::Fenced`] (and its role the
/// `UpdateItem`/`DeleteItem` actions on the idempotency table that fenced
/// mode uses).
pub const COMMIT_MODE: CommitMode = CommitMode::Optimistic;

/// How the reservation commits when the records live in Valkey
/// (`IDEMPOTENCY_STORE=valkey`): claim-then-complete.
///
/// A Valkey record cannot commit in one transaction with the stock
/// decrement, so the event is claimed in Valkey (one script), the decrement
/// commits on its own in the stock table, then the completion is written
/// (one fenced script). Concurrent deliveries still run once (the claim),
/// and a refusal is still recorded. The known window: a crash, a timeout or
/// a lost Valkey record (a restart without persistence) between the
/// decrement and the completion lets a redelivery after the lease decrement
/// again. Where that matters, keep the records in DynamoDB.
pub const VALKEY_COMMIT_MODE: CommitMode = CommitMode::ClaimThenComplete;

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
///
/// It carries no stock level: the response is built (and recorded) before
/// the transaction commits, when the level after the decrement is unknown.
/// Records written by earlier versions, which carried `remaining`, still
/// replay (the extra field is ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// The order.
    pub order_id: String,
    /// The SKU.
    pub sku: String,
    /// Units reserved.
    pub reserved: u32,
}

/// The function's response (what a local run prints): the
/// [`Reservation`] (`{"order_id","sku","reserved"}`, reserved now or the
/// recorded reservation replayed), `{"rejected": "insufficient stock ..."}`
/// (a recorded refusal, now or replayed: the event is done, Lambda does not
/// retry it), or `{"duplicate": true}` (a redelivery of an event whose
/// response was not kept: not with [`App::config`], which keeps responses).
pub type Response = EventResponse<Reservation>;

/// The reservation of one order as a staged write: the business logic, free
/// of Lambda. Empty ids are terminal errors; not enough stock (or an unknown
/// SKU) is the staged write's rejection, decided when it commits.
pub fn stage_reservation(
    stock: &StockTable,
    order: &OrderPlaced,
) -> Result<Staged<Reservation>, HandlerError> {
    if order.order_id.trim().is_empty() {
        return Err(HandlerError::terminal("order_id is empty"));
    }
    if order.sku.trim().is_empty() {
        return Err(HandlerError::terminal("sku is empty"));
    }
    let quantity = order.quantity.get();
    Ok(Staged::new(Reservation {
        order_id: order.order_id.clone(),
        sku: order.sku.clone(),
        reserved: quantity,
    })
    .write(stock.reserve_write(&order.sku, quantity, &order.order_id)))
}

/// The function: its engine and stock table, built once per execution
/// environment.
#[derive(Debug, Clone)]
pub struct App {
    processor: EventBridgeProcessor,
    stock: StockTable,
}

impl App {
    /// The function over the given engine and stock table, keyed by the
    /// event id, committing in the engine's mode ([`App::config`]:
    /// [`COMMIT_MODE`]). The engine's store must reach the stock table (the
    /// same DynamoDB account, or the same [`MemoryStore`](lambda_idempotency::MemoryStore)).
    pub fn new(engine: Idempotency, stock: StockTable) -> Self {
        Self {
            processor: Self::processor(engine),
            stock,
        }
    }

    /// The processor: keyed by the event id, for `OrderPlaced` events from
    /// `shop.orders` only (any other is a permanent error).
    fn processor(engine: Idempotency) -> EventBridgeProcessor {
        EventBridgeProcessor::new(engine).accept(SOURCE, DETAIL_TYPE)
    }

    /// Commits with `mode` instead of the engine's (tests, comparisons).
    pub fn with_commit_mode(mut self, mode: CommitMode) -> Self {
        self.processor = Self::processor(self.processor.engine().in_mode(mode));
        self
    }

    /// Engine configuration: keys under `inventory.reserve` (`from_env`: the
    /// deployment's `IDEMPOTENCY_KEY_PREFIX` when set), kept
    /// [`RECORD_LIFETIME`] (overridden by the deployment through
    /// `IDEMPOTENCY_EXPIRES_AFTER_SECONDS`), terminal errors recorded.
    pub fn config() -> Config {
        Config::with_prefix("inventory.reserve")
            .expires_after(RECORD_LIFETIME)
            .on_terminal_error(TerminalErrors::Record)
            .commit_mode(COMMIT_MODE)
    }

    /// From the environment: DynamoDB when `IDEMPOTENCY_TABLE` and
    /// [`STOCK_TABLE_ENV`] are set (honouring `AWS_ENDPOINT_URL`), the
    /// embedded memory store otherwise (local runs: the stock starts as
    /// [`SAMPLE_STOCK`]). One without the other is an error: the decrement
    /// commits in one transaction with the record, so both tables must live
    /// in the same store.
    ///
    /// With `IDEMPOTENCY_STORE=valkey` (and `VALKEY_URL`) the records live in
    /// Valkey and the stock in DynamoDB ([`STOCK_TABLE_ENV`]; in memory with
    /// sample levels when unset): see [`VALKEY_COMMIT_MODE`].
    pub async fn from_env() -> Result<Self, lambda_runtime::Error> {
        let config = Self::config().prefix_from_env()?.expires_after_from_env()?;
        // Records in Valkey are accepted, committing in VALKEY_COMMIT_MODE.
        let config = config.accept_store_without_transactions(VALKEY_COMMIT_MODE);
        let backend = lambda_idempotency::Backend::from_env(config, [STOCK])
            .await
            .map_err(|e| lambda_idempotency::report(&e))?;
        let local = backend.local_store().cloned();
        let (engine, [stock]) = backend.into_parts();
        let stock = match local {
            Some(store) => {
                tracing::warn!(sample = ?SAMPLE_STOCK, "the stock is seeded with sample levels (local run)");
                StockTable::sample(store)
            }
            None => StockTable::from_table(stock),
        };
        Ok(Self::new(engine, stock))
    }

    /// The stock table.
    pub fn stock(&self) -> &StockTable {
        &self.stock
    }

    /// The engine.
    pub fn engine(&self) -> &Idempotency {
        self.processor.engine()
    }

    /// Handles one EventBridge event. `Ok` when the event is done (reserved,
    /// replayed, or a recorded refusal); `Err` to have Lambda deliver it
    /// again (a retryable failure, an event in progress elsewhere) or, for
    /// a malformed event, to send it to the on-failure destination after the
    /// retries. The error is a [`lambda_idempotency::batch::Unfinished`]
    /// naming the event and its [`lambda_idempotency::batch::FailureReason`].
    ///
    /// The payload is the invocation's text ([`EventPayload`]), so a number
    /// in the `detail` is hashed for payload validation as written.
    pub async fn handle(
        &self,
        event: LambdaEvent<EventPayload>,
    ) -> Result<Response, lambda_runtime::Error> {
        let stock = &self.stock;
        self.processor
            .handle(event, |e: EventBridgeEvent<OrderPlaced>| async move {
                stage_reservation(stock, &e.detail)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use lambda_idempotency::MemoryStore;
    use lambda_idempotency::batch::{FailureReason, Unfinished};
    use lambda_idempotency::{
        ErrorKind, Store, StoreError, Write, store::Claim, store::Record, store::RecordWrite,
        store::Status, store::TransactError,
    };
    use serde_json::{Value, json};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use tokio::sync::Notify;

    const MODES: [CommitMode; 2] = [CommitMode::Optimistic, CommitMode::Fenced];

    fn order_placed() -> Value {
        serde_json::from_str(include_str!("../../../events/inventory-order-placed.json")).unwrap()
    }

    fn insufficient() -> Value {
        serde_json::from_str(include_str!(
            "../../../events/inventory-insufficient-stock.json"
        ))
        .unwrap()
    }

    /// The function over one memory store holding the records and the
    /// sample stock.
    fn local(mode: CommitMode) -> (App, MemoryStore) {
        let store = MemoryStore::new();
        let engine = Idempotency::new(store.clone(), App::config().disabled(false));
        let app = App::new(engine, StockTable::sample(store.clone())).with_commit_mode(mode);
        (app, store)
    }

    fn restock(store: &MemoryStore, sku: &str, level: i64) {
        StockTable::memory(store.clone(), LOCAL_STOCK_TABLE, [(sku, level)]);
    }

    async fn level(app: &App, sku: &str) -> Option<i64> {
        app.stock().level(sku).await.unwrap()
    }

    async fn invoke(app: &App, event: Value) -> Result<Response, lambda_runtime::Error> {
        let ctx = lambda_idempotency::runtime::local_context(1, Duration::from_secs(30));
        // As Lambda delivers it: the payload's text.
        let payload = EventPayload::from_text(event.to_string()).unwrap();
        app.handle(LambdaEvent::new(payload, ctx)).await
    }

    fn reserved(order_id: &str, reserved: u32) -> Response {
        Response::Done(Reservation {
            order_id: order_id.into(),
            sku: "SKU-RED-MUG".into(),
            reserved,
        })
    }

    /// The recorded refusal: `available` is the stock as it stood (`None`:
    /// no such SKU).
    fn rejected(sku: &str, quantity: u32, order_id: &str, available: Option<i64>) -> Response {
        let rejected = match available {
            None => format!("unknown SKU {sku}; order {order_id}"),
            Some(n) => format!(
                "insufficient stock for {sku}: {quantity} requested, {n} available; order {order_id}"
            ),
        };
        Response::Rejected { rejected }
    }

    #[test]
    fn responses_serialize_as_documented() {
        assert_eq!(
            serde_json::to_value(reserved("ord-1", 2)).unwrap(),
            json!({"order_id": "ord-1", "sku": "SKU-RED-MUG", "reserved": 2})
        );
        assert_eq!(
            serde_json::to_value(Response::Rejected {
                rejected: "no".into()
            })
            .unwrap(),
            json!({"rejected": "no"})
        );
    }

    #[test]
    fn the_default_commit_mode_is_optimistic() {
        assert_eq!(COMMIT_MODE, CommitMode::Optimistic);
        let (app, _) = local(COMMIT_MODE);
        assert_eq!(app.engine().config().commit_mode, CommitMode::Optimistic);
    }

    #[tokio::test]
    async fn reserves_once_and_replays_the_reservation() {
        for mode in MODES {
            let (app, _) = local(mode);
            let first = invoke(&app, order_placed()).await.unwrap();
            assert_eq!(first, reserved("ord-1001", 2), "{mode:?}");
            for _redelivery in 0..3 {
                assert_eq!(invoke(&app, order_placed()).await.unwrap(), first);
            }
            assert_eq!(level(&app, "SKU-RED-MUG").await, Some(98), "{mode:?}");
            // Another event for the same SKU is another reservation.
            let mut next = order_placed();
            next["id"] = json!("0f0f0f0f-0000-4000-8000-000000000001");
            next["detail"]["order_id"] = json!("ord-1002");
            assert_eq!(invoke(&app, next).await.unwrap(), reserved("ord-1002", 2));
            assert_eq!(level(&app, "SKU-RED-MUG").await, Some(96), "{mode:?}");
        }
    }

    /// A record written by the previous version (claim/complete, with
    /// `remaining` in its response) replays as a reservation.
    #[tokio::test]
    async fn records_of_the_previous_response_shape_still_replay() {
        let (app, store) = local(COMMIT_MODE);
        let event = order_placed();
        let key = app.engine().key(&event["id"]).unwrap();
        let now_ms = app.engine().now_ms();
        let old = Record {
            id: key.as_str().to_owned(),
            status: Status::Completed,
            expiration: now_ms / 1000 + 3600,
            in_progress_expiration: None,
            data: Some(
                json!({"order_id": "ord-1001", "sku": "SKU-RED-MUG", "reserved": 2, "remaining": 98})
                    .to_string(),
            ),
            error: None,
            validation: None,
            owner: None,
            outbox: None,
        };
        assert_eq!(store.claim(&old, now_ms).await.unwrap(), Claim::Acquired);
        assert_eq!(invoke(&app, event).await.unwrap(), reserved("ord-1001", 2));
        assert_eq!(
            level(&app, "SKU-RED-MUG").await,
            Some(100),
            "not reserved again"
        );
    }

    #[tokio::test]
    async fn insufficient_stock_is_recorded_and_replayed_without_touching_stock() {
        for mode in MODES {
            let (app, store) = local(mode);
            let first = invoke(&app, insufficient()).await.unwrap();
            let expected = rejected("SKU-RED-MUG", 1000, "ord-1004", Some(100));
            assert_eq!(first, expected, "{mode:?}");
            assert_eq!(level(&app, "SKU-RED-MUG").await, Some(100));
            // Restocked since: the redelivery still replays the recorded refusal.
            restock(&store, "SKU-RED-MUG", 5000);
            assert_eq!(invoke(&app, insufficient()).await.unwrap(), expected);
            assert_eq!(level(&app, "SKU-RED-MUG").await, Some(5000), "{mode:?}");
        }
    }

    #[tokio::test]
    async fn unknown_sku_is_recorded_and_never_created() {
        for mode in MODES {
            let (app, _) = local(mode);
            let mut event = order_placed();
            event["detail"]["sku"] = json!("SKU-NOPE");
            for _ in 0..2 {
                assert_eq!(
                    invoke(&app, event.clone()).await.unwrap(),
                    rejected("SKU-NOPE", 2, "ord-1001", None),
                    "{mode:?}"
                );
            }
            assert_eq!(level(&app, "SKU-NOPE").await, None);
        }
    }

    #[tokio::test]
    async fn wrong_events_are_clear_errors() {
        let (app, _) = local(COMMIT_MODE);
        for (field, value) in [("source", "shop.payments"), ("detail-type", "OrderShipped")] {
            let mut event = order_placed();
            event[field] = json!(value);
            let err = invoke(&app, event).await.unwrap_err();
            let wrong = err.downcast_ref::<Unfinished>().expect("an Unfinished");
            assert!(
                matches!(wrong.reason(), FailureReason::NotAccepted(_)) && !wrong.is_retryable(),
                "{wrong:?}"
            );
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
                err.downcast_ref::<lambda_idempotency::batch::BatchError>(),
                Some(lambda_idempotency::batch::BatchError::WrongEvent { .. })
            ),
            "{err}"
        );
        assert_eq!(level(&app, "SKU-RED-MUG").await, Some(100));
    }

    #[tokio::test]
    async fn malformed_details_are_permanent_errors() {
        let (app, store) = local(COMMIT_MODE);
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
            match err.downcast_ref::<Unfinished>() {
                Some(e) if matches!(e.reason(), FailureReason::Parse(_)) => {
                    assert!(!e.is_retryable())
                }
                other => panic!("{field}={value}: {other:?}"),
            }
            assert!(err.to_string().contains(expected), "{field}={value}: {err}");
        }
        assert_eq!(level(&app, "SKU-RED-MUG").await, Some(100));
        assert!(store.is_empty(), "no record for a malformed event");
    }

    #[tokio::test]
    async fn an_event_without_an_id_is_a_permanent_key_error() {
        let (app, _) = local(COMMIT_MODE);
        for id in [json!(null), json!("")] {
            let mut event = order_placed();
            event["id"] = id.clone();
            let err = invoke(&app, event).await.unwrap_err();
            match err.downcast_ref::<Unfinished>() {
                Some(e) if matches!(e.reason(), FailureReason::Key(_)) => {
                    assert!(!e.is_retryable())
                }
                other => panic!("id {id}: {other:?}: {err}"),
            }
        }
        assert_eq!(level(&app, "SKU-RED-MUG").await, Some(100));
    }

    #[test]
    fn empty_fields_are_terminal() {
        let stock = StockTable::sample(MemoryStore::new());
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
            let err = stage_reservation(&stock, &order).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Terminal);
            assert_eq!(err.to_string(), expected);
        }
    }

    #[test]
    fn an_order_stages_one_guarded_decrement() {
        let stock = StockTable::sample(MemoryStore::new());
        let order = OrderPlaced {
            order_id: "ord-9".into(),
            sku: "SKU-BLUE-PLATE".into(),
            quantity: NonZeroU32::new(3).unwrap(),
        };
        let staged = stage_reservation(&stock, &order).unwrap();
        assert_eq!(
            staged.response,
            Reservation {
                order_id: "ord-9".into(),
                sku: "SKU-BLUE-PLATE".into(),
                reserved: 3,
            }
        );
        let expected = stock.reserve_write("SKU-BLUE-PLATE", 3, "ord-9");
        let [write] = staged.writes.as_slice() else {
            panic!("one write: {:?}", staged.writes);
        };
        assert_eq!(
            (&write.table, &write.key, &write.op, &write.condition),
            (
                &expected.table,
                &expected.key,
                &expected.op,
                &expected.condition
            )
        );
        let message = |w: &lambda_idempotency::Write| w.rejection.as_ref().map(|r| r.message(None));
        assert_eq!(message(write), message(&expected));
    }

    /// The kill switch: the decrement still commits atomically (no record);
    /// every delivery reserves, and a refusal is a terminal error, not a
    /// recorded outcome.
    #[tokio::test]
    async fn the_kill_switch_runs_unprotected() {
        let store = MemoryStore::new();
        let engine = Idempotency::new(store.clone(), App::config().disabled(true));
        let app = App::new(engine, StockTable::sample(store.clone()));
        for _ in 0..2 {
            assert_eq!(
                invoke(&app, order_placed()).await.unwrap(),
                reserved("ord-1001", 2)
            );
        }
        assert_eq!(level(&app, "SKU-RED-MUG").await, Some(96));
        let err = invoke(&app, insufficient()).await.unwrap_err();
        match err.downcast_ref::<Unfinished>() {
            Some(
                e @ Unfinished::Failed {
                    reason: FailureReason::Handler { kind, .. },
                    ..
                },
            ) => {
                assert!(!e.is_retryable());
                assert_eq!(*kind, ErrorKind::Terminal);
            }
            other => panic!("{other:?}: {err}"),
        }
        assert_eq!(level(&app, "SKU-RED-MUG").await, Some(96));
        assert!(store.is_empty(), "no idempotency records");
    }

    /// A memory store whose first transaction waits for `release` (a slow
    /// commit), and optionally fails (throttled) instead of committing.
    #[derive(Debug)]
    struct Gated {
        inner: MemoryStore,
        entered: Notify,
        release: Notify,
        transactions: AtomicUsize,
        fail_first: bool,
    }

    impl Gated {
        fn new(inner: MemoryStore, fail_first: bool) -> Self {
            Self {
                inner,
                entered: Notify::new(),
                release: Notify::new(),
                transactions: AtomicUsize::new(0),
                fail_first,
            }
        }
    }

    #[async_trait]
    impl Store for Gated {
        async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError> {
            self.inner.claim(record, now_ms).await
        }
        async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
            self.inner.release(id, owner).await
        }
        async fn get_many(&self, ids: &[String]) -> Result<Vec<Record>, StoreError> {
            self.inner.get_many(ids).await
        }
        async fn commit(
            &self,
            record: RecordWrite<'_>,
            writes: &[Write],
        ) -> Result<(), TransactError> {
            if !writes.is_empty() && self.transactions.fetch_add(1, SeqCst) == 0 {
                self.entered.notify_one();
                self.release.notified().await;
                if self.fail_first {
                    return Err(TransactError::Store(StoreError::Backend {
                        operation: "TransactWriteItems",
                        source: "ThrottlingException: stock table throttled".into(),
                    }));
                }
            }
            self.inner.commit(record, writes).await
        }
    }

    fn gated(mode: CommitMode, fail_first: bool) -> (App, Arc<Gated>) {
        let store = MemoryStore::new();
        let gated = Arc::new(Gated::new(store.clone(), fail_first));
        let engine = Idempotency::new(gated.clone(), App::config().disabled(false));
        let app = App::new(engine, StockTable::sample(store)).with_commit_mode(mode);
        (app, gated)
    }

    /// A second delivery while the first is committing. Optimistic: both
    /// stage the decrement, one transaction commits and the other replays it
    /// (both `Ok`). Fenced: the second finds the claim and fails in progress
    /// (so Lambda retries it), and its retry replays. Either way the stock
    /// is taken once.
    #[tokio::test]
    async fn concurrent_deliveries_reserve_once() {
        for mode in MODES {
            let (app, gate) = gated(mode, false);
            let (first, second) = tokio::join!(invoke(&app, order_placed()), async {
                // While the first delivery is inside its transaction...
                gate.entered.notified().await;
                let second = invoke(&app, order_placed()).await;
                gate.release.notify_one();
                second
            });
            assert_eq!(first.unwrap(), reserved("ord-1001", 2), "{mode:?}");
            match mode {
                CommitMode::Optimistic => {
                    assert_eq!(second.unwrap(), reserved("ord-1001", 2));
                    assert_eq!(gate.transactions.load(SeqCst), 2, "both tried to commit");
                }
                _ => {
                    let err = second.unwrap_err();
                    match err.downcast_ref::<Unfinished>() {
                        Some(
                            e @ Unfinished::Failed {
                                reason: FailureReason::InProgress { .. },
                                ..
                            },
                        ) => assert!(e.is_retryable()),
                        other => panic!("{other:?}"),
                    }
                    assert_eq!(gate.transactions.load(SeqCst), 1);
                }
            }
            // Lambda's retry replays the reservation.
            assert_eq!(
                invoke(&app, order_placed()).await.unwrap(),
                reserved("ord-1001", 2)
            );
            assert_eq!(level(&app, "SKU-RED-MUG").await, Some(98), "{mode:?}");
        }
    }

    #[tokio::test]
    async fn a_retryable_failure_is_an_error_and_the_retry_reserves() {
        for mode in MODES {
            let (app, gate) = gated(mode, true);
            gate.release.notify_one(); // the permit is stored: no waiting
            let err = invoke(&app, order_placed()).await.unwrap_err();
            match err.downcast_ref::<Unfinished>() {
                Some(
                    e @ Unfinished::Failed {
                        reason: FailureReason::Store(_) | FailureReason::Idempotency(_),
                        ..
                    },
                ) => assert!(e.is_retryable()),
                other => panic!("{mode:?}: {other:?}"),
            }
            assert!(
                lambda_idempotency::report(&*err).contains("throttled"),
                "{}",
                lambda_idempotency::report(&*err)
            );
            assert_eq!(
                level(&app, "SKU-RED-MUG").await,
                Some(100),
                "nothing applied"
            );
            assert_eq!(
                invoke(&app, order_placed()).await.unwrap(),
                reserved("ord-1001", 2),
                "{mode:?}"
            );
            assert_eq!(level(&app, "SKU-RED-MUG").await, Some(98));
        }
    }
}
