//! The orders table (`ORDERS_TABLE`, partition key `order_id`).

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use shared::{AttrValue, HandlerError, Item, Table};
use std::collections::HashMap;
use std::sync::Mutex;

use crate::OrderEvent;

/// Where orders live.
#[async_trait]
pub trait Orders: Send + Sync + std::fmt::Debug {
    /// Writes the whole order (`PutItem`): the last write wins, and writing
    /// the same event again leaves the same item, so it is naturally
    /// idempotent.
    async fn upsert(&self, order: &OrderEvent) -> Result<(), HandlerError>;

    /// The order, if it exists. For tests and tools: the function never
    /// reads the table (its role in `template.yaml` has no `GetItem` on it).
    async fn get(&self, order_id: &str) -> Result<Option<OrderEvent>, HandlerError>;
}

/// Orders in DynamoDB, one item per `order_id` with the attributes
/// `event_id`, `customer_id`, `amount_cents` (N) and `status`.
#[derive(Debug, Clone)]
pub struct DynamoDbOrders {
    table: Table,
}

impl DynamoDbOrders {
    /// Orders in `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            table: Table::dynamodb(client, table),
        }
    }
}

/// The key of `order_id`'s item.
fn key(order_id: &str) -> Item {
    Item::from([("order_id".to_owned(), AttrValue::s(order_id))])
}

/// The item of `order`.
fn to_item(order: &OrderEvent) -> Item {
    Item::from([
        ("order_id".to_owned(), AttrValue::s(&order.order_id)),
        ("event_id".to_owned(), AttrValue::s(&order.event_id)),
        ("customer_id".to_owned(), AttrValue::s(&order.customer_id)),
        ("amount_cents".to_owned(), AttrValue::n(order.amount_cents)),
        ("status".to_owned(), AttrValue::s(&order.status)),
    ])
}

/// The order of an item written by [`to_item`].
fn from_item(item: &Item) -> Result<OrderEvent, HandlerError> {
    let corrupt = |what: &str| HandlerError::terminal(format!("order item: {what}"));
    let s = |name: &str| match item.get(name) {
        Some(AttrValue::S(v)) => Ok(v.clone()),
        _ => Err(corrupt(&format!("{name} is missing or not a string"))),
    };
    let amount_cents = match item.get("amount_cents") {
        Some(AttrValue::N(n)) => n
            .parse()
            .map_err(|_| corrupt(&format!("amount_cents is not a whole number: {n}")))?,
        _ => return Err(corrupt("amount_cents is missing or not a number")),
    };
    Ok(OrderEvent {
        event_id: s("event_id")?,
        order_id: s("order_id")?,
        customer_id: s("customer_id")?,
        amount_cents,
        status: s("status")?,
    })
}

#[async_trait]
impl Orders for DynamoDbOrders {
    async fn upsert(&self, order: &OrderEvent) -> Result<(), HandlerError> {
        self.table.put(&key(&order.order_id), to_item(order)).await
    }

    async fn get(&self, order_id: &str) -> Result<Option<OrderEvent>, HandlerError> {
        self.table
            .get(&key(order_id))
            .await?
            .as_ref()
            .map(from_item)
            .transpose()
    }
}

/// Orders in memory (local runs, tests).
#[derive(Debug, Default)]
pub struct MemoryOrders(Mutex<HashMap<String, OrderEvent>>);

impl MemoryOrders {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, OrderEvent>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many orders are stored.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no order is stored.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

#[async_trait]
impl Orders for MemoryOrders {
    async fn upsert(&self, order: &OrderEvent) -> Result<(), HandlerError> {
        self.lock().insert(order.order_id.clone(), order.clone());
        Ok(())
    }

    async fn get(&self, order_id: &str) -> Result<Option<OrderEvent>, HandlerError> {
        Ok(self.lock().get(order_id).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_round_trip() {
        let order = OrderEvent {
            event_id: "evt-1".into(),
            order_id: "ord-1".into(),
            customer_id: "cust-1".into(),
            amount_cents: 4999,
            status: "PLACED".into(),
        };
        let item = to_item(&order);
        assert_eq!(item["amount_cents"], AttrValue::n(4999));
        assert_eq!(from_item(&item).unwrap(), order);
        let mut broken = item;
        broken.insert("amount_cents".into(), AttrValue::n("12.5"));
        let err = from_item(&broken).unwrap_err();
        assert!(err.to_string().contains("amount_cents"), "{err}");
    }
}
