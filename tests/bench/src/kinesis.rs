//! `bench kinesis`: the `ledger` function binary (a Kinesis consumer
//! crediting accounts) in each mode, run as Lambda runs it (a local Runtime
//! API) and fed by the Kinesis event source mapping emulator (batch 100,
//! the default `BatchSize`) from a 4-shard stream on moto over 100 accounts
//! (partition key = account), for (a) unique payments, (b) the same stream
//! read again from the trim horizon (every record a redelivery), (c) 50 %
//! producer retries (every other record is a `PutRecord` retry of a payment
//! ten records earlier: same data, new sequence number). Per mode, scenario
//! and variant: DynamoDB requests per record by operation (moto launcher
//! counts; the mapping's own Kinesis reads apart), records/s, the function
//! process's CPU time per record and its peak RSS.
//!
//! Several builds compare side by side in one run, as in `bench payments`:
//! each `LABEL=BINARY[,VAR=VALUE...]` argument is a variant with its own
//! process and tables, the variants interleaved scenario by scenario, e.g.
//! `bench kinesis 2000 before=/tmp/ledger-old after=target/release/ledger`.

use serde_json::json;
use std::collections::BTreeMap;
use test_kit::kinesis_esm::{self, Options, Stream, create_stream, put_records};
use test_kit::moto;

use crate::ledger_run::{self, Measured};
use crate::payments::variants;

const ACCOUNTS: usize = 100;
const SHARDS: i32 = 4;

fn payment(id: usize) -> (String, Vec<u8>) {
    let account = format!("acct-{}", id % ACCOUNTS);
    let data = json!({"payment_id": format!("pay-{id}"), "account_id": account, "amount_cents": 100 + id % 7});
    (account, data.to_string().into_bytes())
}

/// Writes the payments `ids` (in order, a repeated id is a producer's
/// retry) into a new stream of [`SHARDS`] shards, partition key = account.
async fn stream_of(
    kinesis: &aws_sdk_kinesis::Client,
    ids: &[usize],
) -> Result<Stream, Box<dyn std::error::Error>> {
    let stream = create_stream(kinesis, "bench-ledger", SHARDS).await;
    let records: Vec<(String, Vec<u8>)> = ids.iter().map(|id| payment(*id)).collect();
    for chunk in records.chunks(500) {
        let entries: Vec<(&str, &[u8])> = chunk
            .iter()
            .map(|(k, d)| (k.as_str(), d.as_slice()))
            .collect();
        put_records(kinesis, &stream, &entries).await;
    }
    Ok(stream)
}

struct Row {
    mode: &'static str,
    variant: String,
    scenario: &'static str,
    measured: Measured,
}

/// `bench kinesis [RECORDS] [LABEL=BINARY[,VAR=VALUE...] ...]`.
pub async fn run(records: usize, args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let records = records.clamp(20, 20_000);
    let variants = variants(args, "ledger")?;
    let moto = moto();
    let kinesis = moto.kinesis().await;
    let unique: Vec<usize> = (0..records).collect();
    // (c): every other record retries the payment ten records earlier.
    let half = records / 2;
    let mut retried = Vec::with_capacity(records);
    for i in 0..half {
        retried.push(records + i);
        retried.push(records + i.saturating_sub(10));
    }
    let streams = [
        stream_of(&kinesis, &unique).await?,
        stream_of(&kinesis, &retried).await?,
    ];

    let modes = [
        ("claim/complete", "claim-then-complete"),
        ("fenced tx", "fenced"),
        ("optimistic tx", "optimistic"),
    ];
    let options = Options {
        max_retries: 20,
        ..Options::default()
    };
    // The canary: every account holds exactly the sum of its payments.
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    for id in (0..records).chain(records..records + half) {
        *expected.entry(payment(id).0).or_default() += (100 + id % 7) as i64;
    }
    let mut rows = Vec::new();
    for (name, mode) in modes {
        let mut env = vec![
            (payments::MODE_ENV, mode.to_owned()),
            ("RUST_LOG", "warn".to_owned()),
        ];
        // `IDEMPOTENCY_BATCH_COMMITS=false bench kinesis` compares per-record commits.
        if let Ok(v) = std::env::var(lambda_idempotency::env::BATCH_COMMITS_ENV) {
            env.push((lambda_idempotency::env::BATCH_COMMITS_ENV, v));
        }
        let mut running = Vec::new();
        for variant in &variants {
            running.push(ledger_run::start(variant, "ledger", &env).await?);
        }
        for (scenario, stream) in [
            ("(a) unique", &streams[0]),
            ("(b) all redelivered", &streams[0]),
            ("(c) 50% producer retries", &streams[1]),
        ] {
            for function in &running {
                let label = &function.variant.label;
                let api = &function.api;
                let feed = async {
                    let stats = kinesis_esm::run(&kinesis, stream, &options, |event| {
                        ledger_run::invoke(api, event, "ledger")
                    })
                    .await;
                    if !stats.skipped.is_empty() || stats.timed_out {
                        return Err(format!("{name} {label} {scenario}: {stats:?}"));
                    }
                    Ok((stats.records, stats.invocations))
                };
                rows.push(Row {
                    mode: name,
                    variant: label.clone(),
                    scenario,
                    measured: ledger_run::measure(function, feed).await?,
                });
            }
        }
        for function in &running {
            ledger_run::check_balances(function, &expected, name).await?;
        }
    }

    println!(
        "ledger (Kinesis) against moto: {records} records per scenario, {SHARDS} shards, batch 100, \
         {ACCOUNTS} accounts; CPU = the function process's user + system time (all threads) per record"
    );
    println!(
        "| mode | variant | scenario | invocations | DynamoDB requests / record (by operation) | records/s | CPU / record | peak RSS | Kinesis requests / record (the mapping's) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in &rows {
        let m = &row.measured;
        let (ddb_per_record, ddb_ops) = m.per_record("DynamoDB_20120810.");
        let (kinesis_per_record, _) = m.per_record("Kinesis_20131202.");
        println!(
            "| {} | {} | {} | {} | **{ddb_per_record:.2}** ({ddb_ops}) | {} | {kinesis_per_record:.3} |",
            row.mode,
            row.variant,
            row.scenario,
            m.invocations,
            m.cells(),
        );
    }
    Ok(())
}
