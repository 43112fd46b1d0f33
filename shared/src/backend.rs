//! One call wires a function: its engine and its business tables, from the
//! environment ([`Backend::from_env`]). This module names no store: it
//! reads what the environment asks for, lets the chosen store connect
//! itself (`StoreChoice::connect`, each store folder's `connect.rs`) and
//! builds the engine over it.
//!
//! The rule every function follows, in one place:
//! - the idempotency records live where [`StoreChoice::from_env`] says
//!   (`IDEMPOTENCY_STORE`, `IDEMPOTENCY_TABLE`), and the store says where
//!   the business tables live;
//! - the business tables are named by the function's own variables
//!   ([`TableEnv`]). A store that keeps them with the records (DynamoDB)
//!   needs every variable set, or none of them and no `IDEMPOTENCY_TABLE`
//!   either (a local run: one memory store holds the records and the
//!   tables, with a warning). One without the others is an error naming
//!   what is missing: staged writes commit in one transaction with the
//!   record, so the tables and the records must live in the same store;
//! - records in a store that cannot join that transaction (Valkey) are
//!   refused unless the function accepts them
//!   ([`Config::store_without_transactions`]); its tables then live in
//!   DynamoDB (every variable set) or in memory (none set);
//! - a store checks itself at start (DynamoDB: one `DescribeTable`,
//!   [`DynamoDbStore::checked`](crate::DynamoDbStore::checked)).

use crate::CommitMode;
use crate::config::{Config, LifetimeError};
use crate::engine::{ConfigError, Idempotency, ModeError};
use crate::store::connect::{TableNames, TableRule};
pub use crate::store::{ConnectError, TableEnv};
use crate::store::{MemoryStore, StoreChoice, TABLE_ENV};
use crate::table::Table;

/// A function's engine and its business tables, in the order asked for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Backend<const N: usize> {
    /// The engine, over the chosen store.
    pub engine: Idempotency,
    /// The business tables, in the order of the [`TableEnv`]s given.
    pub tables: [Table; N],
    /// The memory store holding the tables in a local run (to seed them).
    pub local: Option<MemoryStore>,
}

/// Why a function could not be wired.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// `IDEMPOTENCY_STORE` / `IDEMPOTENCY_TABLE` name no usable store, or
    /// a store without transactions for a function that did not accept one.
    #[error("{0}")]
    Choice(String),
    /// Some of the variables are set and some are not.
    #[error(
        "set {} (a local run): {} not set; the staged writes commit in one transaction with the \
         idempotency record, so the tables and the records live in the same store",
        all_or_none(.wanted), list(.missing)
    )]
    Partial {
        /// Every variable the function reads.
        wanted: Vec<&'static str>,
        /// Those not set.
        missing: Vec<&'static str>,
    },
    /// The chosen store could not connect (set up, reach, check).
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The store cannot keep the commit mode.
    #[error("the commit mode does not fit the store")]
    Mode(#[source] ModeError),
    /// The record lifetime is shorter than the lease.
    #[error("the record lifetime does not fit the lease")]
    Lifetime(#[source] LifetimeError),
}

fn all_or_none(vars: &[&str]) -> String {
    match vars {
        [a, b] => format!("both {a} and {b}, or neither"),
        _ => format!("{}, or none of them", list(vars)),
    }
}

fn list(vars: &[&str]) -> String {
    match vars {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The value of `var`, when set and not blank.
fn set(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// What the environment says, read once: the store choice and each table
/// variable's value.
#[derive(Debug)]
struct Reading<const N: usize> {
    choice: StoreChoice,
    names: [Option<String>; N],
}

/// The decision [`Backend::from_env`] acts on, separate from the I/O so that
/// every rule has a unit test: the store, and the tables as it keeps them.
#[derive(Debug, PartialEq, Eq)]
struct Plan<const N: usize> {
    choice: StoreChoice,
    tables: TableNames<N>,
}

impl<const N: usize> Reading<N> {
    fn from_env(
        tables: &[TableEnv; N],
        without_transactions: bool,
        function: &str,
    ) -> Result<Self, BackendError> {
        let choice = if without_transactions {
            StoreChoice::from_env()
        } else {
            StoreChoice::transactional_from_env(function)
        }
        .map_err(BackendError::Choice)?;
        Ok(Self {
            choice,
            names: tables.map(|t| set(t.var)),
        })
    }

    fn plan(self, tables: &[TableEnv; N]) -> Result<Plan<N>, BackendError> {
        let missing: Vec<&'static str> = tables
            .iter()
            .zip(&self.names)
            .filter(|(_, n)| n.is_none())
            .map(|(t, _)| t.var)
            .collect();
        let partial = |records_table: bool, missing: Vec<&'static str>| {
            let head = records_table.then_some(TABLE_ENV);
            BackendError::Partial {
                wanted: head
                    .into_iter()
                    .chain(tables.iter().map(|t| t.var))
                    .collect(),
                missing,
            }
        };
        let named = TableNames::Named(self.names.map(Option::unwrap_or_default));
        let local = TableNames::Local(*tables);
        let tables = match self.choice.table_rule() {
            TableRule::WithRecords if !missing.is_empty() => return Err(partial(true, missing)),
            TableRule::WithRecords => named,
            TableRule::Local if missing.len() == N => local,
            // A table variable without the records table: the
            // half-configured deployment this refuses.
            TableRule::Local => {
                return Err(partial(
                    true,
                    std::iter::once(TABLE_ENV).chain(missing).collect(),
                ));
            }
            TableRule::Apart if missing.len() == N => local,
            TableRule::Apart if missing.is_empty() => named,
            TableRule::Apart => return Err(partial(false, missing)),
        };
        Ok(Plan {
            choice: self.choice,
            tables,
        })
    }
}

/// What the environment says a function's backend is, decided before any
/// connection ([`Wiring::from_env`]), then connected ([`Wiring::connect`]):
/// for a function with a rule of its own between the two (e.g. a setting
/// required with DynamoDB tables). [`Backend::from_env`] does both.
#[derive(Debug)]
pub struct Wiring<const N: usize> {
    plan: Plan<N>,
    /// The mode of records in a store without transactions, when the
    /// function accepts one.
    without_transactions: Option<CommitMode>,
}

impl<const N: usize> Wiring<N> {
    /// Reads the environment for the function `function` (named in the
    /// refusal of a store without transactions) and its `tables`; refuses a
    /// partial configuration or a store without transactions.
    pub fn from_env(function: &str, tables: [TableEnv; N]) -> Result<Self, BackendError> {
        Self::read(function, tables, None)
    }

    /// [`Wiring::from_env`], accepting a store without transactions when
    /// `without_transactions` gives the mode to commit in there.
    fn read(
        function: &str,
        tables: [TableEnv; N],
        without_transactions: Option<CommitMode>,
    ) -> Result<Self, BackendError> {
        let plan =
            Reading::from_env(&tables, without_transactions.is_some(), function)?.plan(&tables)?;
        Ok(Self {
            plan,
            without_transactions,
        })
    }

    /// Whether the tables will live in memory (a local run).
    pub fn is_local(&self) -> bool {
        matches!(self.plan.tables, TableNames::Local(_))
    }

    /// Connects: the chosen store connects itself and the tables (it checks
    /// itself first: DynamoDB, one `DescribeTable`), then the engine with
    /// `config` over it.
    pub async fn connect(self, config: Config) -> Result<Backend<N>, BackendError> {
        let Self {
            plan: Plan { choice, tables },
            without_transactions,
        } = self;
        let config = match (choice.table_rule(), without_transactions) {
            (TableRule::Apart, Some(mode)) => config.commit_mode(mode),
            _ => config,
        };
        let connected = choice.connect(tables).await?;
        let engine = Idempotency::try_shared(connected.records, config).map_err(|e| match e {
            ConfigError::Mode(e) => BackendError::Mode(e),
            ConfigError::Lifetime(e) => BackendError::Lifetime(e),
        })?;
        Ok(Backend {
            engine,
            tables: connected.tables.tables,
            local: connected.tables.local,
        })
    }
}

impl<const N: usize> Backend<N> {
    /// The engine (with `config`) and the tables named by `tables`, from the
    /// environment, by the rules of this module: [`Wiring::from_env`] (named
    /// by the config's prefix; a store without transactions accepted when
    /// [`Config::store_without_transactions`] says so), then
    /// [`Wiring::connect`].
    pub async fn from_env(config: Config, tables: [TableEnv; N]) -> Result<Self, BackendError> {
        Wiring::read(&config.prefix, tables, config.store_without_transactions)?
            .connect(config)
            .await
    }

    /// The engine and the tables.
    pub fn into_parts(self) -> (Idempotency, [Table; N]) {
        (self.engine, self.tables)
    }

    /// The memory store holding the tables, in a local run (to seed them).
    pub fn local_store(&self) -> Option<&MemoryStore> {
        self.local.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TableConfig;

    const ORDERS: TableEnv = TableEnv::new("ORDERS_TABLE", "orders");
    const AUDIT: TableEnv = TableEnv::new("AUDIT_TABLE", "audit");

    fn reading<const N: usize>(choice: StoreChoice, names: [Option<&str>; N]) -> Reading<N> {
        Reading {
            choice,
            names: names.map(|n| n.map(str::to_owned)),
        }
    }

    fn dynamodb() -> StoreChoice {
        StoreChoice::DynamoDb(TableConfig::new("records"))
    }

    #[test]
    fn every_table_with_the_records_table_is_dynamodb() {
        let plan = reading(dynamodb(), [Some("o"), Some("a")])
            .plan(&[ORDERS, AUDIT])
            .unwrap();
        assert_eq!(
            plan,
            Plan {
                choice: dynamodb(),
                tables: TableNames::Named(["o".into(), "a".into()])
            }
        );
        // A function with no business table needs only the records table.
        let plan = reading(dynamodb(), []).plan(&[]).unwrap();
        assert_eq!(
            plan,
            Plan {
                choice: dynamodb(),
                tables: TableNames::Named([])
            }
        );
    }

    #[test]
    fn nothing_set_is_a_local_run() {
        let plan = reading(StoreChoice::Memory, [None, None])
            .plan(&[ORDERS, AUDIT])
            .unwrap();
        assert_eq!(
            plan,
            Plan {
                choice: StoreChoice::Memory,
                tables: TableNames::Local([ORDERS, AUDIT])
            }
        );
    }

    #[test]
    fn one_without_the_others_is_refused_naming_what_is_missing() {
        let err = reading(dynamodb(), [Some("o"), None])
            .plan(&[ORDERS, AUDIT])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "set IDEMPOTENCY_TABLE, ORDERS_TABLE and AUDIT_TABLE, or none of them (a local run): \
             AUDIT_TABLE not set; the staged writes commit in one transaction with the \
             idempotency record, so the tables and the records live in the same store"
        );
        let err = reading(dynamodb(), [None]).plan(&[ORDERS]).unwrap_err();
        assert!(
            matches!(&err, BackendError::Partial { missing, .. } if missing == &["ORDERS_TABLE"])
        );
        // A table without the records table.
        let err = reading(StoreChoice::Memory, [None, Some("a")])
            .plan(&[ORDERS, AUDIT])
            .unwrap_err();
        assert!(
            matches!(&err, BackendError::Partial { missing, .. }
                if missing == &["IDEMPOTENCY_TABLE", "ORDERS_TABLE"]),
            "{err}"
        );
    }

    #[test]
    fn valkey_records_take_every_table_or_none() {
        assert_eq!(
            reading(StoreChoice::Valkey, [Some("o")])
                .plan(&[ORDERS])
                .unwrap(),
            Plan {
                choice: StoreChoice::Valkey,
                tables: TableNames::Named(["o".into()])
            }
        );
        assert_eq!(
            reading(StoreChoice::Valkey, [None])
                .plan(&[ORDERS])
                .unwrap(),
            Plan {
                choice: StoreChoice::Valkey,
                tables: TableNames::Local([ORDERS])
            }
        );
        let err = reading(StoreChoice::Valkey, [Some("o"), None])
            .plan(&[ORDERS, AUDIT])
            .unwrap_err();
        assert!(
            matches!(&err, BackendError::Partial { missing, .. } if missing == &["AUDIT_TABLE"])
        );
    }

    #[tokio::test]
    async fn a_local_run_connects_one_memory_store_for_records_and_tables() {
        let wiring = Wiring {
            plan: reading(StoreChoice::Memory, [None, None])
                .plan(&[ORDERS, AUDIT])
                .unwrap(),
            without_transactions: None,
        };
        assert!(wiring.is_local());
        let backend = wiring.connect(Config::with_prefix("p")).await.unwrap();
        let store = backend.local_store().cloned().expect("a local run's store");
        let names: Vec<&str> = backend.tables.iter().map(Table::name).collect();
        assert_eq!(names, ["orders", "audit"]);
        let key = crate::write::Item::from([("pk".to_owned(), crate::value::AttrValue::s("a"))]);
        backend.tables[1]
            .put(&key, crate::write::Item::new())
            .await
            .unwrap();
        assert!(store.item("audit", &key).is_some(), "the tables live in it");
        let record = crate::store::Record {
            id: "p#1".into(),
            status: crate::store::Status::InProgress,
            expiration: u64::MAX / 1000,
            in_progress_expiration: None,
            data: None,
            error: None,
            validation: None,
            owner: Some("o".into()),
            outbox: None,
        };
        backend.engine.store().claim(&record, 0).await.unwrap();
        assert_eq!(store.len(), 1, "and so do the records");
    }

    #[test]
    fn lists_read_as_prose() {
        assert_eq!(list(&["A"]), "A");
        assert_eq!(list(&["A", "B"]), "A and B");
        assert_eq!(list(&["A", "B", "C"]), "A, B and C");
        assert_eq!(all_or_none(&["A", "B"]), "both A and B, or neither");
        assert_eq!(all_or_none(&["A"]), "A, or none of them");
    }
}
