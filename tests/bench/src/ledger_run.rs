//! What `bench kinesis` and `bench streams` share: a `ledger`-like function
//! binary started as Lambda runs it (a local Runtime API, its own tables on
//! moto), one feed of records measured (DynamoDB requests, wall time, the
//! process's CPU and peak RSS), and the canary that every account holds
//! exactly the sum of its payments.

use ledger::Accounts;
use serde_json::Value;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};
use test_kit::runtime_api::{Invocation, RuntimeApi, lambda_command};
use test_kit::{create_idempotency_table, create_table, moto, now_ms};

use crate::payments::{Variant, process_cpu, status_kb};

/// One variant's function process and tables.
pub(crate) struct Running {
    pub(crate) variant: Variant,
    pub(crate) child: std::process::Child,
    pub(crate) api: RuntimeApi,
    pub(crate) accounts: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one feed of records cost the function.
pub(crate) struct Measured {
    pub(crate) records: usize,
    pub(crate) invocations: usize,
    /// The moto launcher's request counts, by operation.
    pub(crate) requests: BTreeMap<String, u64>,
    pub(crate) wall: Duration,
    pub(crate) cpu: Duration,
    /// The process's peak RSS so far (`VmHWM`), kB.
    pub(crate) peak_kb: u64,
}

impl Measured {
    /// Requests per record of one service (`prefix`: `DynamoDB_20120810.`),
    /// and the same by operation.
    pub(crate) fn per_record(&self, prefix: &str) -> (f64, String) {
        crate::per_unit(
            self.requests
                .iter()
                .filter_map(|(k, c)| Some((k.strip_prefix(prefix)?, *c))),
            self.records as f64,
        )
    }

    /// `records/s | CPU / record | peak RSS` as table cells.
    pub(crate) fn cells(&self) -> String {
        let n = self.records as f64;
        format!(
            "{:.0} | {:.3} ms | {:.1} MB",
            n / self.wall.as_secs_f64(),
            self.cpu.as_secs_f64() * 1e3 / n,
            self.peak_kb as f64 / 1024.0,
        )
    }
}

/// Starts `variant` (`name` for messages) over fresh idempotency and
/// accounts tables, with `env`, and waits for its first poll.
pub(crate) async fn start(
    variant: &Variant,
    name: &str,
    env: &[(&str, String)],
) -> Result<Running, Box<dyn std::error::Error>> {
    let moto = moto();
    let ddb = moto.dynamodb().await;
    let idempotency = create_idempotency_table(&ddb).await;
    let accounts = create_table(&ddb, "bench-accounts", "account_id", None).await;
    let api = RuntimeApi::start().await;
    let mut command = lambda_command(&variant.binary, name, &api);
    moto.apply_env(&mut command);
    let child = command
        .env("IDEMPOTENCY_TABLE", &idempotency)
        .env("ACCOUNTS_TABLE", &accounts)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .envs(variant.env.iter().map(|(k, v)| (k, v)))
        .spawn()?;
    api.wait_first_poll(Duration::from_secs(10))
        .await
        .ok_or(format!("{name}: no first poll"))?;
    Ok(Running {
        variant: variant.clone(),
        child,
        api,
        accounts,
    })
}

/// One invocation of the function under `api` (`name` for messages).
pub(crate) async fn invoke(
    api: &RuntimeApi,
    event: Value,
    name: &str,
) -> Result<Value, lambda_runtime::Error> {
    match api
        .invoke(event, now_ms() + 30_000, Duration::from_secs(30))
        .await
    {
        Some(Invocation::Response(r)) => Ok(r),
        other => Err(format!("{name}: {other:?}").into()),
    }
}

/// Runs `feed` (it answers `(records, invocations)`) against `function`,
/// with the launcher's counts reset first.
pub(crate) async fn measure<F>(function: &Running, feed: F) -> Result<Measured, String>
where
    F: Future<Output = Result<(usize, usize), String>>,
{
    let moto = moto();
    let pid = function.child.id();
    moto.reset_counts().await;
    let cpu0 = process_cpu(pid);
    let start = Instant::now();
    let (records, invocations) = feed.await?;
    let wall = start.elapsed();
    let cpu = process_cpu(pid).saturating_sub(cpu0);
    Ok(Measured {
        records,
        invocations,
        requests: moto
            .request_counts()
            .await
            .into_iter()
            .filter_map(|(k, v)| Some((k, v.as_u64()?)))
            .collect(),
        wall,
        cpu,
        peak_kb: status_kb(pid, "VmHWM:"),
    })
}

/// The canary: every account of `function`'s table holds exactly its sum in
/// `expected`.
pub(crate) async fn check_balances(
    function: &Running,
    expected: &BTreeMap<String, i64>,
    what: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let ddb = moto().dynamodb().await;
    let table = Accounts::from_table(lambda_idempotency::Table::dynamodb(
        ddb,
        function.accounts.clone(),
    ));
    let label = &function.variant.label;
    for (account, sum) in expected {
        let balance = table.balance(account).await.map_err(|e| e.to_string())?;
        if balance != Some(*sum) {
            return Err(
                format!("{what} {label}: {account} holds {balance:?}, expected {sum}").into(),
            );
        }
    }
    Ok(())
}
