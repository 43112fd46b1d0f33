//! One call wires a function: its engine and its business tables, from the
//! environment ([`Backend::from_env`]).
//!
//! The rule every function follows, in one place:
//! - the idempotency records live where [`StoreChoice::from_env`] says
//!   (`IDEMPOTENCY_STORE`, `IDEMPOTENCY_TABLE`);
//! - the business tables are named by the function's own variables
//!   ([`TableEnv`]). With DynamoDB records, they live in DynamoDB: every
//!   variable set, or none of them and no `IDEMPOTENCY_TABLE` either (a local
//!   run: one [`MemoryStore`] holds the records and the tables, with a
//!   warning). One without the others is an error naming what is missing:
//!   staged writes commit in one transaction with the record, so the tables
//!   and the records must live in the same store;
//! - Valkey records are refused unless the function opts in with the mode
//!   its writes commit in ([`Backend::from_env_or_valkey`]); its tables then
//!   live in DynamoDB (every variable set) or in memory (none set);
//! - a DynamoDB idempotency table passes its check at start (one
//!   `DescribeTable`: [`DynamoDbStore::checked`](crate::DynamoDbStore::checked)).

use crate::CommitMode;
use crate::config::Config;
use crate::engine::{Idempotency, ModeError};
use crate::store::{MemoryStore, StoreChoice};
use crate::store::{TABLE_ENV, TableConfig};
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

/// Where a [`Backend`] keeps the records and the tables.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Place {
    /// Records and tables in DynamoDB.
    DynamoDb,
    /// Records and tables in this memory store (a local run).
    Memory(MemoryStore),
    /// Records in Valkey; tables in DynamoDB, or in this memory store when
    /// no table variable is set.
    Valkey(Option<MemoryStore>),
}

/// A function's engine and its business tables, in the order asked for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Backend<const N: usize> {
    /// The engine, over the chosen store.
    pub engine: Idempotency,
    /// The business tables, in the order of the [`TableEnv`]s given.
    pub tables: [Table; N],
    /// Where records and tables live (a local run seeds its memory tables
    /// through [`Place::Memory`]).
    pub place: Place,
}

/// Why a function could not be wired.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// `IDEMPOTENCY_STORE` / `IDEMPOTENCY_TABLE` name no usable store, or
    /// name Valkey for a function that did not opt in.
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
    /// The idempotency table failed its check at start.
    #[cfg(feature = "dynamodb")]
    #[error("the idempotency table failed its check at start")]
    TableCheck(#[source] crate::TableCheckError),
    /// The Valkey store could not be configured or reached.
    #[cfg(feature = "valkey")]
    #[error("the Valkey store could not be set up")]
    Valkey(#[source] crate::valkey::ValkeyConfigError),
    /// The store cannot keep the commit mode.
    #[error("the commit mode does not fit the store")]
    Mode(#[source] ModeError),
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
/// every rule has a unit test.
#[derive(Debug, PartialEq, Eq)]
#[allow(
    clippy::large_enum_variant,
    reason = "made once per execution environment"
)]
enum Plan<const N: usize> {
    Memory,
    DynamoDb(TableConfig, [String; N]),
    Valkey(Option<[String; N]>),
}

impl<const N: usize> Reading<N> {
    fn from_env(
        tables: &[TableEnv; N],
        valkey: bool,
        function: &str,
    ) -> Result<Self, BackendError> {
        let choice = if valkey {
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
        let names = self.names.map(Option::unwrap_or_default);
        match self.choice {
            StoreChoice::DynamoDb(_) if !missing.is_empty() => Err(partial(true, missing)),
            StoreChoice::DynamoDb(table) => Ok(Plan::DynamoDb(table, names)),
            StoreChoice::Memory if missing.len() == N => Ok(Plan::Memory),
            // A table variable without the records table: the
            // half-configured deployment this refuses.
            StoreChoice::Memory => Err(partial(
                true,
                std::iter::once(TABLE_ENV).chain(missing).collect(),
            )),
            StoreChoice::Valkey if missing.len() == N => Ok(Plan::Valkey(None)),
            StoreChoice::Valkey if missing.is_empty() => Ok(Plan::Valkey(Some(names))),
            StoreChoice::Valkey => Err(partial(false, missing)),
        }
    }
}

/// What the environment says a function's backend is, decided before any
/// connection ([`Wiring::from_env`]), then connected ([`Wiring::connect`]):
/// for a function with a rule of its own between the two (e.g. a setting
/// required with DynamoDB tables). [`Backend::from_env`] does both.
#[derive(Debug)]
pub struct Wiring<const N: usize> {
    plan: Plan<N>,
    tables: [TableEnv; N],
    /// The mode of Valkey records, when the function accepts them.
    #[cfg_attr(
        not(feature = "valkey"),
        allow(dead_code, reason = "read by the Valkey arm")
    )]
    valkey_mode: Option<CommitMode>,
}

impl<const N: usize> Wiring<N> {
    /// Reads the environment for the function `function` (named in the
    /// refusal of Valkey records) and its `tables`; refuses a partial
    /// configuration or Valkey records.
    pub fn from_env(function: &str, tables: [TableEnv; N]) -> Result<Self, BackendError> {
        let plan = Reading::from_env(&tables, false, function)?.plan(&tables)?;
        Ok(Self {
            plan,
            tables,
            valkey_mode: None,
        })
    }

    /// [`Wiring::from_env`], accepting Valkey records: then the engine
    /// commits in `valkey_mode` (Valkey cannot join a DynamoDB transaction,
    /// so a mode whose writes commit on their own, e.g.
    /// [`CommitMode::ClaimThenComplete`]).
    pub fn from_env_or_valkey(
        tables: [TableEnv; N],
        valkey_mode: CommitMode,
    ) -> Result<Self, BackendError> {
        let plan = Reading::from_env(&tables, true, "")?.plan(&tables)?;
        Ok(Self {
            plan,
            tables,
            valkey_mode: Some(valkey_mode),
        })
    }

    /// Whether the tables will live in memory (a local run).
    pub fn is_local(&self) -> bool {
        matches!(self.plan, Plan::Memory | Plan::Valkey(None))
    }

    /// Connects: the engine with `config` over the chosen store (a DynamoDB
    /// idempotency table is checked first: one `DescribeTable`), and the
    /// tables.
    pub async fn connect(self, config: Config) -> Result<Backend<N>, BackendError> {
        #[cfg(feature = "valkey")]
        let valkey_mode = self.valkey_mode.unwrap_or_default();
        let Self { plan, tables, .. } = self;
        match plan {
            Plan::Memory => {
                tracing::warn!(
                    tables = ?tables.iter().map(|t| t.var).collect::<Vec<_>>(),
                    "{TABLE_ENV} not set (nor the tables' variables): idempotency records and \
                     tables are kept in memory (local run)"
                );
                let store = MemoryStore::new();
                let engine =
                    Idempotency::try_new(store.clone(), config).map_err(BackendError::Mode)?;
                Ok(Backend {
                    engine,
                    tables: tables.map(|t| Table::memory(store.clone(), t.local)),
                    place: Place::Memory(store),
                })
            }
            #[cfg(feature = "dynamodb")]
            Plan::DynamoDb(table, names) => {
                let client = aws_sdk_dynamodb::Client::new(&crate::aws::aws_sdk_config().await);
                // One DescribeTable at start: an eventually consistent
                // global table is refused (README "Multi-Region").
                let store = crate::DynamoDbStore::checked(client.clone(), table)
                    .await
                    .map_err(BackendError::TableCheck)?;
                let engine = Idempotency::try_new(store, config).map_err(BackendError::Mode)?;
                Ok(Backend {
                    engine,
                    tables: names.map(|name| Table::dynamodb(client.clone(), name)),
                    place: Place::DynamoDb,
                })
            }
            #[cfg(not(feature = "dynamodb"))]
            Plan::DynamoDb(..) => Err(BackendError::Choice(format!(
                "{TABLE_ENV} is set: this build has no DynamoDB store (cargo feature `dynamodb` \
                 of shared)"
            ))),
            #[cfg(feature = "valkey")]
            Plan::Valkey(names) => {
                let mode = valkey_mode;
                let valkey = crate::ValkeyStore::from_env()
                    .await
                    .map_err(BackendError::Valkey)?;
                let config = config.commit_mode(mode);
                match names {
                    #[cfg(feature = "dynamodb")]
                    Some(names) => {
                        let client =
                            aws_sdk_dynamodb::Client::new(&crate::aws::aws_sdk_config().await);
                        // The tables' writes commit on their own through this
                        // store; it never writes a record there.
                        let writes = crate::DynamoDbStore::new(
                            client.clone(),
                            TableConfig::new(names.first().cloned().unwrap_or_default()),
                        );
                        let engine = Idempotency::try_new(valkey.with_tables(writes), config)
                            .map_err(BackendError::Mode)?;
                        Ok(Backend {
                            engine,
                            tables: names.map(|name| Table::dynamodb(client.clone(), name)),
                            place: Place::Valkey(None),
                        })
                    }
                    #[cfg(not(feature = "dynamodb"))]
                    Some(_) => Err(BackendError::Choice(
                        "the tables' variables are set: this build has no DynamoDB store (cargo \
                         feature `dynamodb` of shared)"
                            .into(),
                    )),
                    None => {
                        if N > 0 {
                            tracing::warn!(
                            tables = ?tables.iter().map(|t| t.var).collect::<Vec<_>>(),
                            "the tables' variables are not set: idempotency records in Valkey, \
                             tables kept in memory (local run)"
                            );
                        }
                        let store = MemoryStore::new();
                        let engine =
                            Idempotency::try_new(valkey.with_tables(store.clone()), config)
                                .map_err(BackendError::Mode)?;
                        Ok(Backend {
                            engine,
                            tables: tables.map(|t| Table::memory(store.clone(), t.local)),
                            place: Place::Valkey(Some(store)),
                        })
                    }
                }
            }
            #[cfg(not(feature = "valkey"))]
            Plan::Valkey(_) => Err(BackendError::Choice(format!(
                "{}=valkey: this build has no Valkey store (cargo feature `valkey` of \
                 shared)",
                crate::store::STORE_ENV
            ))),
        }
    }
}

impl<const N: usize> Backend<N> {
    /// The engine (with `config`) and the tables named by `tables`, from the
    /// environment, by the rules of this module: [`Wiring::from_env`] (named
    /// by the config's prefix), then [`Wiring::connect`].
    pub async fn from_env(config: Config, tables: [TableEnv; N]) -> Result<Self, BackendError> {
        Wiring::from_env(&config.prefix, tables)?
            .connect(config)
            .await
    }

    /// [`Backend::from_env`], accepting Valkey records committing in
    /// `valkey_mode` ([`Wiring::from_env_or_valkey`]).
    pub async fn from_env_or_valkey(
        config: Config,
        tables: [TableEnv; N],
        valkey_mode: CommitMode,
    ) -> Result<Self, BackendError> {
        Wiring::from_env_or_valkey(tables, valkey_mode)?
            .connect(config)
            .await
    }

    /// The engine and the tables.
    pub fn into_parts(self) -> (Idempotency, [Table; N]) {
        (self.engine, self.tables)
    }

    /// The memory store holding the tables, in a local run (to seed them).
    pub fn local_store(&self) -> Option<&MemoryStore> {
        match &self.place {
            Place::Memory(store) | Place::Valkey(Some(store)) => Some(store),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            Plan::DynamoDb(TableConfig::new("records"), ["o".into(), "a".into()])
        );
        // A function with no business table needs only the records table.
        let plan = reading(dynamodb(), []).plan(&[]).unwrap();
        assert_eq!(plan, Plan::DynamoDb(TableConfig::new("records"), []));
    }

    #[test]
    fn nothing_set_is_a_local_run() {
        let plan = reading(StoreChoice::Memory, [None, None])
            .plan(&[ORDERS, AUDIT])
            .unwrap();
        assert_eq!(plan, Plan::Memory);
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
            Plan::Valkey(Some(["o".into()]))
        );
        assert_eq!(
            reading(StoreChoice::Valkey, [None])
                .plan(&[ORDERS])
                .unwrap(),
            Plan::Valkey(None)
        );
        let err = reading(StoreChoice::Valkey, [Some("o"), None])
            .plan(&[ORDERS, AUDIT])
            .unwrap_err();
        assert!(
            matches!(&err, BackendError::Partial { missing, .. } if missing == &["AUDIT_TABLE"])
        );
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
