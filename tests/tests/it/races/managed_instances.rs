//! Lambda Managed Instances: one process serving several invocations at
//! once (`AWS_LAMBDA_MAX_CONCURRENCY`), under the local Runtime API. The
//! `lmi-probe` binary shows what each invocation sees of the shared runtime
//! (its own context, deadline and log span; a panic stays its own); the
//! `payments` binary on moto shows the engine shared by concurrent
//! invocations: duplicates of one key have one effect, and each
//! invocation's EMF line counts only its own records.

use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};
use test_kit::events::{Msg, payment, sqs_event};
use test_kit::runtime_api::{
    Invocation, RuntimeApi, function_binary, function_command, lambda_command, stderr_of,
};
use test_kit::{Fault, FaultPlan, balance, moto, now_ms, payment_tables};

const CONCURRENCY: usize = 4;

/// Kills `child` and returns its stderr's lines that are JSON.
fn stop(child: Child) -> Vec<Value> {
    stderr_of(child)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn probe(api: &RuntimeApi) -> Child {
    lambda_command(&function_binary("lmi-probe"), "lmi-probe", api)
        .env("AWS_LAMBDA_MAX_CONCURRENCY", CONCURRENCY.to_string())
        .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
        .env("AWS_LAMBDA_LOG_LEVEL", "INFO")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lmi-probe")
}

/// Waits until every worker of the process polls (it opens one
/// connection per concurrent invocation).
async fn polling(api: &RuntimeApi) {
    assert!(
        api.wait_polling(CONCURRENCY, Duration::from_secs(20)).await,
        "the function's {CONCURRENCY} workers never all polled"
    );
}

/// N invocations at once in one process, each answered with its own
/// request id and deadline; every log line of an invocation carries its
/// request id, though their lines interleave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_serves_invocations_at_once_each_with_its_own_context() {
    let api = RuntimeApi::start().await;
    let child = probe(&api);
    polling(&api).await;
    let base = now_ms() + 20_000;
    let events: Vec<(Value, u64)> = (0..CONCURRENCY as u64)
        .map(|i| (json!({"tag": i, "sleep_ms": 400}), base + i * 1_000))
        .collect();
    let results = api
        .invoke_all(events.clone(), Duration::from_secs(20))
        .await;
    let logs = stop(child);

    // All handed out before any answered: served at once (no clock needed).
    assert_eq!(api.max_in_flight(), CONCURRENCY, "served at once");
    let mut tag_of_request = HashMap::new();
    for ((id, result), (event, deadline)) in results.iter().zip(&events) {
        let Some(Invocation::Response(r)) = result else {
            panic!("{id}: {result:?}");
        };
        assert_eq!(r["requestId"], json!(id), "{r}");
        assert_eq!(r["tag"], event["tag"], "{r}");
        assert_eq!(r["deadlineMs"], json!(deadline), "its own deadline: {r}");
        tag_of_request.insert(id.clone(), event["tag"].to_string());
    }
    let probe_lines: Vec<&Value> = logs
        .iter()
        .filter(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("probe"))
        })
        .collect();
    assert_eq!(probe_lines.len(), 2 * CONCURRENCY, "{logs:?}");
    for line in probe_lines {
        let request = line["span"]["requestId"].as_str().unwrap_or_default();
        assert_eq!(
            tag_of_request.get(request).map(String::as_str),
            line["fields"]["tag"].as_str(),
            "a line in another invocation's span: {line}"
        );
    }
}

/// Among invocations served at once, one panics and one runs past its
/// deadline: the others answer with their own results before the overrun
/// one (they do not wait for it), the panicking one is answered as an
/// error, and the process goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_or_an_overrun_deadline_touches_no_other_invocation() {
    let api = RuntimeApi::start().await;
    let child = probe(&api);
    polling(&api).await;
    let limit = Duration::from_secs(20);
    let long = now_ms() + 20_000;
    // Each result with its place in the order the answers came.
    let answered = AtomicUsize::new(0);
    let timed = |event: Value, deadline: u64| {
        let (api, answered) = (&api, &answered);
        async move {
            let started = Instant::now();
            let result = api.invoke(event, deadline, limit).await;
            let place = answered.fetch_add(1, SeqCst);
            (result, place, started.elapsed())
        }
    };
    let (
        (panicked, _, _),
        (overrun, overrun_place, overrun_took),
        (a, a_place, _),
        (b, b_place, _),
    ) = tokio::join!(
        timed(json!({"panic": "test"}), long),
        // Its deadline is 200 ms away; it runs 1.5 s.
        timed(json!({"tag": "late", "sleep_ms": 1_500}), now_ms() + 200),
        timed(json!({"tag": "a", "sleep_ms": 300}), long),
        timed(json!({"tag": "b", "sleep_ms": 300}), long),
    );
    assert!(api.max_in_flight() >= 3, "served at once");
    let Some(Invocation::Error(err)) = &panicked else {
        panic!("a panic is that invocation's error: {panicked:?}");
    };
    assert!(
        err.to_string().contains("probe asked to panic"),
        "the panic's message: {err}"
    );
    for (result, place, tag) in [(&a, a_place, "a"), (&b, b_place, "b")] {
        let Some(Invocation::Response(r)) = result else {
            panic!("{tag}: {result:?}");
        };
        assert_eq!(r["tag"], tag);
        assert_eq!(r["deadlineMs"], json!(long), "{r}");
        assert!(
            r["remainingMs"].as_u64().unwrap() > 15_000,
            "not the overrun one's deadline: {r}"
        );
        assert!(
            place < overrun_place,
            "{tag} waited for the overrun invocation: answered {place}, it {overrun_place}"
        );
    }
    let Some(Invocation::Response(late)) = &overrun else {
        panic!("{overrun:?}");
    };
    assert!(late["remainingMs"].as_u64().unwrap() <= 200, "{late}");
    assert!(overrun_took >= Duration::from_millis(1_500));
    // Still serving, all workers.
    let after = api
        .invoke_all(
            (0..CONCURRENCY)
                .map(|i| (json!({"tag": i, "sleep_ms": 300}), long))
                .collect(),
            limit,
        )
        .await;
    for (id, result) in &after {
        assert!(
            matches!(result, Some(Invocation::Response(r)) if r["requestId"] == json!(id)),
            "{id}: {result:?}"
        );
    }
    assert_eq!(api.max_in_flight(), CONCURRENCY);
    stop(child);
}

/// `payments` serving CONCURRENCY invocations at once in one process:
/// invocation `i` carries the first `i + 1` records of one batch, so every
/// key is in several invocations at once. Each key is credited once, and
/// each invocation's EMF line (named by its `requestId`) counts its own
/// records: as many outcomes as it had records, executions summing to one
/// per record over all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_across_concurrent_invocations_have_one_effect_and_own_metrics() {
    let t = payment_tables("lmi").await;
    // Every DynamoDB request on these tables answers 100 ms late, so the
    // invocations overlap.
    moto()
        .inject(
            &t.marker,
            &FaultPlan::new(1.0, &[Fault::Slow]).slow(Duration::from_millis(100)),
        )
        .await;
    let api = RuntimeApi::start().await;
    let child = function_command("payments", &api)
        .env("AWS_LAMBDA_MAX_CONCURRENCY", CONCURRENCY.to_string())
        .envs(t.env())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start payments");
    polling(&api).await;

    let payments = [("a", 100), ("b", 20), ("c", 3), ("d", 4000)];
    let messages: Vec<Msg> = payments
        .iter()
        .enumerate()
        .map(|(i, (account, amount))| payment(i, account, *amount))
        .collect();
    let sizes: Vec<usize> = (1..=CONCURRENCY).collect();
    let events: Vec<(Value, u64)> = sizes
        .iter()
        .map(|n| {
            (
                sqs_event("payments.fifo", &messages[..*n]),
                now_ms() + 30_000,
            )
        })
        .collect();
    let limit = Duration::from_secs(30);
    let first = api.invoke_all(events, limit).await;
    assert_eq!(api.max_in_flight(), CONCURRENCY, "served at once");

    // What failed (held by another invocation) comes again, one at a time.
    let mut size_of = HashMap::new();
    let mut rounds = Vec::new();
    for ((id, result), n) in first.iter().zip(&sizes) {
        size_of.insert(id.clone(), *n);
        let failed = result
            .as_ref()
            .and_then(Invocation::failed_ids)
            .unwrap_or_else(|| panic!("{id}: {result:?}"));
        if !failed.is_empty() {
            let again: Vec<Msg> = messages[..*n]
                .iter()
                .filter(|m| failed.contains(&m.id))
                .cloned()
                .collect();
            rounds.push(again);
        }
    }
    for again in rounds {
        let (id, result) = api
            .invoke_all(
                vec![(sqs_event("payments.fifo", &again), now_ms() + 30_000)],
                limit,
            )
            .await
            .remove(0);
        assert_eq!(
            result.as_ref().and_then(Invocation::failed_ids),
            Some(vec![]),
            "{id}: {result:?}"
        );
        size_of.insert(id, again.len());
    }
    let lines = stop(child);
    moto().clear_faults(&t.marker).await;

    let mut balances = BTreeMap::new();
    for (account, _) in payments {
        balances.insert(account, balance(&t.accounts, account).await);
    }
    let expected: BTreeMap<&str, Option<i64>> =
        payments.iter().map(|(a, n)| (*a, Some(*n))).collect();
    assert_eq!(balances, expected, "each payment credited once");

    let emf: Vec<&Value> = lines.iter().filter(|l| l.get("_aws").is_some()).collect();
    assert_eq!(
        emf.len(),
        size_of.len(),
        "one EMF line per invocation: {emf:?}"
    );
    let mut executed = 0;
    for line in emf {
        let id = line["requestId"].as_str().unwrap_or_default();
        let n = size_of
            .get(id)
            .unwrap_or_else(|| panic!("an EMF line for no invocation: {line}"));
        let count = |name: &str| line[name].as_u64().unwrap();
        let outcomes = count("Processed") + count("Replayed") + count("Failed") + count("Rejected");
        assert_eq!(outcomes, *n as u64, "{id} counts its own records: {line}");
        executed += count("Processed");
    }
    assert_eq!(executed, payments.len() as u64, "one execution per record");
}
