//! `bench bill [MESSAGES]`: the bill per message of every function in every
//! mode, next to the same function with no idempotency (the kill switch,
//! `IDEMPOTENCY_DISABLED`), priced by [`test_kit::bill`] from
//! the launcher's ledger of the requests each run sent. Each function runs
//! in process (the relay as its binary under the stream mapping emulator),
//! one invocation at a time: (a) new messages, (b) the same messages
//! redelivered. Per row: DynamoDB requests, write and read request units,
//! SQS requests and EventBridge events per message; CPU time and latency
//! per invocation; Lambda GB-seconds per message at 128, 512 and 1,769 MB
//! ([`test_kit::bill::lambda_gb_seconds`]). Then docs/cost.md's
//! table: dollars per million messages at [`Prices::US_EAST_1`].

use lambda_idempotency::testing::events::kinesis_event;
use lambda_idempotency::{CommitMode, Config, DynamoDbStore, Idempotency, store::TableConfig};
use lambda_runtime::LambdaEvent;
use serde_json::{Value, json};
use std::future::Future;
use std::time::{Duration, Instant};
use test_kit::bill::{Bill, Prices, lambda_gb_seconds};
use test_kit::{create_idempotency_table, create_table, esm, moto};

use crate::payments::{Payment, cpu_time};

/// The memory sizes priced.
const MEMORY_MB: [f64; 3] = [128.0, 512.0, 1769.0];

/// One measured run of one function, mode and scenario.
struct Row {
    function: &'static str,
    mode: &'static str,
    scenario: &'static str,
    messages: usize,
    invocations: usize,
    bill: Bill,
    cpu: Duration,
    wall: Duration,
}

impl Row {
    fn per_message(&self, x: f64) -> f64 {
        x / self.messages as f64
    }

    /// Lambda GB-seconds per message at `memory_mb`, from the mean
    /// invocation (its CPU time and wall time).
    fn gb_seconds(&self, memory_mb: f64) -> f64 {
        let n = self.invocations.max(1) as u32;
        self.per_message(lambda_gb_seconds(self.cpu / n, self.wall / n, memory_mb) * n as f64)
    }

    /// Dollars per million messages: DynamoDB, SQS + EventBridge, Lambda
    /// (requests and GB-seconds) at `memory_mb`.
    fn dollars(&self, p: &Prices, memory_mb: f64) -> (f64, f64, f64) {
        let m = 1e6 / self.messages as f64;
        let dynamodb = (self.bill.wru * p.wru + self.bill.rru * p.rru) * m;
        let messaging = (self.bill.sqs_standard * p.sqs_standard
            + self.bill.sqs_fifo * p.sqs_fifo
            + self.bill.events * p.event)
            * m;
        let lambda = self.invocations as f64 * p.lambda_request * m
            + self.gb_seconds(memory_mb) * 1e6 * p.gb_second_arm;
        (dynamodb, messaging, lambda)
    }
}

/// Runs `invoke` on each event, one at a time, with the ledger on.
async fn measure<F, Fut>(
    function: &'static str,
    mode: &'static str,
    scenario: &'static str,
    messages: usize,
    events: &[Value],
    mut invoke: F,
) -> Result<Row, Box<dyn std::error::Error>>
where
    F: FnMut(Value) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let moto = moto();
    moto.reset_ledger().await;
    let cpu0 = cpu_time();
    let start = Instant::now();
    for event in events {
        invoke(event.clone())
            .await
            .map_err(|e| format!("{function} {mode} {scenario}: {e}"))?;
    }
    let (wall, cpu) = (start.elapsed(), cpu_time().saturating_sub(cpu0));
    let ledger = moto.ledger().await;
    moto.stop_ledger().await;
    Ok(Row {
        function,
        mode,
        scenario,
        messages,
        invocations: events.len(),
        bill: Bill::of(&ledger)?,
        cpu,
        wall,
    })
}

/// The modes of a function with a record, and the kill switch.
const MODES: [(&str, Option<CommitMode>); 4] = [
    ("claim/complete", Some(CommitMode::ClaimThenComplete)),
    ("fenced", Some(CommitMode::Fenced)),
    ("optimistic", Some(CommitMode::Optimistic)),
    ("no idempotency", None),
];

fn configured(config: Config, mode: Option<CommitMode>) -> Config {
    match mode {
        Some(mode) => config.disabled(false).commit_mode(mode),
        None => config.disabled(true),
    }
}

/// `Ok` when an answer named no failed record.
fn no_failures<T: std::fmt::Debug>(failures: &[T]) -> Result<(), String> {
    failures
        .is_empty()
        .then_some(())
        .ok_or_else(|| format!("failures {failures:?}"))
}

fn ctx() -> lambda_runtime::Context {
    lambda_idempotency::runtime::local_context(0, Duration::from_secs(30))
}

async fn payments(n: usize, rows: &mut Vec<Row>) -> Result<(), Box<dyn std::error::Error>> {
    let ddb = moto().dynamodb().await;
    for (mode, commit) in MODES {
        let idempotency = create_idempotency_table(&ddb).await;
        let accounts = create_table(&ddb, "bill-accounts", "account_id", None).await;
        let engine = Idempotency::new(
            DynamoDbStore::new(ddb.clone(), TableConfig::new(idempotency)),
            configured(payments::App::config(), commit),
        );
        let app = payments::App::new(
            engine,
            payments::Accounts::from_table(lambda_idempotency::Table::dynamodb(
                ddb.clone(),
                accounts,
            )),
        );
        let new: Vec<Payment> = (0..n).map(Payment::new).collect();
        let again: Vec<Payment> = new
            .iter()
            .map(|p| Payment {
                redelivered: true,
                ..p.clone()
            })
            .collect();
        for (scenario, list, tag) in [("new", &new, "a"), ("redelivered", &again, "b")] {
            let events = crate::payments::batches(list, tag);
            let app = &app;
            rows.push(
                measure("payments", mode, scenario, n, &events, |event| async move {
                    let r = app
                        .handle(LambdaEvent::new(event, ctx()))
                        .await
                        .map_err(|e| e.to_string())?;
                    no_failures(&r.batch_item_failures)
                })
                .await?,
            );
        }
    }
    Ok(())
}

async fn orders(n: usize, rows: &mut Vec<Row>) -> Result<(), Box<dyn std::error::Error>> {
    let ddb = moto().dynamodb().await;
    let sqs = moto().sqs().await;
    let queue = esm::create_queue(&sqs, "bill-notify", true, 5, 30).await;
    let ids: Vec<usize> = (0..n).collect();
    for (mode, commit) in MODES {
        let idempotency = create_idempotency_table(&ddb).await;
        let table = create_table(&ddb, "bill-orders", "order_id", None).await;
        let app = crate::orders_app::app_with(
            ddb.clone(),
            idempotency,
            table,
            queue.url.clone(),
            configured(orders::App::config(), commit),
        );
        for (scenario, redelivered, tag) in [("new", false, "a"), ("redelivered", true, "b")] {
            let events = crate::orders::batches(&ids, tag, redelivered);
            let app = &app;
            rows.push(
                measure("orders", mode, scenario, n, &events, |event| async move {
                    let r = app
                        .handle(LambdaEvent::new(event, ctx()))
                        .await
                        .map_err(|e| e.to_string())?;
                    no_failures(&r.batch_item_failures)
                })
                .await?,
            );
        }
    }
    Ok(())
}

async fn inventory(n: usize, rows: &mut Vec<Row>) -> Result<(), Box<dyn std::error::Error>> {
    let ddb = moto().dynamodb().await;
    let events: Vec<Value> = (0..n)
        .map(|i| {
            let mut e = test_kit::events::sample("inventory-order-placed.json");
            e["id"] = json!(format!("00000000-0000-4000-8000-{i:012}"));
            e["detail"] = json!({"order_id": format!("ord-{i}"), "sku": format!("SKU-{}", i % 20), "quantity": 1});
            e
        })
        .collect();
    for (mode, commit) in MODES {
        let idempotency = create_idempotency_table(&ddb).await;
        let stock = create_table(&ddb, "bill-stock", "sku", None).await;
        for sku in 0..20 {
            ddb.put_item()
                .table_name(&stock)
                .item(
                    "sku",
                    aws_sdk_dynamodb::types::AttributeValue::S(format!("SKU-{sku}")),
                )
                .item(
                    "stock",
                    aws_sdk_dynamodb::types::AttributeValue::N("1000000".into()),
                )
                .send()
                .await?;
        }
        let engine = Idempotency::new(
            DynamoDbStore::new(ddb.clone(), TableConfig::new(idempotency)),
            configured(inventory::App::config(), commit),
        );
        let app = inventory::App::new(
            engine,
            inventory::StockTable::from_table(lambda_idempotency::Table::dynamodb(
                ddb.clone(),
                &stock,
            )),
        );
        for scenario in ["new", "redelivered"] {
            let app = &app;
            rows.push(
                measure(
                    "inventory",
                    mode,
                    scenario,
                    n,
                    &events,
                    |event| async move {
                        let payload = lambda_idempotency::eventbridge::EventPayload::from_text(
                            event.to_string(),
                        )
                        .map_err(|e| e.to_string())?;
                        app.handle(LambdaEvent::new(payload, ctx()))
                            .await
                            .map(drop)
                            .map_err(|e| e.to_string())
                    },
                )
                .await?,
            );
        }
    }
    Ok(())
}

async fn payments_api(n: usize, rows: &mut Vec<Row>) -> Result<(), Box<dyn std::error::Error>> {
    for (tag, (mode, commit)) in ["c", "f", "o", "x"].into_iter().zip(MODES) {
        let app = crate::http::app(commit.unwrap_or(CommitMode::Fenced), commit.is_none()).await;
        let events: Vec<Value> = (0..n).map(|i| crate::http::request(i, tag)).collect();
        for scenario in ["new", "redelivered"] {
            let app = &app;
            rows.push(
                measure(
                    "payments-api",
                    mode,
                    scenario,
                    n,
                    &events,
                    |event| async move {
                        let r = app
                            .handle(LambdaEvent::new(event, ctx()))
                            .await
                            .map_err(|e| e.to_string())?;
                        let r = serde_json::to_value(r).map_err(|e| e.to_string())?;
                        (r["statusCode"] == 201)
                            .then_some(())
                            .ok_or_else(|| format!("answered {r}"))
                    },
                )
                .await?,
            );
        }
    }
    Ok(())
}

async fn ledger(n: usize, rows: &mut Vec<Row>) -> Result<(), Box<dyn std::error::Error>> {
    let ddb = moto().dynamodb().await;
    let records: Vec<(String, Vec<u8>)> = (0..n)
        .map(|id| {
            let account = format!("acct-{}", id % 20);
            let data = json!({"payment_id": format!("pay-{id}"), "account_id": account, "amount_cents": 100 + id % 7});
            (account, data.to_string().into_bytes())
        })
        .collect();
    // Batches of 10 records of one shard, as the mapping delivers them.
    let events: Vec<Value> = records
        .chunks(10)
        .enumerate()
        .map(|(b, chunk)| {
            let entries: Vec<(&str, &[u8])> = chunk
                .iter()
                .map(|(k, d)| (k.as_str(), d.as_slice()))
                .collect();
            kinesis_event("bill-ledger", 0, (b * 10) as u64, &entries)
        })
        .collect();
    for (mode, commit) in MODES {
        let idempotency = create_idempotency_table(&ddb).await;
        let accounts = create_table(&ddb, "bill-ledger-accounts", "account_id", None).await;
        let engine = Idempotency::new(
            DynamoDbStore::new(ddb.clone(), TableConfig::new(idempotency)),
            configured(ledger::App::config(), commit),
        );
        let app = ledger::App::new(
            engine,
            ledger::Accounts::from_table(lambda_idempotency::Table::dynamodb(
                ddb.clone(),
                accounts,
            )),
        );
        for scenario in ["new", "redelivered"] {
            let app = &app;
            rows.push(
                measure("ledger", mode, scenario, n, &events, |event| async move {
                    let r = app
                        .handle(LambdaEvent::new(event, ctx()))
                        .await
                        .map_err(|e| e.to_string())?;
                    no_failures(&r.batch_item_failures)
                })
                .await?,
            );
        }
    }
    Ok(())
}

async fn relay(n: usize, rows: &mut Vec<Row>) -> Result<(), Box<dyn std::error::Error>> {
    let run = crate::relay::measure(n).await?;
    if run.skipped > 0 {
        return Err(format!("relay: {} records skipped", run.skipped).into());
    }
    rows.push(Row {
        function: "outbox-relay",
        mode: "(publishes the outbox)",
        scenario: "new",
        messages: n,
        invocations: run.invocations,
        bill: Bill::of(&run.ledger)?,
        cpu: run.cpu,
        wall: run.busy,
    });
    Ok(())
}

/// `bench bill [MESSAGES]`.
pub async fn run(messages: usize) -> Result<(), Box<dyn std::error::Error>> {
    let n = messages.clamp(10, 20_000) / 10 * 10;
    let mut rows = Vec::new();
    eprintln!("bench bill: payments");
    payments(n, &mut rows).await?;
    eprintln!("bench bill: orders");
    orders(n, &mut rows).await?;
    eprintln!("bench bill: inventory");
    inventory(n, &mut rows).await?;
    eprintln!("bench bill: payments-api");
    payments_api(n, &mut rows).await?;
    eprintln!("bench bill: ledger");
    ledger(n, &mut rows).await?;
    eprintln!("bench bill: outbox-relay");
    relay(n, &mut rows).await?;

    println!(
        "bench bill: {n} messages per row against moto, one invocation at a time (SQS and Kinesis \
         batches of 10, EventBridge and HTTP one per invocation, the relay's stream batches of 100); \
         units by DynamoDB's documented rules (tests/kit/src/bill.rs); CPU = this process's user + system \
         time (the relay: its process's); cancelled transactions counted as applied (in brackets)"
    );
    println!(
        "| function | mode | messages | DynamoDB requests / msg | WRU / msg | RRU / msg | SQS requests / msg | events / msg | CPU / invocation | wall / invocation | GB-s / msg at 128 / 512 / 1,769 MB |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for r in &rows {
        let inv = r.invocations.max(1) as f64;
        let cancelled = if r.bill.wru_cancelled > 0.0 {
            format!(" ({:.2})", r.per_message(r.bill.wru_cancelled))
        } else {
            String::new()
        };
        println!(
            "| {} | {} | {} | {:.2} | {:.2}{} | {:.2} | {:.2} | {:.2} | {:.3} ms | {:.2} ms | {:.6} / {:.6} / {:.6} |",
            r.function,
            r.mode,
            r.scenario,
            r.per_message(r.bill.dynamodb_requests as f64),
            r.per_message(r.bill.wru),
            cancelled,
            r.per_message(r.bill.rru),
            r.per_message(r.bill.sqs_standard + r.bill.sqs_fifo),
            r.per_message(r.bill.events),
            r.cpu.as_secs_f64() * 1e3 / inv,
            r.wall.as_secs_f64() * 1e3 / inv,
            r.gb_seconds(MEMORY_MB[0]),
            r.gb_seconds(MEMORY_MB[1]),
            r.gb_seconds(MEMORY_MB[2]),
        );
    }

    let p = Prices::US_EAST_1;
    println!();
    println!(
        "Dollars per million messages, us-east-1 on-demand (Prices::US_EAST_1), Lambda arm64; \
         new messages, and in brackets the same messages redelivered (duplicates)"
    );
    println!(
        "| function | mode | DynamoDB | SQS + EventBridge | Lambda at 128 MB | Lambda at 512 MB | Lambda at 1,769 MB | total at 512 MB |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for new in rows.iter().filter(|r| r.scenario == "new") {
        let dup = rows.iter().find(|r| {
            r.function == new.function && r.mode == new.mode && r.scenario == "redelivered"
        });
        let cell = |f: &dyn Fn(&Row) -> f64| match dup {
            Some(d) => format!("{:.2} ({:.2})", f(new), f(d)),
            None => format!("{:.2}", f(new)),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | **{}** |",
            new.function,
            new.mode,
            cell(&|r| r.dollars(&p, 512.0).0),
            cell(&|r| r.dollars(&p, 512.0).1),
            cell(&|r| r.dollars(&p, MEMORY_MB[0]).2),
            cell(&|r| r.dollars(&p, MEMORY_MB[1]).2),
            cell(&|r| r.dollars(&p, MEMORY_MB[2]).2),
            cell(&|r| {
                let (d, m, l) = r.dollars(&p, 512.0);
                d + m + l
            }),
        );
    }
    Ok(())
}
