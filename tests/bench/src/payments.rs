//! `bench payments`: the payments function binary in each mode
//! (claim/complete, fenced transactional, optimistic transactional), run as
//! Lambda runs it (a local Runtime API) against moto, for
//! (a) unique payments in FIFO batches of 10 over 20 groups, (b) the same
//! batches redelivered, (c) 50 % duplicates (redeliveries mixed with new
//! payments), (d) one duplicate per batch (a payment of (a) sent again by
//! its producer: first delivery, no pre-read) with nine new ones, (e) one
//! rejected payment per batch (its `MessageGroupId` is not its account: a
//! terminal error before any write, failed to the DLQ) with nine new ones.
//! Per mode and scenario: DynamoDB requests per message by
//! operation (counted by the moto launcher), msgs/s, the function process's
//! CPU time per message, p50/p99 batch latency. Then the function binary's
//! RSS, cold start (process start to first Runtime API poll) and RSS after
//! one batch.
//!
//! Several builds or settings compare side by side in one run: each
//! `LABEL=BINARY[,VAR=VALUE...]` argument is a variant with its own process
//! and tables, the variants interleaved scenario by scenario, e.g.
//! `bench payments 2000 before=/tmp/payments-old after=target/release/payments`.
//! `BENCH_MODES=optimistic` (modes by their `PAYMENTS_COMMIT_MODE` value,
//! comma-separated) runs only those modes.

use payments::Accounts;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use test_kit::events::{Msg, sqs_event};
use test_kit::runtime_api::{Invocation, RuntimeApi, lambda_command};
use test_kit::{create_idempotency_table, create_table, moto};

use crate::{per_unit, percentile};

const GROUPS: usize = 20;
const BATCH: usize = 10;

/// One message of a scenario.
#[derive(Clone)]
pub(crate) struct Payment {
    pub(crate) id: usize,
    pub(crate) redelivered: bool,
    /// Sent in another account's group: rejected (a terminal error).
    pub(crate) bad_group: bool,
}

impl Payment {
    pub(crate) fn new(id: usize) -> Self {
        Self {
            id,
            redelivered: false,
            bad_group: false,
        }
    }
}

pub(crate) fn batches(payments: &[Payment], tag: &str) -> Vec<Value> {
    payments
        .chunks(BATCH)
        .enumerate()
        .map(|(b, chunk)| {
            let msgs: Vec<Msg> = chunk
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let account = format!("acct-{}", p.id % GROUPS);
                    let body = json!({"payment_id": format!("pay-{}", p.id), "account_id": account, "amount_cents": 100 + p.id % 7});
                    let group = if p.bad_group {
                        format!("other-{account}")
                    } else {
                        account
                    };
                    Msg::new(format!("{tag}-{b}-{i}"), body.to_string()).in_group(group)
                })
                .collect();
            let mut event = sqs_event("payments.fifo", &msgs);
            for (r, p) in event["Records"].as_array_mut().into_iter().flatten().zip(chunk) {
                if p.redelivered {
                    r["attributes"]["ApproximateReceiveCount"] = json!("2");
                }
            }
            event
        })
        .collect()
}

/// One build (or setting) of the function under test: a binary and the
/// environment it runs with.
#[derive(Debug, Clone)]
pub(crate) struct Variant {
    pub(crate) label: String,
    pub(crate) binary: PathBuf,
    pub(crate) env: Vec<(String, String)>,
}

/// Reads `LABEL=BINARY[,VAR=VALUE...]` arguments; none means the `default`
/// binary next to this one, as built.
pub(crate) fn variants(
    args: &[String],
    default: &str,
) -> Result<Vec<Variant>, Box<dyn std::error::Error>> {
    if args.is_empty() {
        return Ok(vec![Variant {
            label: default.to_owned(),
            binary: sibling(default)?,
            env: Vec::new(),
        }]);
    }
    args.iter()
        .map(|arg| {
            let mut parts = arg.split(',');
            let (label, binary) = parts
                .next()
                .and_then(|p| p.split_once('='))
                .ok_or_else(|| format!("{arg:?}: expected LABEL=BINARY[,VAR=VALUE...]"))?;
            let env = parts
                .map(|kv| {
                    kv.split_once('=')
                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                        .ok_or_else(|| format!("{kv:?}: expected VAR=VALUE"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let binary = PathBuf::from(binary);
            if !binary.exists() {
                return Err(format!("{}: no such binary", binary.display()).into());
            }
            Ok(Variant {
                label: label.to_owned(),
                binary,
                env,
            })
        })
        .collect()
}

/// A workspace binary next to this one.
pub(crate) fn sibling(name: &str) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let binary = std::env::current_exe()?
        .parent()
        .map(|d| d.join(name))
        .ok_or("no target dir")?;
    if !binary.exists() {
        return Err(format!(
            "{} is missing: run `cargo build --release -p {name}` first",
            binary.display()
        )
        .into());
    }
    Ok(binary)
}

/// CPU time (user + system, all threads) of process `pid`.
pub(crate) fn process_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat_cpu(&stat)
}

fn stat_cpu(stat: &str) -> Duration {
    let ticks_per_s: f64 = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0);
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields after the command name: state is 0, utime 11, stime 12.
    Duration::from_secs_f64((ticks(11) + ticks(12)) / ticks_per_s)
}

/// CPU time (user + system) of this process.
pub(crate) fn cpu_time() -> Duration {
    stat_cpu(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default())
}

/// A `/proc/<pid>/status` field in kB.
pub(crate) fn status_kb(pid: u32, name: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Row {
    mode: &'static str,
    variant: String,
    scenario: &'static str,
    messages: usize,
    requests: BTreeMap<String, u64>,
    wall: Duration,
    cpu: Duration,
    latencies: Vec<Duration>,
}

/// A function process under a local Runtime API, with its own tables.
struct Function {
    variant: Variant,
    api: RuntimeApi,
    child: std::process::Child,
    accounts: Accounts,
}

impl Function {
    async fn start(
        variant: &Variant,
        mode: &str,
        ddb: &aws_sdk_dynamodb::Client,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let idempotency = create_idempotency_table(ddb).await;
        let accounts = create_table(ddb, "bench-accounts", "account_id", None).await;
        let api = RuntimeApi::start().await;
        let mut command = lambda_command(&variant.binary, "payments", &api);
        moto().apply_env(&mut command);
        command
            .env("IDEMPOTENCY_TABLE", &idempotency)
            .env("ACCOUNTS_TABLE", &accounts)
            .env(payments::MODE_ENV, mode);
        for (k, v) in &variant.env {
            command.env(k, v);
        }
        let child = command.spawn()?;
        api.wait_first_poll(Duration::from_secs(10))
            .await
            .ok_or_else(|| format!("{}: no first poll", variant.label))?;
        Ok(Self {
            variant: variant.clone(),
            api,
            child,
            accounts: Accounts::from_table(lambda_idempotency::Table::dynamodb(
                ddb.clone(),
                accounts,
            )),
        })
    }

    /// Invokes the function with each event, redelivering the records it
    /// reports failed (at most 5 rounds; with `rejected`, that many records
    /// per event are expected to fail and are not redelivered): wall time,
    /// the function's CPU time, each event's latency.
    async fn run(
        &self,
        events: &[Value],
        rejected: usize,
    ) -> Result<(Duration, Duration, Vec<Duration>), String> {
        let pid = self.child.id();
        let cpu0 = process_cpu(pid);
        let start = Instant::now();
        let mut latencies = Vec::with_capacity(events.len());
        for event in events {
            let mut pending = event.clone();
            let t = Instant::now();
            for round in 0..5 {
                let deadline = lambda_idempotency::clock::Clock::now_ms(
                    &lambda_idempotency::clock::SystemClock,
                ) + 30_000;
                let response = match self
                    .api
                    .invoke(pending, deadline, Duration::from_secs(30))
                    .await
                {
                    Some(Invocation::Response(r)) => r,
                    other => return Err(format!("{}: {other:?}", self.variant.label)),
                };
                let failed: Vec<&Value> = response["batchItemFailures"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|f| &f["itemIdentifier"])
                    .collect();
                if failed.is_empty() {
                    break;
                }
                if rejected > 0 {
                    if failed.len() != rejected {
                        return Err(format!("expected {rejected} rejected, got {failed:?}"));
                    }
                    break;
                }
                if round == 4 {
                    return Err(format!("records still failing: {failed:?}"));
                }
                let records: Vec<Value> = event["Records"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| failed.contains(&&r["messageId"]))
                    .cloned()
                    .collect();
                pending = json!({ "Records": records });
            }
            latencies.push(t.elapsed());
        }
        Ok((start.elapsed(), process_cpu(pid) - cpu0, latencies))
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) async fn counts() -> BTreeMap<String, u64> {
    moto()
        .request_counts()
        .await
        .into_iter()
        .filter_map(|(k, v)| Some((k.rsplit('.').next()?.to_owned(), v.as_u64()?)))
        .collect()
}

/// `bench payments [MESSAGES] [LABEL=BINARY[,VAR=VALUE...] ...]`: each mode
/// and scenario through each variant's function process, the variants
/// interleaved scenario by scenario.
pub async fn run(messages: usize, args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let variants = variants(args, "payments")?;
    let messages = messages.clamp(BATCH, 20_000) / BATCH * BATCH;
    let moto = moto();
    let unique: Vec<Payment> = (0..messages).map(Payment::new).collect();
    let redelivered: Vec<Payment> = unique
        .iter()
        .map(|p| Payment {
            redelivered: true,
            ..p.clone()
        })
        .collect();
    // (c): every other message redelivers one from ten messages earlier.
    let half = messages / 2;
    let mut mixed = Vec::with_capacity(messages);
    for i in 0..half {
        mixed.push(Payment::new(messages + i));
        if i >= BATCH {
            mixed.push(Payment {
                redelivered: true,
                ..Payment::new(messages + i - BATCH)
            });
        }
    }
    for i in half.saturating_sub(BATCH)..half {
        mixed.push(Payment {
            redelivered: true,
            ..Payment::new(messages + i)
        });
    }
    // (d) and (e): per batch, nine new payments on nine consecutive
    // accounts, and one on the next account: a payment of (a) sent again
    // (d), or a new one in the wrong group (e).
    let per_batch = BATCH - 1;
    let batches_de = messages / BATCH;
    let new_d = messages + half;
    let new_e = new_d + batches_de * per_batch;
    let one_of = |base: usize, last: &dyn Fn(usize, usize) -> Payment| -> Vec<Payment> {
        let mut list = Vec::with_capacity(messages);
        for b in 0..batches_de {
            let first = base + b * per_batch;
            list.extend((first..first + per_batch).map(Payment::new));
            list.push(last(b, (first + per_batch) % GROUPS));
        }
        list
    };
    let one_duplicate = one_of(new_d, &|_, account| Payment::new(account));
    let one_rejected = one_of(new_e, &|b, _| Payment {
        bad_group: true,
        ..Payment::new(new_e + batches_de * per_batch + b)
    });

    let modes = [
        ("claim/complete", "claim-then-complete"),
        ("fenced tx", "fenced"),
        ("optimistic tx", "optimistic"),
    ];
    // `BENCH_MODES=optimistic` (a comma-separated list) runs those modes only.
    let only = std::env::var("BENCH_MODES").ok();
    let modes: Vec<(&str, &str)> = modes
        .into_iter()
        .filter(|(_, mode)| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|m| m == *mode))
        })
        .collect();
    let mut rows = Vec::new();
    let mut rss_kb = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(1800);
    for (name, mode) in modes {
        let ddb = moto.dynamodb().await;
        let mut functions = Vec::new();
        for variant in &variants {
            functions.push(Function::start(variant, mode, &ddb).await?);
        }
        for (scenario, list, tag, rejected) in [
            ("(a) unique", &unique, "a", 0),
            ("(b) all redelivered", &redelivered, "b", 0),
            ("(c) 50% duplicates", &mixed, "c", 0),
            ("(d) 1 duplicate / batch", &one_duplicate, "d", 0),
            ("(e) 1 rejected / batch", &one_rejected, "e", 1),
        ] {
            let events = batches(list, tag);
            for function in &functions {
                if Instant::now() > deadline {
                    return Err("time bound reached".into());
                }
                moto.reset_counts().await;
                let (wall, cpu, latencies) = function.run(&events, rejected).await?;
                rows.push(Row {
                    mode: name,
                    variant: function.variant.label.clone(),
                    scenario,
                    messages: list.len(),
                    requests: counts().await,
                    wall,
                    cpu,
                    latencies,
                });
            }
        }
        // The canary: every account holds exactly the sum of its unique payments.
        let mut expected: BTreeMap<String, i64> = BTreeMap::new();
        let credited = (0..messages)
            .chain(messages..messages + half)
            .chain(new_d..new_d + batches_de * per_batch)
            .chain(new_e..new_e + batches_de * per_batch);
        for id in credited {
            *expected.entry(format!("acct-{}", id % GROUPS)).or_default() += (100 + id % 7) as i64;
        }
        for function in &functions {
            rss_kb.push((
                function.variant.label.clone(),
                status_kb(function.child.id(), "VmRSS:"),
                status_kb(function.child.id(), "VmHWM:"),
            ));
            for (account, sum) in &expected {
                let balance = function
                    .accounts
                    .balance(account)
                    .await
                    .map_err(|e| e.to_string())?;
                if balance != Some(*sum) {
                    return Err(format!(
                        "{name} ({}): {account} holds {balance:?}, expected {sum}",
                        function.variant.label
                    )
                    .into());
                }
            }
        }
    }

    println!(
        "payments against moto: {messages} messages per scenario, FIFO batches of {BATCH} over {GROUPS} groups; \
         CPU = the function process's user + system time (all threads) per message"
    );
    println!(
        "| mode | scenario | variant | DynamoDB requests / message (by operation) | msgs/s | CPU / message | p50 batch | p99 batch |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in &mut rows {
        row.latencies.sort();
        let n = row.messages as f64;
        let (per_message, by_op) =
            per_unit(row.requests.iter().map(|(op, c)| (op.as_str(), *c)), n);
        println!(
            "| {} | {} | {} | **{:.2}** ({}) | {:.0} | {:.3} ms | {:.1} ms | {:.1} ms |",
            row.mode,
            row.scenario,
            row.variant,
            per_message,
            by_op,
            n / row.wall.as_secs_f64(),
            row.cpu.as_secs_f64() * 1e3 / n,
            percentile(&row.latencies, 0.5).as_secs_f64() * 1e3,
            percentile(&row.latencies, 0.99).as_secs_f64() * 1e3,
        );
    }
    for (label, rss, hwm) in &rss_kb {
        println!(
            "{label}: RSS after the three scenarios {:.1} MB (peak {:.1} MB)",
            *rss as f64 / 1024.0,
            *hwm as f64 / 1024.0
        );
    }
    for variant in &variants {
        cold_start(variant).await?;
    }
    Ok(())
}

/// The `payments` binary's cold start and memory under a local Runtime API.
async fn cold_start(variant: &Variant) -> Result<(), Box<dyn std::error::Error>> {
    let binary = &variant.binary;
    let ddb = moto().dynamodb().await;
    let idempotency = create_idempotency_table(&ddb).await;
    let accounts = create_table(&ddb, "bench-accounts", "account_id", None).await;
    let event = batches(&(0..10).map(Payment::new).collect::<Vec<_>>(), "cold").remove(0);
    let mut starts = Vec::new();
    let mut rss_kb = Vec::new();
    let mut hwm_kb = Vec::new();
    for i in 0..10 {
        let api = RuntimeApi::start().await;
        let t0 = Instant::now();
        let mut command = lambda_command(binary, "payments", &api);
        moto().apply_env(&mut command);
        for (k, v) in &variant.env {
            command.env(k, v);
        }
        let mut child = command
            .env("IDEMPOTENCY_TABLE", &idempotency)
            .env("ACCOUNTS_TABLE", &accounts)
            .env("RUST_LOG", "warn")
            .env("IDEMPOTENCY_METRICS", "off")
            .spawn()?;
        let polled = api
            .wait_first_poll(Duration::from_secs(10))
            .await
            .ok_or("no first poll")?;
        starts.push(polled.duration_since(t0));
        let deadline =
            lambda_idempotency::clock::Clock::now_ms(&lambda_idempotency::clock::SystemClock)
                + 30_000;
        let mut event = event.clone();
        for r in event["Records"].as_array_mut().into_iter().flatten() {
            let body = r["body"]
                .as_str()
                .unwrap_or_default()
                .replace("pay-", &format!("cold{i}-"));
            r["body"] = json!(body);
        }
        match api.invoke(event, deadline, Duration::from_secs(20)).await {
            Some(Invocation::Response(_)) => {}
            other => return Err(format!("cold start invocation: {other:?}").into()),
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))?;
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        rss_kb.push(field("VmRSS:"));
        hwm_kb.push(field("VmHWM:"));
        child.kill()?;
        child.wait()?;
    }
    starts.sort();
    println!(
        "{}: 10 starts: cold start (spawn to first Runtime API poll) p50 {:.1} ms, max {:.1} ms; \
         RSS after a 10-record batch on DynamoDB: max {:.1} MB (peak {:.1} MB)",
        variant.label,
        percentile(&starts, 0.5).as_secs_f64() * 1e3,
        starts.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        *rss_kb.iter().max().unwrap_or(&0) as f64 / 1024.0,
        *hwm_kb.iter().max().unwrap_or(&0) as f64 / 1024.0,
    );
    Ok(())
}
