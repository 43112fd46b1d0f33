//! Store faults and races (issue 6): DynamoDB requests fail between the SDK
//! and moto (the launcher's fault injector: throttling, 500s, connection
//! resets, answers slower than the SDK's attempt timeout), several function
//! instances race over the same keys, a lease lapses under its owner. The
//! payments function must still credit every payment exactly once, report
//! every failed record in `batchItemFailures`, never fail a whole batch, and
//! leave no record in progress past its lease.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency::CommitMode;
use lambda_idempotency::testing::FailedIds as _;
use lambda_idempotency::{
    DynamoDbStore, Idempotency, Store, store::Claim, store::Record, store::Status,
    store::TableConfig,
};
use lambda_runtime::{Context, LambdaEvent};
use payments::{Accounts, App};
use serde_json::json;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};
use test_kit::events::{Msg, sqs_event};
use test_kit::{
    Fault, FaultCounts, FaultPlan, Moto, PaymentTables, now_ms, payment_tables_on, unique_name,
};

/// The fault tests' own moto server: their timed runs (short SDK timeouts,
/// injected stalls) must not queue behind the other tests' requests, which
/// the launcher serves one at a time.
fn moto() -> &'static Moto {
    static MOTO: std::sync::OnceLock<Moto> = std::sync::OnceLock::new();
    MOTO.get_or_init(|| Moto::start(&[]))
}

async fn payment_tables(prefix: &str) -> PaymentTables {
    payment_tables_on(moto(), prefix).await
}

/// The Lambda deadline each invocation gets: it caps the engine's lease.
const DEADLINE: Duration = Duration::from_secs(2);
/// The test clients' per-attempt timeout (the crate's is 3 s).
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(300);
/// How late a `slow` fault answers: past [`ATTEMPT_TIMEOUT`].
const SLOW: Duration = Duration::from_millis(500);
/// How long a failed record's group waits before it is delivered again.
const VISIBILITY: Duration = Duration::from_millis(100);

/// A small deterministic RNG (xorshift64*): the test needs no crate for it.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// A client with the crate's retries (3 attempts, 50 ms backoff) and short
/// timeouts, so a `slow` answer costs 300 ms per attempt, not 3 s.
async fn fast_client() -> Client {
    client_with_attempt_timeout(ATTEMPT_TIMEOUT).await
}

/// A client with the crate's retries and the given per-attempt timeout.
async fn client_with_attempt_timeout(attempt: Duration) -> Client {
    use aws_config::timeout::TimeoutConfig;
    let config = moto()
        .sdk_config_loader()
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(1))
                .operation_attempt_timeout(attempt)
                .operation_timeout(attempt * 4)
                .build(),
        )
        .load()
        .await;
    Client::new(&config)
}

fn app(client: Client, t: &PaymentTables, mode: CommitMode) -> App {
    let engine = Idempotency::new(
        DynamoDbStore::new(client.clone(), TableConfig::new(t.idempotency.clone())),
        App::config().commit_mode(mode),
    );
    App::new(
        engine,
        Accounts::from_table(lambda_idempotency::Table::dynamodb(
            client,
            t.accounts.clone(),
        )),
    )
}

/// A payment stream: `unique` payments over `accounts` accounts (FIFO group =
/// account), every `dup_every`-th sent again a little later (a producer
/// retry: a new messageId, the same body). Amounts are 1000..=1099 cents, so
/// a balance off by `c` cents is off by `c / 1000` payments.
struct Stream {
    messages: Vec<Msg>,
    expected: BTreeMap<String, i64>,
    unique: usize,
}

fn stream(unique: usize, accounts: u64, dup_every: usize, seed: u64) -> Stream {
    let mut rng = Rng::new(seed);
    let mut keyed: Vec<(usize, Msg)> = Vec::new();
    let mut expected = BTreeMap::new();
    for i in 0..unique {
        let account = format!("acct-{}", rng.below(accounts));
        let amount = 1000 + rng.below(100);
        let body = json!({
            "payment_id": format!("pay-{i}"),
            "account_id": account,
            "amount_cents": amount,
        })
        .to_string();
        *expected.entry(account.clone()).or_default() += amount as i64;
        keyed.push((
            i * 100,
            Msg::new(format!("m-{i}"), &body).in_group(&account),
        ));
        if i % dup_every == 0 {
            let later = (i + 1 + rng.below(40) as usize) * 100 + 50;
            keyed.push((
                later,
                Msg::new(format!("m-{i}-again"), body).in_group(account),
            ));
        }
    }
    keyed.sort_by_key(|(k, _)| *k);
    Stream {
        messages: keyed.into_iter().map(|(_, m)| m).collect(),
        expected,
        unique,
    }
}

/// What draining a queue took.
#[derive(Debug, Default)]
struct Drained {
    invocations: usize,
    deliveries: usize,
    reported_failures: usize,
    whole_batch_errors: usize,
    unknown_ids: usize,
    left: usize,
    max_deliveries: u32,
    /// The longest lease seen ahead of a scan (ms), and the scans made.
    max_lease_ahead_ms: u64,
    lease_scans: usize,
    elapsed: Duration,
}

/// How a queue is drained.
#[derive(Clone, Copy)]
struct Drain<'a> {
    /// Invocations in flight at once (Lambda polls a FIFO queue with several
    /// pollers; one message group is only ever in one batch).
    concurrency: usize,
    /// Time budget; the invocations are bounded too.
    budget: Duration,
    /// Every 10 invocations, scan the idempotency table and record how far
    /// ahead the in-progress leases reach.
    audit: Option<(&'a Client, &'a str)>,
    /// The messages were delivered before: `ApproximateReceiveCount` starts
    /// at 2 (the processor then reads the batch's records ahead).
    redelivery: bool,
}

impl Default for Drain<'_> {
    fn default() -> Self {
        Self {
            concurrency: 1,
            budget: Duration::from_secs(30),
            audit: None,
            redelivery: false,
        }
    }
}

/// A FIFO queue as the event source mapping sees it: batches of up to 10 in
/// queue order, a message group in at most one batch at a time; a failed
/// record stays at its place and its group waits [`VISIBILITY`] (the other
/// groups go on); everything not in `batchItemFailures` is deleted.
async fn drain(app: &App, messages: &[Msg], how: Drain<'_>) -> Drained {
    struct Pending {
        msg: Msg,
        deliveries: u32,
        in_flight: bool,
        done: bool,
    }
    type Invocation = (Vec<usize>, Result<Vec<String>, String>);
    let start = Instant::now();
    let mut pending: Vec<Pending> = messages
        .iter()
        .map(|m| Pending {
            msg: m.clone(),
            deliveries: u32::from(how.redelivery),
            in_flight: false,
            done: false,
        })
        .collect();
    let group = |p: &Pending| p.msg.group.clone().unwrap_or_default();
    let mut busy: HashSet<String> = HashSet::new();
    let mut parked: HashMap<String, Instant> = HashMap::new();
    let mut running: tokio::task::JoinSet<Invocation> = tokio::task::JoinSet::new();
    let mut out = Drained::default();
    let max_invocations = messages.len() * 4;
    let mut left = pending.len();
    while left > 0 {
        let now = Instant::now();
        parked.retain(|_, until| *until > now);
        let open = out.invocations < max_invocations && start.elapsed() < how.budget;
        while open && running.len() < how.concurrency {
            let mut batch = Vec::new();
            let mut taken: HashSet<String> = HashSet::new();
            for (i, p) in pending.iter().enumerate() {
                let g = group(p);
                if p.done || busy.contains(&g) || parked.contains_key(&g) {
                    continue;
                }
                taken.insert(g);
                batch.push(i);
                if batch.len() == 10 {
                    break;
                }
            }
            if batch.is_empty() {
                break;
            }
            busy.extend(taken);
            let msgs: Vec<Msg> = batch.iter().map(|&i| pending[i].msg.clone()).collect();
            let mut event = sqs_event("payments.fifo", &msgs);
            let records = event["Records"].as_array_mut().unwrap();
            for (record, &i) in records.iter_mut().zip(&batch) {
                let p = &mut pending[i];
                p.in_flight = true;
                p.deliveries += 1;
                out.max_deliveries = out.max_deliveries.max(p.deliveries);
                record["attributes"]["ApproximateReceiveCount"] = json!(p.deliveries.to_string());
            }
            out.invocations += 1;
            out.deliveries += batch.len();
            let mut ctx = Context::default();
            ctx.request_id = format!("faults-{}", out.invocations);
            ctx.deadline = now_ms() + DEADLINE.as_millis() as u64;
            let app = app.clone();
            running.spawn(async move {
                let result = app
                    .handle(LambdaEvent::new(event, ctx))
                    .await
                    .map(|r| {
                        r.batch_item_failures
                            .into_iter()
                            .map(|f| f.item_identifier)
                            .collect()
                    })
                    .map_err(|e| e.to_string());
                (batch, result)
            });
        }
        if running.is_empty() {
            if !open {
                break;
            }
            // Every group with work is parked: wait for the first to return.
            let next = parked.values().min().copied().unwrap_or(now);
            tokio::time::sleep(
                next.saturating_duration_since(now)
                    .max(Duration::from_millis(1)),
            )
            .await;
            continue;
        }
        let (batch, result) = running
            .join_next()
            .await
            .expect("a running invocation")
            .unwrap();
        let failed: HashSet<String> = match result {
            Ok(failed) => failed.into_iter().collect(),
            Err(e) => {
                // The whole batch comes back: what the test must never see.
                eprintln!("whole-batch error: {e}");
                out.whole_batch_errors += 1;
                batch.iter().map(|&i| pending[i].msg.id.clone()).collect()
            }
        };
        out.reported_failures += failed.len();
        out.unknown_ids += failed
            .iter()
            .filter(|id| !batch.iter().any(|&i| &pending[i].msg.id == *id))
            .count();
        let retry_at = Instant::now() + VISIBILITY;
        for &i in &batch {
            let g = group(&pending[i]);
            busy.remove(&g);
            let p = &mut pending[i];
            p.in_flight = false;
            if failed.contains(&p.msg.id) {
                parked.insert(g, retry_at);
            } else {
                p.done = true;
                left -= 1;
            }
        }
        if let Some((client, table)) = how.audit
            && out.invocations % 10 == 0
            && let Ok(records) = scan(client, table).await
        {
            let now = now_ms();
            out.lease_scans += 1;
            for r in records.iter().filter(|r| r.status == Status::InProgress) {
                let ahead = r
                    .in_progress_expiration
                    .unwrap_or(u64::MAX)
                    .saturating_sub(now);
                out.max_lease_ahead_ms = out.max_lease_ahead_ms.max(ahead);
            }
        }
    }
    debug_assert!(pending.iter().all(|p| !p.in_flight));
    out.left = left;
    out.elapsed = start.elapsed();
    out
}

/// The idempotency table's items (consistent scan, bounded pages).
async fn scan(client: &Client, table: &str) -> Result<Vec<Record>, String> {
    let mut records = Vec::new();
    let mut start = None;
    for _ in 0..100 {
        let out = client
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())?;
        for item in out.items() {
            records.push(record(item));
        }
        start = out.last_evaluated_key().cloned();
        if start.is_none() {
            return Ok(records);
        }
    }
    Err("scan: too many pages".into())
}

/// An item of the idempotency table (the default attribute names).
fn record(item: &HashMap<String, AttributeValue>) -> Record {
    let a = lambda_idempotency::store::Attributes::default();
    let s = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned();
    let n = |k: &str| {
        item.get(k)
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse().ok())
    };
    Record {
        id: s(&a.id).unwrap_or_default(),
        status: s(&a.status)
            .and_then(|s| Status::parse(&s))
            .expect("a status"),
        expiration: n(&a.expiration).unwrap_or(0),
        in_progress_expiration: n(&a.in_progress_expiration),
        data: s(&a.data),
        error: s(&a.error),
        validation: s(&a.validation),
        owner: s(&a.owner),
        outbox: None,
    }
}

/// Balances against the expected sums: (cents missing, cents credited twice).
async fn balance_errors(accounts: &Accounts, expected: &BTreeMap<String, i64>) -> (i64, i64) {
    let (mut lost, mut twice) = (0, 0);
    for (account, sum) in expected {
        let balance = accounts.balance(account).await.unwrap().unwrap_or(0);
        if balance < *sum {
            lost += sum - balance;
        } else {
            twice += balance - sum;
        }
    }
    (lost, twice)
}

/// 1000 unique payments over 20 accounts, every 5th sent twice (1200
/// messages), through the payments function in batches of 10 while 10 % of
/// the test's DynamoDB requests fail (throttling, throughput, 500, reset,
/// slow), until every message is done. Then the faults stop, and the whole
/// stream is delivered once more: it must change nothing.
async fn payments_under_faults(mode: CommitMode, seed: u64) -> Figures {
    let t = payment_tables("faults").await;
    let client = fast_client().await;
    let app = app(client.clone(), &t, mode);
    let s = stream(1000, 20, 5, seed);
    let started = Instant::now();
    let moto = moto();
    moto.inject(
        &t.marker,
        &FaultPlan::new(0.10, &Fault::STORE).seed(seed).slow(SLOW),
    )
    .await;
    // Audits scan with the crate's timeouts (a scan of 1000 items can take
    // longer than the test client's 300 ms).
    let plain = moto.dynamodb().await;
    let run = drain(
        &app,
        &s.messages,
        Drain {
            concurrency: 3,
            // A bound, not a duration: the drain ends when every message is
            // done (seconds on a quiet machine), later under load.
            budget: Duration::from_secs(120),
            audit: Some((&plain, &t.idempotency)),
            ..Drain::default()
        },
    )
    .await;
    let faults = moto.clear_faults(&t.marker).await;

    let after_run = scan(&plain, &t.idempotency).await.unwrap();
    let now = now_ms();
    let in_progress: Vec<&Record> = after_run
        .iter()
        .filter(|r| r.status == Status::InProgress)
        .collect();
    // A record left in progress must lapse within one lease (the deadline).
    for r in &in_progress {
        let lease_end = r.in_progress_expiration.expect("a lease");
        assert!(
            lease_end <= now + DEADLINE.as_millis() as u64,
            "{mode:?}: {} in progress until {lease_end}, past now {now} + one lease",
            r.id
        );
    }
    // Balances are read with the crate's timeouts too: the check must not
    // fail on the test client's 300 ms attempt timeout.
    let audit = Accounts::from_table(lambda_idempotency::Table::dynamodb(
        plain.clone(),
        t.accounts.clone(),
    ));
    let (lost, twice) = balance_errors(&audit, &s.expected).await;

    // After one lease every record is claimable; a redelivery of the whole
    // stream (no faults now) completes what is left and applies nothing.
    if !in_progress.is_empty() {
        tokio::time::sleep(DEADLINE).await;
    }
    let again = drain(
        &app,
        &s.messages,
        Drain {
            concurrency: 3,
            redelivery: true,
            ..Drain::default()
        },
    )
    .await;
    let final_records = scan(&plain, &t.idempotency).await.unwrap();
    let (lost_after, twice_after) = balance_errors(&audit, &s.expected).await;
    let completed = final_records
        .iter()
        .filter(|r| r.status == Status::Completed)
        .count();

    let figures = Figures {
        mode,
        messages: s.messages.len(),
        unique: s.unique,
        run,
        faults,
        in_progress_after_run: in_progress.len(),
        lost_cents: lost,
        twice_cents: twice,
        replay: again,
        completed,
        in_progress_at_end: final_records.len() - completed,
        lost_cents_at_end: lost_after,
        twice_cents_at_end: twice_after,
        wall: started.elapsed(),
    };
    eprintln!("{figures}");

    let f = &figures;
    assert_eq!(f.run.whole_batch_errors, 0, "{f}");
    assert_eq!(f.run.unknown_ids, 0, "{f}");
    assert_eq!(f.run.left, 0, "{mode:?}: messages never done: {f}");
    assert!(f.faults.injected >= 50, "faults were injected: {f}");
    assert_eq!(f.replay.whole_batch_errors, 0, "{f}");
    assert_eq!(f.replay.reported_failures, 0, "{f}");
    assert_eq!(f.replay.left, 0, "{f}");
    assert_eq!(f.completed, f.unique, "{f}");
    assert_eq!(f.in_progress_at_end, 0, "{f}");
    assert!(
        f.run.max_lease_ahead_ms <= DEADLINE.as_millis() as u64,
        "a lease reached past the deadline: {f}"
    );
    assert_eq!(f.lost_cents, 0, "payments lost: {f}");
    assert_eq!(f.lost_cents_at_end, 0, "payments lost: {f}");
    assert_eq!(
        f.twice_cents_at_end, f.twice_cents,
        "the replay applied something: {f}"
    );
    figures
}

struct Figures {
    mode: CommitMode,
    messages: usize,
    unique: usize,
    run: Drained,
    faults: FaultCounts,
    in_progress_after_run: usize,
    lost_cents: i64,
    twice_cents: i64,
    replay: Drained,
    completed: usize,
    in_progress_at_end: usize,
    lost_cents_at_end: i64,
    twice_cents_at_end: i64,
    wall: Duration,
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.run;
        write!(
            f,
            "[faults {:?}] {} messages ({} unique payments); {}; {} invocations, {} deliveries, \
             {} reported failures, {} whole-batch errors, max {} deliveries of one message, \
             {} left; max lease ahead {} ms over {} scans; {} in progress after the run; \
             lost {} cents (~{} payments), applied twice {} cents (~{} payments); replay of \
             the stream: {} failures, {} completed records, {} in progress; {:.1?} (run {:.1?})",
            self.mode,
            self.messages,
            self.unique,
            self.faults,
            r.invocations,
            r.deliveries,
            r.reported_failures,
            r.whole_batch_errors,
            r.max_deliveries,
            r.left,
            r.max_lease_ahead_ms,
            r.lease_scans,
            self.in_progress_after_run,
            self.lost_cents,
            self.lost_cents / 1000,
            self.twice_cents,
            self.twice_cents / 1000,
            self.replay.reported_failures,
            self.completed,
            self.in_progress_at_end,
            self.wall,
            r.elapsed,
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optimistic_payments_exactly_once_under_store_faults() {
    let f = payments_under_faults(CommitMode::Optimistic, 11).await;
    assert_eq!(f.twice_cents, 0, "applied twice: {f}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_payments_exactly_once_under_store_faults() {
    let f = payments_under_faults(CommitMode::Fenced, 12).await;
    assert_eq!(f.twice_cents, 0, "applied twice: {f}");
}

/// Claim/complete credits with its own `UpdateItem`: an answer lost after
/// the credit was applied (a `slow` fault, or the SDK retrying it) credits
/// again. Reported, not asserted: the mode is there for comparison.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_complete_payments_under_store_faults_reported() {
    let f = payments_under_faults(CommitMode::ClaimThenComplete, 13).await;
    eprintln!(
        "[faults ClaimComplete] applied twice: {} cents (~{} payments) — expected from \
         `slow` faults on the credit's UpdateItem",
        f.twice_cents,
        f.twice_cents / 1000
    );
}

fn context(deadline_in: Duration) -> Context {
    let mut ctx = Context::default();
    ctx.request_id = unique_name("req");
    ctx.deadline = now_ms() + deadline_in.as_millis() as u64;
    ctx
}

/// 4 instances of the function (4 apps, each with its own client) drain
/// their own copies of one payment stream at the same time, so the same
/// payment ids are in flight in several instances at once: every payment is
/// credited once, in every mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_instances_over_overlapping_batches_apply_each_payment_once() {
    for (mode, seed) in [
        (CommitMode::Optimistic, 21),
        (CommitMode::Fenced, 22),
        (CommitMode::ClaimThenComplete, 23),
    ] {
        let started = Instant::now();
        let t = payment_tables("faults").await;
        let s = stream(120, 8, 4, seed);
        let n = s.messages.len();
        let mut tasks = Vec::new();
        // Two instances see the stream in the same order (maximal overlap),
        // two from a third and from two thirds of the way in.
        for (k, offset) in [0, 0, n / 3, 2 * n / 3].into_iter().enumerate() {
            let app = app(moto().dynamodb().await, &t, mode);
            let copy: Vec<Msg> = s.messages[offset..]
                .iter()
                .chain(&s.messages[..offset])
                .map(|m| {
                    let mut m = m.clone();
                    m.id = format!("i{k}-{}", m.id);
                    m
                })
                .collect();
            tasks.push(tokio::spawn(async move {
                drain(&app, &copy, Drain::default()).await
            }));
        }
        let mut runs = Vec::new();
        for task in tasks {
            runs.push(task.await.unwrap());
        }
        let check = app(moto().dynamodb().await, &t, mode);
        let (lost, twice) = balance_errors(check.accounts(), &s.expected).await;
        let records = scan(&moto().dynamodb().await, &t.idempotency)
            .await
            .unwrap();
        let completed = records
            .iter()
            .filter(|r| r.status == Status::Completed)
            .count();
        let conflicts: Vec<usize> = runs.iter().map(|r| r.reported_failures).collect();
        eprintln!(
            "[races {mode:?}] 4 instances x {n} messages ({} unique payments): failed \
             deliveries (in-progress conflicts) per instance {conflicts:?}, invocations {:?}; \
             lost {lost} cents, applied twice {twice} cents; {completed} completed records; \
             {:.1?}",
            s.unique,
            runs.iter().map(|r| r.invocations).collect::<Vec<_>>(),
            started.elapsed()
        );
        for r in &runs {
            assert_eq!(r.whole_batch_errors, 0, "{mode:?}: {r:?}");
            assert_eq!(r.unknown_ids, 0, "{mode:?}: {r:?}");
            assert_eq!(r.left, 0, "{mode:?}: messages never done: {r:?}");
        }
        assert_eq!((lost, twice), (0, 0), "{mode:?}: balances");
        assert_eq!(completed, s.unique, "{mode:?}");
        assert_eq!(records.len(), s.unique, "{mode:?}: records");
    }
}

/// The first owner of a payment is held up (its commit stalls 2 s in the
/// launcher before reaching moto) until its lease (400 ms: its invocation's
/// deadline) lapses; a second instance takes the payment over and commits.
/// Fenced: the first owner's commit is then rejected by the fence and its
/// record reported in `batchItemFailures`; the credit is applied once and
/// a redelivery replays. Optimistic: the stale commit fails its claim
/// condition and becomes a replay. Claim/complete (reported, not asserted):
/// the stale credit lands — the double effect the transactional modes avoid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_lease_rejects_the_first_owners_commit() {
    let first_deadline = Duration::from_millis(400);
    let stall = Duration::from_secs(2);
    for mode in [
        CommitMode::Fenced,
        CommitMode::Optimistic,
        CommitMode::ClaimThenComplete,
    ] {
        let t = payment_tables("faults").await;
        let moto = moto();
        let plain = moto.dynamodb().await;
        // The crate's 3 s attempt timeout outlasts the stall.
        let first = app(moto.dynamodb().await, &t, mode);
        let second = app(moto.dynamodb().await, &t, mode);
        // Claim/complete commits the credit alone (its plain conditional
        // UpdateItem, the first after the claim), the other modes in one
        // transaction with the record.
        let commit = match mode {
            CommitMode::ClaimThenComplete => "UpdateItem",
            _ => "TransactWriteItems",
        };
        moto.inject(
            &t.marker,
            &FaultPlan::new(1.0, &[Fault::Stall])
                .stall(stall)
                .max(1)
                .target(commit),
        )
        .await;
        let body = |id: &str, account: &str| {
            json!({"payment_id": id, "account_id": account, "amount_cents": 1000}).to_string()
        };
        let first_event = sqs_event(
            "payments.fifo",
            &[Msg::new("m-a", body("pay-x", "acct-1")).in_group("acct-1")],
        );
        let event = first_event.clone();
        let started = Instant::now();
        let first_run = tokio::spawn(async move {
            first
                .handle(LambdaEvent::new(event, context(first_deadline)))
                .await
        });
        // The first owner's commit is held by the launcher...
        let deadline = Instant::now() + Duration::from_secs(3);
        while moto.fault_counts(&t.marker).await.get(Fault::Stall) == 0 {
            assert!(Instant::now() < deadline, "{mode:?}: the commit never came");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // ...and its lease lapses.
        if mode != CommitMode::Optimistic {
            let records = scan(&plain, &t.idempotency).await.unwrap();
            let lease_end = records
                .iter()
                .find(|r| r.status == Status::InProgress)
                .and_then(|r| r.in_progress_expiration)
                .expect("the first owner's claim");
            let wait = lease_end.saturating_sub(now_ms()) + 30;
            assert!(wait <= first_deadline.as_millis() as u64 + 30);
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
        let taken_over_at = started.elapsed();
        let second_event = sqs_event(
            "payments.fifo",
            &[
                Msg::new("m-b", body("pay-x", "acct-1")).in_group("acct-1"),
                Msg::new("m-c", body("pay-y", "acct-2")).in_group("acct-2"),
            ],
        );
        let response = second
            .handle(LambdaEvent::new(second_event, context(DEADLINE)))
            .await
            .unwrap();
        assert!(response.failed_ids().is_empty(), "{mode:?}: {response:?}");
        let second_done_at = started.elapsed();
        assert!(
            second_done_at < stall,
            "{mode:?}: the takeover must finish while the first commit is held \
             ({second_done_at:?})"
        );
        let first_response = first_run.await.unwrap().unwrap();
        let balance = second.accounts().balance("acct-1").await.unwrap();
        eprintln!(
            "[lease race {mode:?}] takeover at {taken_over_at:?}, done at {second_done_at:?}; \
             first owner answered at {:?} with batchItemFailures {:?}; acct-1 balance {balance:?} \
             (one credit = 1000)",
            started.elapsed(),
            first_response.failed_ids()
        );
        match mode {
            CommitMode::Fenced => {
                assert_eq!(
                    first_response.failed_ids(),
                    ["m-a"],
                    "the stale commit is reported"
                );
                assert_eq!(balance, Some(1000), "applied once");
            }
            CommitMode::Optimistic => {
                assert!(
                    first_response.failed_ids().is_empty(),
                    "a replay: {first_response:?}"
                );
                assert_eq!(balance, Some(1000), "applied once");
            }
            _ => {}
        }
        // The first owner's record comes back: a replay, nothing applied.
        let before = balance;
        let response = second
            .handle(LambdaEvent::new(first_event, context(DEADLINE)))
            .await
            .unwrap();
        assert!(response.failed_ids().is_empty(), "{mode:?}: {response:?}");
        assert_eq!(
            second.accounts().balance("acct-1").await.unwrap(),
            before,
            "{mode:?}"
        );
        assert_eq!(
            second.accounts().balance("acct-2").await.unwrap(),
            Some(1000)
        );
        let counts = moto.clear_faults(&t.marker).await;
        assert_eq!(counts.get(Fault::Stall), 1, "{counts}");
    }
}

fn claim_record(id: &str) -> Record {
    let now = now_ms();
    Record {
        id: id.to_owned(),
        status: Status::InProgress,
        expiration: now / 1000 + 3600,
        in_progress_expiration: Some(now + 60_000),
        data: None,
        error: None,
        validation: None,
        owner: Some("owner-1".to_owned()),
        outbox: None,
    }
}

/// The crate's SDK settings (`lambda_idempotency::aws::aws_sdk_config_loader`: 3 attempts,
/// standard backoff) retry a throttled request: two throttled attempts, the
/// third goes through; every attempt throttled gives exactly 3 attempts and
/// a store error naming the operation and the throttling, nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_retries_throttling_then_fails_with_a_clear_store_error() {
    let t = payment_tables("faults").await;
    let moto = moto();
    let store = DynamoDbStore::new(
        moto.dynamodb().await,
        TableConfig::new(t.idempotency.clone()),
    );
    for (kind, code) in [
        (Fault::Throttle, "ThrottlingException"),
        (Fault::Throughput, "ProvisionedThroughputExceededException"),
    ] {
        moto.inject(&t.marker, &FaultPlan::new(1.0, &[kind]).max(2))
            .await;
        let ok = claim_record(&format!("retry#{}-ok", kind.as_str()));
        let started = Instant::now();
        assert_eq!(store.claim(&ok, now_ms()).await.unwrap(), Claim::Acquired);
        let took = started.elapsed();
        let counts = moto.clear_faults(&t.marker).await;
        assert_eq!(
            (counts.requests, counts.get(kind)),
            (3, 2),
            "{kind:?}: {counts}"
        );
        assert_eq!(store.get(&ok.id).await.unwrap(), Some(ok.clone()));

        moto.inject(&t.marker, &FaultPlan::new(1.0, &[kind])).await;
        let failed = claim_record(&format!("retry#{}-failed", kind.as_str()));
        let err = store.claim(&failed, now_ms()).await.unwrap_err();
        let counts = moto.clear_faults(&t.marker).await;
        assert_eq!(
            (counts.requests, counts.get(kind)),
            (3, 3),
            "{kind:?}: exactly 3 attempts: {counts}"
        );
        let text = lambda_idempotency::report(&err);
        assert!(
            matches!(
                err,
                lambda_idempotency::StoreError::Backend {
                    operation: "PutItem",
                    ..
                }
            ) && text.contains(code),
            "{kind:?}: {text}"
        );
        assert_eq!(
            store.get(&failed.id).await.unwrap(),
            None,
            "nothing applied"
        );
        eprintln!("[sdk retries {kind:?}] 2 faults then success in {took:?}; 3 faults: {text}");
    }
}

/// Each fault kind reaches the SDK as intended (through the crate's retry
/// settings with a 300 ms attempt timeout): throttling, throughput and 500
/// as service errors, a reset as a dispatch (connection) failure, a slow answer as
/// a timeout; each retried (3 attempts); nothing applied except under
/// `slow` (applied, yet reported as a timeout: the ambiguous case); and two
/// faults followed by a clean attempt succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_kind_reaches_the_sdk_as_intended() {
    let t = payment_tables("faults").await;
    let moto = moto();
    // Unfaulted attempts here must finish within the attempt timeout while
    // the rest of the suite loads moto (whose DynamoDB requests queue on one
    // lock): a roomier timeout than the load tests', and a slow fault past it.
    let attempt = Duration::from_millis(1500);
    let slow = Duration::from_millis(2000);
    let client = client_with_attempt_timeout(attempt).await;
    let put = |id: String| {
        client
            .put_item()
            .table_name(&t.idempotency)
            .item("id", AttributeValue::S(id))
            .item("status", AttributeValue::S("COMPLETED".into()))
            .item("expiration", AttributeValue::N("4000000000".into()))
            .send()
    };
    let exists = |id: String| {
        let client = client.clone();
        let table = t.idempotency.clone();
        async move {
            client
                .get_item()
                .table_name(table)
                .key("id", AttributeValue::S(id))
                .consistent_read(true)
                .send()
                .await
                .unwrap()
                .item()
                .is_some()
        }
    };
    for kind in Fault::STORE {
        let plan = FaultPlan::new(1.0, &[kind]).slow(slow).stall(slow).seed(7);
        moto.inject(&t.marker, &plan).await;
        let id = format!("kind#{}", kind.as_str());
        let started = Instant::now();
        let err = put(id.clone()).await.unwrap_err();
        let took = started.elapsed();
        let counts = moto.clear_faults(&t.marker).await;
        let what = match &err {
            SdkError::ServiceError(e) => match e.err() {
                PutItemError::ThrottlingException(_) => "throttling",
                PutItemError::ProvisionedThroughputExceededException(_) => "throughput",
                PutItemError::InternalServerError(_) => "500",
                _ => "other service error",
            },
            // hyper: "connection closed before message completed".
            SdkError::DispatchFailure(_) => "connection",
            SdkError::TimeoutError(_) => "timeout",
            _ => "other",
        };
        let expected = match kind {
            Fault::Throttle => "throttling",
            Fault::Throughput => "throughput",
            Fault::ServerError => "500",
            Fault::Reset => "connection",
            Fault::Slow | Fault::Stall => "timeout",
            Fault::Conflict => unreachable!("a TransactWriteItems fault: not in this scenario"),
        };
        let detail = aws_sdk_dynamodb::error::DisplayErrorContext(&err).to_string();
        eprintln!("[fault kinds] {kind:?}: {what} after {took:?}, {counts}: {detail}");
        assert_eq!(what, expected, "{kind:?}: {detail}");
        assert_eq!(counts.requests, 3, "{kind:?}: 3 attempts: {counts}");
        assert_eq!(
            exists(id).await,
            kind == Fault::Slow,
            "{kind:?}: applied only when slow"
        );

        moto.inject(&t.marker, &plan.clone().max(2)).await;
        put(format!("kind#{}-ok", kind.as_str())).await.unwrap();
        let counts = moto.clear_faults(&t.marker).await;
        assert_eq!((counts.requests, counts.injected), (3, 2), "{kind:?}");
    }
}
