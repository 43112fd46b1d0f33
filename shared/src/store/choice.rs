//! Which store a function uses, from its environment, and the dispatch to
//! its connect step: a new store is one folder, one cargo feature and one
//! [`StoreChoice`] arm here.

use crate::store::connect::{ConnectError, Connected, TableEnv, TableNames, TableRule, Tables};
use crate::store::{TABLE_ENV, TableConfig};

/// Environment variable selecting the idempotency store: `dynamodb`,
/// `valkey` (also `redis`) or `memory`. Unset: DynamoDB when
/// [`TABLE_ENV`] is set, the memory store otherwise (local runs).
pub const STORE_ENV: &str = "IDEMPOTENCY_STORE";

/// The idempotency store named by the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[allow(
    clippy::large_enum_variant,
    reason = "read once per execution environment"
)]
pub enum StoreChoice {
    /// The embedded memory store (local runs).
    Memory,
    /// DynamoDB, in this table.
    DynamoDb(TableConfig),
    /// Valkey / Redis OSS at `VALKEY_URL` (or `REDIS_URL`): build it with
    /// `ValkeyStore::from_env` (feature `valkey`).
    Valkey,
}

impl StoreChoice {
    /// Reads [`STORE_ENV`] and [`TABLE_ENV`]. An unknown store, DynamoDB
    /// without a table, or Valkey in a build without the `valkey` feature
    /// is an error naming the variable.
    pub fn from_env() -> Result<Self, String> {
        let table = TableConfig::from_env()?;
        let choice = std::env::var(STORE_ENV).unwrap_or_default();
        Self::parse(&choice, table)
    }

    /// For a function whose effects commit in one DynamoDB transaction with
    /// its record: reads the choice like [`StoreChoice::from_env`] and
    /// refuses Valkey (which cannot join that transaction) with an error
    /// naming `function` and the variable, instead of ignoring the setting.
    pub fn transactional_from_env(function: &str) -> Result<Self, String> {
        let choice = std::env::var(STORE_ENV).unwrap_or_default();
        Self::transactional(&choice, TableConfig::from_env()?, function)
    }

    /// Valkey is refused whether or not this build has the `valkey` feature.
    fn transactional(
        choice: &str,
        table: Option<TableConfig>,
        function: &str,
    ) -> Result<Self, String> {
        match choice.trim().to_ascii_lowercase().as_str() {
            "valkey" | "redis" => Err(format!(
                "{function} commits its effects in one DynamoDB transaction with its idempotency \
                 record: {STORE_ENV}=valkey cannot do that (README \"Valkey\"); keep its records \
                 in DynamoDB ({STORE_ENV} unset or dynamodb)"
            )),
            _ => Self::parse(choice, table),
        }
    }

    /// Where this store keeps a function's business tables.
    pub(crate) fn table_rule(&self) -> TableRule {
        match self {
            StoreChoice::Memory => TableRule::Local,
            StoreChoice::DynamoDb(_) => TableRule::WithRecords,
            StoreChoice::Valkey => TableRule::Apart,
        }
    }

    /// Connects the chosen store and the business `tables` (named as its
    /// [`table_rule`](Self::table_rule) allows): its folder's connect step.
    pub(crate) async fn connect<const N: usize>(
        self,
        tables: TableNames<N>,
    ) -> Result<Connected<N>, ConnectError> {
        match (self, tables) {
            (StoreChoice::Memory, TableNames::Local(tables)) => {
                Ok(super::memory::connect::connect(tables))
            }
            #[cfg(feature = "dynamodb")]
            (StoreChoice::DynamoDb(table), TableNames::Named(names)) => {
                super::dynamodb::connect::connect(table, names).await
            }
            #[cfg(not(feature = "dynamodb"))]
            (StoreChoice::DynamoDb(_), _) => Err(ConnectError::NotBuilt(format!(
                "{TABLE_ENV} is set: this build has no DynamoDB store (cargo feature `dynamodb` \
                 of shared)"
            ))),
            #[cfg(feature = "valkey")]
            (StoreChoice::Valkey, tables) => super::valkey::connect::connect(apart(tables)).await,
            #[cfg(not(feature = "valkey"))]
            (StoreChoice::Valkey, _) => Err(ConnectError::NotBuilt(format!(
                "{STORE_ENV}=valkey: this build has no Valkey store (cargo feature `valkey` of \
                 shared)"
            ))),
            (choice, tables) => Err(ConnectError::NotBuilt(format!(
                "{choice:?} cannot keep the tables {tables:?}"
            ))),
        }
    }

    fn parse(choice: &str, table: Option<TableConfig>) -> Result<Self, String> {
        match choice.trim().to_ascii_lowercase().as_str() {
            "" => Ok(table.map_or(StoreChoice::Memory, StoreChoice::DynamoDb)),
            "memory" => Ok(StoreChoice::Memory),
            "dynamodb" => table
                .map(StoreChoice::DynamoDb)
                .ok_or_else(|| format!("{STORE_ENV}=dynamodb needs {TABLE_ENV}")),
            "valkey" | "redis" if cfg!(feature = "valkey") => Ok(StoreChoice::Valkey),
            "valkey" | "redis" => Err(format!(
                "{STORE_ENV}={choice}: this build has no Valkey store (cargo feature `valkey` of \
                 shared)"
            )),
            other => Err(format!(
                "{STORE_ENV}={other:?} is not a store: dynamodb, valkey or memory"
            )),
        }
    }
}

/// Business tables apart from the records (a store that cannot hold them):
/// in DynamoDB when named, else in memory (a local run).
#[cfg_attr(not(feature = "valkey"), allow(dead_code, reason = "Valkey's tables"))]
async fn apart<const N: usize>(tables: TableNames<N>) -> Result<Tables<N>, ConnectError> {
    match tables {
        #[cfg(feature = "dynamodb")]
        TableNames::Named(names) => Ok(super::dynamodb::connect::tables(names).await),
        #[cfg(not(feature = "dynamodb"))]
        TableNames::Named(_) => Err(ConnectError::NotBuilt(
            "the tables' variables are set: this build has no DynamoDB store (cargo feature \
             `dynamodb` of shared)"
                .into(),
        )),
        TableNames::Local(tables) => {
            if N > 0 {
                tracing::warn!(
                    tables = ?tables.iter().map(|t: &TableEnv| t.var).collect::<Vec<_>>(),
                    "the tables' variables are not set: idempotency records in Valkey, \
                     tables kept in memory (local run)"
                );
            }
            Ok(super::memory::connect::tables(tables))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactional_functions_refuse_valkey() {
        for choice in ["valkey", " Redis "] {
            let refused = StoreChoice::transactional(choice, None, "payments").unwrap_err();
            assert!(
                refused.contains("payments") && refused.contains(STORE_ENV),
                "{refused}"
            );
        }
        assert_eq!(
            StoreChoice::transactional("", None, "payments"),
            Ok(StoreChoice::Memory)
        );
        assert!(StoreChoice::transactional("mongo", None, "payments").is_err());
    }

    #[test]
    fn parses_the_choice() {
        let table = || Some(TableConfig::new("t"));
        assert_eq!(StoreChoice::parse("", None), Ok(StoreChoice::Memory));
        assert_eq!(
            StoreChoice::parse("", table()),
            Ok(StoreChoice::DynamoDb(TableConfig::new("t")))
        );
        assert_eq!(
            StoreChoice::parse(" Memory ", table()),
            Ok(StoreChoice::Memory)
        );
        assert!(
            StoreChoice::parse("dynamodb", None)
                .unwrap_err()
                .contains(TABLE_ENV)
        );
        assert!(StoreChoice::parse("mongo", None).is_err());
        let valkey = StoreChoice::parse("VALKEY", None);
        if cfg!(feature = "valkey") {
            assert_eq!(valkey, Ok(StoreChoice::Valkey));
            assert_eq!(StoreChoice::parse("redis", None), Ok(StoreChoice::Valkey));
        } else {
            assert!(valkey.unwrap_err().contains("feature"));
        }
    }
}
