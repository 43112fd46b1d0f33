//! The memory store's connect step: records and tables in one new
//! [`MemoryStore`] (a local run), or only the tables when the records live
//! in a store that cannot hold them.

use std::sync::Arc;

use super::MemoryStore;
use crate::store::TABLE_ENV;
use crate::store::connect::{Connected, TableEnv, Tables};
use crate::table::Table;

/// The records and `tables` in one new memory store, with a warning: a
/// local run.
pub(crate) fn connect<const N: usize>(tables: [TableEnv; N]) -> Connected<N> {
    tracing::warn!(
        tables = ?tables.iter().map(|t| t.var).collect::<Vec<_>>(),
        "{TABLE_ENV} not set (nor the tables' variables): idempotency records and \
         tables are kept in memory (local run)"
    );
    let tables = self::tables(tables);
    Connected {
        records: tables.writes.clone(),
        tables,
    }
}

/// `tables` in a new memory store, by their local names.
pub(crate) fn tables<const N: usize>(tables: [TableEnv; N]) -> Tables<N> {
    let store = MemoryStore::new();
    Tables {
        tables: tables.map(|t| Table::memory(store.clone(), t.local)),
        writes: Arc::new(store.clone()),
        local: Some(store),
    }
}
