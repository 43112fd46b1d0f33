//! `bench streams`: the `stream-ledger` function binary (the `ledger`
//! credit, optimistic commits, a pre-read per batch) behind each stream
//! source, run as Lambda runs it (a local Runtime API) and fed by the kit's
//! event source mapping emulators (batch 100, the default `BatchSize`):
//!
//! - Kinesis: a 4-shard stream on moto, partition key = account;
//! - DynamoDB Streams: a table's stream on moto (one shard there), one item
//!   per account, each payment a `PutItem` of its account's item;
//! - Kafka: an in-memory topic of 4 partitions (no broker here), record key
//!   = account, each account on one partition.
//!
//! 100 accounts; scenarios (a) unique payments, (b) the same records read
//! again from the start (every record a redelivery). Per source, scenario
//! and variant: DynamoDB requests per record by operation (moto launcher
//! counts; the mappings' own stream reads apart), records/s, the function
//! process's CPU time per record and its peak RSS (`VmHWM`).
//!
//! Variants compare side by side in one run, as in `bench payments`: each
//! `LABEL=BINARY[,VAR=VALUE...]` argument is a function process of its own
//! (own tables), interleaved scenario by scenario, e.g.
//! `bench streams 2000 before=/tmp/stream_ledger-base after=target/release/stream_ledger
//! after-lane=target/release/stream_ledger,STREAM_ORDER=lane`. None: the
//! `stream_ledger` next to this binary, ordered by key.

use lambda_idempotency::dynamodb_streams::DynamoDbEventResponse;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;
use test_kit::kafka_esm::{self, Topic};
use test_kit::kinesis_esm::{self, Stream, create_stream, put_records};
use test_kit::runtime_api::RuntimeApi;
use test_kit::{create_idempotency_table_with_stream, moto, stream_esm, unique_name};

use crate::ledger_run::{self, Measured};
use crate::payments::variants;

const ACCOUNTS: usize = 100;
const SHARDS: usize = 4;

fn account(id: usize) -> String {
    format!("acct-{}", id % ACCOUNTS)
}

fn amount(id: usize) -> u64 {
    100 + (id % 7) as u64
}

fn payment(id: usize) -> Vec<u8> {
    json!({"payment_id": format!("pay-{id}"), "account_id": account(id), "amount_cents": amount(id)})
        .to_string()
        .into_bytes()
}

/// A source's records, written once, read by every variant.
enum Input {
    Kinesis(Stream),
    DynamoDb(String),
    Kafka(Topic),
}

impl Input {
    fn source(&self) -> &'static str {
        match self {
            Self::Kinesis(_) => "kinesis",
            Self::DynamoDb(_) => "dynamodb-streams",
            Self::Kafka(_) => "kafka",
        }
    }

    fn label(&self) -> &'static str {
        match self {
            Self::Kinesis(_) => "Kinesis (4 shards)",
            Self::DynamoDb(_) => "DynamoDB Streams (1 shard)",
            Self::Kafka(_) => "Kafka (4 partitions)",
        }
    }
}

async fn kinesis_input(records: usize) -> Input {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "bench-streams", SHARDS as i32).await;
    let all: Vec<(String, Vec<u8>)> = (0..records).map(|id| (account(id), payment(id))).collect();
    for chunk in all.chunks(500) {
        let entries: Vec<(&str, &[u8])> = chunk
            .iter()
            .map(|(k, d)| (k.as_str(), d.as_slice()))
            .collect();
        put_records(&kinesis, &stream, &entries).await;
    }
    Input::Kinesis(stream)
}

async fn dynamodb_input(records: usize) -> Input {
    use aws_sdk_dynamodb::types::{AttributeValue, StreamViewType};
    let ddb = moto().dynamodb().await;
    let table = unique_name("bench-src");
    let arn = create_idempotency_table_with_stream(&ddb, &table, StreamViewType::NewImage).await;
    for id in 0..records {
        ddb.put_item()
            .table_name(&table)
            .item("id", AttributeValue::S(account(id)))
            .item("account_id", AttributeValue::S(account(id)))
            .item("payment_id", AttributeValue::S(format!("pay-{id}")))
            .item("amount_cents", AttributeValue::N(amount(id).to_string()))
            .send()
            .await
            .expect("put a payment");
    }
    Input::DynamoDb(arn)
}

fn kafka_input(records: usize) -> Input {
    let mut topic = Topic::new("bench-payments", SHARDS);
    for id in 0..records {
        let key = account(id);
        topic.produce(
            id % ACCOUNTS % SHARDS,
            Some(key.as_bytes()),
            &payment(id),
            &[],
        );
    }
    Input::Kafka(topic)
}

struct Row {
    source: &'static str,
    variant: String,
    scenario: &'static str,
    measured: Measured,
}

async fn invoke(api: &RuntimeApi, event: Value) -> Result<Value, lambda_runtime::Error> {
    ledger_run::invoke(api, event, "stream-ledger").await
}

/// Feeds `input` through the function from the start: (records, invocations).
async fn feed(input: &Input, api: &RuntimeApi) -> Result<(usize, usize), String> {
    match input {
        Input::Kinesis(stream) => {
            let kinesis = moto().kinesis().await;
            let options = kinesis_esm::Options {
                max_retries: 20,
                ..kinesis_esm::Options::default()
            };
            let stats = kinesis_esm::run(&kinesis, stream, &options, |e| invoke(api, e)).await;
            if !stats.skipped.is_empty() || stats.timed_out {
                return Err(format!("{stats:?}"));
            }
            Ok((stats.records, stats.invocations))
        }
        Input::DynamoDb(arn) => {
            let streams = moto().dynamodbstreams().await;
            let options = stream_esm::Options {
                max_retries: 20,
                max_time: Duration::from_secs(600),
                ..stream_esm::Options::default()
            };
            let stats = stream_esm::run(&streams, arn, &options, |e| async move {
                let answer = invoke(api, e).await?;
                Ok(serde_json::from_value::<DynamoDbEventResponse>(answer)?)
            })
            .await;
            if !stats.skipped.is_empty() || stats.timed_out || stats.partial_failures > 0 {
                return Err(format!("{stats:?}"));
            }
            Ok((stats.records, stats.invocations))
        }
        Input::Kafka(topic) => {
            let options = kafka_esm::Options {
                max_retries: 20,
                ..kafka_esm::Options::default()
            };
            let stats = kafka_esm::run(topic, &options, |e| invoke(api, e)).await;
            if !stats.skipped.is_empty() || stats.invocation_errors > 0 {
                return Err(format!("{:?}", stats.skipped));
            }
            Ok((stats.records, stats.invocations))
        }
    }
}

/// `bench streams [RECORDS] [LABEL=BINARY[,VAR=VALUE...] ...]`.
pub async fn run(records: usize, args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let records = records.clamp(20, 20_000);
    let variants = variants(args, "stream_ledger")?;
    let inputs = [
        kinesis_input(records).await,
        dynamodb_input(records).await,
        kafka_input(records),
    ];
    // The canary: every account holds exactly the sum of its payments.
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    for id in 0..records {
        *expected.entry(account(id)).or_default() += amount(id) as i64;
    }
    let mut rows = Vec::new();
    for input in &inputs {
        let env = [
            (payments::MODE_ENV, "optimistic".to_owned()),
            ("STREAM_SOURCE", input.source().to_owned()),
        ];
        let mut running = Vec::new();
        for variant in &variants {
            running.push(ledger_run::start(variant, "stream-ledger", &env).await?);
        }
        for scenario in ["(a) unique", "(b) all redelivered"] {
            for function in &running {
                let label = &function.variant.label;
                let measured = ledger_run::measure(function, feed(input, &function.api))
                    .await
                    .map_err(|e| format!("{} {label} {scenario}: {e}", input.label()))?;
                rows.push(Row {
                    source: input.label(),
                    variant: label.clone(),
                    scenario,
                    measured,
                });
            }
        }
        for function in &running {
            ledger_run::check_balances(function, &expected, input.label()).await?;
        }
    }

    println!(
        "stream-ledger against moto: {records} records per scenario, batch 100, {ACCOUNTS} accounts, \
         optimistic commits, a pre-read per batch; CPU = the function process's user + system time \
         (all threads) per record"
    );
    println!(
        "| source | scenario | variant | invocations | DynamoDB requests / record (by operation) | records/s | CPU / record | peak RSS |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in &rows {
        let m = &row.measured;
        let (per_record, by_op) = m.per_record("DynamoDB_20120810.");
        println!(
            "| {} | {} | {} | {} | **{per_record:.2}** ({by_op}) | {} |",
            row.source,
            row.scenario,
            row.variant,
            m.invocations,
            m.cells(),
        );
    }
    Ok(())
}
