//! An asynchronous Lambda invocation, as SNS (and EventBridge) invoke a
//! function: the same event is retried after a function error up to
//! `max_retries` times (`MaximumRetryAttempts`, 0 to 2, Lambda's default 2),
//! then handed to the on-failure destination. A retry delivers the very same
//! event (the same SNS `MessageId`): the function must treat it as a
//! duplicate of whatever the failed attempt did before it failed.

use serde_json::Value;
use std::future::Future;
use std::time::Duration;

/// How the invocation is retried.
#[derive(Debug, Clone)]
pub struct Options {
    /// Retries after a function error (Lambda's default: 2).
    pub max_retries: u32,
    /// Pause before a retry (Lambda waits about a minute, then two).
    pub pause: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_retries: 2,
            pause: Duration::from_millis(20),
        }
    }
}

/// What the invocation did.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Attempts (the first one and the retries).
    pub attempts: usize,
    /// Attempts that returned an error.
    pub errors: usize,
    /// The event, when every attempt failed (the on-failure destination's).
    pub dead_letter: Option<Value>,
}

/// Invokes `handler` with `event` as an asynchronous invocation does (see
/// the module docs). The function's answer is discarded, as Lambda does.
pub async fn invoke<F, Fut, R>(event: &Value, options: &Options, handler: F) -> Stats
where
    F: Fn(Value) -> Fut,
    Fut: Future<Output = Result<R, lambda_runtime::Error>>,
{
    let mut stats = Stats::default();
    loop {
        stats.attempts += 1;
        if handler(event.clone()).await.is_ok() {
            return stats;
        }
        stats.errors += 1;
        if stats.attempts > options.max_retries as usize {
            stats.dead_letter = Some(event.clone());
            return stats;
        }
        tokio::time::sleep(options.pause).await;
    }
}
