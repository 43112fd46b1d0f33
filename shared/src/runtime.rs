//! Running a handler: under Lambda (`lambda_runtime`) or locally on event
//! files (`--event events/x.json`), with the same code path.
//!
//! Under Lambda Managed Instances (`AWS_LAMBDA_MAX_CONCURRENCY` above 1) one
//! process serves that many invocations at once ([`run`] uses
//! `lambda_runtime::run_concurrent`): the handler's state (engine, cache,
//! clients) is shared by all of them; what belongs to one invocation (its
//! context and deadline, its log span, its metrics) stays its own.

use lambda_runtime::{Context, LambdaEvent, service_fn};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::diagnostic::diagnostic;

/// Environment variable Lambda sets for the Runtime API.
pub const RUNTIME_API_ENV: &str = "AWS_LAMBDA_RUNTIME_API";

/// Environment variable that sets the number of tokio worker threads: `1`
/// runs a current-thread runtime, more a multi-thread one. Unset, the count
/// follows the CPU the function's memory buys (see [`worker_threads`]).
pub const WORKER_THREADS_ENV: &str = "FUNCTION_WORKER_THREADS";

/// Environment variable Lambda Managed Instances set to the number of
/// invocations one execution environment serves at once (the function's
/// `PerExecutionEnvironmentMaxConcurrency`). Unset or 1: one at a time.
pub const MAX_CONCURRENCY_ENV: &str = "AWS_LAMBDA_MAX_CONCURRENCY";

/// Environment variable that sets the time a local `--event` run gives each
/// invocation (whole seconds, 1 to [`MAX_LOCAL_TIMEOUT_SECS`]; unset:
/// [`DEFAULT_LOCAL_TIMEOUT`]): the deadline its `Context` carries, as a
/// function's timeout does under Lambda. Lambda itself sets no such
/// variable (an invocation's deadline comes from the Runtime API), so it
/// changes local runs only.
pub const LOCAL_TIMEOUT_ENV: &str = "LOCAL_TIMEOUT_SECONDS";

/// A local invocation's time when [`LOCAL_TIMEOUT_ENV`] is unset.
pub const DEFAULT_LOCAL_TIMEOUT: Duration = Duration::from_secs(30);

/// The most [`LOCAL_TIMEOUT_ENV`] may be: Lambda's largest function
/// timeout, 900 s.
pub const MAX_LOCAL_TIMEOUT_SECS: u64 = 900;

/// A [`LOCAL_TIMEOUT_ENV`] value that is not a timeout Lambda could have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocalTimeoutError {
    /// Not a whole number of seconds.
    #[error(
        "{LOCAL_TIMEOUT_ENV}={value:?} is not a whole number of seconds (1 to {MAX_LOCAL_TIMEOUT_SECS})"
    )]
    NotSeconds {
        /// The value given.
        value: String,
    },
    /// Zero, or past Lambda's largest timeout.
    #[error(
        "{LOCAL_TIMEOUT_ENV}={seconds} is out of range: a Lambda timeout is 1 to {MAX_LOCAL_TIMEOUT_SECS} s"
    )]
    OutOfRange {
        /// The seconds given.
        seconds: u64,
    },
}

/// The time a local invocation gets: [`LOCAL_TIMEOUT_ENV`]'s value, or
/// [`DEFAULT_LOCAL_TIMEOUT`] when unset.
///
/// # Errors
/// A value that is not a whole number of seconds from 1 to
/// [`MAX_LOCAL_TIMEOUT_SECS`] (surrounding spaces allowed).
pub fn local_timeout(env: Option<&str>) -> Result<Duration, LocalTimeoutError> {
    let Some(value) = env else {
        return Ok(DEFAULT_LOCAL_TIMEOUT);
    };
    let seconds = value
        .trim()
        .parse::<u64>()
        .map_err(|_| LocalTimeoutError::NotSeconds {
            value: value.to_owned(),
        })?;
    if !(1..=MAX_LOCAL_TIMEOUT_SECS).contains(&seconds) {
        return Err(LocalTimeoutError::OutOfRange { seconds });
    }
    Ok(Duration::from_secs(seconds))
}

/// Memory (MB) at which Lambda gives a function one full vCPU.
const MB_PER_VCPU: u64 = 1769;

/// The invocations one process serves at once: [`MAX_CONCURRENCY_ENV`]
/// when a positive number, else 1.
pub fn max_concurrency(env: Option<&str>) -> u32 {
    env.and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(1)
}

/// The worker threads for a function: [`WORKER_THREADS_ENV`] when set to a
/// positive number; on a Lambda Managed Instance (a `max_concurrency`
/// above one) one per CPU visible; else one per full vCPU that
/// `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` buys (1,769 MB each, rounded up; at
/// most the CPUs visible), else 1.
///
/// Below 1,769 MB a function has less than one vCPU: a second thread adds
/// only wake-ups and cross-thread hand-offs (billed CPU) to work that mostly
/// waits on the network. A managed instance's execution environment has
/// whole vCPUs (2, 4 or 8 GiB of memory each) shared by its concurrent
/// invocations: the 1,769 MB rule does not apply there.
pub fn worker_threads(
    threads_env: Option<&str>,
    memory_mb_env: Option<&str>,
    max_concurrency: u32,
    cpus: usize,
) -> usize {
    if let Some(n) = threads_env
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    if max_concurrency > 1 {
        return cpus.max(1);
    }
    memory_mb_env
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(1, |mb| {
            usize::try_from(mb.div_ceil(MB_PER_VCPU)).unwrap_or(usize::MAX)
        })
        .clamp(1, cpus.max(1))
}

/// Builds the function's tokio runtime ([`worker_threads`] from the
/// environment: current-thread for 1) and runs `main` on it to completion.
/// A function's `main` is [`serve`], which starts here.
///
/// # Panics
/// When the runtime cannot be built (the process cannot create its event
/// loop: nothing could run).
pub fn start<F: Future>(main: F) -> F::Output {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let threads = worker_threads(
        std::env::var(WORKER_THREADS_ENV).ok().as_deref(),
        std::env::var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
            .ok()
            .as_deref(),
        max_concurrency(std::env::var(MAX_CONCURRENCY_ENV).ok().as_deref()),
        cpus,
    );
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    let runtime = builder
        .enable_all()
        .build()
        .expect("cannot build the tokio runtime");
    runtime.block_on(main)
}

/// Keeps `state` (a function's app: engine, clients) for the rest of the
/// process and returns a `'static` reference to it, which a handler given
/// to [`run`] can capture: concurrent invocations share it, and it lives as
/// long as the process anyway.
pub fn process_wide<T>(state: T) -> &'static T {
    Box::leak(Box::new(state))
}

/// Installs the log subscriber: JSON when `AWS_LAMBDA_LOG_FORMAT=JSON` (each
/// line carries the invocation's `requestId` span field), level from
/// `AWS_LAMBDA_LOG_LEVEL` or `RUST_LOG` (default `INFO`). Logs go to stderr so
/// a local run's stdout holds only the responses.
pub fn init_telemetry() {
    lambda_runtime::tracing::init_default_subscriber_with_writer(std::io::stderr);
}

/// A function's whole `main`: builds the runtime ([`start`]), installs the
/// log subscriber ([`init_telemetry`]), connects the app once (`connect`,
/// e.g. `App::from_env`) and keeps it for the process ([`process_wide`]:
/// the invocations a managed instance serves at once share it), then
/// serves `handle` (e.g. `App::handle`) under Lambda or on the `--event`
/// files ([`run`]).
///
/// ```no_run
/// use lambda_runtime::LambdaEvent;
/// use serde_json::Value;
///
/// struct App;
///
/// impl App {
///     async fn from_env() -> Result<Self, lambda_runtime::Error> {
///         Ok(App)
///     }
///
///     async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, lambda_runtime::Error> {
///         Ok(event.payload)
///     }
/// }
///
/// fn main() -> Result<(), lambda_runtime::Error> {
///     lambda_idempotency::runtime::serve(App::from_env, App::handle)
/// }
/// ```
///
/// # Errors
/// The app cannot connect (the process stops before serving anything,
/// saying the error with its chain of causes, [`report`](crate::report):
/// `connect` needs no `map_err` of its own), or what [`run`] returns.
pub fn serve<A, C, CFut, CErr, E, H, HFut, R>(
    connect: C,
    handle: H,
) -> Result<(), lambda_runtime::Error>
where
    A: Sync + 'static,
    C: FnOnce() -> CFut,
    CFut: Future<Output = Result<A, CErr>>,
    CErr: Into<lambda_runtime::Error>,
    E: DeserializeOwned + Send + 'static,
    H: Fn(&'static A, LambdaEvent<E>) -> HFut + Clone + Send + 'static,
    HFut: Future<Output = Result<R, lambda_runtime::Error>> + Send + 'static,
    R: Serialize + Send + 'static,
{
    start(async move {
        init_telemetry();
        // The whole chain of causes, as one message: what stops the start.
        let app = connect().await.map_err(|e| {
            let e: lambda_runtime::Error = e.into();
            lambda_runtime::Error::from(crate::report(&*e))
        })?;
        let app = process_wide(app);
        run(move |event| handle(app, event)).await
    })
}

/// How the binary was asked to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Under a Lambda Runtime API.
    Lambda,
    /// Locally, once per event file, in order; as invocations of the
    /// tenant given (`--tenant-id`), as Lambda's tenant isolation mode
    /// hands it.
    Local(Vec<PathBuf>, Option<String>),
}

/// Reads the command line: `--event FILE` (repeatable, or several files after
/// one `--event`) runs locally, `--tenant-id ID` as invocations of that
/// tenant; otherwise the Runtime API must be set.
pub(crate) fn mode_from_args(
    args: impl IntoIterator<Item = String>,
    runtime_api_set: bool,
) -> Result<Mode, String> {
    let mut files = Vec::new();
    let mut taking = false;
    let mut tenant: Option<String> = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--event" | "-e" => taking = true,
            "--help" | "-h" => return Err(usage()),
            "--tenant-id" => match args.next() {
                Some(id) if !id.is_empty() && !id.starts_with('-') => tenant = Some(id),
                _ => return Err(format!("--tenant-id needs a tenant id\n{}", usage())),
            },
            other if other.starts_with("--tenant-id=") && other.len() > "--tenant-id=".len() => {
                tenant = Some(other["--tenant-id=".len()..].to_owned());
            }
            other if other.starts_with("--event=") => {
                files.push(PathBuf::from(&other["--event=".len()..]));
            }
            other if taking && !other.starts_with('-') => files.push(PathBuf::from(other)),
            other => return Err(format!("unknown argument {other:?}\n{}", usage())),
        }
    }
    if tenant.is_some() && files.is_empty() {
        return Err(format!(
            "--tenant-id is for a local run (under Lambda the tenant comes with each invocation)\n{}",
            usage()
        ));
    }
    if !files.is_empty() {
        Ok(Mode::Local(files, tenant))
    } else if taking {
        Err(format!("--event needs a file\n{}", usage()))
    } else if runtime_api_set {
        Ok(Mode::Lambda)
    } else {
        Err(format!("{RUNTIME_API_ENV} is not set\n{}", usage()))
    }
}

fn usage() -> String {
    "usage: <function> [--tenant-id ID] --event EVENT.json [EVENT.json ...]   run locally, print each \
     response (--tenant-id: as invocations of that tenant, as Lambda's tenant isolation mode hands it)\n       \
     (under Lambda, with AWS_LAMBDA_RUNTIME_API set, it serves the Runtime API)"
        .to_owned()
}

/// Whether the command line asks for a local run (`--event FILE`), as
/// [`run`] reads it: for a function whose setup differs locally (a printing
/// publisher instead of the AWS clients).
pub fn is_local_run() -> bool {
    let args = std::env::args().skip(1);
    let runtime_api = std::env::var_os(RUNTIME_API_ENV).is_some();
    matches!(mode_from_args(args, runtime_api), Ok(Mode::Local(..)))
}

/// The invocation's remaining time, from its `Context`: what the batch
/// processors' `process` takes (`None`: no deadline, `deadline == 0`).
pub fn remaining(ctx: &Context) -> Option<Duration> {
    crate::batch::remaining_now(ctx)
}

/// A context for a local invocation: a request id and a deadline
/// `timeout` from now (what Lambda would give a function with that timeout).
pub fn local_context(n: usize, timeout: Duration) -> Context {
    let mut ctx = Context::default();
    ctx.request_id = format!("local-{n}");
    ctx.deadline = SystemClock
        .now_ms()
        .saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
    ctx.invoked_function_arn = "arn:aws:lambda:local:000000000000:function:local".to_owned();
    ctx
}

/// Runs `handler` under Lambda, or locally on the event files named on the
/// command line, printing each response as one JSON line on stdout. A local
/// invocation's deadline is [`local_timeout`] from its start
/// ([`LOCAL_TIMEOUT_ENV`], 30 s unset; a bad value fails the run before any
/// event is read).
///
/// The handler's payload type `E` is deserialized from the invocation's
/// text, under Lambda and from a file alike: a `Value`, a typed event, or
/// an [`EventPayload`](crate::eventbridge::EventPayload) that keeps the
/// text itself (exact numbers).
///
/// An invocation error is answered with the [`diagnostic`] of the error
/// (an `errorType` naming what failed, the chain of causes as the message);
/// locally it is printed as `{"errorType":..,"errorMessage":..}` (what Lambda
/// returns) and the process exits non-zero at the end.
///
/// Under Lambda it serves [`MAX_CONCURRENCY_ENV`] invocations at once
/// (`lambda_runtime::run_concurrent`; one at a time when unset), hence the
/// `Clone + Send + 'static` handler: capture the app by a [`process_wide`]
/// reference. Each invocation runs in its own
/// [`metrics::invocation`](crate::metrics::invocation) scope and its own
/// log span (`requestId`); its deadline is its own `Context`'s; a panic in
/// one is answered as that invocation's error and the others go on.
pub async fn run<E, H, Fut, R>(handler: H) -> Result<(), lambda_runtime::Error>
where
    E: DeserializeOwned + Send + 'static,
    H: Fn(LambdaEvent<E>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<R, lambda_runtime::Error>> + Send + 'static,
    R: Serialize + Send + 'static,
{
    let mode = mode_from_args(
        std::env::args().skip(1),
        std::env::var_os(RUNTIME_API_ENV).is_some(),
    )?;
    let (files, tenant) = match mode {
        Mode::Lambda => {
            return lambda_runtime::run_concurrent(service_fn(move |event: LambdaEvent<E>| {
                let handler = handler.clone();
                let request_id = event.context.request_id.clone();
                crate::metrics::invocation(request_id, async move {
                    // errorType says what failed (InvalidEvent, StoreUnavailable, ...).
                    let response = handler(event).await.map_err(|e| diagnostic(&*e))?;
                    serde_json::to_value(response).map_err(|e| diagnostic(&e))
                })
            }))
            .await;
        }
        Mode::Local(files, tenant) => (files, tenant),
    };
    let timeout = local_timeout(std::env::var(LOCAL_TIMEOUT_ENV).ok().as_deref())
        .map_err(|e| e.to_string())?;
    let mut failed = 0;
    for (n, file) in files.iter().enumerate() {
        let mut ctx = local_context(n + 1, timeout);
        ctx.tenant_id.clone_from(&tenant);
        let answer = invoke_file(&handler, file, ctx).await?;
        let line = match answer {
            Ok(response) => serde_json::to_string(&response)?,
            Err(err) => {
                failed += 1;
                serde_json::to_string(&diagnostic(&*err))?
            }
        };
        println!("{line}");
    }
    if failed > 0 {
        return Err(format!("{failed} of {} invocations failed", files.len()).into());
    }
    Ok(())
}

/// One local invocation of `handler` on the event file `file`, as the
/// `--event` run makes it ([`invoke_text`]). `Err`: the file cannot be
/// read or is not the handler's JSON (no invocation).
pub(crate) async fn invoke_file<E, H, Fut, R>(
    handler: H,
    file: &std::path::Path,
    ctx: Context,
) -> Result<Result<R, lambda_runtime::Error>, String>
where
    E: DeserializeOwned,
    H: FnOnce(LambdaEvent<E>) -> Fut,
    Fut: Future<Output = Result<R, lambda_runtime::Error>>,
{
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    invoke_text(handler, text, file.display(), ctx).await
}

/// One local invocation of `handler` on an event's text (`source` names it
/// in errors and logs): the text read as the handler's payload type `E`,
/// the handler run with `ctx` in its own metrics scope and log span. `Err`:
/// the text is not the handler's JSON (no invocation).
pub(crate) async fn invoke_text<E, H, Fut, R>(
    handler: H,
    text: String,
    source: impl std::fmt::Display,
    ctx: Context,
) -> Result<Result<R, lambda_runtime::Error>, String>
where
    E: DeserializeOwned,
    H: FnOnce(LambdaEvent<E>) -> Fut,
    Fut: Future<Output = Result<R, lambda_runtime::Error>>,
{
    let event: E = serde_json::from_str(&text).map_err(|e| format!("{source} is not JSON: {e}"))?;
    // The text is not needed past here: a 6 MB event's text would
    // otherwise stay allocated for the whole invocation.
    drop(text);
    let span = tracing::info_span!("local invoke", requestId = %ctx.request_id, event = %source);
    let _entered = span.enter();
    let request_id = ctx.request_id.clone();
    Ok(crate::metrics::invocation(request_id, handler(LambdaEvent::new(event, ctx))).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn event_files_mean_local() {
        assert_eq!(
            mode_from_args(args(&["--event", "a.json", "b.json"]), true),
            Ok(Mode::Local(vec!["a.json".into(), "b.json".into()], None))
        );
        assert_eq!(
            mode_from_args(args(&["--event=a.json", "-e", "a.json"]), false),
            Ok(Mode::Local(vec!["a.json".into(), "a.json".into()], None))
        );
    }

    #[test]
    fn a_local_run_takes_a_tenant_id() {
        let local = |files: &[&str], tenant: &str| {
            let files = files.iter().map(PathBuf::from).collect();
            Ok(Mode::Local(files, Some(tenant.to_owned())))
        };
        assert_eq!(
            mode_from_args(args(&["--tenant-id", "t-1", "--event", "a.json"]), false),
            local(&["a.json"], "t-1")
        );
        assert_eq!(
            mode_from_args(args(&["--event", "a.json", "--tenant-id=t:2"]), false),
            local(&["a.json"], "t:2")
        );
        for bad in [
            &["--tenant-id", "--event", "a.json"][..],
            &["--event", "a.json", "--tenant-id"],
            &["--tenant-id", "t-1"],
            &["--event", "a.json", "--tenant-id="],
        ] {
            assert!(mode_from_args(args(bad), true).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn no_args_means_lambda_only_with_runtime_api() {
        assert_eq!(mode_from_args(args(&[]), true), Ok(Mode::Lambda));
        let err = mode_from_args(args(&[]), false).unwrap_err();
        assert!(err.contains("AWS_LAMBDA_RUNTIME_API") && err.contains("--event"));
        assert!(mode_from_args(args(&["--event"]), false).is_err());
        assert!(mode_from_args(args(&["--bogus"]), true).is_err());
    }

    #[test]
    fn worker_threads_follow_memory_unless_set() {
        // Under one vCPU (and locally): one thread, a current-thread runtime.
        assert_eq!(worker_threads(None, Some("128"), 1, 2), 1);
        assert_eq!(worker_threads(None, Some("1769"), 1, 2), 1);
        assert_eq!(worker_threads(None, None, 1, 8), 1);
        // One per full vCPU, at most the CPUs visible.
        assert_eq!(worker_threads(None, Some("1770"), 1, 2), 2);
        assert_eq!(worker_threads(None, Some("10240"), 1, 2), 2);
        assert_eq!(worker_threads(None, Some("10240"), 1, 6), 6);
        // The variable wins; nonsense is ignored.
        assert_eq!(worker_threads(Some("3"), Some("128"), 1, 2), 3);
        assert_eq!(worker_threads(Some("0"), Some("4000"), 1, 4), 3);
        assert_eq!(worker_threads(Some("x"), Some("bad"), 1, 4), 1);
    }

    #[test]
    fn managed_instances_use_every_cpu_and_their_concurrency() {
        assert_eq!(max_concurrency(None), 1);
        assert_eq!(max_concurrency(Some("0")), 1);
        assert_eq!(max_concurrency(Some("x")), 1);
        assert_eq!(max_concurrency(Some(" 64 ")), 64);
        // A managed instance's environment: whole vCPUs, whatever the memory.
        assert_eq!(worker_threads(None, Some("2048"), 64, 4), 4);
        assert_eq!(worker_threads(None, Some("2048"), 64, 0), 1);
        assert_eq!(worker_threads(Some("2"), Some("2048"), 64, 4), 2);
    }

    #[test]
    fn serve_stops_before_serving_when_the_app_cannot_connect() {
        let served = std::sync::atomic::AtomicBool::new(false);
        let served = process_wide(served);
        let err = serve(
            || async { Err::<(), _>("the table is missing") },
            move |_: &'static (), _: LambdaEvent<serde_json::Value>| async move {
                served.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok::<_, lambda_runtime::Error>(())
            },
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "the table is missing");
        assert!(!served.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[test]
    fn start_runs_the_future() {
        assert_eq!(start(async { 7 }), 7);
    }

    #[test]
    fn local_timeout_is_30_s_unless_set_within_lambdas_range() {
        assert_eq!(local_timeout(None), Ok(Duration::from_secs(30)));
        assert_eq!(local_timeout(Some("300")), Ok(Duration::from_secs(300)));
        assert_eq!(local_timeout(Some(" 1 ")), Ok(Duration::from_secs(1)));
        assert_eq!(local_timeout(Some("900")), Ok(Duration::from_secs(900)));
        assert_eq!(
            local_timeout(Some("901")),
            Err(LocalTimeoutError::OutOfRange { seconds: 901 })
        );
        assert_eq!(
            local_timeout(Some("0")),
            Err(LocalTimeoutError::OutOfRange { seconds: 0 })
        );
        for bad in ["", "30s", "-5", "1.5", "ten"] {
            let err = local_timeout(Some(bad)).unwrap_err();
            assert_eq!(
                err,
                LocalTimeoutError::NotSeconds {
                    value: bad.to_owned()
                }
            );
            let text = err.to_string();
            assert!(
                text.contains(LOCAL_TIMEOUT_ENV) && text.contains("1 to 900"),
                "{text}"
            );
        }
        assert!(
            local_timeout(Some("901"))
                .unwrap_err()
                .to_string()
                .contains("out of range")
        );
    }

    #[test]
    fn local_context_has_a_future_deadline() {
        let ctx = local_context(1, Duration::from_secs(30));
        let now = SystemClock.now_ms();
        assert!(ctx.deadline > now + 29_000 && ctx.deadline <= now + 30_000);
        assert_eq!(ctx.request_id, "local-1");
    }
}
