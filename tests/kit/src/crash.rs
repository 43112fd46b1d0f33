//! Crash trials: a function binary under the local Runtime API
//! ([`runtime_api`](crate::runtime_api)), killed (SIGKILL) by the moto
//! launcher right after its `n`-th request on a marker's tables or queues is
//! answered ([`Moto::kill_after`](crate::Moto::kill_after)), restarted as the
//! Lambda runtime restarts it, and its input delivered again as its source
//! delivers it. A crash test runs [`every_boundary`] over one of the trials
//! here and checks the effects after each.

use crate::moto;
use crate::runtime_api::{Invocation, RuntimeApi, Watched};
use serde_json::{Value, json};
use std::future::Future;
use std::process::Child;
use std::time::{Duration, Instant};

/// Runs `trial(1)`, `trial(2)`, … (at most `max` trials) until one in which
/// the kill did not happen (its `n`-th request was past the last one), and
/// returns the number of boundaries crossed: the trials whose kill happened.
/// `trial` returns whether its kill happened; it checks the effects itself.
pub async fn every_boundary<F, Fut>(max: u32, mut trial: F) -> usize
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = bool>,
{
    let mut boundaries = 0;
    for n in 1..=max {
        if !trial(n).await {
            break;
        }
        boundaries += 1;
    }
    boundaries
}

/// A trial's first invocation, as [`first_invocation`] saw it.
#[derive(Debug)]
pub struct First {
    /// Its result, when one came before the kill.
    pub result: Option<Invocation>,
    /// Whether the process was killed.
    pub killed: bool,
    /// When the lease of what the killed process left in progress has
    /// lapsed (its start plus the lease, plus 200 ms): the earliest a
    /// redelivery or a client's retry can take the keys over.
    pub lease_lapsed_at: Instant,
}

impl First {
    /// Sleeps until [`First::lease_lapsed_at`].
    pub async fn after_the_lease(&self) {
        tokio::time::sleep(
            self.lease_lapsed_at
                .saturating_duration_since(Instant::now()),
        )
        .await;
    }
}

/// A trial's first invocation: `spawn`'s process under a Runtime API of its
/// own, killed right after its `n`-th request on `marker` is answered
/// ([`Moto::invoke_killing_after`](crate::Moto::invoke_killing_after)),
/// invoked with `event` under a deadline `lease` from now. The process is
/// stopped either way.
pub async fn first_invocation(
    n: u32,
    marker: &str,
    lease: Duration,
    event: &Value,
    spawn: impl Fn(&RuntimeApi) -> Child,
) -> First {
    let api = RuntimeApi::start().await;
    let mut child = spawn(&api);
    let started = Instant::now();
    // Wait for the response, or for the kill (then no response ever comes).
    let Watched { result, killed } = moto()
        .invoke_killing_after(n, marker, &api, &mut child, event.clone(), lease)
        .await;
    First {
        result,
        killed,
        lease_lapsed_at: started + lease + Duration::from_millis(200),
    }
}

/// A restarted function process (the Lambda runtime starts a new one after
/// a crash) under a Runtime API of its own; stopped when dropped.
#[derive(Debug)]
pub struct Restarted {
    /// Its Runtime API.
    pub api: RuntimeApi,
    child: Child,
}

impl Restarted {
    /// Starts `spawn`'s process.
    pub async fn start(spawn: impl Fn(&RuntimeApi) -> Child) -> Self {
        let api = RuntimeApi::start().await;
        let child = spawn(&api);
        Self { api, child }
    }
}

impl Drop for Restarted {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A crash trial over one SQS batch (`event`): the first invocation killed
/// after the `n`-th request on `marker` ([`first_invocation`]); without a
/// kill it must fail no record. After a kill the process is restarted and
/// the batch redelivered once the lease lapsed ([`redeliver_until_clean`]).
/// Returns whether the kill happened; `label` names the trial in failures.
pub async fn sqs_batch_trial(
    n: u32,
    marker: &str,
    lease: Duration,
    event: &Value,
    spawn: impl Fn(&RuntimeApi) -> Child,
    label: &str,
) -> bool {
    let first = first_invocation(n, marker, lease, event, &spawn).await;
    if !first.killed {
        assert_eq!(
            first.result.as_ref().and_then(Invocation::failed_ids),
            Some(vec![]),
            "{label} n={n}: {:?}",
            first.result
        );
    } else {
        // The runtime restarts the function; SQS redelivers after the lease.
        let again = Restarted::start(&spawn).await;
        redeliver_until_clean(
            &again.api,
            event,
            first.lease_lapsed_at,
            &format!("{label} n={n}"),
        )
        .await;
    }
    first.killed
}

/// Delivers the SQS batch `event` again as SQS does after a failure: the
/// whole batch at `not_before`, then only the records the last answer
/// listed in `batchItemFailures`, 500 ms apart, until none fails (at most 6
/// deliveries).
///
/// # Panics
/// When an answer is not a partial batch response, or records still fail
/// after the last delivery.
pub async fn redeliver_until_clean(
    api: &RuntimeApi,
    event: &Value,
    not_before: Instant,
    label: &str,
) {
    let mut pending = event.clone();
    for round in 0..6 {
        let wait = not_before.saturating_duration_since(Instant::now());
        tokio::time::sleep(wait.max(Duration::from_millis(if round == 0 { 0 } else { 500 }))).await;
        let result = api
            .invoke(
                pending.clone(),
                crate::now_ms() + 30_000,
                Duration::from_secs(20),
            )
            .await;
        let failed = result
            .as_ref()
            .and_then(Invocation::failed_ids)
            .unwrap_or_else(|| panic!("{label}: {result:?}"));
        if failed.is_empty() {
            break;
        }
        assert!(round < 5, "{label}: still failing {failed:?}");
        let records: Vec<Value> = event["Records"]
            .as_array()
            .expect("an SQS event")
            .iter()
            .filter(|r| failed.iter().any(|f| r["messageId"] == json!(f)))
            .cloned()
            .collect();
        pending = json!({ "Records": records });
    }
}

/// A function process fed by an event source mapping emulator across a
/// crash trial: started with a kill armed after its `n`-th request on
/// `marker`, restarted (the kill disarmed) whenever it died, and counted.
pub struct Process<S> {
    api: RuntimeApi,
    child: Child,
    spawn: S,
    marker: String,
    kills: usize,
}

impl<S: Fn(&RuntimeApi) -> Child> Process<S> {
    /// Starts `spawn`'s process and arms its kill.
    pub async fn start_killing_after(n: u32, marker: &str, spawn: S) -> Self {
        let api = RuntimeApi::start().await;
        let child = spawn(&api);
        moto().kill_after(n, child.id(), marker).await;
        Self {
            api,
            child,
            spawn,
            marker: marker.to_owned(),
            kills: 0,
        }
    }

    /// One invocation, as the mapping makes it: the answer, or an error
    /// when none came. When the process died it is restarted, and the kill
    /// disarmed (the launcher refuses the marker's requests once it fired).
    pub async fn invoke(
        &mut self,
        event: Value,
        deadline_ms: u64,
    ) -> Result<Value, lambda_runtime::Error> {
        match self.invoke_watching(event, deadline_ms).await {
            Some(Invocation::Response(r)) => Ok(r),
            other => {
                if matches!(self.child.try_wait(), Ok(Some(_))) {
                    self.kills += 1;
                    moto().kill_after(u32::MAX, 0, &self.marker).await;
                    self.api = RuntimeApi::start().await;
                    self.child = (self.spawn)(&self.api);
                }
                Err(format!("the function did not answer: {other:?}").into())
            }
        }
    }

    /// Invokes and waits for the answer, or for the process to die (`None`).
    async fn invoke_watching(&mut self, event: Value, deadline_ms: u64) -> Option<Invocation> {
        let invoke = self.api.invoke(event, deadline_ms, Duration::from_secs(20));
        tokio::pin!(invoke);
        loop {
            tokio::select! {
                result = &mut invoke => return result,
                _ = tokio::time::sleep(Duration::from_millis(10)) => {
                    if let Ok(Some(_)) = self.child.try_wait() {
                        return None;
                    }
                }
            }
        }
    }

    /// Stops the process and disarms the kill; returns how many times it
    /// was killed. A kill after the last request can land after the last
    /// answer, with nothing invoked afterwards to notice it: it is given the
    /// time the launcher takes to fire, then looked for.
    pub async fn stop(mut self) -> usize {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if matches!(self.child.try_wait(), Ok(Some(status)) if !status.success()) {
            self.kills += 1;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        moto().kill_after(u32::MAX, 0, &self.marker).await;
        self.kills
    }
}
