//! Account balances: the business table (`ACCOUNTS_TABLE`, partition key `account_id`).

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use shared::HandlerError;
use std::collections::HashMap;
use std::sync::Mutex;

/// Where balances live.
#[async_trait]
pub trait Accounts: Send + Sync + std::fmt::Debug {
    /// Adds `amount_cents` to the account's balance (creating it at zero) and
    /// returns the new balance. Not idempotent by itself: the engine makes it so.
    async fn credit(&self, account_id: &str, amount_cents: u64) -> Result<i64, HandlerError>;

    /// The balance, if the account exists.
    async fn balance(&self, account_id: &str) -> Result<Option<i64>, HandlerError>;
}

/// Balances in DynamoDB: `UpdateItem` with `ADD balance_cents :amount`.
#[derive(Debug, Clone)]
pub struct DynamoDbAccounts {
    client: Client,
    table: String,
}

impl DynamoDbAccounts {
    /// Balances in `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }
}

fn balance_of(item: Option<&HashMap<String, AttributeValue>>) -> Result<Option<i64>, HandlerError> {
    match item.and_then(|i| i.get("balance_cents")) {
        None => Ok(None),
        Some(AttributeValue::N(n)) => n
            .parse()
            .map(Some)
            .map_err(|_| HandlerError::terminal(format!("balance_cents is not an integer: {n}"))),
        Some(other) => Err(HandlerError::terminal(format!(
            "balance_cents has the wrong type: {other:?}"
        ))),
    }
}

#[async_trait]
impl Accounts for DynamoDbAccounts {
    async fn credit(&self, account_id: &str, amount_cents: u64) -> Result<i64, HandlerError> {
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("account_id", AttributeValue::S(account_id.to_owned()))
            .update_expression("ADD #balance :amount")
            .expression_attribute_names("#balance", "balance_cents")
            .expression_attribute_values(":amount", AttributeValue::N(amount_cents.to_string()))
            .return_values(ReturnValue::UpdatedNew)
            .send()
            .await
            .map_err(|e| {
                HandlerError::retryable(aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())
            })?;
        balance_of(out.attributes())?
            .ok_or_else(|| HandlerError::retryable("UpdateItem returned no balance"))
    }

    async fn balance(&self, account_id: &str) -> Result<Option<i64>, HandlerError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("account_id", AttributeValue::S(account_id.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| {
                HandlerError::retryable(aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())
            })?;
        balance_of(out.item())
    }
}

/// Balances in memory (local runs, tests).
#[derive(Debug, Default)]
pub struct MemoryAccounts(Mutex<HashMap<String, i64>>);

impl MemoryAccounts {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl Accounts for MemoryAccounts {
    async fn credit(&self, account_id: &str, amount_cents: u64) -> Result<i64, HandlerError> {
        let amount = i64::try_from(amount_cents)
            .map_err(|_| HandlerError::terminal("amount_cents is too large"))?;
        let mut balances = self.lock();
        let balance = balances.entry(account_id.to_owned()).or_default();
        *balance += amount;
        Ok(*balance)
    }

    async fn balance(&self, account_id: &str) -> Result<Option<i64>, HandlerError> {
        Ok(self.lock().get(account_id).copied())
    }
}
