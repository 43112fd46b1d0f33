//! `ledger`: a Kinesis Data Streams consumer that credits account balances
//! exactly once per `payment_id`, whatever the stream redelivers and however
//! often a producer retries its `PutRecord`.
//!
//! The same business as `payments` (an SQS FIFO consumer), on a stream: each
//! record's `data` is a [`Payment`], keyed by its `payment_id` (never by the
//! `sequenceNumber`: a producer's retry writes the same payment under a new
//! one). The credit, `ADD balance_cents :amount` on `ACCOUNTS_TABLE`, is
//! staged and committed in one `TransactWriteItems` with the idempotency
//! record (optimistic mode): one request per new payment. The records of a
//! shard run in sequence order, shards in parallel; after a record fails,
//! nothing later in its shard runs and the partial batch response names it
//! (Lambda retries the shard from there), so another shard is never held
//! back.
//!
//! A record that can never succeed (data that is not a payment, no
//! `payment_id`, a payment refused for good) is parked in the SQS queue
//! `PARKING_QUEUE_URL` names ([`shared::parking`]): the shard goes on past
//! it, and only retryable failures stop it. Without that variable, parking
//! is off: such a record fails and holds back its shard, as any other.

use std::time::Duration;

use lambda_runtime::LambdaEvent;
use serde_json::Value;
use shared::kinesis::{KinesisEventResponse, KinesisProcessor, KinesisRecord};
use shared::parking::{PARKING_QUEUE_ENV, Parking, SqsParking};
use shared::{CommitMode, Config, HandlerError, Idempotency, KeySelector, Staged};

pub use payments::{Accounts, Applied, Payment};

/// How long a payment's record lives by default: 7 days, at least the
/// stream's retention (24 hours by default; Kinesis keeps records up to 365
/// days when extended), so no redelivery of a record the stream still holds
/// (a mapping started again at the trim horizon reads them all) outlives the
/// record of its first delivery. A stream kept longer needs
/// `IDEMPOTENCY_EXPIRES_AFTER_SECONDS` of at least its retention.
pub const RECORD_LIFETIME: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The payment as staged writes: the business logic, free of Lambda (the
/// rules of `payments`: a terminal error for bad input, then the credit).
/// The engine's commit mode decides how they are written.
pub fn stage_credit(
    accounts: &Accounts,
    payment: &Payment,
) -> Result<Staged<Applied>, HandlerError> {
    payments::stage_payment(accounts, payment, None)
}

/// The function: its engine and tables, built once per execution
/// environment.
#[derive(Debug, Clone)]
pub struct App {
    processor: KinesisProcessor,
    accounts: Accounts,
}

impl App {
    /// The function over the given engine and accounts table, committing in
    /// the engine's [`CommitMode`]. The engine's store must reach the
    /// accounts table (the same DynamoDB account, or the same
    /// [`MemoryStore`](shared::MemoryStore)).
    pub fn new(engine: Idempotency, accounts: Accounts) -> Self {
        let processor = KinesisProcessor::new(engine, KeySelector::pointer("/payment_id"));
        Self {
            processor,
            accounts,
        }
    }

    /// Engine configuration: keys under `ledger.credit` (`from_env`: the
    /// deployment's `IDEMPOTENCY_KEY_PREFIX` when set), kept
    /// [`RECORD_LIFETIME`] (overridden through
    /// `IDEMPOTENCY_EXPIRES_AFTER_SECONDS`), optimistic commits (one request
    /// per new payment).
    pub fn config() -> Config {
        Config::with_prefix("ledger.credit")
            .expires_after(RECORD_LIFETIME)
            .commit_mode(CommitMode::Optimistic)
    }

    /// From the environment, as `payments` reads it: DynamoDB when
    /// `IDEMPOTENCY_TABLE` and `ACCOUNTS_TABLE` are set (honouring
    /// `AWS_ENDPOINT_URL`), the embedded memory store otherwise (local
    /// runs); `PAYMENTS_COMMIT_MODE` ([`payments::MODE_ENV`]) picks the mode;
    /// `PARKING_QUEUE_URL` ([`PARKING_QUEUE_ENV`]) turns parking on.
    pub async fn from_env() -> Result<Self, lambda_runtime::Error> {
        let config = Self::config()
            .prefix_from_env()?
            .expires_after_from_env()?
            .commit_mode_from_env(payments::MODE_ENV)?;
        let (engine, [accounts]) = shared::Backend::from_env(config, [payments::ACCOUNTS])
            .await
            .map_err(|e| shared::report(&e))?
            .into_parts();
        let accounts = payments::Accounts::from_table(accounts);
        let app = Self::new(engine, accounts);
        Ok(match SqsParking::from_env().await {
            Some(parking) => {
                lambda_runtime::tracing::info!(
                    queue = parking.queue_url(),
                    "parking is on: records that can never succeed are parked, their shard goes on"
                );
                app.parking(parking)
            }
            None => {
                lambda_runtime::tracing::warn!(
                    "parking is off ({PARKING_QUEUE_ENV} unset): a record that can never \
                     succeed fails and holds back its shard"
                );
                app
            }
        })
    }

    /// This function parking the records that can never succeed in
    /// `parking` (their shard goes on past them).
    pub fn parking(mut self, parking: impl Parking + 'static) -> Self {
        self.processor = self.processor.parking(parking);
        self
    }

    /// The accounts table.
    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    /// Handles one Kinesis event (one shard's records): the partial batch
    /// response names the first failed record of the shard, if any.
    pub async fn handle(
        &self,
        event: LambdaEvent<Value>,
    ) -> Result<KinesisEventResponse, lambda_runtime::Error> {
        let accounts = &self.accounts;
        self.processor
            .handle(event, |r: KinesisRecord<Payment>| async move {
                stage_credit(accounts, &r.body)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a failed step is a failed test")]

    use super::*;
    use shared::MemoryStore;
    use std::collections::{BTreeMap, BTreeSet};

    fn sample(name: &str) -> Value {
        let text = match name {
            "0" => include_str!("../../../events/kinesis-payments-shard-0.json"),
            _ => include_str!("../../../events/kinesis-payments-shard-1.json"),
        };
        serde_json::from_str(text).unwrap()
    }

    /// The payments of an event's records that parse, first copies only.
    fn expected(event: &Value, upto: usize) -> BTreeMap<String, i64> {
        let mut sums = BTreeMap::new();
        let mut seen = BTreeSet::new();
        for r in event["Records"].as_array().unwrap().iter().take(upto) {
            use base64::Engine as _;
            let data = base64::engine::general_purpose::STANDARD
                .decode(r["kinesis"]["data"].as_str().unwrap())
                .unwrap();
            let Ok(p) = serde_json::from_slice::<Payment>(&data) else {
                continue;
            };
            if seen.insert(p.payment_id.clone()) {
                *sums.entry(p.account_id).or_default() += p.amount_cents as i64;
            }
        }
        sums
    }

    fn app(mode: CommitMode) -> App {
        let store = MemoryStore::new();
        let engine = Idempotency::new(store.clone(), App::config().commit_mode(mode));
        App::new(engine, Accounts::memory(store, "accounts"))
    }

    /// With parking, shard 1's poison record is parked and the records
    /// after it are credited; the response names nothing.
    #[tokio::test]
    async fn with_parking_the_poison_record_is_parked_and_the_rest_of_its_shard_credited() {
        let event = sample("1");
        let parking = shared::parking::MemoryParking::new();
        let app = app(CommitMode::Optimistic).parking(parking.clone());
        let response = app
            .handle(LambdaEvent::new(event.clone(), Default::default()))
            .await
            .unwrap();
        assert!(response.batch_item_failures.is_empty());
        let poison = event["Records"][1]["kinesis"]["sequenceNumber"]
            .as_str()
            .unwrap();
        let parked = parking.parked();
        assert_eq!(parked.len(), 1);
        assert_eq!(parked[0].position, poison);
        for (account, sum) in expected(&event, usize::MAX) {
            assert_eq!(
                app.accounts().balance(&account).await.unwrap(),
                Some(sum),
                "{account}"
            );
        }
    }

    #[test]
    fn bad_payments_are_terminal() {
        let accounts = Accounts::memory(MemoryStore::new(), "a");
        let empty = Payment {
            payment_id: " ".into(),
            account_id: "a1".into(),
            amount_cents: 1,
        };
        let err = stage_credit(&accounts, &empty).unwrap_err();
        assert_eq!(err.kind(), shared::ErrorKind::Terminal);
    }

    /// Shard 0's sample: `pay-2001` twice (a producer retry under a new
    /// sequence number) credits once, in every mode, and again on a
    /// redelivery of the whole batch.
    #[tokio::test]
    async fn a_producer_retry_credits_once_in_every_mode() {
        let event = sample("0");
        for mode in [
            CommitMode::ClaimThenComplete,
            CommitMode::Fenced,
            CommitMode::Optimistic,
        ] {
            let app = app(mode);
            for _ in 0..2 {
                let response = app
                    .handle(LambdaEvent::new(event.clone(), Default::default()))
                    .await
                    .unwrap();
                assert!(response.batch_item_failures.is_empty(), "{mode:?}");
            }
            for (account, sum) in expected(&event, usize::MAX) {
                assert_eq!(
                    app.accounts().balance(&account).await.unwrap(),
                    Some(sum),
                    "{mode:?} {account}"
                );
            }
        }
    }

    /// Shard 1's sample: the poison record (index 1) is named, and the
    /// record after it in the shard (`pay-2102`, index 2 and later) is not
    /// applied.
    #[tokio::test]
    async fn a_poison_record_is_named_and_holds_back_the_rest_of_its_shard() {
        let event = sample("1");
        let app = app(CommitMode::Optimistic);
        let response = app
            .handle(LambdaEvent::new(event.clone(), Default::default()))
            .await
            .unwrap();
        let poison = event["Records"][1]["kinesis"]["sequenceNumber"]
            .as_str()
            .unwrap();
        let failed: Vec<_> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone().unwrap_or_default())
            .collect();
        assert_eq!(failed, [poison]);
        let mut balances = BTreeMap::new();
        for account in ["acct-2", "acct-4"] {
            if let Some(b) = app.accounts().balance(account).await.unwrap() {
                balances.insert(account.to_owned(), b);
            }
        }
        assert_eq!(balances, expected(&event, 1), "only the records before it");
    }
}
