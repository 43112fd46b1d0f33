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

use ledger::Accounts;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use test_kit::kinesis_esm::{self, Options, Stream, create_stream, put_records};
use test_kit::runtime_api::{Invocation, RuntimeApi, lambda_command};
use test_kit::{create_idempotency_table, create_table, moto, now_ms};

use crate::payments::{Variant, process_cpu, status_kb, variants};
use crate::per_unit;

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
    records: usize,
    invocations: usize,
    requests: BTreeMap<String, u64>,
    wall: Duration,
    cpu: Duration,
    /// The process's peak RSS so far (`VmHWM`), kB.
    peak_kb: u64,
}

/// One variant's function process and tables in one mode.
struct Running {
    variant: Variant,
    child: std::process::Child,
    api: RuntimeApi,
    accounts: String,
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
    let mut rows = Vec::new();
    for (name, mode) in modes {
        let ddb = moto.dynamodb().await;
        let mut running = Vec::new();
        for variant in &variants {
            let idempotency = create_idempotency_table(&ddb).await;
            let accounts = create_table(&ddb, "bench-accounts", "account_id", None).await;
            let api = RuntimeApi::start().await;
            let mut command = lambda_command(&variant.binary, "ledger", &api);
            moto.apply_env(&mut command);
            // `IDEMPOTENCY_BATCH_COMMITS=false bench kinesis` compares per-record commits.
            if let Ok(v) = std::env::var(lambda_idempotency::env::BATCH_COMMITS_ENV) {
                command.env(lambda_idempotency::env::BATCH_COMMITS_ENV, v);
            }
            let child = command
                .env("IDEMPOTENCY_TABLE", &idempotency)
                .env("ACCOUNTS_TABLE", &accounts)
                .env(payments::MODE_ENV, mode)
                .env("RUST_LOG", "warn")
                .envs(variant.env.iter().map(|(k, v)| (k, v)))
                .spawn()?;
            api.wait_first_poll(Duration::from_secs(10))
                .await
                .ok_or("ledger: no first poll")?;
            running.push(Running {
                variant: variant.clone(),
                child,
                api,
                accounts,
            });
        }
        for (scenario, stream) in [
            ("(a) unique", &streams[0]),
            ("(b) all redelivered", &streams[0]),
            ("(c) 50% producer retries", &streams[1]),
        ] {
            for function in &running {
                let pid = function.child.id();
                moto.reset_counts().await;
                let cpu0 = process_cpu(pid);
                let start = Instant::now();
                let api = &function.api;
                let stats = kinesis_esm::run(&kinesis, stream, &options, |event| async move {
                    match api
                        .invoke(event, now_ms() + 30_000, Duration::from_secs(30))
                        .await
                    {
                        Some(Invocation::Response(r)) => Ok::<Value, lambda_runtime::Error>(r),
                        other => Err(format!("ledger: {other:?}").into()),
                    }
                })
                .await;
                let wall = start.elapsed();
                let cpu = process_cpu(pid).saturating_sub(cpu0);
                let label = &function.variant.label;
                if !stats.skipped.is_empty() || stats.timed_out {
                    return Err(format!("{name} {label} {scenario}: {stats:?}").into());
                }
                rows.push(Row {
                    mode: name,
                    variant: label.clone(),
                    scenario,
                    records: stats.records,
                    invocations: stats.invocations,
                    requests: moto
                        .request_counts()
                        .await
                        .into_iter()
                        .filter_map(|(k, v)| Some((k, v.as_u64()?)))
                        .collect(),
                    wall,
                    cpu,
                    peak_kb: status_kb(pid, "VmHWM:"),
                });
            }
        }
        for mut function in running {
            let _ = function.child.kill();
            let _ = function.child.wait();
            // The canary: every account holds exactly the sum of its payments.
            let mut expected: BTreeMap<String, i64> = BTreeMap::new();
            for id in (0..records).chain(records..records + half) {
                *expected.entry(payment(id).0).or_default() += (100 + id % 7) as i64;
            }
            let table = Accounts::from_table(lambda_idempotency::Table::dynamodb(
                ddb.clone(),
                function.accounts,
            ));
            let label = &function.variant.label;
            for (account, sum) in &expected {
                let balance = table.balance(account).await.map_err(|e| e.to_string())?;
                if balance != Some(*sum) {
                    return Err(format!(
                        "{name} {label}: {account} holds {balance:?}, expected {sum}"
                    )
                    .into());
                }
            }
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
        let n = row.records as f64;
        let ops = |prefix: &str| {
            per_unit(
                row.requests
                    .iter()
                    .filter_map(|(k, c)| Some((k.strip_prefix(prefix)?, *c))),
                n,
            )
        };
        let (ddb_per_record, ddb_ops) = ops("DynamoDB_20120810.");
        let (kinesis_per_record, _) = ops("Kinesis_20131202.");
        println!(
            "| {} | {} | {} | {} | **{:.2}** ({}) | {:.0} | {:.3} ms | {:.1} MB | {:.3} |",
            row.mode,
            row.variant,
            row.scenario,
            row.invocations,
            ddb_per_record,
            ddb_ops,
            n / row.wall.as_secs_f64(),
            row.cpu.as_secs_f64() * 1e3 / n,
            row.peak_kb as f64 / 1024.0,
            kinesis_per_record,
        );
    }
    Ok(())
}
