//! CloudWatch metrics in Embedded Metric Format (EMF): one JSON line per
//! invocation that CloudWatch Logs turns into metrics, with no API call.
//!
//! Namespace `Idempotency`, dimension `service` (the function name, from
//! `AWS_LAMBDA_FUNCTION_NAME`), metrics `Processed`, `Replayed`,
//! `InProgressConflict`, `Failed` (plus `Rejected`, terminal outcomes
//! recorded, and `Parked`, stream records set aside in a parking queue). A rising `Replayed` rate means trouble upstream: the template
//! alarms on it. Lines go to stderr (CloudWatch reads both streams; a local
//! run's stdout stays the responses). They are written under Lambda (when
//! `AWS_LAMBDA_FUNCTION_NAME` is set); `IDEMPOTENCY_METRICS=on` writes them
//! elsewhere too, `IDEMPOTENCY_METRICS=off` never.
//!
//! On Lambda Managed Instances one process serves several invocations at
//! once: each runs in its own [`invocation`] scope, so the counts kept
//! beside the engine (undecodable replays) are that invocation's alone and
//! its EMF line carries its `requestId`.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Stream records that can never succeed, parked (done; not retried).
    pub parked: u64,
    /// Replays whose stored response no longer decodes into the handler's
    /// type (changed in a deploy): replayed without the body.
    pub undecodable: u64,
}

/// What one invocation counts apart from its records' outcomes.
#[derive(Debug)]
struct Scope {
    request_id: String,
    undecodable: AtomicU64,
}

tokio::task_local! {
    static INVOCATION: Scope;
}

/// Runs `invocation` (one invocation's work, on one task) in its own
/// scope: counts noted while it runs are its own, not those of another
/// invocation the process serves at the same time, and its EMF line names
/// `request_id`. The runtime wraps every invocation in one.
pub async fn invocation<F: Future>(request_id: String, invocation: F) -> F::Output {
    let scope = Scope {
        request_id,
        undecodable: AtomicU64::new(0),
    };
    INVOCATION.scope(scope, invocation).await
}

/// Counts one undecodable replay: in the current invocation's scope, or,
/// outside any (an engine used directly), in `fallback`.
pub(crate) fn count_undecodable(fallback: &AtomicU64) {
    if INVOCATION
        .try_with(|s| s.undecodable.fetch_add(1, Ordering::Relaxed))
        .is_err()
    {
        fallback.fetch_add(1, Ordering::Relaxed);
    }
}

/// Takes (and resets) the undecodable replays counted by the current
/// invocation, or outside any scope those counted in `fallback`.
pub(crate) fn take_undecodable(fallback: &AtomicU64) -> u64 {
    INVOCATION
        .try_with(|s| s.undecodable.swap(0, Ordering::Relaxed))
        .unwrap_or_else(|_| fallback.swap(0, Ordering::Relaxed))
}

/// The current invocation's request id, if in one's scope.
fn request_id() -> Option<String> {
    INVOCATION.try_with(|s| s.request_id.clone()).ok()
}

/// The EMF JSON line for `counts` at `timestamp_ms` for `service`, with
/// the invocation's `request_id` (a property, not a dimension) when known.
pub(crate) fn emf_line(
    service: &str,
    counts: &Counts,
    timestamp_ms: u64,
    request_id: Option<&str>,
    tenant: Option<&str>,
) -> String {
    let values = [
        ("Processed", counts.processed),
        ("Replayed", counts.replayed),
        ("InProgressConflict", counts.in_progress),
        ("Failed", counts.failed),
        ("Rejected", counts.rejected),
        ("Parked", counts.parked),
        ("UndecodableReplay", counts.undecodable),
    ];
    named_line(service, &values, timestamp_ms, request_id, tenant)
}

/// The EMF JSON line of the counts `values` (name, value), in
/// [`NAMESPACE`] under the dimension `service`, and for an invocation of a
/// tenant also under `service` and `tenant` (the function's totals stay
/// where its alarms read them).
fn named_line(
    service: &str,
    values: &[(&str, u64)],
    timestamp_ms: u64,
    request_id: Option<&str>,
    tenant: Option<&str>,
) -> String {
    use std::fmt::Write as _;
    // Written directly (no JSON tree per invocation); strings escaped as
    // JSON strings.
    let text = |s: &str| serde_json::Value::from(s).to_string();
    let mut line = String::with_capacity(640);
    let _ = write!(
        line,
        "{{\"_aws\":{{\"Timestamp\":{timestamp_ms},\"CloudWatchMetrics\":[{{\"Namespace\":{},\
         \"Dimensions\":[[\"service\"]{}],\"Metrics\":[",
        text(NAMESPACE),
        if tenant.is_some() {
            ",[\"service\",\"tenant\"]"
        } else {
            ""
        }
    );
    for (i, (name, _)) in values.iter().enumerate() {
        let comma = if i == 0 { "" } else { "," };
        let _ = write!(
            line,
            "{comma}{{\"Name\":{},\"Unit\":\"Count\"}}",
            text(name)
        );
    }
    let _ = write!(line, "]}}]}},\"service\":{}", text(service));
    if let Some(tenant) = tenant {
        let _ = write!(line, ",\"tenant\":{}", text(tenant));
    }
    for (name, n) in values {
        let _ = write!(line, ",{}:{n}", text(name));
    }
    if let Some(id) = request_id {
        let _ = write!(line, ",\"requestId\":{}", text(id));
    }
    line.push('}');
    line
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
    emit_for(counts, None);
}

/// [`emit`] for an invocation of `tenant` (Lambda's tenant isolation
/// mode): the line has the dimension `tenant` as well.
pub fn emit_for(counts: &Counts, tenant: Option<&str>) {
    if enabled() {
        let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
        let request_id = request_id();
        write(&emf_line(
            &service(),
            counts,
            now,
            request_id.as_deref(),
            tenant,
        ));
    }
}

/// Writes an EMF line of a function's own counts `values` (name, value:
/// `[("OutboxPoison", 2)]`), in [`NAMESPACE`] under the `service`
/// dimension with the invocation's `requestId`, as [`emit`] does.
pub fn emit_named(values: &[(&str, u64)]) {
    if enabled() {
        let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
        write(&named_line(
            &service(),
            values,
            now,
            request_id().as_deref(),
            None,
        ));
    }
}

fn write(line: &str) {
    // One locked write of the whole line, so lines from concurrent tasks
    // never interleave (and test harnesses capture it like other output).
    eprintln!("{line}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, HandlerError, Idempotency, MemoryStore, Outcome};
    use serde_json::json;

    /// Two invocations served at once by one engine: the undecodable
    /// replays each counts are its own, whichever finishes first.
    #[tokio::test]
    async fn concurrent_invocations_count_their_own_undecodable_replays() {
        let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("lmi"));
        let key = engine.key(&json!("pay-1")).unwrap();
        let stored = engine
            .run(&key, None, None, || async {
                Ok::<_, HandlerError>(json!({"charge": "ch_1"}))
            })
            .await
            .unwrap();
        assert_eq!(stored, Outcome::Executed(json!({"charge": "ch_1"})));
        // `a` replays `replays` times into a type the stored response no
        // longer decodes into, then waits for `b` to finish, then takes.
        let (b_done_tx, b_done) = tokio::sync::oneshot::channel::<()>();
        let a = invocation("req-a".to_owned(), async {
            for _ in 0..3 {
                let again = engine
                    .run(&key, None, None, || async { Ok::<_, HandlerError>(7_u32) })
                    .await
                    .unwrap();
                assert_eq!(again, Outcome::Replayed(None));
            }
            b_done.await.unwrap();
            engine.take_undecodable()
        });
        let b = invocation("req-b".to_owned(), async {
            tokio::task::yield_now().await;
            let taken = engine.take_undecodable();
            b_done_tx.send(()).unwrap();
            taken
        });
        let (a, b) = tokio::join!(a, b);
        assert_eq!((a, b), (3, 0), "each invocation takes only its own count");
        assert_eq!(engine.take_undecodable(), 0, "nothing left outside a scope");
    }

    /// A function's own counts: the same namespace, dimension and
    /// request id as the library's line, each metric declared.
    #[test]
    fn a_named_line_declares_the_functions_own_metrics() {
        let line = named_line(
            "relay",
            &[("OutboxPoison", 2), ("OutboxRefused", 0)],
            7,
            Some("r"),
            None,
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let meta = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(meta["Namespace"], NAMESPACE);
        assert_eq!(meta["Dimensions"], json!([["service"]]));
        assert_eq!(
            meta["Metrics"],
            json!([{"Name": "OutboxPoison", "Unit": "Count"}, {"Name": "OutboxRefused", "Unit": "Count"}])
        );
        assert_eq!(
            (v["service"].as_str(), v["requestId"].as_str()),
            (Some("relay"), Some("r"))
        );
        assert_eq!(
            (v["OutboxPoison"].as_u64(), v["OutboxRefused"].as_u64()),
            (Some(2), Some(0))
        );
        assert_eq!(v["_aws"]["Timestamp"], 7);
    }

    /// An invocation of a tenant: counted under the function and under
    /// the function and the tenant.
    #[test]
    fn a_tenants_line_has_the_tenant_dimension() {
        let counts = Counts {
            processed: 1,
            ..Counts::default()
        };
        let line = emf_line("payments", &counts, 1, Some("r"), Some("tenant-\"a"));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let meta = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(
            meta["Dimensions"],
            json!([["service"], ["service", "tenant"]])
        );
        assert_eq!(v["tenant"], "tenant-\"a");
        assert_eq!(v["service"], "payments");
        assert_eq!(v["Processed"], 1);
    }

    #[test]
    fn emf_line_declares_every_metric_it_carries() {
        let counts = Counts {
            processed: 3,
            replayed: 2,
            in_progress: 1,
            failed: 4,
            rejected: 5,
            parked: 7,
            undecodable: 6,
        };
        let v: serde_json::Value =
            serde_json::from_str(&emf_line("payments", &counts, 42, Some("req-7"), None)).unwrap();
        let meta = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(v["_aws"]["Timestamp"], 42);
        assert_eq!(meta["Namespace"], NAMESPACE);
        assert_eq!(meta["Dimensions"], serde_json::json!([["service"]]));
        assert_eq!(v["service"], "payments");
        assert_eq!(v["requestId"], "req-7");
        let odd: serde_json::Value =
            serde_json::from_str(&emf_line("a\"b\\c", &counts, 1, Some("r\n\u{1}"), None)).unwrap();
        assert_eq!(odd["service"], "a\"b\\c");
        assert_eq!(odd["requestId"], "r\n\u{1}");
        assert!(
            emf_line("s", &counts, 1, None, None)
                .parse::<serde_json::Value>()
                .is_ok()
        );
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
                "Parked",
                "UndecodableReplay"
            ]
        );
        for (name, n) in declared.iter().zip([3, 2, 1, 4, 5, 7, 6]) {
            assert_eq!(v[*name], n, "{name}");
        }
    }
}
