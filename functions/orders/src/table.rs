//! The orders table (`ORDERS_TABLE`, partition key `order_id`): one item per
//! order with the attributes `event_id`, `customer_id`, `amount_cents` (N)
//! and `status`, written by a staged [`Write::put`] that commits with the
//! idempotency record.

use lambda_idempotency::{HandlerError, Item, Table, Write, value::AttrValue};

use crate::OrderEvent;

/// The key of `order_id`'s item.
pub fn key(order_id: &str) -> Item {
    Item::from([("order_id".to_owned(), AttrValue::s(order_id))])
}

/// The item of `order`.
pub fn to_item(order: &OrderEvent) -> Item {
    Item::from([
        ("order_id".to_owned(), AttrValue::s(&order.order_id)),
        ("event_id".to_owned(), AttrValue::s(&order.event_id)),
        ("customer_id".to_owned(), AttrValue::s(&order.customer_id)),
        ("amount_cents".to_owned(), AttrValue::n(order.amount_cents)),
        ("status".to_owned(), AttrValue::s(&order.status)),
    ])
}

/// The write of the whole order (a `Put`): the last write wins, and writing
/// the same event again leaves the same item.
pub fn put(orders: &Table, order: &OrderEvent) -> Write {
    Write::put(orders.name(), key(&order.order_id), to_item(order))
}

/// The order of an item written by [`to_item`].
pub fn from_item(item: &Item) -> Result<OrderEvent, HandlerError> {
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

/// The order, if it exists. For tests and tools: the function never reads
/// the table (its role in `template.yaml` has no `GetItem` on it).
pub async fn get(orders: &Table, order_id: &str) -> Result<Option<OrderEvent>, HandlerError> {
    orders
        .get(&key(order_id))
        .await?
        .as_ref()
        .map(from_item)
        .transpose()
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
