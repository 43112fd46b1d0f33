//! `ledger` as a real process under a local Lambda Runtime API, fed by the
//! Kinesis event source mapping emulator, killed (SIGKILL) right after its
//! `n`-th DynamoDB request of the run is answered — every boundary in turn
//! — then restarted; the mapping retries the shard's batch (an invocation
//! error), and records left in progress by the dead process fail until their
//! lease lapses. Every payment credits exactly once in every trial, the
//! producer's retries included.

use std::collections::BTreeMap;
use std::process::Child;
use std::time::Duration;
use test_kit::crash::{Process, every_boundary};
use test_kit::kinesis_esm::{self, Options, create_stream};
use test_kit::runtime_api::{RuntimeApi, spawn_function};
use test_kit::{PaymentTables, balances, moto, now_ms, payment_tables};

use crate::exactly_once::ledger::put_payments;

/// Each invocation's deadline, so the lease a killed process leaves behind.
const LEASE: Duration = Duration::from_millis(1000);

fn spawn(api: &RuntimeApi, t: &PaymentTables, mode: &str) -> Child {
    let [idempotency, accounts] = t.env();
    spawn_function(
        "ledger",
        api,
        &[idempotency, accounts, (payments::MODE_ENV, mode)],
    )
}

/// One trial: kill after the `n`-th DynamoDB request of the run. Returns
/// whether the kill happened.
async fn trial(mode: &str, n: u32) -> bool {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "ledger-crash", 2).await;
    let t = payment_tables("ledger-crash").await;
    // Shard 0: p1, its retry (same batch), p2; shard 1: p3, p2's retry
    // under another partition key, p4.
    put_payments(
        &kinesis,
        &stream,
        &[
            (0, "p1", "a", 100),
            (0, "p1", "a", 100),
            (0, "p2", "b", 20),
            (1, "p3", "a", 3),
            (1, "p2", "b", 20),
            (1, "p4", "c", 4000),
        ],
    )
    .await;
    let expected = BTreeMap::from([("a".into(), 103), ("b".into(), 20), ("c".into(), 4000)]);

    let process =
        Process::start_killing_after(n, &t.marker, |api: &RuntimeApi| spawn(api, &t, mode)).await;
    let state = tokio::sync::Mutex::new(process);
    let options = Options {
        max_retries: 30,
        retry_pause: Duration::from_millis(150),
        max_time: Duration::from_secs(30),
        ..Options::default()
    };
    let state_ref = &state;
    let stats = kinesis_esm::run(&kinesis, &stream, &options, |event| async move {
        // One execution environment: one invocation at a time.
        let mut p = state_ref.lock().await;
        let deadline = now_ms() + LEASE.as_millis() as u64;
        p.invoke(event, deadline).await
    })
    .await;
    let kills = state.into_inner().stop().await;
    assert!(
        stats.skipped.is_empty() && !stats.timed_out,
        "{mode} n={n}: {stats:?}"
    );
    assert_eq!(
        balances(&t.accounts).await,
        expected,
        "{mode}: killed after request {n}"
    );
    kills > 0
}

/// Both transactional modes are exact at every boundary of the run: at
/// least one request per payment (optimistic), two (fenced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_survives_a_kill_after_every_request() {
    for (mode, per_payment) in [("optimistic", 1), ("fenced", 2)] {
        let boundaries = every_boundary(30, |n| trial(mode, n)).await;
        assert!(
            boundaries >= 4 * per_payment,
            "{mode}: only {boundaries} kill points were reached"
        );
    }
}
