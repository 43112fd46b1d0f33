//! `ledger` as a real process under a local Lambda Runtime API, fed by the
//! Kinesis event source mapping emulator, killed (SIGKILL) right after its
//! `n`-th DynamoDB request of the run is answered — every boundary in turn
//! — then restarted; the mapping retries the shard's batch (an invocation
//! error), and records left in progress by the dead process fail until their
//! lease lapses. Every payment credits exactly once in every trial, the
//! producer's retries included.

use crate::exactly_once::ledger::{balances, payment};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Child;
use std::time::Duration;
use test_kit::kinesis_esm::{self, Options, create_stream, put_to_shard};
use test_kit::runtime_api::{Invocation, RuntimeApi, function_binary, lambda_command};
use test_kit::{PaymentTables, moto, now_ms, payment_tables};

/// Each invocation's deadline, so the lease a killed process leaves behind.
const LEASE: Duration = Duration::from_millis(1000);

fn spawn(api: &RuntimeApi, t: &PaymentTables, mode: &str) -> Child {
    let mut command = lambda_command(&function_binary("ledger"), "ledger", api);
    moto().apply_env(&mut command);
    command
        .env("IDEMPOTENCY_TABLE", &t.idempotency)
        .env("ACCOUNTS_TABLE", &t.accounts)
        .env(payments::MODE_ENV, mode)
        .env("RUST_LOG", "warn")
        .spawn()
        .expect("start the ledger binary")
}

struct Proc {
    api: RuntimeApi,
    child: Child,
    kills: usize,
}

/// Invokes and waits for the answer, or for the process to die (`None`).
async fn invoke_watching(p: &mut Proc, event: Value) -> Option<Invocation> {
    let deadline = now_ms() + LEASE.as_millis() as u64;
    let invoke = p.api.invoke(event, deadline, Duration::from_secs(20));
    tokio::pin!(invoke);
    loop {
        tokio::select! {
            result = &mut invoke => return result,
            _ = tokio::time::sleep(Duration::from_millis(10)) => {
                if let Ok(Some(_)) = p.child.try_wait() {
                    return None;
                }
            }
        }
    }
}

/// One trial: kill after the `n`-th DynamoDB request of the run. Returns
/// whether the kill happened.
async fn trial(mode: &str, n: u32) -> bool {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "ledger-crash", 2).await;
    let t = payment_tables("ledger-crash").await;
    // Shard 0: p1, its retry (same batch), p2; shard 1: p3, p2's retry
    // under another partition key, p4.
    for (shard, id, account, amount) in [
        (0, "p1", "a", 100),
        (0, "p1", "a", 100),
        (0, "p2", "b", 20),
        (1, "p3", "a", 3),
        (1, "p2", "b", 20),
        (1, "p4", "c", 4000),
    ] {
        put_to_shard(
            &kinesis,
            &stream,
            shard,
            account,
            payment(id, account, amount),
        )
        .await;
    }
    let expected = BTreeMap::from([("a".into(), 103), ("b".into(), 20), ("c".into(), 4000)]);

    let api = RuntimeApi::start().await;
    let child = spawn(&api, &t, mode);
    moto().kill_after(n, child.id(), &t.marker).await;
    let state = tokio::sync::Mutex::new(Proc {
        api,
        child,
        kills: 0,
    });
    let options = Options {
        max_retries: 30,
        retry_pause: Duration::from_millis(150),
        max_time: Duration::from_secs(30),
        ..Options::default()
    };
    let (state_ref, t_ref) = (&state, &t);
    let stats = kinesis_esm::run(&kinesis, &stream, &options, |event| async move {
        // One execution environment: one invocation at a time.
        let mut p = state_ref.lock().await;
        match invoke_watching(&mut p, event).await {
            Some(Invocation::Response(r)) => Ok(r),
            other => {
                if matches!(p.child.try_wait(), Ok(Some(_))) {
                    // Killed: disarm (the launcher refuses the marker's
                    // requests once the kill fired) and restart.
                    p.kills += 1;
                    moto().kill_after(u32::MAX, 0, &t_ref.marker).await;
                    p.api = RuntimeApi::start().await;
                    p.child = spawn(&p.api, t_ref, mode);
                }
                Err(format!("the ledger did not answer: {other:?}").into())
            }
        }
    })
    .await;
    let mut p = state.into_inner();
    // A kill after the last request can land after the last answer.
    tokio::time::sleep(Duration::from_millis(100)).await;
    if matches!(p.child.try_wait(), Ok(Some(status)) if !status.success()) {
        p.kills += 1;
    }
    let _ = p.child.kill();
    let _ = p.child.wait();
    moto().kill_after(u32::MAX, 0, &t.marker).await;
    assert!(
        stats.skipped.is_empty() && !stats.timed_out,
        "{mode} n={n}: {stats:?}"
    );
    assert_eq!(
        balances(&t.accounts).await,
        expected,
        "{mode}: killed after request {n}"
    );
    p.kills > 0
}

/// Both transactional modes are exact at every boundary of the run: at
/// least one request per payment (optimistic), two (fenced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_survives_a_kill_after_every_request() {
    for (mode, per_payment) in [("optimistic", 1), ("fenced", 2)] {
        let mut boundaries = 0;
        for n in 1..=30 {
            if !trial(mode, n).await {
                break;
            }
            boundaries += 1;
        }
        assert!(
            boundaries >= 4 * per_payment,
            "{mode}: only {boundaries} kill points were reached"
        );
    }
}
