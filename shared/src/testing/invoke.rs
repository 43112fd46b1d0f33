//! A handler invoked locally, as Lambda and the `--event` run invoke it.

use lambda_runtime::LambdaEvent;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use crate::runtime::local_context;

/// The deadline a local invocation gets: Lambda's default timeout for a
/// function that sets one, 30 s.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// Invokes `handler` on `event` as Lambda does: the event's text read as
/// the handler's payload type `E` (a `Value`, an `aws_lambda_events` type,
/// an [`EventPayload`](crate::eventbridge::EventPayload)), a context with a
/// request id and a deadline [`TIMEOUT`] away, its own metrics scope.
/// `Err`: the handler's error, or the event is not its payload type (as
/// Lambda fails such an invocation).
///
/// `handler` is typically a closure over the function's app:
/// `invoke(|e| app.handle(e), &event)`.
pub async fn invoke<E, H, Fut, R>(
    handler: H,
    event: &serde_json::Value,
) -> Result<R, lambda_runtime::Error>
where
    E: DeserializeOwned,
    H: FnOnce(LambdaEvent<E>) -> Fut,
    Fut: Future<Output = Result<R, lambda_runtime::Error>>,
{
    crate::runtime::invoke_text(
        handler,
        event.to_string(),
        "the event",
        local_context(1, TIMEOUT),
    )
    .await
    .unwrap_or_else(|e| Err(e.into()))
}

/// Invokes `handler` on the event file `path` (e.g. `events/x.json`) as the
/// function's `--event` run does ([`runtime::run`](crate::runtime::run)).
/// `Err`: the handler's error, or the file cannot be read or is not the
/// handler's payload.
pub async fn invoke_file<E, H, Fut, R>(
    handler: H,
    path: impl AsRef<Path>,
) -> Result<R, lambda_runtime::Error>
where
    E: DeserializeOwned,
    H: FnOnce(LambdaEvent<E>) -> Fut,
    Fut: Future<Output = Result<R, lambda_runtime::Error>>,
{
    crate::runtime::invoke_file(handler, path.as_ref(), local_context(1, TIMEOUT))
        .await
        .unwrap_or_else(|e| Err(e.into()))
}
