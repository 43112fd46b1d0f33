//! `bench http`: `payments-api` in process against moto: `POST /payments`
//! with (a) a new `Idempotency-Key` each, (b) the same requests again
//! (replays), in fenced and optimistic mode, and (c) the same new payments
//! with the idempotency layer off (the kill switch: the same function, the
//! credit committed alone). Per row: DynamoDB requests per call by
//! operation (counted by the moto launcher), calls/s, the function's CPU
//! time per call, p50/p99 latency, and the CPU ratio to (c).

use lambda_idempotency::{CommitMode, DynamoDbStore, Idempotency, store::TableConfig};
use lambda_runtime::LambdaEvent;
use payments::Accounts;
use payments_api::App;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use test_kit::{create_idempotency_table, create_table, moto};

use crate::payments::{counts, cpu_time};
use crate::{per_unit, percentile};

const ACCOUNTS: usize = 20;

/// An HTTP API (2.0) `POST /payments`, as `events/payments-api-http.json`.
pub(crate) fn request(i: usize, tag: &str) -> Value {
    let body = json!({"account_id": format!("acct-{}", i % ACCOUNTS), "amount_cents": 100 + i % 7});
    json!({
        "version": "2.0",
        "routeKey": "POST /payments",
        "rawPath": "/payments",
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "idempotency-key": format!("{tag}-{i:08}-5c1e0a11-7d2f-4b8e-9a41"),
            "user-agent": "bench",
        },
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "bench",
            "authorizer": {"iam": {"userArn": "arn:aws:iam::123456789012:user/bench"}},
            "http": {"method": "POST", "path": "/payments", "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
            "requestId": format!("r-{tag}-{i}"),
            "routeKey": "POST /payments",
            "stage": "$default",
        },
        "body": body.to_string(),
        "isBase64Encoded": false
    })
}

struct Row {
    name: String,
    calls: usize,
    requests: BTreeMap<String, u64>,
    wall: Duration,
    cpu: Duration,
    latencies: Vec<Duration>,
}

pub(crate) async fn app(mode: CommitMode, disabled: bool) -> App {
    let ddb = moto().dynamodb().await;
    let idempotency = create_idempotency_table(&ddb).await;
    let accounts = create_table(&ddb, "bench-accounts", "account_id", None).await;
    let engine = Idempotency::new(
        DynamoDbStore::new(ddb.clone(), TableConfig::new(idempotency)),
        App::config().disabled(disabled).commit_mode(mode),
    );
    App::new(
        engine,
        Accounts::from_table(lambda_idempotency::Table::dynamodb(ddb, accounts)),
    )
}

async fn measure(
    app: &App,
    name: String,
    events: &[Value],
    expect: &str,
) -> Result<Row, Box<dyn std::error::Error>> {
    moto().reset_counts().await;
    let cpu0 = cpu_time();
    let start = Instant::now();
    let mut latencies = Vec::with_capacity(events.len());
    for event in events {
        let t = Instant::now();
        let ctx = lambda_idempotency::runtime::local_context(0, Duration::from_secs(30));
        let response = app
            .handle(LambdaEvent::new(event.clone(), ctx))
            .await
            .map_err(|e| e.to_string())?;
        latencies.push(t.elapsed());
        let response = serde_json::to_value(response)?;
        let replayed = response["headers"]["idempotent-replayed"] == "true";
        let ok = response["statusCode"] == 201
            && match expect {
                "new" => !replayed,
                _ => replayed,
            };
        if !ok {
            return Err(format!("{name}: unexpected answer {response}").into());
        }
    }
    let (wall, cpu) = (start.elapsed(), cpu_time().saturating_sub(cpu0));
    Ok(Row {
        name,
        calls: events.len(),
        requests: counts().await,
        wall,
        cpu,
        latencies,
    })
}

async fn check_balances(app: &App, calls: usize, times: i64) -> Result<(), String> {
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    for i in 0..calls {
        *expected
            .entry(format!("acct-{}", i % ACCOUNTS))
            .or_default() += (100 + i % 7) as i64;
    }
    for (account, sum) in expected {
        let balance = app
            .accounts()
            .balance(&account)
            .await
            .map_err(|e| e.to_string())?;
        if balance != Some(sum * times) {
            return Err(format!(
                "{account} holds {balance:?}, expected {}",
                sum * times
            ));
        }
    }
    Ok(())
}

pub async fn run(calls: usize) -> Result<(), Box<dyn std::error::Error>> {
    let calls = calls.clamp(10, 20_000);
    let mut rows = Vec::new();
    for (mode_name, mode) in [
        ("fenced", CommitMode::Fenced),
        ("optimistic", CommitMode::Optimistic),
    ] {
        let app = app(mode, false).await;
        let events: Vec<Value> = (0..calls).map(|i| request(i, mode_name)).collect();
        rows.push(measure(&app, format!("{mode_name}: (a) new keys"), &events, "new").await?);
        rows.push(measure(&app, format!("{mode_name}: (b) replays"), &events, "replay").await?);
        check_balances(&app, calls, 1).await?;
    }
    let app = app(CommitMode::Fenced, true).await;
    let events: Vec<Value> = (0..calls).map(|i| request(i, "off")).collect();
    rows.push(measure(&app, "(c) no idempotency layer".to_owned(), &events, "new").await?);
    check_balances(&app, calls, 1).await?;
    let base = rows.last().map_or(Duration::ZERO, |r| r.cpu);

    println!(
        "payments-api against moto: {calls} POST /payments per row, in process, one at a time"
    );
    println!(
        "| row | DynamoDB requests / call (by operation) | calls/s | CPU / call | CPU vs (c) | p50 | p99 |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for row in &mut rows {
        row.latencies.sort();
        let n = row.calls as f64;
        let (per_call, by_op) = per_unit(row.requests.iter().map(|(op, c)| (op.as_str(), *c)), n);
        println!(
            "| {} | **{:.2}** ({}) | {:.0} | {:.3} ms | {:.2}x | {:.1} ms | {:.1} ms |",
            row.name,
            per_call,
            by_op,
            n / row.wall.as_secs_f64(),
            row.cpu.as_secs_f64() * 1e3 / n,
            row.cpu.as_secs_f64() / base.as_secs_f64().max(1e-9),
            percentile(&row.latencies, 0.5).as_secs_f64() * 1e3,
            percentile(&row.latencies, 0.99).as_secs_f64() * 1e3,
        );
    }
    Ok(())
}
