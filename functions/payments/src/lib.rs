//! `payments`: an SQS FIFO consumer that credits account balances exactly once
//! per `payment_id`, whatever SQS redelivers.
//!
//! The effect, `ADD balance_cents :amount`, is not naturally idempotent: this
//! function is the canary for the engine. Records of one account (its
//! `MessageGroupId`) run in order; accounts run concurrently; a failed record
//! holds back the later records of its account only.

pub mod accounts;

use lambda_runtime::LambdaEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shared::batch::{BatchProcessor, KeySelector, SqsRecord};
use shared::{Config, HandlerError, Idempotency};
use std::sync::Arc;

pub use accounts::{Accounts, DynamoDbAccounts, MemoryAccounts};

/// Environment variable naming the accounts table.
pub const ACCOUNTS_TABLE_ENV: &str = "ACCOUNTS_TABLE";

/// A payment message body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    /// The producer's unique payment id: the idempotency key.
    pub payment_id: String,
    /// The account to credit (also the FIFO `MessageGroupId`).
    pub account_id: String,
    /// A non-negative whole number of cents.
    pub amount_cents: u64,
}

/// What a payment did: recorded, and replayed to duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The payment.
    pub payment_id: String,
    /// The account credited.
    pub account_id: String,
    /// The account's balance right after this payment.
    pub balance_cents: i64,
}

/// Validates and applies one payment: the business logic, free of Lambda.
pub async fn apply_payment(
    accounts: &dyn Accounts,
    payment: &Payment,
    group_id: Option<&str>,
) -> Result<Applied, HandlerError> {
    if payment.payment_id.trim().is_empty() {
        return Err(HandlerError::terminal("payment_id is empty"));
    }
    if payment.account_id.trim().is_empty() {
        return Err(HandlerError::terminal("account_id is empty"));
    }
    if let Some(group) = group_id
        && group != payment.account_id
    {
        return Err(HandlerError::terminal(format!(
            "MessageGroupId {group:?} is not the payment's account_id {:?}: \
             per-account ordering would not hold",
            payment.account_id
        )));
    }
    let balance_cents = accounts
        .credit(&payment.account_id, payment.amount_cents)
        .await?;
    Ok(Applied {
        payment_id: payment.payment_id.clone(),
        account_id: payment.account_id.clone(),
        balance_cents,
    })
}

/// The function: its engine and tables, built once per execution environment.
#[derive(Debug, Clone)]
pub struct App {
    processor: BatchProcessor,
    accounts: Arc<dyn Accounts>,
}

impl App {
    /// The function over the given engine and accounts.
    pub fn new(engine: Idempotency, accounts: Arc<dyn Accounts>) -> Self {
        let processor = BatchProcessor::new(engine, KeySelector::Pointer("/payment_id".into()));
        Self {
            processor,
            accounts,
        }
    }

    /// Engine configuration: keys under `payments.credit`, kept 24 h (past
    /// the queue's retention of redeliveries).
    pub fn config() -> Config {
        Config::with_prefix("payments.credit")
            .expires_after(std::time::Duration::from_secs(24 * 60 * 60))
    }

    /// From the environment: DynamoDB for each table whose variable is set
    /// (`IDEMPOTENCY_TABLE`, `ACCOUNTS_TABLE`, honouring `AWS_ENDPOINT_URL`),
    /// embedded in-memory stores otherwise (local runs).
    pub async fn from_env() -> Self {
        let idempotency = shared::TableConfig::from_env();
        let accounts = std::env::var(ACCOUNTS_TABLE_ENV)
            .ok()
            .filter(|t| !t.trim().is_empty());
        let sdk = match (&idempotency, &accounts) {
            (None, None) => None,
            _ => Some(shared::aws_sdk_config().await),
        };
        let engine = match (idempotency, &sdk) {
            (Some(table), Some(sdk)) => Idempotency::new(
                shared::DynamoDbStore::new(aws_sdk_dynamodb::Client::new(sdk), table),
                Self::config(),
            ),
            _ => {
                tracing::warn!("IDEMPOTENCY_TABLE not set: idempotency records kept in memory");
                Idempotency::new(shared::MemoryStore::new(), Self::config())
            }
        };
        let accounts: Arc<dyn Accounts> = match (accounts, &sdk) {
            (Some(table), Some(sdk)) => Arc::new(DynamoDbAccounts::new(
                aws_sdk_dynamodb::Client::new(sdk),
                table,
            )),
            _ => {
                tracing::warn!("ACCOUNTS_TABLE not set: balances kept in memory");
                Arc::new(MemoryAccounts::default())
            }
        };
        Self::new(engine, accounts)
    }

    /// The accounts table.
    pub fn accounts(&self) -> &dyn Accounts {
        &*self.accounts
    }

    /// Handles one SQS FIFO event: the partial batch response lists exactly
    /// the records to redeliver.
    pub async fn handle(
        &self,
        event: LambdaEvent<Value>,
    ) -> Result<aws_lambda_events::sqs::SqsBatchResponse, lambda_runtime::Error> {
        let (payload, ctx) = event.into_parts();
        let event = shared::batch::parse_sqs_event(payload)?;
        let remaining =
            shared::batch::remaining_time(&ctx, shared::Clock::now_ms(&shared::SystemClock));
        let accounts = &*self.accounts;
        let report = self
            .processor
            .process(event, remaining, |record: SqsRecord<Payment>| async move {
                apply_payment(accounts, &record.body, record.group_id()).await
            })
            .await;
        Ok(report.into_response()?)
    }
}
