//! A business table, in any store that implements [`TableStore`] (DynamoDB,
//! the [`MemoryStore`](crate::MemoryStore)): what a function reads and writes outside its staged
//! writes (seeding, tools, tests, or an effect applied as its own request in
//! claim-then-complete mode).

use async_trait::async_trait;
use std::sync::Arc;

use crate::error::HandlerError;
use crate::write::{Item, Write};

/// Where business tables live: what a store implements for [`Table`] to
/// read and write its items outside the records' transactions. The
/// [`MemoryStore`](crate::MemoryStore) implements it (its `Table::memory`
/// builds one there), and so does the DynamoDB client (feature
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
    /// (the same [`MemoryStore`](crate::MemoryStore), or DynamoDB in the same account and
    /// Region).
    pub fn new(store: impl TableStore + 'static, name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            store: Arc::new(store),
        }
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
