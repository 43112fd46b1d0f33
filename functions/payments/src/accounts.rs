//! Account balances: the business table (`ACCOUNTS_TABLE`, partition key
//! `account_id`, number attribute `balance_cents`).

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use shared::{HandlerError, Item, MemoryStore, Write};

/// The accounts table, in DynamoDB or in the embedded memory store.
#[derive(Debug, Clone)]
pub struct Accounts {
    table: String,
    backend: Backend,
}

#[derive(Debug, Clone)]
enum Backend {
    DynamoDb(Client),
    Memory(MemoryStore),
}

fn key(account_id: &str) -> Item {
    Item::from([(
        "account_id".to_owned(),
        AttributeValue::S(account_id.to_owned()),
    )])
}

fn balance_of(item: Option<&Item>) -> Result<Option<i64>, HandlerError> {
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

fn sdk_error<E: std::error::Error + Send + Sync + 'static>(
    e: aws_sdk_dynamodb::error::SdkError<E>,
) -> HandlerError {
    HandlerError::retryable(aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())
}

impl Accounts {
    /// Balances in the DynamoDB table `table`.
    pub fn dynamodb(client: Client, table: impl Into<String>) -> Self {
        Self {
            table: table.into(),
            backend: Backend::DynamoDb(client),
        }
    }

    /// Balances in the memory store's table `table` (the same store the
    /// engine uses, so transactions span both).
    pub fn memory(store: MemoryStore, table: impl Into<String>) -> Self {
        Self {
            table: table.into(),
            backend: Backend::Memory(store),
        }
    }

    /// The table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The credit as a write to stage (transactional modes):
    /// `ADD balance_cents :amount`.
    pub fn credit_write(&self, account_id: &str, amount_cents: i64) -> Write {
        Write::update(&self.table, key(account_id)).add("balance_cents", amount_cents)
    }

    /// Applies the credit now, as its own request (claim/complete mode), and
    /// returns the new balance. Not idempotent by itself: the engine makes it so.
    pub async fn credit(&self, account_id: &str, amount_cents: i64) -> Result<i64, HandlerError> {
        match &self.backend {
            Backend::DynamoDb(client) => {
                let out = client
                    .update_item()
                    .table_name(&self.table)
                    .set_key(Some(key(account_id)))
                    .update_expression("ADD #balance :amount")
                    .expression_attribute_names("#balance", "balance_cents")
                    .expression_attribute_values(
                        ":amount",
                        AttributeValue::N(amount_cents.to_string()),
                    )
                    .return_values(ReturnValue::UpdatedNew)
                    .send()
                    .await
                    .map_err(sdk_error)?;
                balance_of(out.attributes())?
                    .ok_or_else(|| HandlerError::retryable("UpdateItem returned no balance"))
            }
            Backend::Memory(store) => {
                store.write(&self.credit_write(account_id, amount_cents))?;
                balance_of(store.item(&self.table, &key(account_id)).as_ref())?
                    .ok_or_else(|| HandlerError::retryable("the credit left no balance"))
            }
        }
    }

    /// The balance, if the account exists.
    pub async fn balance(&self, account_id: &str) -> Result<Option<i64>, HandlerError> {
        match &self.backend {
            Backend::DynamoDb(client) => {
                let out = client
                    .get_item()
                    .table_name(&self.table)
                    .set_key(Some(key(account_id)))
                    .consistent_read(true)
                    .send()
                    .await
                    .map_err(sdk_error)?;
                balance_of(out.item())
            }
            Backend::Memory(store) => {
                balance_of(store.item(&self.table, &key(account_id)).as_ref())
            }
        }
    }
}
