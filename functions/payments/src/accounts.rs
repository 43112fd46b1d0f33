//! Account balances: the business table (`ACCOUNTS_TABLE`, partition key
//! `account_id`, number attribute `balance_cents`).

use lambda_idempotency::{HandlerError, Item, MemoryStore, Table, Write, value::AttrValue};

/// The accounts table, in DynamoDB or in the embedded memory store: a thin
/// domain wrapper over [`Table`].
#[derive(Debug, Clone)]
pub struct Accounts {
    table: Table,
}

fn key(account_id: &str) -> Item {
    Item::from([("account_id".to_owned(), AttrValue::s(account_id))])
}

fn balance_of(item: Option<&Item>) -> Result<Option<i64>, HandlerError> {
    match item.and_then(|i| i.get("balance_cents")) {
        None => Ok(None),
        Some(AttrValue::N(n)) => n
            .parse()
            .map(Some)
            .map_err(|_| HandlerError::terminal(format!("balance_cents is not an integer: {n}"))),
        Some(other) => Err(HandlerError::terminal(format!(
            "balance_cents has the wrong type: {other:?}"
        ))),
    }
}

impl Accounts {
    /// Balances in `table` (as [`lambda_idempotency::Backend::from_env`] wires it: in
    /// DynamoDB, the engine's store must be in the same account and Region,
    /// so that one transaction spans both tables).
    pub fn from_table(table: Table) -> Self {
        Self { table }
    }

    /// Balances in the memory store's table `table` (the same store the
    /// engine uses, so transactions span both).
    pub fn memory(store: MemoryStore, table: impl Into<String>) -> Self {
        Self {
            table: Table::memory(store, table),
        }
    }

    /// The table name.
    pub fn table(&self) -> &str {
        self.table.name()
    }

    /// The credit as a write to stage (transactional modes):
    /// `ADD balance_cents :amount`.
    pub fn credit_write(&self, account_id: &str, amount_cents: i64) -> Write {
        Write::update(self.table.name(), key(account_id)).add("balance_cents", amount_cents)
    }

    /// Applies the credit now, as its own request (claim/complete mode), and
    /// returns the new balance. Not idempotent by itself: the engine makes it so.
    pub async fn credit(&self, account_id: &str, amount_cents: i64) -> Result<i64, HandlerError> {
        let item = self
            .table
            .write(&self.credit_write(account_id, amount_cents))
            .await?;
        balance_of(item.as_ref())?
            .ok_or_else(|| HandlerError::retryable("the credit left no balance"))
    }

    /// The balance, if the account exists.
    pub async fn balance(&self, account_id: &str) -> Result<Option<i64>, HandlerError> {
        balance_of(self.table.get(&key(account_id)).await?.as_ref())
    }
}
