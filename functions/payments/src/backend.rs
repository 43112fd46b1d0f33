//! Where a payments engine keeps its records and balances, from the
//! environment: shared by every function that credits accounts (`payments`
//! on SQS, `payments-api` over HTTP).

use shared::{CommitMode, Config, Idempotency, MemoryStore};

use crate::{ACCOUNTS_TABLE_ENV, Accounts, LOCAL_ACCOUNTS_TABLE, MODE_ENV};

/// `config` with the [`CommitMode`] named by [`MODE_ENV`], when set; an
/// unknown mode is an error.
pub fn mode_from_env(config: Config) -> Result<Config, lambda_runtime::Error> {
    Ok(match std::env::var(MODE_ENV) {
        Ok(v) => config.commit_mode(
            CommitMode::parse(&v).ok_or_else(|| format!("{MODE_ENV}={v:?} is not a mode"))?,
        ),
        Err(_) => config,
    })
}

/// The engine (with `config`) and the accounts table: DynamoDB when
/// `IDEMPOTENCY_TABLE` and `ACCOUNTS_TABLE` are set (honouring
/// `AWS_ENDPOINT_URL`), one embedded memory store for both otherwise
/// (local runs), so the staged credit and the record commit together.
pub async fn from_env(config: Config) -> Result<(Idempotency, Accounts), lambda_runtime::Error> {
    shared::StoreChoice::transactional_from_env("payments")?;
    let idempotency = shared::TableConfig::from_env();
    let accounts = std::env::var(ACCOUNTS_TABLE_ENV)
        .ok()
        .filter(|t| !t.trim().is_empty());
    match (idempotency, accounts) {
        (Some(table), Some(accounts)) => {
            let client = aws_sdk_dynamodb::Client::new(&shared::aws_sdk_config().await);
            // One DescribeTable at start: an eventually consistent global
            // table is refused (README "Multi-Region").
            let store = shared::DynamoDbStore::checked(client.clone(), table)
                .await
                .map_err(|e| shared::report(&e))?;
            let engine = Idempotency::new(store, config);
            Ok((engine, Accounts::dynamodb(client, accounts)))
        }
        (None, None) => {
            tracing::warn!(
                "IDEMPOTENCY_TABLE not set (nor ACCOUNTS_TABLE): idempotency records and \
                 balances are kept in memory (local run)"
            );
            let store = MemoryStore::new();
            let engine = Idempotency::new(store.clone(), config);
            Ok((engine, Accounts::memory(store, LOCAL_ACCOUNTS_TABLE)))
        }
        _ => Err("set both IDEMPOTENCY_TABLE and ACCOUNTS_TABLE, or neither (local run)".into()),
    }
}
