//! `bench valkey`: the same SQS batches (standard queue, 10 records, each
//! handler a pure function: claim + complete, fenced mode, no staged
//! writes) through the batch processor over the DynamoDB store on moto and
//! over the Valkey store on a local redis-server, side by side in one run:
//! (a) unique messages (claim + complete), (b) the batches redelivered
//! (the duplicate path with the batch pre-read), (c) the batches delivered
//! a third time without the pre-read (each duplicate's claim answers with
//! the record). Per store and scenario: round trips per message (store
//! calls, each one request or one script/pipeline; and what the server
//! counted), the function's CPU per message (this process: moto and
//! redis-server run in their own), and latency per batch.

use async_trait::async_trait;
use lambda_idempotency::sqs::{PreRead, SqsProcessor, SqsRecord, parse_sqs_event};
use lambda_idempotency::{
    Config, DynamoDbStore, HandlerError, Idempotency, KeySelector, Store, StoreError, Write,
    store::Claim, store::Record, store::RecordWrite, store::TableConfig, store::TransactError,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use test_kit::events::{Msg, sqs_event};
use test_kit::{create_idempotency_table, moto};

use crate::payments::cpu_time;
use crate::percentile;

const BATCH: usize = 10;

/// Store calls by verb: each is one round trip on both stores (a
/// `BatchGetItem` per 100 keys; one `HGETALL` pipeline per batch).
#[derive(Debug, Default)]
struct Calls {
    claim: AtomicU64,
    commit: AtomicU64,
    release: AtomicU64,
    get_many: AtomicU64,
}

impl Calls {
    fn take(&self) -> BTreeMap<&'static str, u64> {
        [
            ("claim", &self.claim),
            ("complete", &self.commit),
            ("release", &self.release),
            ("pre-read", &self.get_many),
        ]
        .into_iter()
        .map(|(name, c)| (name, c.swap(0, Ordering::Relaxed)))
        .filter(|(_, n)| *n > 0)
        .collect()
    }
}

/// A store counting its calls.
#[derive(Debug)]
struct Counted<S> {
    inner: S,
    calls: Arc<Calls>,
}

#[async_trait]
impl<S: Store> Store for Counted<S> {
    async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError> {
        self.calls.claim.fetch_add(1, Ordering::Relaxed);
        self.inner.claim(record, now_ms).await
    }
    async fn commit(&self, record: RecordWrite<'_>, writes: &[Write]) -> Result<(), TransactError> {
        self.calls.commit.fetch_add(1, Ordering::Relaxed);
        self.inner.commit(record, writes).await
    }
    async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
        self.calls.release.fetch_add(1, Ordering::Relaxed);
        self.inner.release(id, owner).await
    }
    async fn get_many(&self, ids: &[String]) -> Result<Vec<Record>, StoreError> {
        self.calls.get_many.fetch_add(1, Ordering::Relaxed);
        self.inner.get_many(ids).await
    }
    fn item_size(&self, record: &Record) -> usize {
        self.inner.item_size(record)
    }
    fn transactions(&self) -> bool {
        self.inner.transactions()
    }
}

struct Row {
    store: &'static str,
    scenario: &'static str,
    messages: usize,
    calls: BTreeMap<&'static str, u64>,
    server: BTreeMap<String, u64>,
    cpu: Duration,
    wall: Duration,
    latencies: Vec<Duration>,
}

fn events(messages: usize, receive_count: u32) -> Vec<Value> {
    (0..messages / BATCH)
        .map(|b| {
            let msgs: Vec<Msg> = (0..BATCH)
                .map(|i| {
                    let n = b * BATCH + i;
                    let body = json!({"key": format!("msg-{n}"), "amount": n % 7});
                    Msg::new(format!("m-{n}"), body.to_string())
                })
                .collect();
            let mut event = sqs_event("orders", &msgs);
            for r in event["Records"].as_array_mut().into_iter().flatten() {
                r["attributes"]["ApproximateReceiveCount"] = json!(receive_count.to_string());
            }
            event
        })
        .collect()
}

async fn scenario(
    processor: &SqsProcessor,
    events: &[Value],
) -> Result<(Duration, Duration, Vec<Duration>), String> {
    let cpu0 = cpu_time();
    let start = Instant::now();
    let mut latencies = Vec::with_capacity(events.len());
    for event in events {
        let event = parse_sqs_event(event.clone()).map_err(|e| e.to_string())?;
        let t = Instant::now();
        let report = processor
            .process(event, None, |r: SqsRecord<Value>| async move {
                Ok::<_, HandlerError>(json!({"charged": r.body["amount"]}))
            })
            .await;
        latencies.push(t.elapsed());
        if !report.is_success() {
            return Err("a record failed".into());
        }
    }
    Ok((start.elapsed(), cpu_time().saturating_sub(cpu0), latencies))
}

pub async fn run(messages: usize) -> Result<(), Box<dyn std::error::Error>> {
    let messages = messages.clamp(BATCH, 20_000) / BATCH * BATCH;
    let moto = moto();
    let server = test_kit::valkey::valkey();
    let config = || Config::with_prefix("bench.valkey").disabled(false);

    let ddb = moto.dynamodb().await;
    let table = create_idempotency_table(&ddb).await;
    let ddb_calls = Arc::new(Calls::default());
    let ddb_engine = Idempotency::try_new(
        Counted {
            inner: DynamoDbStore::new(ddb, TableConfig::new(table)),
            calls: ddb_calls.clone(),
        },
        config(),
    )?;
    let vk_calls = Arc::new(Calls::default());
    let vk_engine = Idempotency::try_new(
        Counted {
            inner: server.store().await,
            calls: vk_calls.clone(),
        },
        config(),
    )?;
    // Load the scripts once, as a warm execution environment has them.
    vk_engine
        .run(&vk_engine.key(&json!("warm-up"))?, None, None, || async {
            Ok::<_, HandlerError>(())
        })
        .await?;
    vk_calls.take();

    let plans = [
        ("(a) unique: claim + complete", 1, PreRead::OnRedelivery),
        ("(b) redelivered, batch pre-read", 2, PreRead::OnRedelivery),
        ("(c) redelivered, no pre-read", 3, PreRead::Never),
    ];
    let mut rows = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    for (name, receive_count, pre_read) in plans {
        let events = events(messages, receive_count);
        for store in ["DynamoDB (moto)", "Valkey"] {
            if Instant::now() > deadline {
                return Err("time bound reached".into());
            }
            let (engine, calls) = if store == "Valkey" {
                (&vk_engine, &vk_calls)
            } else {
                (&ddb_engine, &ddb_calls)
            };
            let processor =
                SqsProcessor::new(engine.clone(), KeySelector::pointer("/key")).pre_read(pre_read);
            moto.reset_counts().await;
            server.reset_stats().await;
            let (wall, cpu, latencies) = scenario(&processor, &events).await?;
            let server_counts: BTreeMap<String, u64> = if store == "Valkey" {
                server.command_counts().await
            } else {
                crate::payments::counts().await
            };
            rows.push(Row {
                store,
                scenario: name,
                messages,
                calls: calls.take(),
                server: server_counts
                    .into_iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "config|resetstat" | "info"))
                    .collect(),
                cpu,
                wall,
                latencies,
            });
        }
    }

    println!(
        "claim + complete and duplicates, DynamoDB (moto) vs Valkey (redis-server {}), \
         {messages} messages per scenario, standard-queue batches of {BATCH}, pure handler",
        redis_version(server).await
    );
    println!(
        "| scenario | store | round trips / message (store calls) | server work / message (DynamoDB requests; Valkey commands, inside scripts included) | \
         function CPU / message | latency / message | p50 batch | p99 batch |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in &mut rows {
        row.latencies.sort();
        let n = row.messages as f64;
        let per = |map: Vec<(String, u64)>| -> (f64, String) {
            let total: u64 = map.iter().map(|(_, c)| c).sum();
            let parts: Vec<String> = map
                .iter()
                .map(|(op, c)| format!("{op} {:.2}", *c as f64 / n))
                .collect();
            (total as f64 / n, parts.join(", "))
        };
        let (trips, by_verb) = per(row
            .calls
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect());
        let (requests, by_op) = per(row.server.clone().into_iter().collect());
        println!(
            "| {} | {} | **{trips:.2}** ({by_verb}) | {requests:.2} ({by_op}) | {:.1} µs | {:.3} ms | {:.2} ms | {:.2} ms |",
            row.scenario,
            row.store,
            row.cpu.as_secs_f64() * 1e6 / n,
            row.wall.as_secs_f64() * 1e3 / n,
            percentile(&row.latencies, 0.5).as_secs_f64() * 1e3,
            percentile(&row.latencies, 0.99).as_secs_f64() * 1e3,
        );
    }
    Ok(())
}

async fn redis_version(server: &test_kit::valkey::Valkey) -> String {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut server.connection().await)
        .await
        .unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_owned()
}
