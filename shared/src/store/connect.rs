//! What a store's connect step takes and gives, in no store's terms: each
//! store folder has its `connect.rs` (the memory store, DynamoDB, Valkey),
//! and [`StoreChoice::connect`](super::StoreChoice) picks one. The function
//! side (`backend.rs`) reads the environment and builds the engine over
//! what the step gives.

use std::sync::Arc;

use super::{MemoryStore, Store};
use crate::error::BoxError;
use crate::table::Table;

/// A business table a function names by an environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableEnv {
    /// The variable holding the DynamoDB table name, e.g. `ORDERS_TABLE`.
    pub var: &'static str,
    /// The table's name in the memory store of a local run.
    pub local: &'static str,
}

impl TableEnv {
    /// The table named by `var`, called `local` in a local run.
    pub const fn new(var: &'static str, local: &'static str) -> Self {
        Self { var, local }
    }
}

/// The business tables a function asks for, as its environment names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TableNames<const N: usize> {
    /// Every table variable set: the tables' names.
    Named([String; N]),
    /// None set (a local run): the tables, by their local names.
    Local([TableEnv; N]),
}

/// Where a store keeps a function's business tables: what the environment
/// must name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TableRule {
    /// With the records, in one transaction: every table variable is set
    /// along with the records' table.
    WithRecords,
    /// With the records, in memory (a local run): no table variable is set.
    Local,
    /// Apart from the records, which cannot join the tables' transaction:
    /// every table variable set (the tables in DynamoDB) or none (in
    /// memory). The engine commits in the mode the function accepts for it.
    Apart,
}

/// The business tables, connected.
#[derive(Debug)]
pub(crate) struct Tables<const N: usize> {
    /// One per table asked for, in order.
    pub(crate) tables: [Table; N],
    /// The store the tables' writes commit through on their own.
    pub(crate) writes: Arc<dyn Store>,
    /// The memory store holding the tables in a local run (to seed them).
    pub(crate) local: Option<MemoryStore>,
}

/// What a store's connect step gives: the records' store and the tables.
#[derive(Debug)]
pub(crate) struct Connected<const N: usize> {
    /// Where the records live.
    pub(crate) records: Arc<dyn Store>,
    /// The business tables.
    pub(crate) tables: Tables<N>,
}

/// Why a store could not connect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The store could not be set up, reached or checked.
    #[error("{what}")]
    Store {
        /// What failed, in the store's words.
        what: &'static str,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// This build has no such store (its cargo feature is off).
    #[error("{0}")]
    NotBuilt(String),
}

impl ConnectError {
    /// A [`ConnectError::Store`] saying `what` failed, for `map_err`.
    #[cfg_attr(
        not(any(feature = "dynamodb", feature = "valkey")),
        allow(dead_code, reason = "the DynamoDB and Valkey steps use it")
    )]
    pub(crate) fn store<E>(what: &'static str) -> impl FnOnce(E) -> Self
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        move |e| Self::Store {
            what,
            source: Box::new(e),
        }
    }
}
