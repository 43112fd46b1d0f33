//! The memory store's business tables: items read and written outside any
//! transaction (seeding, tools, tests, claim-then-complete's own writes), and
//! the [`TableStore`](crate::store::TableStore) a [`Table`](crate::Table) over them
//! uses. Staged writes commit with the records in `mod.rs`.

use async_trait::async_trait;

use super::{MemoryStore, invalid};
use crate::error::{HandlerError, StoreError};
use crate::table::TableStore;
use crate::write::{Item, Write, holds, key_text};

impl MemoryStore {
    /// Reads a business item.
    pub fn item(&self, table: &str, key: &Item) -> Option<Item> {
        self.lock()
            .tables
            .get(table)
            .and_then(|t| t.get(&key_text(key)))
            .cloned()
    }

    /// Writes a business item (seeding tables for local runs and tests).
    pub fn put_item(&self, table: &str, key: &Item, item: Item) {
        // Numbers as DynamoDB keeps them (`12.50` reads back as `12.5`).
        let mut item = crate::write::canonical_item(&item).unwrap_or(item);
        item.extend(crate::write::canonical_item(key).unwrap_or_else(|_| key.clone()));
        self.lock()
            .tables
            .entry(table.to_owned())
            .or_default()
            .insert(key_text(key), item);
    }

    /// Applies one write outside any transaction (with its condition), as a
    /// single DynamoDB request would: `Ok(false)` when the condition failed;
    /// [`StoreError::Invalid`] for a write DynamoDB refuses (an update
    /// without changes, a malformed number).
    pub fn write(&self, write: &Write) -> Result<bool, StoreError> {
        Ok(self.write_one(write)?.is_ok())
    }

    /// [`MemoryStore::write`], returning the item as it stands after the
    /// write (`Ok`), or as it stood when the condition failed (`Err`);
    /// `None`: no item.
    pub(crate) fn write_one(
        &self,
        write: &Write,
    ) -> Result<Result<Option<Item>, Option<Item>>, StoreError> {
        crate::write::check(std::slice::from_ref(write))
            .map_err(|reason| StoreError::Invalid { reason })?;
        let mut inner = self.lock();
        let table = inner.tables.entry(write.table.clone()).or_default();
        let key = key_text(&write.key);
        if let Some(cond) = &write.condition
            && !holds(cond, table.get(&key))
        {
            return Ok(Err(table.get(&key).cloned()));
        }
        let new = crate::write::apply(write, table.get(&key).cloned()).map_err(invalid)?;
        match &new {
            Some(item) => table.insert(key, item.clone()),
            None => table.remove(&key),
        };
        Ok(Ok(new))
    }
}

#[async_trait]
impl TableStore for MemoryStore {
    async fn get_item(&self, table: &str, key: &Item) -> Result<Option<Item>, HandlerError> {
        Ok(self.item(table, key))
    }

    async fn write_item(
        &self,
        write: &Write,
    ) -> Result<Result<Option<Item>, Option<Item>>, HandlerError> {
        Ok(self.write_one(write)?)
    }
}

#[cfg(test)]
mod tests {
    use crate::MemoryStore;
    use crate::value::AttrValue;
    use crate::write::{Item, Write};

    fn number(text: &str) -> Item {
        Item::from([("pk".to_owned(), AttrValue::N(text.to_owned()))])
    }

    /// `N "1"`, `N "1.0"` and `N "1e0"` are one item, as in DynamoDB.
    #[test]
    fn a_numeric_key_names_one_item_whatever_its_text() {
        let store = MemoryStore::new();
        for text in ["1", "1.0", "1e0"] {
            let credit = Write::update("accounts", number(text)).add("balance", 5);
            assert!(store.write(&credit).unwrap(), "{text}");
        }
        let item = store.item("accounts", &number("10E-1")).expect("one item");
        assert_eq!(item["balance"], AttrValue::N("15".to_owned()));
        assert_eq!(
            item["pk"],
            AttrValue::N("1".to_owned()),
            "kept as DynamoDB keeps it"
        );
        store.put_item("accounts", &number("-0"), Item::new());
        assert_eq!(
            store.item("accounts", &number("0")).unwrap()["pk"],
            AttrValue::N("0".to_owned())
        );
    }
}
