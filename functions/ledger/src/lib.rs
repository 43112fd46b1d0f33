//! `ledger`: a Kinesis Data Streams consumer that credits account balances
//! exactly once per `payment_id`, whatever the stream redelivers and however
//! often a producer retries its `PutRecord`.
//!
//! The same business as `payments` (an SQS FIFO consumer), on a stream: each
//! record's `data` is a [`Payment`], keyed by its `payment_id` (never by the
//! `sequenceNumber`: a producer's retry writes the same payment under a new
//! one). The credit, `ADD balance_cents :amount` on `ACCOUNTS_TABLE`, is
//! staged and committed with the idempotency record (optimistic mode).
//!
//! The partition key is the account, and the records of one partition key
//! run in sequence order ([`KinesisOrder::PartitionKey`]): an account's
//! credits apply in the order they were put. Different accounts run
//! concurrently and their commits share the batch's transactions, so a
//! batch of 100 records over 25 accounts commits in a few
//! `TransactWriteItems`, not 100. After a record fails, nothing later of its
//! account runs; the partial batch response names the lowest failed
//! sequence number of the shard (Lambda retries the shard from there), so
//! the records of other accounts after it are delivered again and replay.
//! Each batch is read ahead in one `BatchGetItem` per 100 records
//! ([`PreRead::Always`]): a redelivered record replays without running or
//! writing (Kinesis records carry no receive count to tell a redelivery
//! by).
//!
//! A producer using the Kinesis Producer Library's aggregation packs many
//! payments into one Kinesis record: the processor splits it, and each
//! payment is credited on its own (its account its partition key); the
//! response names the packed record when one of its payments is not done,
//! and its redelivery replays the others.
//!
//! A record that can never succeed (data that is not a payment, no
//! `payment_id`, a payment refused for good) is parked in the SQS queue
//! `PARKING_QUEUE_URL` names ([`lambda_idempotency::parking`]): the shard goes on past
//! it, and only retryable failures stop it. Without that variable, parking
//! is off: such a record fails and holds back its shard, as any other.

use std::time::Duration;

use lambda_idempotency::batch::PreRead;
use lambda_idempotency::kinesis::{
    KinesisEventResponse, KinesisOrder, KinesisProcessor, KinesisRecord,
};
use lambda_idempotency::parking::Parking;
use lambda_idempotency::{
    CommitMode, Config, HandlerError, Idempotency, KeySelector, write::Staged,
};
use lambda_runtime::LambdaEvent;
use serde_json::Value;

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
    /// [`MemoryStore`](lambda_idempotency::MemoryStore)).
    pub fn new(engine: Idempotency, accounts: Accounts) -> Self {
        let processor = KinesisProcessor::new(engine, KeySelector::pointer("/payment_id"))
            .order(KinesisOrder::PartitionKey)
            .pre_read(PreRead::Always);
        Self {
            processor,
            accounts,
        }
    }

    /// Engine configuration: keys under `ledger.credit` (`from_env`: the
    /// deployment's `IDEMPOTENCY_KEY_PREFIX` when set), kept
    /// [`RECORD_LIFETIME`] (overridden through
    /// `IDEMPOTENCY_EXPIRES_AFTER_SECONDS`), optimistic commits (the
    /// batch's new payments share transactions).
    pub fn config() -> Config {
        Config::with_prefix("ledger.credit")
            .expires_after(RECORD_LIFETIME)
            .commit_mode(CommitMode::Optimistic)
    }

    /// From the environment, as `payments` reads it ([`payments::connect`]),
    /// with the parking queue `PARKING_QUEUE_URL` names
    /// ([`KinesisProcessor::parking_from_env`]; unset, parking is off).
    pub async fn from_env() -> Result<Self, lambda_runtime::Error> {
        let (engine, accounts) = payments::connect(Self::config()).await?;
        let mut app = Self::new(engine, accounts);
        app.processor = app.processor.parking_from_env().await?;
        Ok(app)
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
    /// response names the lowest failed sequence number of the shard, if
    /// any.
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
    use lambda_idempotency::MemoryStore;
    use lambda_idempotency::testing::{self, FailedIds, kinesis_event};
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
        let parking = lambda_idempotency::parking::MemoryParking::new();
        let app = app(CommitMode::Optimistic).parking(parking.clone());
        let response = testing::invoke(|e| app.handle(e), &event).await.unwrap();
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
        assert_eq!(err.kind(), lambda_idempotency::ErrorKind::Terminal);
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
                let response = testing::invoke(|e| app.handle(e), &event).await.unwrap();
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

    /// Shard 1's sample: the poison record (index 1, account `acct-2`) is
    /// named, and the record after it of its account (`pay-2102`, index 2)
    /// is not applied. Changed with lanes by partition key (issue 29): the
    /// record of `acct-4` after it (`pay-2103`) was held back with the whole
    /// shard; it is now credited (and replays when Lambda retries from the
    /// poison).
    #[tokio::test]
    async fn a_poison_record_is_named_and_holds_back_the_rest_of_its_account() {
        let event = sample("1");
        let app = app(CommitMode::Optimistic);
        let response = testing::invoke(|e| app.handle(e), &event).await.unwrap();
        let poison = event["Records"][1]["kinesis"]["sequenceNumber"]
            .as_str()
            .unwrap();
        assert_eq!(response.failed_ids(), [poison]);
        let mut balances = BTreeMap::new();
        for account in ["acct-2", "acct-4"] {
            if let Some(b) = app.accounts().balance(account).await.unwrap() {
                balances.insert(account.to_owned(), b);
            }
        }
        let mut credited = expected(&event, 1);
        credited.insert("acct-4".to_owned(), 1200);
        assert_eq!(
            balances, credited,
            "acct-2: only the record before it; acct-4: its own"
        );
    }

    /// A memory store that reads the balance of every account a commit
    /// touched right after the commit, and counts the requests it is sent
    /// (commits, batch commits, pre-reads); it fails the first `failures`
    /// commits touching account `held` (as a throttled request would).
    #[derive(Debug)]
    struct Watched {
        inner: MemoryStore,
        held: String,
        failures: std::sync::atomic::AtomicUsize,
        requests: std::sync::atomic::AtomicUsize,
        seen: std::sync::Mutex<Vec<(String, i64)>>,
    }

    impl Watched {
        fn touches_held(&self, writes: &[lambda_idempotency::Write]) -> bool {
            writes
                .iter()
                .any(|w| w.key.get("account_id").and_then(|a| a.as_s()) == Some(&self.held))
        }

        /// Whether to fail: `writes` touch the held account and failures
        /// are left.
        fn faulty(&self, writes: &[lambda_idempotency::Write]) -> bool {
            use std::sync::atomic::Ordering::SeqCst;
            let take = |n: usize| n.checked_sub(1);
            self.touches_held(writes) && self.failures.fetch_update(SeqCst, SeqCst, take).is_ok()
        }

        /// Reads the balance of every account `writes` touch.
        fn watch(&self, writes: &[lambda_idempotency::Write]) {
            for w in writes {
                let Some(account) = w.key.get("account_id").and_then(|a| a.as_s()) else {
                    continue;
                };
                let balance = self
                    .inner
                    .item("accounts", &w.key)
                    .and_then(|i| i.get("balance_cents")?.as_i64())
                    .unwrap();
                self.seen
                    .lock()
                    .unwrap()
                    .push((account.to_owned(), balance));
            }
        }
    }

    fn throttled() -> lambda_idempotency::store::TransactError {
        lambda_idempotency::store::TransactError::Store(lambda_idempotency::StoreError::Backend {
            operation: "TransactWriteItems",
            source: "throttled".into(),
        })
    }

    #[async_trait::async_trait]
    impl lambda_idempotency::Store for Watched {
        async fn claim(
            &self,
            record: &lambda_idempotency::store::Record,
            now_ms: u64,
        ) -> Result<lambda_idempotency::store::Claim, lambda_idempotency::StoreError> {
            self.inner.claim(record, now_ms).await
        }
        async fn commit(
            &self,
            record: lambda_idempotency::store::RecordWrite<'_>,
            writes: &[lambda_idempotency::Write],
        ) -> Result<(), lambda_idempotency::store::TransactError> {
            self.requests
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if self.faulty(writes) {
                return Err(throttled());
            }
            self.inner.commit(record, writes).await?;
            self.watch(writes);
            Ok(())
        }
        async fn release(
            &self,
            id: &str,
            owner: &str,
        ) -> Result<(), lambda_idempotency::StoreError> {
            self.inner.release(id, owner).await
        }
        async fn get_many(
            &self,
            ids: &[String],
        ) -> Result<Vec<lambda_idempotency::store::Record>, lambda_idempotency::StoreError>
        {
            self.requests
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.inner.get_many(ids).await
        }
        fn item_size(&self, record: &lambda_idempotency::store::Record) -> usize {
            self.inner.item_size(record)
        }
        async fn commit_many(
            &self,
            commits: &[lambda_idempotency::store::Commit<'_>],
        ) -> Result<(), lambda_idempotency::store::CommitsError> {
            self.requests
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let writes: Vec<lambda_idempotency::Write> = commits
                .iter()
                .flat_map(|c| c.writes.iter().cloned())
                .collect();
            if self.faulty(&writes) {
                return Err(lambda_idempotency::store::CommitsError::Transaction(
                    throttled(),
                ));
            }
            self.inner.commit_many(commits).await?;
            self.watch(&writes);
            Ok(())
        }
    }

    /// 2,000 payments over 4 shards and 100 accounts (account `a` in shard
    /// `a % 4`), each account's `j`-th payment `2^j` cents: superincreasing,
    /// so a balance is `2^k - 1` exactly when the account's first `k`
    /// payments, and no other, are applied. Read as Lambda reads a stream
    /// (batches of 100 per shard, again from the lowest failed sequence
    /// number), with account `acct-7`'s first commits failing: at every
    /// commit, every account's balance is such a prefix; every balance ends
    /// at `2^20 - 1`, each payment applied once; and the whole run sends at
    /// most 0.2 requests per record.
    #[tokio::test]
    async fn each_accounts_credits_apply_in_order_at_batch_speed() {
        let store = std::sync::Arc::new(Watched {
            inner: MemoryStore::new(),
            held: "acct-7".to_owned(),
            failures: 3.into(),
            requests: 0.into(),
            seen: std::sync::Mutex::default(),
        });
        let engine = Idempotency::new(store.clone(), App::config().disabled(false));
        let app = App::new(engine, Accounts::memory(store.inner.clone(), "accounts"));
        // Each shard's records: (partition key = account, data).
        let mut shards: [Vec<(String, String)>; 4] = Default::default();
        let mut paid = [0u32; 100];
        for n in 0..2000u64 {
            let a = (n * 37 % 100) as usize;
            let amount = 1i64 << paid[a];
            paid[a] += 1;
            let account = format!("acct-{a}");
            let data = serde_json::json!({"payment_id": format!("pay-{n}"),
                                          "account_id": account, "amount_cents": amount});
            shards[a % 4].push((account, data.to_string()));
        }
        let mut redelivered = 0;
        for (shard, records) in shards.iter().enumerate() {
            let mut at = 0;
            while at < records.len() {
                let batch: Vec<(&str, &[u8])> = records[at..(at + 100).min(records.len())]
                    .iter()
                    .map(|(key, data)| (key.as_str(), data.as_bytes()))
                    .collect();
                let event = kinesis_event("payments", shard as u32, at as u64, &batch);
                let batch = event["Records"].as_array().unwrap();
                let response = testing::invoke(|e| app.handle(e), &event).await;
                match response.failed_ids().as_slice() {
                    [] => at += batch.len(),
                    failed => {
                        let [seq] = failed else {
                            panic!("one per shard: {failed:?}");
                        };
                        let from = batch
                            .iter()
                            .position(|r| r["kinesis"]["sequenceNumber"] == seq.as_str())
                            .unwrap();
                        redelivered += batch.len() - from;
                        at += from;
                    }
                }
            }
        }
        assert!(
            redelivered > 0,
            "acct-7's failures held its shard's checkpoint"
        );
        let seen = store.seen.lock().unwrap().clone();
        assert!(seen.len() >= 2000);
        for (account, balance) in seen.iter() {
            assert_eq!(
                (balance + 1).count_ones(),
                1,
                "{account} at {balance}: not its first payments in order"
            );
        }
        for a in 0..100 {
            let account = format!("acct-{a}");
            assert_eq!(
                app.accounts().balance(&account).await.unwrap(),
                Some((1 << 20) - 1),
                "{account}"
            );
        }
        let requests = store.requests.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            requests as f64 / 2000.0 <= 0.2,
            "{requests} requests for 2,000 records"
        );
    }
}
