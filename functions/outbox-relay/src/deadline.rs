//! The deadline window: no request starts so late that the invocation
//! would time out instead of answering with what it published.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Time kept in hand at the end of an invocation: no request starts later
/// than this before the deadline (the SDK's operation timeout is 8 s), so an
/// invocation answers with what it published instead of timing out (which
/// would retry the whole batch).
pub const REQUEST_BUDGET: Duration = Duration::from_secs(9);

/// How long from `now_ms` requests may still start, for an invocation whose
/// deadline is `deadline_ms` (epoch ms): the time left less
/// [`REQUEST_BUDGET`], or less half the time left when that is shorter (a
/// short function timeout still publishes). `None` when the deadline is not
/// after now: unknown (`cargo lambda watch` gives `600000`), so no cut-off.
pub fn request_window(deadline_ms: u64, now_ms: u64) -> Option<Duration> {
    let left = Duration::from_millis(deadline_ms.checked_sub(now_ms).filter(|l| *l > 0)?);
    Some(left - REQUEST_BUDGET.min(left / 2))
}

/// The instant after which no request starts, for an invocation whose
/// deadline is `deadline_ms` ([`request_window`] from now).
pub(crate) fn cutoff(deadline_ms: u64) -> Option<Instant> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    request_window(deadline_ms, now_ms).map(|w| Instant::now() + w)
}
