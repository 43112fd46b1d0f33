//! `payments`: an SQS FIFO consumer that credits account balances exactly once
//! per `payment_id`, whatever SQS redelivers.
//!
//! The effect, `ADD balance_cents :amount`, is not naturally idempotent: this
//! function is the canary for the engine. By default the credit is staged and
//! committed in **one `TransactWriteItems` with the idempotency record**
//! (optimistic mode): the balance and the record can never disagree, and the
//! new payments of a batch share one request (batch commits: ten new
//! payments on ten accounts are one `TransactWriteItems`). Records of one account (its
//! `MessageGroupId`) run in order; accounts run concurrently; a failed record
//! holds back the later records of its account only.

pub mod accounts;

use lambda_idempotency::sqs::{EnvelopeMode, SqsBatchResponse, SqsProcessor, SqsRecord};
use lambda_idempotency::{
    Backend, CommitMode, Config, HandlerError, Idempotency, KeySelector, write::Staged,
};
use lambda_runtime::LambdaEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use accounts::Accounts;

/// Environment variable naming the accounts table.
pub const ACCOUNTS_TABLE_ENV: &str = "ACCOUNTS_TABLE";
/// Environment variable choosing the engine's [`CommitMode`]
/// (`optimistic`, `fenced`, `claim-then-complete`); default `optimistic`.
pub const MODE_ENV: &str = "PAYMENTS_COMMIT_MODE";
/// How long a payment's record lives by default: the queue's retention (4
/// days) plus its DLQ's (14 days), so no redelivery, DLQ redrive or resend
/// of a message can outlive the record of its first delivery.
pub const RECORD_LIFETIME: std::time::Duration = std::time::Duration::from_secs(18 * 24 * 60 * 60);
/// The accounts table's name in local runs.
pub const LOCAL_ACCOUNTS_TABLE: &str = "accounts";
/// The accounts table, as [`Backend::from_env`] reads it.
pub const ACCOUNTS: lambda_idempotency::backend::TableEnv =
    lambda_idempotency::backend::TableEnv::new(ACCOUNTS_TABLE_ENV, LOCAL_ACCOUNTS_TABLE);

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
    /// The amount credited.
    pub amount_cents: u64,
}

/// Checks a payment before any effect: terminal errors for bad input.
pub fn validate(payment: &Payment, group_id: Option<&str>) -> Result<i64, HandlerError> {
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
    i64::try_from(payment.amount_cents)
        .map_err(|_| HandlerError::terminal("amount_cents is too large"))
}

fn applied(payment: &Payment) -> Applied {
    Applied {
        payment_id: payment.payment_id.clone(),
        account_id: payment.account_id.clone(),
        amount_cents: payment.amount_cents,
    }
}

/// The payment as staged writes: the business logic, free of Lambda. The
/// engine's commit mode decides how they are written.
pub fn stage_payment(
    accounts: &Accounts,
    payment: &Payment,
    group_id: Option<&str>,
) -> Result<Staged<Applied>, HandlerError> {
    let amount = validate(payment, group_id)?;
    Ok(Staged::new(applied(payment)).write(accounts.credit_write(&payment.account_id, amount)))
}

/// The engine with `config` and the accounts table, from the environment:
/// the engine's variables over `config` ([`Config::read_env`]), [`MODE_ENV`]
/// the commit mode; DynamoDB when `IDEMPOTENCY_TABLE` and `ACCOUNTS_TABLE`
/// are set (honouring `AWS_ENDPOINT_URL`), the embedded memory store when
/// neither is (local runs). What `payments`, `payments-api` and `ledger`
/// start with.
pub async fn connect(config: Config) -> Result<(Idempotency, Accounts), lambda_runtime::Error> {
    let config = config.read_env()?.commit_mode_from_env(MODE_ENV)?;
    let (engine, [accounts]) = Backend::from_env(config, [ACCOUNTS]).await?.into_parts();
    Ok((engine, Accounts::from_table(accounts)))
}

/// The function: its engine and tables, built once per execution environment.
#[derive(Debug, Clone)]
pub struct App {
    processor: SqsProcessor,
    accounts: Accounts,
}

impl App {
    /// The function over the given engine and accounts table, committing
    /// in the engine's [`CommitMode`]. The engine's store must reach the
    /// accounts table (the same DynamoDB account, or the same
    /// [`MemoryStore`](lambda_idempotency::MemoryStore)).
    pub fn new(engine: Idempotency, accounts: Accounts) -> Self {
        // The queue carries payments, never envelopes: a body is the payment
        // its key and its credit are read from.
        let processor = SqsProcessor::new(engine, KeySelector::pointer("/payment_id"))
            .envelope(EnvelopeMode::Never);
        Self {
            processor,
            accounts,
        }
    }

    /// Engine configuration: keys under `payments.credit` (`from_env`: the
    /// deployment's `IDEMPOTENCY_KEY_PREFIX` when set), kept
    /// [`RECORD_LIFETIME`] (overridden by the deployment through
    /// `IDEMPOTENCY_EXPIRES_AFTER_SECONDS`), lease 60 s (2 x the function
    /// timeout), optimistic commits (one request per new payment, shared by
    /// the batch's new payments with batch commits, the default).
    pub fn config() -> Config {
        Config::with_prefix("payments.credit")
            .expires_after(RECORD_LIFETIME)
            .commit_mode(CommitMode::Optimistic)
    }

    /// From the environment ([`connect`]), with the signature verifier it
    /// configures ([`SqsProcessor::verifier_from_env`]).
    pub async fn from_env() -> Result<Self, lambda_runtime::Error> {
        let (engine, accounts) = connect(Self::config()).await?;
        let mut app = Self::new(engine, accounts);
        app.processor = app.processor.verifier_from_env().await?;
        Ok(app)
    }

    /// The accounts table.
    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    /// Handles one SQS FIFO event: the partial batch response lists exactly
    /// the records to redeliver.
    pub async fn handle(
        &self,
        event: LambdaEvent<Value>,
    ) -> Result<SqsBatchResponse, lambda_runtime::Error> {
        let accounts = &self.accounts;
        self.processor
            .handle(event, |r: SqsRecord<Payment>| async move {
                stage_payment(accounts, &r.body, r.group_id())
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_idempotency::MemoryStore;

    fn payment(id: &str, account: &str, amount: u64) -> Payment {
        Payment {
            payment_id: id.into(),
            account_id: account.into(),
            amount_cents: amount,
        }
    }

    #[test]
    fn bad_payments_are_terminal() {
        let accounts = Accounts::memory(MemoryStore::new(), "a");
        for (p, group, why) in [
            (payment("", "a1", 1), None, "payment_id is empty"),
            (payment("p", " ", 1), None, "account_id is empty"),
            (payment("p", "a1", 1), Some("a2"), "MessageGroupId"),
            (payment("p", "a1", u64::MAX), None, "too large"),
        ] {
            let err = stage_payment(&accounts, &p, group).unwrap_err();
            assert_eq!(err.kind(), lambda_idempotency::ErrorKind::Terminal);
            assert!(err.to_string().contains(why), "{err}");
        }
    }

    #[tokio::test]
    async fn every_mode_credits_once_per_payment() {
        for mode in [
            CommitMode::ClaimThenComplete,
            CommitMode::Fenced,
            CommitMode::Optimistic,
        ] {
            let store = MemoryStore::new();
            let config = App::config().disabled(false).commit_mode(mode);
            let engine = Idempotency::new(store.clone(), config);
            let app = App::new(engine, Accounts::memory(store, "accounts"));
            let event: Value =
                serde_json::from_str(include_str!("../../../events/payments-fifo-duplicate.json"))
                    .unwrap();
            for _ in 0..2 {
                let response = app
                    .handle(LambdaEvent::new(event.clone(), Default::default()))
                    .await
                    .unwrap();
                assert!(response.batch_item_failures.is_empty(), "{mode:?}");
            }
            let mut expected = std::collections::HashMap::<String, i64>::new();
            let mut seen = std::collections::HashSet::new();
            for r in event["Records"].as_array().unwrap() {
                let p: Payment = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
                if seen.insert(p.payment_id.clone()) {
                    *expected.entry(p.account_id).or_default() += p.amount_cents as i64;
                }
            }
            for (account, sum) in expected {
                assert_eq!(
                    app.accounts().balance(&account).await.unwrap(),
                    Some(sum),
                    "{mode:?}"
                );
            }
        }
    }
}
