//! `orders`: an SQS standard-queue consumer that records each order and
//! publishes one `OrderConfirmed` notification per order event, whatever SQS
//! redelivers.
//!
//! Two effects per event, keyed by the producer's `event_id`, **staged** and
//! committed by the engine in one `TransactWriteItems` with the idempotency
//! record (optimistic mode, one request per new order):
//!
//! 1. the order, a `Put` of the whole item in `ORDERS_TABLE` (the last write
//!    wins);
//! 2. `OrderConfirmed` for the FIFO queue `NOTIFICATIONS_QUEUE_URL`, stored
//!    in the record's outbox and published by `outbox-relay` from the
//!    table's stream under its stable id (`MessageDeduplicationId` and the
//!    `outbox_id` attribute). This function never calls `SendMessage`: a
//!    crash or a lost answer after the commit re-publishes nothing, and a
//!    crash before it leaves nothing behind.
//!
//! Records run concurrently; an in-batch duplicate waits for its first copy
//! and replays its outcome; a bad body fails only its record (it reaches the
//! DLQ after the queue's `maxReceiveCount`).
//!
//! Ordering: a standard queue does not keep order, so two events of one
//! order (`PLACED`, then `PAID`) may be applied in either order and the last
//! write wins. A producer that needs the latest status to win must carry a
//! version and make the write conditional on it. The notifications of one
//! order share a FIFO group ([`group_id`] of `order_id`), but two events are
//! two idempotency records, and DynamoDB Streams orders changes per item
//! only: their notifications may leave in either order. A consumer that
//! needs the latest reads the order, or compares the event's status.

pub mod table;

use lambda_idempotency::backend::Wiring;
use lambda_idempotency::outbox::Message;
use lambda_idempotency::sqs::{EnvelopeMode, SqsProcessor, SqsRecord};
use lambda_idempotency::{
    CommitMode, Config, HandlerError, Idempotency, IdempotencyKey, KeySelector, Table,
    write::Staged,
};
use lambda_runtime::LambdaEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How long an order event's record lives by default: the queue's retention
/// (4 days) plus its DLQ's (14 days), so no redelivery, DLQ redrive or
/// resend of an event can outlive the record of its first delivery.
pub const RECORD_LIFETIME: std::time::Duration = std::time::Duration::from_secs(18 * 24 * 60 * 60);

/// The prefix of this function's idempotency keys.
pub const RECORD_PREFIX: &str = "orders.record";

/// Environment variable naming the orders table.
pub const ORDERS_TABLE_ENV: &str = "ORDERS_TABLE";
/// Environment variable holding the notifications (FIFO) queue URL.
pub const NOTIFICATIONS_QUEUE_URL_ENV: &str = "NOTIFICATIONS_QUEUE_URL";
/// The orders table, as [`lambda_idempotency::Backend::from_env`] reads it.
pub const ORDERS: lambda_idempotency::backend::TableEnv =
    lambda_idempotency::backend::TableEnv::new(ORDERS_TABLE_ENV, LOCAL_ORDERS_TABLE);
/// The orders table's name in local runs.
pub const LOCAL_ORDERS_TABLE: &str = "orders";
/// The notifications queue in local runs: nothing is published, the memory
/// store logs what would be.
pub const LOCAL_NOTIFICATIONS_QUEUE_URL: &str =
    "https://sqs.local.invalid/000000000000/notifications.fifo";
/// The SQS message attribute naming the notification's type.
pub const TYPE_ATTRIBUTE: &str = "type";

/// An order event: the message body, and the item stored in the orders table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderEvent {
    /// The producer's unique event id: the idempotency key.
    pub event_id: String,
    /// The order (the table's partition key).
    pub order_id: String,
    /// The customer.
    pub customer_id: String,
    /// A non-negative whole number of cents.
    pub amount_cents: u64,
    /// The order's status as of this event (`PLACED`, `PAID`, ...).
    pub status: String,
}

/// The notification body: `{"type":"OrderConfirmed","order_id":..,
/// "customer_id":..,"amount_cents":..,"event_id":..}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "OrderConfirmed")]
pub struct OrderConfirmed {
    /// The order.
    pub order_id: String,
    /// The customer.
    pub customer_id: String,
    /// The amount.
    pub amount_cents: u64,
    /// The event that confirmed it.
    pub event_id: String,
}

impl From<&OrderEvent> for OrderConfirmed {
    fn from(order: &OrderEvent) -> Self {
        Self {
            order_id: order.order_id.clone(),
            customer_id: order.customer_id.clone(),
            amount_cents: order.amount_cents,
            event_id: order.event_id.clone(),
        }
    }
}

/// What an order event did: recorded, and replayed to duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// The event.
    pub event_id: String,
    /// The order written.
    pub order_id: String,
    /// Its status.
    pub status: String,
    /// The stable id of its `OrderConfirmed` message: the
    /// `MessageDeduplicationId` and `outbox_id` attribute the relay
    /// publishes it with, from the record's key
    /// ([`IdempotencyKey::outbox_id`]). `None` when the event ran
    /// unprotected (the kill switch): the message then rides a record of
    /// its own, under an id decided at the commit.
    pub notification_id: Option<String>,
}

/// The stable outbox id of the `OrderConfirmed` of `event_id` in a record
/// not scoped by a tenant ([`IdempotencyKey::outbox_id`] of its key under
/// [`RECORD_PREFIX`]): what a consumer or a test expects.
pub fn notification_id(event_id: &str) -> Result<String, HandlerError> {
    let key = IdempotencyKey::new(RECORD_PREFIX, &Value::String(event_id.to_owned()))
        .map_err(|e| HandlerError::terminal(format!("event_id: {e}")))?;
    Ok(key.outbox_id(0))
}

/// The FIFO `MessageGroupId` of an order's notifications
/// ([`fifo_group`](lambda_idempotency::outbox::fifo_group) of the
/// `order_id`): the `order_id` itself when SQS accepts it as a group id,
/// otherwise `sha256-` and its hex SHA-256. Any order id the function
/// accepts gets a valid group, and one order's notifications always share
/// it.
pub use lambda_idempotency::outbox::fifo_group as group_id;

/// Checks an order event before any effect: terminal errors for bad input.
pub fn validate(order: &OrderEvent) -> Result<(), HandlerError> {
    for (field, value) in [
        ("event_id", &order.event_id),
        ("order_id", &order.order_id),
        ("customer_id", &order.customer_id),
        ("status", &order.status),
    ] {
        if value.trim().is_empty() {
            return Err(HandlerError::terminal(format!("{field} is empty")));
        }
    }
    Ok(())
}

/// The order event as staged effects: the business logic, free of Lambda.
/// The put of the order and its `OrderConfirmed` (group [`group_id`], message
/// attribute `type` = `OrderConfirmed`) commit with the record of `key`, or
/// nothing does.
pub fn stage_order(
    orders: &Table,
    queue_url: &str,
    order: &OrderEvent,
    key: Option<&IdempotencyKey>,
) -> Result<Staged<Recorded>, HandlerError> {
    validate(order)?;
    let message = Message::sqs_json(queue_url, &OrderConfirmed::from(order))?
        .group_by(&order.order_id)
        .attribute(TYPE_ATTRIBUTE, "OrderConfirmed");
    let recorded = Recorded {
        event_id: order.event_id.clone(),
        order_id: order.order_id.clone(),
        status: order.status.clone(),
        notification_id: key.map(|key| key.outbox_id(0)),
    };
    Ok(Staged::new(recorded)
        .write(table::put(orders, order))
        .publish(message))
}

/// The notifications queue: [`NOTIFICATIONS_QUEUE_URL_ENV`]'s value
/// (`set`), required with DynamoDB tables; in a local run (`local`) the
/// store logs what would be published, to [`LOCAL_NOTIFICATIONS_QUEUE_URL`]
/// unless the variable names another queue.
pub fn notifications_queue(set: Option<String>, local: bool) -> Result<String, String> {
    match (set.filter(|v| !v.trim().is_empty()), local) {
        (url, true) => {
            tracing::warn!("OrderConfirmed notifications are logged, not published (local run)");
            Ok(url.unwrap_or_else(|| LOCAL_NOTIFICATIONS_QUEUE_URL.into()))
        }
        (Some(url), false) => Ok(url),
        (None, false) => Err(format!(
            "{NOTIFICATIONS_QUEUE_URL_ENV} is required with DynamoDB tables"
        )),
    }
}

/// The function: its engine, orders table and notifications queue, built
/// once per execution environment.
#[derive(Debug, Clone)]
pub struct App {
    processor: SqsProcessor,
    orders: Table,
    queue_url: String,
}

impl App {
    /// The function over the given engine, orders table and notifications
    /// queue URL. The engine's store must reach the orders table (the same
    /// DynamoDB account, or the same [`MemoryStore`](lambda_idempotency::MemoryStore)), and its
    /// configuration's prefix should be [`RECORD_PREFIX`] (see
    /// [`App::config`]), the prefix the relay's allowlist lets publish.
    pub fn new(engine: Idempotency, orders: Table, queue_url: impl Into<String>) -> Self {
        // The queue carries order events, never envelopes: a body is the
        // order event its key and its effects are read from.
        let processor = SqsProcessor::new(engine, KeySelector::pointer("/event_id"))
            .envelope(EnvelopeMode::Never);
        Self {
            processor,
            orders,
            queue_url: queue_url.into(),
        }
    }

    /// Engine configuration: keys under [`RECORD_PREFIX`] (fixed: `from_env`
    /// refuses another `IDEMPOTENCY_KEY_PREFIX`: the relay's allowlist and
    /// [`notification_id`] name it), kept
    /// [`RECORD_LIFETIME`] (overridden by the deployment through
    /// `IDEMPOTENCY_EXPIRES_AFTER_SECONDS`), optimistic commits (one
    /// `TransactWriteItems` per new order, shared by the batch's new orders
    /// with batch commits, the default).
    pub fn config() -> Config {
        Config::with_prefix(RECORD_PREFIX)
            .expires_after(RECORD_LIFETIME)
            .commit_mode(CommitMode::Optimistic)
    }

    /// From the environment: DynamoDB when `IDEMPOTENCY_TABLE` and
    /// `ORDERS_TABLE` are set (honouring `AWS_ENDPOINT_URL`; then
    /// `NOTIFICATIONS_QUEUE_URL` is required), the embedded memory store
    /// when neither is (local runs: the store logs what would be published
    /// to [`LOCAL_NOTIFICATIONS_QUEUE_URL`] unless `NOTIFICATIONS_QUEUE_URL`
    /// names another queue). One without the other is an error.
    pub async fn from_env() -> Result<Self, lambda_runtime::Error> {
        let config = Self::config().read_env()?.require_prefix(RECORD_PREFIX)?;
        let wiring = Wiring::from_env(RECORD_PREFIX, [ORDERS])?;
        let queue_url = std::env::var(NOTIFICATIONS_QUEUE_URL_ENV).ok();
        let queue_url = notifications_queue(queue_url, wiring.is_local())?;
        let (engine, [orders]) = wiring.connect(config).await?.into_parts();
        let mut app = Self::new(engine, orders, queue_url);
        app.processor = app.processor.verifier_from_env().await?;
        Ok(app)
    }

    /// The orders table.
    pub fn orders(&self) -> &Table {
        &self.orders
    }

    /// The notifications queue URL.
    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    /// The engine.
    pub fn engine(&self) -> &Idempotency {
        self.processor.engine()
    }

    /// Handles one SQS event: the partial batch response lists exactly the
    /// records to redeliver.
    pub async fn handle(
        &self,
        event: LambdaEvent<Value>,
    ) -> Result<aws_lambda_events::sqs::SqsBatchResponse, lambda_runtime::Error> {
        let (orders, queue_url) = (&self.orders, self.queue_url.as_str());
        self.processor
            .handle(event, |record: SqsRecord<OrderEvent>| async move {
                stage_order(orders, queue_url, &record.body, record.key.as_ref())
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_idempotency::testing::{self, FailedIds, Msg, eventbridge_event, sqs_event};
    use lambda_idempotency::{ErrorKind, MemoryStore};
    use serde_json::json;
    use std::collections::BTreeMap;

    const QUEUE: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/notifications.fifo";

    fn order(event_id: &str, order_id: &str) -> OrderEvent {
        OrderEvent {
            event_id: event_id.into(),
            order_id: order_id.into(),
            customer_id: "cust-1".into(),
            amount_cents: 4999,
            status: "PLACED".into(),
        }
    }

    fn event(name: &str) -> Value {
        let text = match name {
            "orders-standard.json" => include_str!("../../../events/orders-standard.json"),
            "orders-missing-key.json" => include_str!("../../../events/orders-missing-key.json"),
            "orders-eventbridge-via-sqs.json" => {
                include_str!("../../../events/orders-eventbridge-via-sqs.json")
            }
            other => panic!("no sample {other}"),
        };
        serde_json::from_str(text).unwrap()
    }

    fn ids(event: &Value) -> Vec<String> {
        event["Records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["messageId"].as_str().unwrap().to_owned())
            .collect()
    }

    struct Local {
        app: App,
        store: MemoryStore,
    }

    fn local() -> Local {
        let store = MemoryStore::new();
        let engine = Idempotency::new(store.clone(), App::config().disabled(false));
        let app = App::new(engine, Table::memory(store.clone(), "orders"), QUEUE);
        Local { app, store }
    }

    impl Local {
        /// The outbox entries of `event_id`'s record (none without a record).
        async fn outbox(&self, event_id: &str) -> Vec<lambda_idempotency::outbox::Entry> {
            let key = self.app.engine().key(&json!(event_id)).unwrap();
            testing::outbox(&self.store, &key).await.unwrap()
        }

        /// `OrderConfirmed` staged for publishing, counted by event id,
        /// checked against `event_ids`' records.
        async fn confirmed(&self, event_ids: &[&str]) -> BTreeMap<String, usize> {
            let mut counts = BTreeMap::new();
            for event_id in event_ids {
                for entry in self.outbox(event_id).await {
                    let body: OrderConfirmed = serde_json::from_str(&entry.message.body).unwrap();
                    assert_eq!(body.event_id, *event_id);
                    assert_eq!(entry.id, notification_id(event_id).unwrap());
                    assert_eq!(
                        entry.message.group_id.as_deref(),
                        Some(body.order_id.as_str())
                    );
                    *counts.entry(body.event_id).or_insert(0) += 1;
                }
            }
            counts
        }

        async fn order(&self, order_id: &str) -> Option<OrderEvent> {
            table::get(self.app.orders(), order_id).await.unwrap()
        }
    }

    /// The ids of the records that failed.
    async fn invoke(app: &App, event: Value) -> Vec<String> {
        let response = testing::invoke(|e| app.handle(e), &event).await;
        response.unwrap().failed_ids()
    }

    fn once(ids: &[&str]) -> BTreeMap<String, usize> {
        ids.iter().map(|id| ((*id).to_owned(), 1)).collect()
    }

    #[test]
    fn stages_the_order_put_and_its_confirmation() {
        let orders = Table::memory(MemoryStore::new(), "orders");
        let o = order("evt-1", "ord-1");
        let key = IdempotencyKey::new(RECORD_PREFIX, &json!("evt-1")).unwrap();
        let staged = stage_order(&orders, QUEUE, &o, Some(&key)).unwrap();
        assert_eq!(
            staged.response,
            Recorded {
                event_id: "evt-1".into(),
                order_id: "ord-1".into(),
                status: "PLACED".into(),
                notification_id: Some(lambda_idempotency::outbox::stable_id(key.as_str(), 0)),
            }
        );
        assert_eq!(staged.writes, vec![table::put(&orders, &o)]);
        assert_eq!(staged.writes[0].table, "orders");
        assert_eq!(staged.messages.len(), 1);
        let message = &staged.messages[0];
        assert_eq!(
            message.destination,
            lambda_idempotency::outbox::Destination::Sqs {
                queue_url: QUEUE.into()
            }
        );
        assert_eq!(message.group_id.as_deref(), Some("ord-1"));
        assert_eq!(message.attributes[TYPE_ATTRIBUTE], "OrderConfirmed");
        assert_eq!(
            serde_json::from_str::<Value>(&message.body).unwrap(),
            json!({"type": "OrderConfirmed", "order_id": "ord-1", "customer_id": "cust-1",
                   "amount_cents": 4999, "event_id": "evt-1"})
        );
    }

    #[test]
    fn any_accepted_order_stages_a_publishable_notification() {
        let orders = Table::memory(MemoryStore::new(), "orders");
        let long = "o".repeat(129);
        let cases = [
            ("ord-1", "ord-1".to_owned()),
            (
                "order 1",
                format!("sha256-{}", lambda_idempotency::key::sha256_hex(b"order 1")),
            ),
            (
                "ordér-1",
                format!(
                    "sha256-{}",
                    lambda_idempotency::key::sha256_hex("ordér-1".as_bytes())
                ),
            ),
            (
                long.as_str(),
                format!(
                    "sha256-{}",
                    lambda_idempotency::key::sha256_hex(long.as_bytes())
                ),
            ),
        ];
        for (order_id, group) in cases {
            let mut o = order("evt-1", order_id);
            o.customer_id = "cust\u{FFFF}1".into();
            let staged = stage_order(&orders, QUEUE, &o, None).unwrap();
            let message = &staged.messages[0];
            assert_eq!(message.check(), Ok(()), "{order_id:?}: {}", message.body);
            assert_eq!(message.group_id.as_deref(), Some(group.as_str()));
            assert_eq!(group_id(order_id), group, "the same group for every event");
            let body: OrderConfirmed = serde_json::from_str(&message.body).unwrap();
            assert_eq!(
                body.customer_id, "cust\u{FFFF}1",
                "the consumer reads it back"
            );
            assert_eq!(body.order_id, order_id);
        }
        // The local placeholder queue is a URL the relay accepts.
        let local = stage_order(
            &orders,
            LOCAL_NOTIFICATIONS_QUEUE_URL,
            &order("e", "o"),
            None,
        )
        .unwrap();
        assert_eq!(local.messages[0].check(), Ok(()));
    }

    #[tokio::test]
    async fn commits_the_order_with_its_outbox_once_per_event() {
        let l = local();
        let o = order("evt-1", "ord-1");
        let batch = |orders: &[&OrderEvent]| {
            let records: Vec<Value> = orders
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    json!({"messageId": format!("m-{i}"), "eventSource": "aws:sqs",
                           "body": serde_json::to_string(o).unwrap(),
                           "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders"})
                })
                .collect();
            json!({ "Records": records })
        };
        assert!(invoke(&l.app, batch(&[&o, &o])).await.is_empty());
        assert!(invoke(&l.app, batch(&[&o])).await.is_empty());
        assert_eq!(l.order("ord-1").await, Some(o.clone()));
        assert_eq!(l.confirmed(&["evt-1"]).await, once(&["evt-1"]));
        // A later event of the same order replaces the item and confirms again.
        let paid = OrderEvent {
            status: "PAID".into(),
            ..order("evt-2", "ord-1")
        };
        assert!(invoke(&l.app, batch(&[&paid])).await.is_empty());
        assert_eq!(l.order("ord-1").await, Some(paid));
        assert_eq!(
            l.confirmed(&["evt-1", "evt-2"]).await,
            once(&["evt-1", "evt-2"])
        );
    }

    #[test]
    fn empty_fields_are_terminal_and_stage_nothing() {
        let orders = Table::memory(MemoryStore::new(), "orders");
        let cases = [
            ("event_id", order(" ", "ord-1")),
            ("order_id", order("evt-1", "")),
            (
                "customer_id",
                OrderEvent {
                    customer_id: String::new(),
                    ..order("evt-1", "ord-1")
                },
            ),
            (
                "status",
                OrderEvent {
                    status: "\t".into(),
                    ..order("evt-1", "ord-1")
                },
            ),
        ];
        for (field, bad) in cases {
            let err = stage_order(&orders, QUEUE, &bad, None).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Terminal, "{field}");
            assert_eq!(err.to_string(), format!("{field} is empty"));
        }
    }

    #[test]
    fn amounts_must_be_whole_non_negative_numbers() {
        let body = |amount: &str| {
            format!(
                r#"{{"event_id":"e","order_id":"o","customer_id":"c","amount_cents":{amount},"status":"PLACED"}}"#
            )
        };
        assert!(serde_json::from_str::<OrderEvent>(&body("0")).is_ok());
        for bad in ["-1", "12.5", "\"100\"", "null"] {
            assert!(
                serde_json::from_str::<OrderEvent>(&body(bad)).is_err(),
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn sample_batch_confirms_each_event_once() {
        let l = local();
        let event = event("orders-standard.json");
        let ids = ids(&event);
        // Records: evt-..11, evt-..12, evt-..11 again, poison, evt-..13.
        for _delivery in 0..2 {
            assert_eq!(invoke(&l.app, event.clone()).await, vec![ids[3].clone()]);
        }
        let events = ["evt-5c1e0a11", "evt-5c1e0a12", "evt-5c1e0a13"];
        assert_eq!(l.confirmed(&events).await, once(&events));
        for (order_id, event_id) in [("ord-1001", "evt-5c1e0a11"), ("ord-1003", "evt-5c1e0a13")] {
            assert_eq!(l.order(order_id).await.unwrap().event_id, event_id);
        }
        let ord = l.order("ord-1002").await.unwrap();
        assert_eq!(
            (ord.event_id.as_str(), ord.customer_id.as_str()),
            ("evt-5c1e0a12", "cust-0077")
        );
        assert_eq!((ord.amount_cents, ord.status.as_str()), (12900, "PLACED"));
    }

    #[tokio::test]
    async fn bad_bodies_fail_only_their_records() {
        let l = local();
        // A good order, one without event_id, one whose event_id is a number.
        let event = event("orders-missing-key.json");
        let ids = ids(&event);
        assert_eq!(invoke(&l.app, event).await, ids[1..].to_vec());
        assert_eq!(
            l.confirmed(&["evt-6d2f1b21"]).await,
            once(&["evt-6d2f1b21"])
        );
        assert!(l.order("ord-1101").await.is_some());
        for order_id in ["ord-1102", "ord-1103"] {
            assert_eq!(l.order(order_id).await, None, "{order_id}");
        }

        // EventBridge envelopes are not order events.
        let event = self::event("orders-eventbridge-via-sqs.json");
        assert_eq!(invoke(&l.app, event.clone()).await, self::ids(&event));

        // Negative, fractional, empty ids: failed (to the DLQ after retries).
        let record = |id: &str, body: Value| Msg::new(id, body.to_string());
        let good = json!({"event_id": "evt-9", "order_id": "ord-9", "customer_id": "c",
                          "amount_cents": 1, "status": "PLACED"});
        let with = |field: &str, value: Value| {
            let mut b = good.clone();
            b["event_id"] = json!(format!("evt-bad-{field}"));
            b[field] = value;
            b
        };
        let batch = sqs_event(
            "orders",
            &[
                record("m-neg", with("amount_cents", json!(-5))),
                record("m-frac", with("amount_cents", json!(12.5))),
                record("m-no-order", with("order_id", json!(""))),
                record("m-no-customer", with("customer_id", json!(" "))),
                record("m-no-event", with("event_id", json!(""))),
                record("m-good", good.clone()),
            ],
        );
        assert_eq!(
            invoke(&l.app, batch).await,
            [
                "m-neg",
                "m-frac",
                "m-no-order",
                "m-no-customer",
                "m-no-event"
            ]
        );
        let bad = [
            "evt-bad-amount_cents",
            "evt-bad-order_id",
            "evt-bad-customer_id",
        ];
        assert!(l.confirmed(&bad).await.is_empty(), "nothing staged");
        assert_eq!(
            l.confirmed(&["evt-6d2f1b21", "evt-9"]).await,
            once(&["evt-6d2f1b21", "evt-9"])
        );
        let ord9 = l.order("ord-9").await.unwrap();
        assert_eq!(
            serde_json::to_value(&ord9).unwrap(),
            good,
            "no bad record wrote"
        );
    }

    #[tokio::test]
    async fn not_an_sqs_event_fails_the_invocation() {
        let Local { app, .. } = local();
        let eventbridge = eventbridge_event("x", "shop.orders", "OrderPlaced", json!({}));
        let err = testing::invoke(|e| app.handle(e), &eventbridge)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not an SQS event"), "{err}");
    }
}
