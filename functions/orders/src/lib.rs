//! `orders`: an SQS standard-queue consumer that records each order and
//! sends one `OrderConfirmed` notification per order event, whatever SQS
//! redelivers.
//!
//! Two effects per event, keyed by the producer's `event_id`:
//!
//! 1. upsert the order in `ORDERS_TABLE` (`PutItem` of the whole order:
//!    naturally idempotent, running it twice leaves the same item);
//! 2. send `OrderConfirmed` to `NOTIFICATIONS_QUEUE_URL`: a side effect
//!    outside DynamoDB that nothing but the engine stops from happening twice.
//!
//! Records run concurrently; an in-batch duplicate waits for its first copy
//! and replays its outcome; a bad body fails only its record (it reaches the
//! DLQ after the queue's `maxReceiveCount`).
//!
//! Ordering: a standard queue does not keep order, so two events of one
//! order (`PLACED`, then `PAID`) may be applied in either order and the last
//! write wins. A producer that needs the latest status to win must carry a
//! version and make the write conditional on it.

pub mod notifier;
pub mod table;

use lambda_runtime::LambdaEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shared::batch::{BatchProcessor, SqsRecord};
use shared::{Config, HandlerError, Idempotency, KeySelector};
use std::sync::Arc;

pub use notifier::{MemoryNotifier, Notifier, Sent, SqsNotifier, deduplication_id};
pub use table::{DynamoDbOrders, MemoryOrders, Orders};

/// How long an order event's record lives by default: the queue's retention
/// (4 days) plus its DLQ's (14 days), so no redelivery, DLQ redrive or
/// resend of an event can outlive the record of its first delivery.
pub const RECORD_LIFETIME: std::time::Duration = std::time::Duration::from_secs(18 * 24 * 60 * 60);

/// Environment variable naming the orders table.
pub const ORDERS_TABLE_ENV: &str = "ORDERS_TABLE";
/// Environment variable holding the notifications queue URL.
pub const NOTIFICATIONS_QUEUE_URL_ENV: &str = "NOTIFICATIONS_QUEUE_URL";

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
    /// The event that confirmed it (consumers can deduplicate on it).
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
    /// The id of the `OrderConfirmed` message sent.
    pub notification_id: String,
}

/// Validates one order event, writes the order, then sends its
/// notification: the business logic, free of Lambda.
///
/// The write comes first: when the send fails (a retryable error), the
/// redelivery writes the same item again and retries the send.
pub async fn record_order(
    orders: &dyn Orders,
    notifier: &dyn Notifier,
    order: &OrderEvent,
) -> Result<Recorded, HandlerError> {
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
    orders.upsert(order).await?;
    let notification_id = notifier
        .order_confirmed(&OrderConfirmed::from(order))
        .await?;
    Ok(Recorded {
        event_id: order.event_id.clone(),
        order_id: order.order_id.clone(),
        status: order.status.clone(),
        notification_id,
    })
}

/// The function: its engine, table and notifier, built once per execution
/// environment.
#[derive(Debug, Clone)]
pub struct App {
    processor: BatchProcessor,
    orders: Arc<dyn Orders>,
    notifier: Arc<dyn Notifier>,
}

impl App {
    /// The function over the given engine, orders table and notifier.
    pub fn new(engine: Idempotency, orders: Arc<dyn Orders>, notifier: Arc<dyn Notifier>) -> Self {
        let processor = BatchProcessor::new(engine, KeySelector::pointer("/event_id"));
        Self {
            processor,
            orders,
            notifier,
        }
    }

    /// Engine configuration: keys under `orders.record`, kept
    /// [`RECORD_LIFETIME`] (overridden by the deployment through
    /// `IDEMPOTENCY_EXPIRES_AFTER_SECONDS`).
    pub fn config() -> Config {
        Config::with_prefix("orders.record").expires_after(RECORD_LIFETIME)
    }

    /// From the environment: DynamoDB for each table whose variable is set
    /// (`IDEMPOTENCY_TABLE`, `ORDERS_TABLE`), SQS when
    /// `NOTIFICATIONS_QUEUE_URL` is set (all honouring `AWS_ENDPOINT_URL`),
    /// in-memory stand-ins otherwise (local runs: notifications are logged).
    pub async fn from_env() -> Result<Self, lambda_runtime::Error> {
        let set = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let idempotency = shared::TableConfig::from_env();
        let orders = set(ORDERS_TABLE_ENV);
        let queue_url = set(NOTIFICATIONS_QUEUE_URL_ENV);
        let config = Self::config().expires_after_from_env()?;
        let sdk = if idempotency.is_none() && orders.is_none() && queue_url.is_none() {
            None
        } else {
            Some(shared::aws_sdk_config().await)
        };
        let engine = match (idempotency, &sdk) {
            (Some(table), Some(sdk)) => Idempotency::new(
                shared::DynamoDbStore::new(aws_sdk_dynamodb::Client::new(sdk), table),
                config,
            ),
            _ => {
                tracing::warn!("IDEMPOTENCY_TABLE not set: idempotency records kept in memory");
                Idempotency::new(shared::MemoryStore::new(), config)
            }
        };
        let orders: Arc<dyn Orders> = match (orders, &sdk) {
            (Some(table), Some(sdk)) => Arc::new(DynamoDbOrders::new(
                aws_sdk_dynamodb::Client::new(sdk),
                table,
            )),
            _ => {
                tracing::warn!("ORDERS_TABLE not set: orders kept in memory");
                Arc::new(MemoryOrders::default())
            }
        };
        let notifier: Arc<dyn Notifier> = match (queue_url, &sdk) {
            (Some(url), Some(sdk)) => {
                Arc::new(SqsNotifier::new(aws_sdk_sqs::Client::new(sdk), url))
            }
            _ => {
                tracing::warn!(
                    "NOTIFICATIONS_QUEUE_URL not set: OrderConfirmed notifications are logged, not sent"
                );
                Arc::new(MemoryNotifier::default())
            }
        };
        let app = Self::new(engine, orders, notifier);
        Ok(match shared::Verifier::from_lambda_env().await? {
            Some(verifier) => app.verify_signatures(verifier),
            None => app,
        })
    }

    /// Checks each record's HMAC-SHA256 body signature (a record without a
    /// valid one fails permanently, logged without its payload).
    pub fn verify_signatures(mut self, verifier: shared::Verifier) -> Self {
        self.processor = self.processor.verify_signatures(verifier);
        self
    }

    /// The orders table.
    pub fn orders(&self) -> &dyn Orders {
        &*self.orders
    }

    /// The notifier.
    pub fn notifier(&self) -> &dyn Notifier {
        &*self.notifier
    }

    /// Handles one SQS event: the partial batch response lists exactly the
    /// records to redeliver.
    pub async fn handle(
        &self,
        event: LambdaEvent<Value>,
    ) -> Result<aws_lambda_events::sqs::SqsBatchResponse, lambda_runtime::Error> {
        let (orders, notifier) = (&*self.orders, &*self.notifier);
        self.processor
            .handle(event, |record: SqsRecord<OrderEvent>| async move {
                record_order(orders, notifier, &record.body).await
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use serde_json::json;
    use shared::{ErrorKind, MemoryStore};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

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
        orders: Arc<MemoryOrders>,
        notifier: Arc<MemoryNotifier>,
    }

    fn local() -> Local {
        let orders = Arc::new(MemoryOrders::default());
        let notifier = Arc::new(MemoryNotifier::default());
        let engine = Idempotency::new(MemoryStore::new(), App::config().disabled(false));
        let app = App::new(engine, orders.clone(), notifier.clone());
        Local {
            app,
            orders,
            notifier,
        }
    }

    async fn invoke(app: &App, event: Value) -> Vec<String> {
        let ctx = shared::runtime::local_context(1, std::time::Duration::from_secs(30));
        app.handle(LambdaEvent::new(event, ctx))
            .await
            .unwrap()
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect()
    }

    fn confirmed_events(notifier: &MemoryNotifier) -> Vec<String> {
        let mut ids: Vec<_> = notifier
            .sent()
            .into_iter()
            .map(|s| s.message.event_id)
            .collect();
        ids.sort();
        ids
    }

    #[tokio::test]
    async fn records_the_order_then_confirms_it() {
        let orders = MemoryOrders::default();
        let notifier = MemoryNotifier::default();
        let o = order("evt-1", "ord-1");
        let recorded = record_order(&orders, &notifier, &o).await.unwrap();
        assert_eq!(
            recorded,
            Recorded {
                event_id: "evt-1".into(),
                order_id: "ord-1".into(),
                status: "PLACED".into(),
                notification_id: "local-notification-1".into(),
            }
        );
        assert_eq!(orders.get("ord-1").await.unwrap(), Some(o.clone()));
        let sent = notifier.sent();
        assert_eq!(sent.len(), 1);
        assert_eq!(
            serde_json::to_value(&sent[0].message).unwrap(),
            json!({"type": "OrderConfirmed", "order_id": "ord-1", "customer_id": "cust-1",
                   "amount_cents": 4999, "event_id": "evt-1"})
        );
        // A later event of the same order replaces the item.
        let paid = OrderEvent {
            status: "PAID".into(),
            ..order("evt-2", "ord-1")
        };
        record_order(&orders, &notifier, &paid).await.unwrap();
        assert_eq!(orders.get("ord-1").await.unwrap(), Some(paid));
        assert_eq!(orders.len(), 1);
    }

    #[tokio::test]
    async fn empty_fields_are_terminal_and_have_no_effect() {
        let orders = MemoryOrders::default();
        let notifier = MemoryNotifier::default();
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
            let err = record_order(&orders, &notifier, &bad).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Terminal, "{field}");
            assert_eq!(err.to_string(), format!("{field} is empty"));
        }
        assert!(orders.is_empty());
        assert!(notifier.sent().is_empty());
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
        let Local {
            app,
            orders,
            notifier,
        } = local();
        let event = event("orders-standard.json");
        let ids = ids(&event);
        // Records: evt-..11, evt-..12, evt-..11 again, poison, evt-..13.
        for _delivery in 0..2 {
            assert_eq!(invoke(&app, event.clone()).await, vec![ids[3].clone()]);
        }
        assert_eq!(
            confirmed_events(&notifier),
            ["evt-5c1e0a11", "evt-5c1e0a12", "evt-5c1e0a13"]
        );
        assert_eq!(orders.len(), 3);
        let ord = orders.get("ord-1002").await.unwrap().unwrap();
        assert_eq!(
            (ord.event_id.as_str(), ord.customer_id.as_str()),
            ("evt-5c1e0a12", "cust-0077")
        );
        assert_eq!((ord.amount_cents, ord.status.as_str()), (12900, "PLACED"));
    }

    #[tokio::test]
    async fn bad_bodies_fail_only_their_records() {
        let Local { app, notifier, .. } = local();
        // A good order, one without event_id, one whose event_id is a number.
        let event = event("orders-missing-key.json");
        let ids = ids(&event);
        assert_eq!(invoke(&app, event).await, ids[1..].to_vec());
        assert_eq!(confirmed_events(&notifier), ["evt-6d2f1b21"]);

        // EventBridge envelopes are not order events.
        let event = self::event("orders-eventbridge-via-sqs.json");
        assert_eq!(invoke(&app, event.clone()).await, self::ids(&event));

        // Negative, fractional, empty ids: failed (to the DLQ after retries).
        let record = |id: &str, body: Value| {
            json!({"messageId": id, "body": body.to_string(), "eventSource": "aws:sqs",
                   "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders"})
        };
        let good = json!({"event_id": "evt-9", "order_id": "ord-9", "customer_id": "c",
                          "amount_cents": 1, "status": "PLACED"});
        let with = |field: &str, value: Value| {
            let mut b = good.clone();
            b["event_id"] = json!(format!("evt-bad-{field}"));
            b[field] = value;
            b
        };
        let batch = json!({"Records": [
            record("m-neg", with("amount_cents", json!(-5))),
            record("m-frac", with("amount_cents", json!(12.5))),
            record("m-no-order", with("order_id", json!(""))),
            record("m-no-customer", with("customer_id", json!(" "))),
            record("m-no-event", with("event_id", json!(""))),
            record("m-good", good.clone()),
        ]});
        assert_eq!(
            invoke(&app, batch).await,
            [
                "m-neg",
                "m-frac",
                "m-no-order",
                "m-no-customer",
                "m-no-event"
            ]
        );
        assert_eq!(confirmed_events(&notifier), ["evt-6d2f1b21", "evt-9"]);
    }

    #[tokio::test]
    async fn not_an_sqs_event_fails_the_invocation() {
        let Local { app, .. } = local();
        let eventbridge = json!({"id": "x", "detail-type": "OrderPlaced", "source": "shop.orders",
                                 "detail": {}});
        let ctx = shared::runtime::local_context(1, std::time::Duration::from_secs(30));
        let err = app
            .handle(LambdaEvent::new(eventbridge, ctx))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not an SQS event"), "{err}");
    }

    /// A notifier whose first `failures` sends fail (a throttled queue).
    #[derive(Debug)]
    struct Flaky {
        inner: MemoryNotifier,
        failures: usize,
        calls: AtomicUsize,
    }

    #[async_trait]
    impl Notifier for Flaky {
        async fn order_confirmed(&self, message: &OrderConfirmed) -> Result<String, HandlerError> {
            if self.calls.fetch_add(1, SeqCst) < self.failures {
                return Err(HandlerError::retryable("SendMessage throttled"));
            }
            self.inner.order_confirmed(message).await
        }
    }

    #[tokio::test]
    async fn a_failed_send_is_retried_and_confirms_once() {
        let orders = Arc::new(MemoryOrders::default());
        let notifier = Arc::new(Flaky {
            inner: MemoryNotifier::default(),
            failures: 1,
            calls: AtomicUsize::new(0),
        });
        let engine = Idempotency::new(MemoryStore::new(), App::config().disabled(false));
        let app = App::new(engine, orders.clone(), notifier.clone());
        let event = event("orders-standard.json");
        let ids = ids(&event);
        // The first send fails: that record (and its in-batch duplicate) is
        // redelivered; the others are done.
        let failed = invoke(&app, event.clone()).await;
        assert!(failed.contains(&ids[3]), "{failed:?}");
        assert!(failed.len() >= 2, "{failed:?}");
        // The redelivery sends what is missing and replays the rest.
        assert_eq!(invoke(&app, event.clone()).await, vec![ids[3].clone()]);
        assert_eq!(invoke(&app, event).await, vec![ids[3].clone()]);
        assert_eq!(
            confirmed_events(&notifier.inner),
            ["evt-5c1e0a11", "evt-5c1e0a12", "evt-5c1e0a13"]
        );
        assert_eq!(notifier.calls.load(SeqCst), 4);
    }
}
