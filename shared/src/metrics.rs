//! CloudWatch metrics in Embedded Metric Format (EMF): one JSON line per
//! invocation that CloudWatch Logs turns into metrics, with no API call.
//!
//! Namespace `Idempotency`, dimension `service` (the function name, from
//! `AWS_LAMBDA_FUNCTION_NAME`), metrics `Processed`, `Replayed`,
//! `InProgressConflict`, `Failed` (plus `Rejected`, terminal outcomes
//! recorded). A rising `Replayed` rate means trouble upstream: the template
//! alarms on it. Lines go to stderr (CloudWatch reads both streams; a local
//! run's stdout stays the responses). They are written under Lambda (when
//! `AWS_LAMBDA_FUNCTION_NAME` is set); `IDEMPOTENCY_METRICS=on` writes them
//! elsewhere too, `IDEMPOTENCY_METRICS=off` never.

/// The metric namespace.
pub const NAMESPACE: &str = "Idempotency";
/// Environment variable that turns the EMF lines on (`on`, `true`, `1`) or
/// off (`off`, `false`, `0`) whatever the environment.
pub const METRICS_ENV: &str = "IDEMPOTENCY_METRICS";

/// Per-invocation counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Handlers run now (idempotently or, with the kill switch, not).
    pub processed: u64,
    /// Duplicates answered from a stored outcome.
    pub replayed: u64,
    /// Records another invocation held (retried later).
    pub in_progress: u64,
    /// Records that failed (reported for redelivery), in-progress included.
    pub failed: u64,
    /// Terminal outcomes recorded (not retried).
    pub rejected: u64,
    /// Replays whose stored response no longer decodes into the handler's
    /// type (changed in a deploy): replayed without the body.
    pub undecodable: u64,
}

/// The EMF JSON line for `counts` at `timestamp_ms` for `service`.
pub(crate) fn emf_line(service: &str, counts: &Counts, timestamp_ms: u64) -> String {
    let metric = |name: &str| serde_json::json!({"Name": name, "Unit": "Count"});
    serde_json::json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["service"]],
                "Metrics": [
                    metric("Processed"),
                    metric("Replayed"),
                    metric("InProgressConflict"),
                    metric("Failed"),
                    metric("Rejected"),
                    metric("UndecodableReplay"),
                ],
            }],
        },
        "service": service,
        "Processed": counts.processed,
        "Replayed": counts.replayed,
        "InProgressConflict": counts.in_progress,
        "Failed": counts.failed,
        "Rejected": counts.rejected,
        "UndecodableReplay": counts.undecodable,
    })
    .to_string()
}

/// Whether EMF lines are written: [`METRICS_ENV`] when set, otherwise
/// under Lambda only (`AWS_LAMBDA_FUNCTION_NAME` set).
pub fn enabled() -> bool {
    let flag = std::env::var(METRICS_ENV).map(|v| v.trim().to_ascii_lowercase());
    match flag.as_deref() {
        Ok("on" | "true" | "1" | "yes") => true,
        Ok("off" | "false" | "0" | "no") => false,
        _ => std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some(),
    }
}

/// The service name: the Lambda function's name, or `local`.
pub fn service() -> String {
    std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "local".to_owned())
}

/// Writes the EMF line for `counts` to stderr (under Lambda, or when turned
/// on).
pub fn emit(counts: &Counts) {
    if !enabled() {
        return;
    }
    let line = emf_line(
        &service(),
        counts,
        crate::clock::Clock::now_ms(&crate::clock::SystemClock),
    );
    // One locked write of the whole line, so lines from concurrent tasks
    // never interleave (and test harnesses capture it like other output).
    eprintln!("{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_line_declares_every_metric_it_carries() {
        let counts = Counts {
            processed: 3,
            replayed: 2,
            in_progress: 1,
            failed: 4,
            rejected: 5,
            undecodable: 6,
        };
        let v: serde_json::Value =
            serde_json::from_str(&emf_line("payments", &counts, 42)).unwrap();
        let meta = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(v["_aws"]["Timestamp"], 42);
        assert_eq!(meta["Namespace"], NAMESPACE);
        assert_eq!(meta["Dimensions"], serde_json::json!([["service"]]));
        assert_eq!(v["service"], "payments");
        let declared: Vec<&str> = meta["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect();
        assert_eq!(
            declared,
            [
                "Processed",
                "Replayed",
                "InProgressConflict",
                "Failed",
                "Rejected",
                "UndecodableReplay"
            ]
        );
        for (name, n) in declared.iter().zip([3, 2, 1, 4, 5, 6]) {
            assert_eq!(v[*name], n, "{name}");
        }
    }
}
