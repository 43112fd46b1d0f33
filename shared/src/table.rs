//! A business table, in any store that implements [`TableStore`] (DynamoDB,
//! the [`MemoryStore`]): what a function reads and writes outside its staged
//! writes (seeding, tools, tests, or an effect applied as its own request in
//! claim-then-complete mode).

use async_trait::async_trait;
use std::sync::Arc;

use crate::error::HandlerError;
use crate::store::MemoryStore;
use crate::write::{Item, Write};

/// Where business tables live: what a store implements for [`Table`] to
/// read and write its items outside the records' transactions. The
/// [`MemoryStore`] implements it, and so does the DynamoDB client (feature
/// `dynamodb`): a new store plugs its tables in here.
#[async_trait]
pub trait TableStore: Send + Sync + std::fmt::Debug {
    /// The item at `key` in `table`, if any (a strongly consistent read).
    async fn get_item(&self, table: &str, key: &Item) -> Result<Option<Item>, HandlerError>;

    /// Applies `write` as a request of its own, with its condition: the
    /// item as it stands afterwards (`Ok`, `None` when deleted or absent),
    /// or as it stood when the condition failed (`Err`).
    async fn write_item(
        &self,
        write: &Write,
    ) -> Result<Result<Option<Item>, Option<Item>>, HandlerError>;
}

/// One business table. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Table {
    name: String,
    store: Arc<dyn TableStore>,
}

impl Table {
    /// The table `name` in `store`. For staged writes to commit with the
    /// idempotency records, `store` is where the engine's store keeps them
    /// (the same [`MemoryStore`], or DynamoDB in the same account and
    /// Region).
    pub fn new(store: impl TableStore + 'static, name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            store: Arc::new(store),
        }
    }

    /// The table `name` inside `store`. Pass the engine's own store, so that
    /// staged writes commit atomically with the records.
    pub fn memory(store: MemoryStore, name: impl Into<String>) -> Self {
        Self::new(store, name)
    }

    /// The table `name` in the same place (client or store) as this one.
    pub fn sibling(&self, name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            store: self.store.clone(),
        }
    }

    /// The table name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The item at `key`, if any (a strongly consistent read).
    pub async fn get(&self, key: &Item) -> Result<Option<Item>, HandlerError> {
        self.store.get_item(&self.name, key).await
    }

    /// Writes `item` at `key` (replacing any item there; the key's
    /// attributes are added to the item).
    pub async fn put(&self, key: &Item, item: Item) -> Result<(), HandlerError> {
        self.write(&Write::put(&self.name, key.clone(), item))
            .await
            .map(drop)
    }

    /// Applies `write` (on this table) as a request of its own, outside any
    /// transaction, and returns the item as it stands afterwards (`None`
    /// when deleted or absent). A failed condition is the write's rejection
    /// (a terminal error, described from the item as it stood) or, without
    /// one, a retryable error. Not idempotent by itself: the engine makes it
    /// so.
    pub async fn write(&self, write: &Write) -> Result<Option<Item>, HandlerError> {
        debug_assert_eq!(write.table, self.name, "a write on another table");
        self.store
            .write_item(write)
            .await?
            .map_err(|old| match &write.rejection {
                Some(rejection) => HandlerError::terminal(rejection.message(old.as_ref())),
                None => HandlerError::retryable(format!(
                    "the condition of a write on table {} failed",
                    write.table
                )),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::value::AttrValue;
    use crate::write::Cond;

    fn key(pk: &str) -> Item {
        Item::from([("pk".to_owned(), AttrValue::s(pk))])
    }

    #[tokio::test]
    async fn memory_tables_read_and_write_in_the_store() {
        let store = MemoryStore::new();
        let t = Table::memory(store.clone(), "t");
        t.put(&key("a"), Item::from([("n".to_owned(), AttrValue::n(1))]))
            .await
            .unwrap();
        assert_eq!(store.item("t", &key("a")).unwrap()["n"], AttrValue::n(1));
        let add = Write::update("t", key("a")).add("n", i64::MAX);
        let after = t.write(&add).await.unwrap().unwrap();
        assert_eq!(after["n"], AttrValue::n("9223372036854775808"));
        let guarded =
            Write::delete("t", key("a")).when(Cond::ge("n", 0).and(Cond::not_exists("pk")));
        let err = t.write(&guarded.clone()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Retryable);
        let err = t
            .write(&guarded.or_reject_with(|i| format!("still {}", i.is_some())))
            .await
            .unwrap_err();
        assert_eq!(
            (err.kind(), err.to_string()),
            (ErrorKind::Terminal, "still true".into())
        );
        let sibling = t.sibling("u");
        assert_eq!(sibling.name(), "u");
        assert_eq!(sibling.get(&key("a")).await.unwrap(), None);
        let empty = Write::update("t", key("a"));
        assert!(t.write(&empty).await.is_err(), "an update without changes");
    }
}
