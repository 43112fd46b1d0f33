//! Benchmarks against moto and a local redis-server (docs/benchmarks.md's commands, not
//! timed tests). Every figure
//! comes from one run, modes interleaved or side by side, so they compare
//! under the same machine load. moto keeps connections open between requests
//! (`--keep-alive`), as the service endpoints do: a client pays no TCP connect
//! per request here that it would not pay in AWS.
//!
//! ```sh
//! cargo run --release -p bench -- batch [ROUNDS]
//! cargo build --release -p outbox-relay && \
//!   cargo run --release -p bench -- bill [MESSAGES]
//! cargo build --release -p orders && \
//!   cargo run --release -p bench -- bigbatch [RECORDS]
//! cargo build --release -p payments && \
//!   cargo run --release -p bench -- payments [MESSAGES] [LABEL=BINARY[,VAR=VALUE...] ...]
//! cargo run --release -p bench -- orders [MESSAGES]
//! cargo build --release -p ledger && \
//!   cargo run --release -p bench -- kinesis [RECORDS] [LABEL=BINARY[,VAR=VALUE...] ...]
//! cargo build --release -p bench --bin stream_ledger && \
//!   cargo run --release -p bench -- streams [RECORDS] [LABEL=BINARY[,VAR=VALUE...] ...]
//! cargo run --release -p bench -- http [CALLS]
//! cargo build --release -p outbox-relay && \
//!   cargo run --release -p bench -- relay [MESSAGES]
//! cargo run --release -p bench -- valkey [MESSAGES]
//! cargo run --release -p bench -- sdk [CALLS]
//! cargo run --release -p bench -- hot [PAYMENTS]
//! ```

mod batch;
mod bigbatch;
mod bill;
mod hot;
mod http;
mod kinesis;
mod ledger_run;
mod orders;
mod orders_app;
mod payments;
mod relay;
mod sdk;
mod streams;
mod valkey;

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let command = args.next();
    let n = args.next().map(|r| r.parse::<usize>()).transpose()?;
    let rest: Vec<String> = args.collect();
    test_kit::moto_keep_alive();
    match command.as_deref() {
        Some("batch") => batch::run(n.unwrap_or(30)).await,
        Some("bigbatch") => bigbatch::run(n.unwrap_or(1000)).await,
        Some("bill") => bill::run(n.unwrap_or(1000)).await,
        Some("payments") => payments::run(n.unwrap_or(2000), &rest).await,
        Some("orders") => orders::run(n.unwrap_or(1000)).await,
        Some("kinesis") => kinesis::run(n.unwrap_or(1000), &rest).await,
        Some("streams") => streams::run(n.unwrap_or(2000), &rest).await,
        Some("relay") => relay::run(n.unwrap_or(1000)).await,
        Some("http") => http::run(n.unwrap_or(1000)).await,
        Some("valkey") => valkey::run(n.unwrap_or(2000)).await,
        Some("hot") => hot::run(n.unwrap_or(2000)).await,
        // Its own current-thread runtime, on a thread of its own.
        Some("sdk") => std::thread::spawn(move || sdk::run(n.unwrap_or(2000)))
            .join()
            .map_err(|_| "bench sdk panicked")?
            .map_err(Into::into),
        _ => Err(
            "usage: bench batch [ROUNDS] | bench bigbatch [RECORDS] | bench bill [MESSAGES] | bench payments [MESSAGES] [LABEL=BINARY[,VAR=VALUE...] ...] | bench orders [MESSAGES] | bench kinesis [RECORDS] [LABEL=BINARY[,VAR=VALUE...] ...] | bench streams [RECORDS] [LABEL=BINARY[,VAR=VALUE...] ...] | bench relay [MESSAGES] | bench http [CALLS] | bench valkey [MESSAGES] | bench sdk [CALLS] | bench hot [PAYMENTS]"
                .into(),
        ),
    }
}

/// The `p` quantile of sorted samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Requests per unit (message, call, record) out of `requests` (counts by
/// operation) over `n` units: the total, and each operation's share as
/// `"{op} {share:.2}"`, joined with commas.
pub fn per_unit<'a>(requests: impl IntoIterator<Item = (&'a str, u64)>, n: f64) -> (f64, String) {
    let mut total = 0;
    let mut by_op = Vec::new();
    for (op, c) in requests {
        total += c;
        by_op.push(format!("{op} {:.2}", c as f64 / n));
    }
    (total as f64 / n, by_op.join(", "))
}

/// The benchmarks' handler effect: one `PutItem` of `key` (as `pk`) into
/// `table`; an SDK error is retryable.
pub async fn put_key(
    ddb: &aws_sdk_dynamodb::Client,
    table: &str,
    key: &str,
) -> Result<(), lambda_idempotency::HandlerError> {
    ddb.put_item()
        .table_name(table)
        .item(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(key.to_owned()),
        )
        .send()
        .await
        .map_err(|e| {
            lambda_idempotency::HandlerError::retryable(
                aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string(),
            )
        })?;
    Ok(())
}
