//! What an operator sees: the `payments` binary under a local Runtime API
//! with Lambda's JSON log format. Every line of an invocation carries the
//! request id; one line per record with the key hash (never the raw key),
//! the outcome and the latency; duplicates at info; one EMF metrics line per
//! invocation.

use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;
use test_kit::now_ms;
use test_kit::runtime_api::{Invocation, RuntimeApi, function_binary, lambda_command, stderr_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_the_request_id_and_one_line_per_record() {
    let api = RuntimeApi::start().await;
    let child = lambda_command(&function_binary("payments"), "payments", &api)
        .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
        .env("AWS_LAMBDA_LOG_LEVEL", "INFO")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start payments");
    let event: Value =
        serde_json::from_str(include_str!("../../../../events/payments-fifo.json")).unwrap();
    let records = event["Records"].as_array().unwrap().len();
    for _ in 0..2 {
        let result = api
            .invoke(event.clone(), now_ms() + 30_000, Duration::from_secs(20))
            .await;
        assert!(
            matches!(result, Some(Invocation::Response(_))),
            "{result:?}"
        );
    }
    let stderr = stderr_of(child);

    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let (emf, logs): (Vec<&Value>, Vec<&Value>) =
        lines.iter().partition(|l| l.get("_aws").is_some());

    // Every log line written during an invocation names its request.
    let in_invocation: Vec<&Value> = logs
        .iter()
        .copied()
        .filter(|l| {
            l["fields"].get("message_id").is_some() || l["fields"]["message"] == "batch processed"
        })
        .collect();
    assert!(!in_invocation.is_empty(), "{stderr}");
    for line in &in_invocation {
        let request = line["span"]["requestId"].as_str();
        assert!(
            request.is_some_and(|r| r.starts_with("req-")),
            "no requestId: {line}"
        );
    }

    // One line per record per invocation, with key hash, outcome, latency.
    let per_record: Vec<&Value> = in_invocation
        .iter()
        .copied()
        .filter(|l| l["fields"].get("message_id").is_some())
        .collect();
    assert_eq!(per_record.len(), 2 * records, "{stderr}");
    for line in &per_record {
        let f = &line["fields"];
        let key = f["key"].as_str().unwrap_or_default();
        assert_eq!(key.len(), 64, "a sha256 hex key hash: {line}");
        assert!(f["latency_ms"].is_u64(), "{line}");
        assert!(!line.to_string().contains("pay-"), "raw key logged: {line}");
    }
    let outcomes: Vec<(&str, &str)> = per_record
        .iter()
        .map(|l| {
            (
                l["fields"]["outcome"].as_str().unwrap_or_default(),
                l["level"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == ("executed", "INFO"))
            .count(),
        records
    );
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == ("replayed", "INFO"))
            .count(),
        records,
        "duplicates are logged at info"
    );

    // One EMF line per invocation.
    assert_eq!(emf.len(), 2, "{stderr}");
    assert_eq!(emf[0]["service"], "payments");
    assert_eq!(emf[0]["Processed"], records);
    assert_eq!(emf[1]["Replayed"], records);
    assert_eq!(emf[1]["Processed"], 0);
}
