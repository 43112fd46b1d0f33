//! Batch commits through the pipeline on the memory store: how many
//! transactions a batch takes, what each holds, and that every record is
//! applied once whatever the store answers.

use super::test_source::*;
use crate::batch::{FailureReason, Ordering};
use crate::error::{HandlerError, StoreError};
use crate::record::Record;
use crate::store::{Claim, Commit, CommitsError, MemoryStore, RecordWrite, Store, TransactError};
use crate::value::AttrValue;
use crate::write::{Cond, Item, Staged, Write};
use crate::{CommitMode, Config, Idempotency, KeySelector, Outcome, config::TerminalErrors};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the store was asked to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sent {
    /// One record alone ([`Store::commit`]): its id.
    One(String),
    /// One batch transaction ([`Store::commit_many`]): its record ids.
    Many(Vec<String>),
}

/// A memory store that logs its commits, checks that no transaction holds
/// two actions on one item, and can be told to cancel batch transactions
/// by conflicts, or to apply one and then answer with an error (a timeout).
#[derive(Debug, Default)]
struct Logged {
    inner: MemoryStore,
    sent: Mutex<Vec<Sent>>,
    conflicts: AtomicU32,
    time_out_after_applying: AtomicU32,
}

fn id_of(record: RecordWrite<'_>) -> String {
    match record {
        RecordWrite::Claim { record, .. } | RecordWrite::Fenced(record) => record.id.clone(),
        RecordWrite::None => String::new(),
    }
}

#[async_trait::async_trait]
impl Store for Logged {
    async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError> {
        self.inner.claim(record, now_ms).await
    }
    async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
        self.inner.release(id, owner).await
    }
    async fn get_many(&self, ids: &[String]) -> Result<Vec<Record>, StoreError> {
        self.inner.get_many(ids).await
    }
    async fn commit(&self, record: RecordWrite<'_>, writes: &[Write]) -> Result<(), TransactError> {
        self.sent.lock().unwrap().push(Sent::One(id_of(record)));
        self.inner.commit(record, writes).await
    }
    async fn commit_many(&self, commits: &[Commit<'_>]) -> Result<(), CommitsError> {
        let ids = commits.iter().map(|c| id_of(c.record)).collect();
        self.sent.lock().unwrap().push(Sent::Many(ids));
        let mut items = std::collections::HashSet::new();
        for c in commits {
            for w in c.writes {
                assert!(
                    items.insert((w.table.clone(), crate::write::key_text(&w.key))),
                    "two actions on one item in one transaction"
                );
            }
        }
        if self.conflicts.load(SeqCst) > 0 {
            self.conflicts.fetch_sub(1, SeqCst);
            return Err(CommitsError::Transaction(TransactError::Conflict(
                StoreError::Backend {
                    operation: "TransactWriteItems",
                    source: "TransactionConflict".into(),
                },
            )));
        }
        let result = self.inner.commit_many(commits).await;
        if result.is_ok() && self.time_out_after_applying.load(SeqCst) > 0 {
            self.time_out_after_applying.fetch_sub(1, SeqCst);
            return Err(CommitsError::Transaction(TransactError::Store(
                StoreError::Backend {
                    operation: "TransactWriteItems",
                    source: "timed out".into(),
                },
            )));
        }
        result
    }
}

impl Logged {
    fn sent(&self) -> Vec<Sent> {
        std::mem::take(&mut *self.sent.lock().unwrap())
    }

    fn balance(&self, account: &str) -> Option<i64> {
        self.inner
            .item("accounts", &account_key(account))?
            .get("balance")?
            .as_i64()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Payment {
    payment_id: String,
    account_id: String,
    amount_cents: i64,
}

fn account_key(account: &str) -> Item {
    Item::from([("pk".to_owned(), AttrValue::s(account))])
}

/// Credits the account; a negative amount is a debit that needs the funds.
async fn pay(r: TestRecord<Payment>) -> Result<Staged<String>, HandlerError> {
    let p = r.body;
    let mut write =
        Write::update("accounts", account_key(&p.account_id)).add("balance", p.amount_cents);
    if p.amount_cents < 0 {
        write = write
            .when(Cond::ge("balance", -p.amount_cents))
            .or_reject("insufficient funds");
    }
    Ok(Staged::new(p.payment_id).write(write))
}

fn processor(store: &Arc<Logged>, config: Config) -> TestProcessor {
    let config = config
        .commit_mode(CommitMode::Optimistic)
        .on_terminal_error(TerminalErrors::Record)
        .disabled(false);
    let engine = Idempotency::new(store.clone(), config);
    TestProcessor::new(engine, KeySelector::pointer("/payment_id"))
}

fn config() -> Config {
    Config::with_prefix("pay").batch_commits(true)
}

fn body(id: &str, account: &str, amount: i64) -> String {
    serde_json::json!({"payment_id": id, "account_id": account, "amount_cents": amount}).to_string()
}

/// An unordered batch of `(payment, account, amount)`.
fn standard(payments: &[(&str, &str, i64)]) -> crate::batch::StreamEvent<TestMessage> {
    batch_of(
        payments
            .iter()
            .map(|(id, account, amount)| rec(Some(id), &body(id, account, *amount)))
            .collect(),
    )
}

/// An ordered batch, each payment in its account's lane.
fn fifo(payments: &[(&str, &str, i64)]) -> crate::batch::StreamEvent<TestMessage> {
    batch_of(
        payments
            .iter()
            .map(|(id, account, amount)| laned(id, Some(account), &body(id, account, *amount)))
            .collect(),
    )
}

fn rid(payment: &str) -> String {
    crate::IdempotencyKey::new("pay", &serde_json::json!(payment))
        .unwrap()
        .as_str()
        .to_owned()
}

fn many(payments: &[&str]) -> Sent {
    Sent::Many(payments.iter().map(|p| rid(p)).collect())
}

fn ten() -> Vec<(String, String, i64)> {
    (0..10)
        .map(|i| (format!("p{i}"), format!("a{i}"), 100 + i))
        .collect()
}

fn refs(v: &[(String, String, i64)]) -> Vec<(&str, &str, i64)> {
    v.iter()
        .map(|(p, a, n)| (p.as_str(), a.as_str(), *n))
        .collect()
}

fn executed<T>(report: &crate::batch::BatchReport<T>) -> usize {
    report
        .records
        .iter()
        .filter(|r| matches!(r.outcome, Ok(Outcome::Executed(_))))
        .count()
}

#[tokio::test]
async fn ten_new_records_commit_in_one_transaction() {
    let store = Arc::new(Logged::default());
    let payments = ten();
    let report = processor(&store, config())
        .process(standard(&refs(&payments)), None, pay)
        .await;
    assert_eq!(executed(&report), 10);
    let ids: Vec<&str> = payments.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(store.sent(), [many(&ids)]);
    for (_, account, amount) in &payments {
        assert_eq!(store.balance(account), Some(*amount));
    }

    // Switched off: one transaction per record, as before.
    let store = Arc::new(Logged::default());
    let report = processor(&store, config().batch_commits(false))
        .process(standard(&refs(&payments)), None, pay)
        .await;
    assert_eq!(executed(&report), 10);
    let sent = store.sent();
    assert_eq!(sent.len(), 10);
    assert!(sent.iter().all(|s| matches!(s, Sent::One(_))), "{sent:?}");
}

#[tokio::test]
async fn a_duplicate_is_replayed_and_the_others_commit_again_without_it() {
    let store = Arc::new(Logged::default());
    let app = processor(&store, config());
    let payments = ten();
    // p3 committed before (no receive count: no read ahead, so the batch
    // transaction meets its record).
    app.process(standard(&refs(&payments[3..4])), None, pay)
        .await;
    store.sent();
    let report = app.process(standard(&refs(&payments)), None, pay).await;
    assert_eq!(executed(&report), 9);
    assert!(
        matches!(&report.records[3].outcome, Ok(Outcome::Replayed(Some(p))) if p == "p3"),
        "{:?}",
        report.records[3].outcome
    );
    let all: Vec<&str> = payments.iter().map(|p| p.0.as_str()).collect();
    let rest: Vec<&str> = all.iter().copied().filter(|p| *p != "p3").collect();
    assert_eq!(store.sent(), [many(&all), many(&rest)]);
    assert_eq!(store.balance("a3"), Some(103), "credited once");
    assert_eq!(store.balance("a4"), Some(104));
}

#[tokio::test]
async fn a_rejected_staged_write_rejects_its_record_only() {
    let store = Arc::new(Logged::default());
    let mut payments = ten();
    payments[5].2 = -50; // a debit of an empty account
    let report = processor(&store, config())
        .process(standard(&refs(&payments)), None, pay)
        .await;
    assert_eq!(executed(&report), 9);
    assert!(
        matches!(&report.records[5].outcome, Ok(Outcome::Rejected { error, replayed: false }) if error == "insufficient funds"),
        "{:?}",
        report.records[5].outcome
    );
    let all: Vec<&str> = payments.iter().map(|p| p.0.as_str()).collect();
    let rest: Vec<&str> = all.iter().copied().filter(|p| *p != "p5").collect();
    assert_eq!(store.sent(), [many(&all), many(&rest)]);
    assert_eq!(store.balance("a5"), None);
    assert_eq!(store.balance("a6"), Some(106));
}

#[tokio::test]
async fn two_records_on_one_item_never_share_a_transaction() {
    let store = Arc::new(Logged::default());
    let payments = [
        ("p0", "a", 1),
        ("p1", "b", 10),
        ("p2", "a", 100),
        ("p3", "a", 1000),
        ("p4", "b", 10000),
    ];
    let report = processor(&store, config())
        .process(standard(&payments), None, pay)
        .await;
    assert_eq!(executed(&report), 5);
    // The second and third on `a` each commit after the one before.
    assert_eq!(
        store.sent(),
        [
            many(&["p0", "p1"]),
            many(&["p2", "p4"]),
            Sent::One(rid("p3"))
        ]
    );
    assert_eq!(store.balance("a"), Some(1101));
    assert_eq!(store.balance("b"), Some(10010));
}

#[tokio::test]
async fn fifo_lanes_commit_in_order_and_share_transactions() {
    let store = Arc::new(Logged::default());
    let payments = [
        ("a1", "a", 1),
        ("b1", "b", 10),
        ("a2", "a", 100),
        ("c1", "c", 5),
        ("a3", "a", 1000),
        ("b2", "b", 20),
    ];
    let report = processor(&store, config())
        .ordering(Ordering::SkipLane)
        .process(fifo(&payments), None, pay)
        .await;
    assert_eq!(executed(&report), 6);
    assert_eq!(
        store.sent(),
        [
            many(&["a1", "b1", "c1"]),
            many(&["a2", "b2"]),
            Sent::One(rid("a3"))
        ]
    );
    assert_eq!(store.balance("a"), Some(1101));
}

#[tokio::test]
async fn more_lanes_than_permits_do_not_deadlock() {
    let store = Arc::new(Logged::default());
    let payments: Vec<(String, String, i64)> = (0..40)
        .map(|i| (format!("p{i}"), format!("g{}", i % 20), 1))
        .collect();
    let app = processor(&store, config())
        .ordering(Ordering::SkipLane)
        .concurrency(4);
    let report = tokio::time::timeout(
        Duration::from_secs(10),
        app.process(fifo(&refs(&payments)), None, pay),
    )
    .await
    .expect("the batch finishes");
    assert_eq!(executed(&report), 40);
    for g in 0..20 {
        assert_eq!(store.balance(&format!("g{g}")), Some(2));
    }
    let sent = store.sent();
    assert!(
        sent.len() < 40,
        "some records shared transactions: {sent:?}"
    );
}

#[tokio::test]
async fn over_a_hundred_actions_are_split() {
    let store = Arc::new(Logged::default());
    let payments: Vec<(String, String, i64)> = (0..60)
        .map(|i| (format!("p{i}"), format!("a{i}"), 1))
        .collect();
    let report = processor(&store, config())
        .concurrency(100)
        .process(standard(&refs(&payments)), None, pay)
        .await;
    assert_eq!(executed(&report), 60);
    let sizes: Vec<usize> = store
        .sent()
        .iter()
        .map(|s| match s {
            Sent::Many(ids) => ids.len(),
            Sent::One(_) => 1,
        })
        .collect();
    // 2 actions each: 50 fill the first transaction's 100.
    assert_eq!(sizes, [50, 10]);
}

#[tokio::test]
async fn conflicts_retry_then_fall_back_to_one_transaction_per_record() {
    let store = Arc::new(Logged::default());
    store.conflicts.store(u32::MAX, SeqCst);
    let payments = ten();
    let report = processor(&store, config())
        .process(standard(&refs(&payments)), None, pay)
        .await;
    assert_eq!(executed(&report), 10);
    let sent = store.sent();
    let (batches, ones): (Vec<_>, Vec<_>) = sent.iter().partition(|s| matches!(s, Sent::Many(_)));
    assert_eq!(batches.len(), 3, "three attempts: {sent:?}");
    assert_eq!(ones.len(), 10, "then one by one: {sent:?}");
    for (_, account, amount) in &payments {
        assert_eq!(store.balance(account), Some(*amount), "applied once");
    }
}

#[tokio::test]
async fn a_batch_applied_but_unanswered_is_found_record_by_record() {
    let store = Arc::new(Logged::default());
    store.time_out_after_applying.store(1, SeqCst);
    let payments = ten();
    let report = processor(&store, config())
        .process(standard(&refs(&payments)), None, pay)
        .await;
    // Each record's own commit finds its record, written by this
    // invocation: executed, not replayed, and applied once.
    assert_eq!(executed(&report), 10, "{:?}", report.records);
    for (_, account, amount) in &payments {
        assert_eq!(store.balance(account), Some(*amount), "applied once");
    }
    let failures: Vec<&FailureReason> = report
        .records
        .iter()
        .filter_map(|r| r.outcome.as_ref().err())
        .collect();
    assert!(failures.is_empty(), "{failures:?}");
}

#[tokio::test]
async fn in_batch_copies_across_lanes_wait_for_their_first_copy_without_deadlock() {
    // p1 is a's third payment, and again b's second: b's copy waits for it
    // while a's first two commit (the group must not wait for the copy);
    // once more alone in c.
    let payments = [
        ("a1", "a", "a", 1),
        ("q1", "b", "b", 10),
        ("p1", "a", "a", 100),
        ("a2", "a", "a", 1000),
        ("p1", "b", "a", 100),
        ("p1", "c", "a", 100),
    ];
    let event = batch_of(
        payments
            .iter()
            .enumerate()
            .map(|(i, (id, group, account, n))| {
                laned(&format!("m{i}"), Some(group), &body(id, account, *n))
            })
            .collect(),
    );
    for mode in [Ordering::SkipLane, Ordering::StopBatch] {
        let store = Arc::new(Logged::default());
        let app = processor(&store, config()).ordering(mode);
        let report = tokio::time::timeout(
            Duration::from_secs(10),
            app.process(event.clone(), None, pay),
        )
        .await
        .expect("the batch finishes");
        let outcomes: Vec<_> = report.records.iter().map(|r| &r.outcome).collect();
        for i in [0, 1, 2, 3] {
            assert!(
                matches!(outcomes[i], Ok(Outcome::Executed(_))),
                "{mode:?} {outcomes:?}"
            );
        }
        for i in [4, 5] {
            assert!(
                matches!(outcomes[i], Ok(Outcome::Replayed(_))),
                "{mode:?} {outcomes:?}"
            );
        }
        assert_eq!(store.balance("a"), Some(1101), "{mode:?}: p1 once");
        assert_eq!(store.balance("b"), Some(10), "{mode:?}");
    }
}
