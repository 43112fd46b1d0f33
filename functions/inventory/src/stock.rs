//! Stock levels: the business table (`STOCK_TABLE`, partition key `sku` (S),
//! attribute `stock` (N)).
//!
//! A reservation is not a request of its own: [`StockTable::reserve_write`]
//! stages it, and the engine commits it in the same `TransactWriteItems` as
//! the event's idempotency record. The function itself never reads the table
//! ([`StockTable::level`] is for tests and tooling).

use lambda_idempotency::{
    HandlerError, Item, MemoryStore, Table, Write, value::AttrValue, write::Cond,
};

/// The attribute holding the level.
pub const STOCK_ATTRIBUTE: &str = "stock";
/// The partition key attribute.
pub const KEY_ATTRIBUTE: &str = "sku";

/// The stock a local run starts with ([`StockTable::sample`]): enough for
/// `events/inventory-order-placed.json`, not for
/// `events/inventory-insufficient-stock.json`.
pub const SAMPLE_STOCK: [(&str, i64); 3] = [
    ("SKU-RED-MUG", 100),
    ("SKU-BLUE-PLATE", 40),
    ("SKU-GREEN-BOWL", 25),
];

/// The stock table's name in local runs.
pub const LOCAL_STOCK_TABLE: &str = "stock";

/// The key of `sku`'s item.
pub fn key(sku: &str) -> Item {
    Item::from([(KEY_ATTRIBUTE.to_owned(), AttrValue::s(sku))])
}

/// The stock table, in DynamoDB or in the engine's embedded memory store:
/// a thin domain wrapper over [`Table`].
#[derive(Debug, Clone)]
pub struct StockTable {
    table: Table,
}

/// The `stock` attribute of an item (`Ok(None)` when there is no item).
fn stock_of(sku: &str, item: Option<&Item>) -> Result<Option<i64>, HandlerError> {
    let Some(item) = item else {
        return Ok(None);
    };
    match item.get(STOCK_ATTRIBUTE) {
        Some(AttrValue::N(n)) => n.parse().map(Some).map_err(|_| {
            HandlerError::terminal(format!("stock of {sku} is not a whole number: {n}"))
        }),
        Some(other) => Err(HandlerError::terminal(format!(
            "stock of {sku} has the wrong type: {other:?}"
        ))),
        None => Err(HandlerError::terminal(format!(
            "the item of {sku} has no stock attribute"
        ))),
    }
}

impl StockTable {
    /// Stock in `table` (as [`lambda_idempotency::Backend`] wires it). In DynamoDB the
    /// engine's store must be a [`lambda_idempotency::DynamoDbStore`] in the same
    /// account and Region, so that one transaction spans both tables.
    pub fn from_table(table: Table) -> Self {
        Self { table }
    }

    /// Stock in the memory store's table `table`, seeded with `levels`. Pass
    /// the engine's own store, so that transactions span the records and the
    /// stock.
    pub fn memory<S: AsRef<str>>(
        store: MemoryStore,
        table: impl Into<String>,
        levels: impl IntoIterator<Item = (S, i64)>,
    ) -> Self {
        let table = table.into();
        for (sku, level) in levels {
            store.put_item(&table, &key(sku.as_ref()), level_item(level));
        }
        Self {
            table: Table::memory(store, table),
        }
    }

    /// Stock in `store`'s table [`LOCAL_STOCK_TABLE`], seeded with
    /// [`SAMPLE_STOCK`] (local runs).
    pub fn sample(store: MemoryStore) -> Self {
        Self::memory(store, LOCAL_STOCK_TABLE, SAMPLE_STOCK)
    }

    /// The table name.
    pub fn table(&self) -> &str {
        self.table.name()
    }

    /// The reservation of `quantity` units of `sku` for `order_id`, as a
    /// write to stage: `ADD stock -quantity` on the condition
    /// `attribute_exists(sku) AND stock >= quantity`, so it never creates an
    /// item nor takes more than there is. A failed condition is a terminal
    /// outcome whose message comes from the item as it stood (returned with
    /// the cancelled transaction, no extra read): "unknown SKU" when there is
    /// none, "insufficient stock … N available" otherwise.
    pub fn reserve_write(&self, sku: &str, quantity: u32, order_id: &str) -> Write {
        let quantity = i64::from(quantity);
        let (sku_text, order) = (sku.to_owned(), order_id.to_owned());
        Write::update(self.table.name(), key(sku))
            .add(STOCK_ATTRIBUTE, -quantity)
            .when(Cond::exists(KEY_ATTRIBUTE).and(Cond::ge(STOCK_ATTRIBUTE, quantity)))
            .or_reject_with(move |item| refusal(&sku_text, quantity, &order, item))
    }

    /// The stock level, if the SKU exists (a strongly consistent read).
    pub async fn level(&self, sku: &str) -> Result<Option<i64>, HandlerError> {
        stock_of(sku, self.table.get(&key(sku)).await?.as_ref())
    }
}

fn level_item(level: i64) -> Item {
    Item::from([(STOCK_ATTRIBUTE.to_owned(), AttrValue::n(level))])
}

/// Why a reservation was refused, from the stock item as it stood.
pub fn refusal(sku: &str, quantity: i64, order_id: &str, item: Option<&Item>) -> String {
    let Some(item) = item else {
        return format!("unknown SKU {sku}; order {order_id}");
    };
    match item.get(STOCK_ATTRIBUTE).and_then(AttrValue::as_n) {
        Some(available) => format!(
            "insufficient stock for {sku}: {quantity} requested, {available} available; \
             order {order_id}"
        ),
        None => format!("stock of {sku} is not a number; order {order_id}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_idempotency::{ErrorKind, write::Change, write::CmpOp, write::WriteOp};

    #[test]
    fn the_reservation_is_a_guarded_decrement_with_a_precise_rejection() {
        let table = StockTable::memory(MemoryStore::new(), "stock", [("A", 5)]);
        let w = table.reserve_write("A", 3, "ord-1");
        assert_eq!(w.table, "stock");
        assert_eq!(w.key, key("A"));
        assert_eq!(w.op, WriteOp::Update(vec![Change::Add("stock".into(), -3)]));
        assert_eq!(
            w.condition,
            Some(Cond::And(vec![
                Cond::Exists("sku".into()),
                Cond::Cmp("stock".into(), CmpOp::Ge, AttrValue::n(3)),
            ]))
        );
        let rejection = w.rejection.as_ref().unwrap();
        assert_eq!(rejection.message(None), "unknown SKU A; order ord-1");
        let short = Item::from([
            ("sku".to_owned(), AttrValue::s("A")),
            ("stock".to_owned(), AttrValue::n(2)),
        ]);
        assert_eq!(
            rejection.message(Some(&short)),
            "insufficient stock for A: 3 requested, 2 available; order ord-1"
        );
    }

    #[tokio::test]
    async fn memory_stock_lives_in_the_engine_store() {
        let store = MemoryStore::new();
        let table = StockTable::memory(store.clone(), "stock", [("A", 5)]);
        assert_eq!(table.level("A").await.unwrap(), Some(5));
        assert_eq!(table.level("B").await.unwrap(), None);
        // A write outside any transaction (as a single request would do).
        assert!(store.write(&table.reserve_write("A", 3, "o")).unwrap());
        assert!(!store.write(&table.reserve_write("A", 3, "o")).unwrap());
        assert!(!store.write(&table.reserve_write("B", 1, "o")).unwrap());
        assert_eq!(table.level("A").await.unwrap(), Some(2));
        assert_eq!(table.level("B").await.unwrap(), None, "never created");
        // Seeding again restocks.
        StockTable::memory(store, "stock", [("A", 9)]);
        assert_eq!(table.level("A").await.unwrap(), Some(9));
        let sample = StockTable::sample(MemoryStore::new());
        assert_eq!(sample.table(), LOCAL_STOCK_TABLE);
        assert_eq!(sample.level("SKU-RED-MUG").await.unwrap(), Some(100));
    }

    #[test]
    fn stock_attribute_parsing() {
        let item = |v: AttrValue| Item::from([("stock".to_owned(), v)]);
        assert_eq!(stock_of("A", None).unwrap(), None);
        assert_eq!(
            stock_of("A", Some(&item(AttrValue::n(7)))).unwrap(),
            Some(7)
        );
        for bad in [item(AttrValue::n("7.5")), item(AttrValue::s("7")), key("A")] {
            let err = stock_of("A", Some(&bad)).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Terminal, "{bad:?}");
            assert!(
                err.to_string().contains("stock of A") || err.to_string().contains("item of A")
            );
        }
    }
}
