//! The relay's metrics: one EMF line per invocation.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::Report;

/// The EMF line of one invocation: `OutboxPublished`, `OutboxUnpublished`
/// (retried), `OutboxPoison` (skipped: alarm on it), `OutboxRefused` (not
/// allowed for its writer: alarm on it), `OutboxRequests`.
pub fn emf_line(report: &Report, service: String) -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let metric = |name: &str| serde_json::json!({"Name": name, "Unit": "Count"});
    serde_json::json!({
        "_aws": {
            "Timestamp": ms,
            "CloudWatchMetrics": [{
                "Namespace": lambda_idempotency::metrics::NAMESPACE,
                "Dimensions": [["service"]],
                "Metrics": [
                    metric("OutboxPublished"),
                    metric("OutboxUnpublished"),
                    metric("OutboxPoison"),
                    metric("OutboxRefused"),
                    metric("OutboxRequests"),
                ],
            }],
        },
        "service": service,
        "OutboxPublished": report.published,
        "OutboxUnpublished": report.unpublished,
        "OutboxPoison": report.poison,
        "OutboxRefused": report.refused,
        "OutboxRequests": report.requests,
    })
    .to_string()
}
