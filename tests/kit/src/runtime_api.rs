//! A local Lambda Runtime API (the `2018-06-01` HTTP interface a function
//! binary polls under Lambda), to run function binaries as Lambda runs them:
//! invocations with a real deadline, cold start measured to the first poll.
//! It serves as many invocations at once as the process polls for (one
//! connection each, as a Lambda Managed Instance's environment with
//! `AWS_LAMBDA_MAX_CONCURRENCY` does), and counts how many were out at once.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, oneshot};

/// What an invocation returned.
#[derive(Debug, Clone, PartialEq)]
pub enum Invocation {
    /// `POST .../response` with this body.
    Response(Value),
    /// `POST .../error` with this body.
    Error(Value),
}

impl Invocation {
    /// The `itemIdentifier`s of a partial batch response; `None` for an
    /// error or a response of another shape.
    pub fn failed_ids(&self) -> Option<Vec<String>> {
        use lambda_idempotency::testing::FailedIds as _;
        match self {
            Invocation::Response(r) => r.get("batchItemFailures").map(|_| r.failed_ids()),
            Invocation::Error(_) => None,
        }
    }
}

/// What [`RuntimeApi::invoke_watching`] saw.
#[derive(Debug)]
pub struct Watched {
    /// The invocation's result, when one came before the process died.
    pub result: Option<Invocation>,
    /// Whether the process died with a failure status (killed), answered
    /// or not.
    pub killed: bool,
}

struct Pending {
    id: String,
    /// The invocation payload's text.
    event: String,
    deadline_ms: u64,
    /// The `Lambda-Runtime-Aws-Tenant-Id` of a tenant-isolated function's
    /// invocation.
    tenant: Option<String>,
    done: oneshot::Sender<Invocation>,
}

#[derive(Default)]
struct State {
    first_poll: Option<Instant>,
    waiting: HashMap<String, oneshot::Sender<Invocation>>,
    /// The most invocations handed out and not yet answered at one time.
    max_in_flight: usize,
    /// Connections waiting in `/next` for an invocation now.
    polling: usize,
}

/// A running Runtime API on 127.0.0.1.
pub struct RuntimeApi {
    port: u16,
    queue: mpsc::Sender<Pending>,
    state: Arc<Mutex<State>>,
    polled: Arc<Notify>,
    next_id: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for RuntimeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeApi")
            .field("port", &self.port)
            .finish()
    }
}

impl RuntimeApi {
    /// Starts the server on a free port.
    pub async fn start() -> Self {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind runtime api");
        let port = listener.local_addr().expect("local addr").port();
        let (queue, rx) = mpsc::channel::<Pending>(64);
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let state: Arc<Mutex<State>> = Arc::default();
        let polled = Arc::new(Notify::new());
        let (st, po) = (state.clone(), polled.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, rx.clone(), st.clone(), po.clone()));
            }
        });
        Self {
            port,
            queue,
            state,
            polled,
            next_id: 0.into(),
        }
    }

    /// The value for `AWS_LAMBDA_RUNTIME_API`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The most invocations the function held at once (handed out by
    /// `/next`, not yet answered): 1 for a function serving one at a time.
    pub fn max_in_flight(&self) -> usize {
        self.state.lock().expect("state").max_in_flight
    }

    /// Invokes with every `(event, deadline_ms)` at once and waits (each at
    /// most `limit`) for all results, in order, each with its request id
    /// (the `Lambda-Runtime-Aws-Request-Id` the function saw).
    pub async fn invoke_all(
        &self,
        events: Vec<(Value, u64)>,
        limit: Duration,
    ) -> Vec<(String, Option<Invocation>)> {
        let calls = events.into_iter().map(|(event, deadline_ms)| {
            let (id, queued) = self.send(event.to_string(), deadline_ms, None);
            async move {
                let result = match queued.await {
                    Some(answer) => answer.wait(limit).await,
                    None => None,
                };
                (id, result)
            }
        });
        futures_util::future::join_all(calls).await
    }

    /// Queues an invocation; its request id, and (once queued) what waits
    /// for its result.
    fn send(
        &self,
        event: String,
        deadline_ms: u64,
        tenant: Option<&str>,
    ) -> (String, impl Future<Output = Option<Answer>> + '_) {
        let n = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let id = format!("req-{n}");
        let (done, result) = oneshot::channel();
        let pending = Pending {
            id: id.clone(),
            event,
            deadline_ms,
            tenant: tenant.map(str::to_owned),
            done,
        };
        let queued = async move {
            self.queue.send(pending).await.ok()?;
            Some(Answer(result))
        };
        (id, queued)
    }

    /// When the function first polled for an invocation.
    pub fn first_poll(&self) -> Option<Instant> {
        self.state.lock().expect("state").first_poll
    }

    /// Waits (at most `limit`) for the function's first poll.
    pub async fn wait_first_poll(&self, limit: Duration) -> Option<Instant> {
        let notified = self.polled.notified();
        if let Some(t) = self.first_poll() {
            return Some(t);
        }
        let _ = tokio::time::timeout(limit, notified).await;
        self.first_poll()
    }

    /// Waits (at most `limit`) until `n` connections of the function wait
    /// for an invocation at once (a process serving `n` at a time polls on
    /// `n` connections); whether they did.
    pub async fn wait_polling(&self, n: usize, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // Created before the check: a poll between the two still wakes it.
            let notified = self.polled.notified();
            if self.state.lock().expect("state").polling >= n {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.state.lock().expect("state").polling >= n;
            }
        }
    }

    /// Queues an invocation with `deadline_ms` (epoch ms) and waits (at most
    /// `limit`) for its result; `None` when none came (the function died).
    pub async fn invoke(
        &self,
        event: Value,
        deadline_ms: u64,
        limit: Duration,
    ) -> Option<Invocation> {
        self.invoke_text(event.to_string(), deadline_ms, limit)
            .await
    }

    /// [`RuntimeApi::invoke`] with the payload's text as sent, byte for
    /// byte (numbers a `Value` would round, say).
    pub async fn invoke_text(
        &self,
        event: String,
        deadline_ms: u64,
        limit: Duration,
    ) -> Option<Invocation> {
        let (_, queued) = self.send(event, deadline_ms, None);
        queued.await?.wait(limit).await
    }

    /// [`RuntimeApi::invoke`] of a tenant-isolated function on behalf of
    /// `tenant`: `/next` answers with its `Lambda-Runtime-Aws-Tenant-Id`
    /// header, as Lambda's tenant isolation mode does.
    pub async fn invoke_as_tenant(
        &self,
        tenant: &str,
        event: Value,
        deadline_ms: u64,
        limit: Duration,
    ) -> Option<Invocation> {
        let (_, queued) = self.send(event.to_string(), deadline_ms, Some(tenant));
        queued.await?.wait(limit).await
    }

    /// Invokes while watching `child`, the function process polling this
    /// API, for at most `limit`: returns the result, or `None` as soon as
    /// the process dies. After an answer it waits 100 ms more, so that a
    /// kill landing on the last answer is seen. The process is then stopped
    /// and reaped either way (a crash test restarts it).
    pub async fn invoke_watching(
        &self,
        child: &mut std::process::Child,
        event: Value,
        deadline_ms: u64,
        limit: Duration,
    ) -> Watched {
        let started = Instant::now();
        let invoke = self.invoke(event, deadline_ms, limit);
        tokio::pin!(invoke);
        let mut result = None;
        let mut killed = false;
        while started.elapsed() < limit {
            tokio::select! {
                answer = &mut invoke => {
                    result = answer;
                    break;
                }
                _ = tokio::time::sleep(Duration::from_millis(10)) => {
                    if let Ok(Some(status)) = child.try_wait() {
                        killed = !status.success();
                        break;
                    }
                }
            }
        }
        if result.is_some() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            killed = matches!(child.try_wait(), Ok(Some(status)) if !status.success());
        }
        let _ = child.kill();
        let _ = child.wait();
        Watched { result, killed }
    }
}

/// The receiving end of one queued invocation's result.
struct Answer(oneshot::Receiver<Invocation>);

impl Answer {
    /// Waits at most `limit` for the result (`None`: none came).
    async fn wait(self, limit: Duration) -> Option<Invocation> {
        tokio::time::timeout(limit, self.0).await.ok()?.ok()
    }
}

async fn serve(
    stream: TcpStream,
    queue: Arc<tokio::sync::Mutex<mpsc::Receiver<Pending>>>,
    state: Arc<Mutex<State>>,
    polled: Arc<Notify>,
) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).await.unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).await.unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).await.is_err() {
            return;
        }
        let mut parts = request_line.split_whitespace();
        let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let reply = if method == "GET" && path.ends_with("/runtime/invocation/next") {
            {
                let mut st = state.lock().expect("state");
                st.first_poll.get_or_insert_with(Instant::now);
                st.polling += 1;
                polled.notify_waiters();
            }
            let next = queue.lock().await.recv().await;
            state.lock().expect("state").polling -= 1;
            let Some(next) = next else {
                return;
            };
            {
                let mut st = state.lock().expect("state");
                st.waiting.insert(next.id.clone(), next.done);
                st.max_in_flight = st.max_in_flight.max(st.waiting.len());
            }
            let body = next.event;
            let tenant = next
                .tenant
                .map(|t| format!("Lambda-Runtime-Aws-Tenant-Id: {t}\r\n"))
                .unwrap_or_default();
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{tenant}\
                 Lambda-Runtime-Aws-Request-Id: {}\r\nLambda-Runtime-Deadline-Ms: {}\r\n\
                 Lambda-Runtime-Invoked-Function-Arn: arn:aws:lambda:us-east-1:123456789012:function:local\r\n\
                 Lambda-Runtime-Trace-Id: Root=1-00000000-000000000000000000000000;Sampled=0\r\n\
                 Content-Length: {}\r\n\r\n{}",
                next.id,
                next.deadline_ms,
                body.len(),
                body
            )
        } else if method == "POST" && path.contains("/runtime/invocation/") {
            let segments: Vec<&str> = path.split('/').collect();
            let id = segments
                .get(segments.len().saturating_sub(2))
                .copied()
                .unwrap_or("");
            let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let result = if path.ends_with("/response") {
                Invocation::Response(value)
            } else {
                Invocation::Error(value)
            };
            if let Some(done) = state.lock().expect("state").waiting.remove(id) {
                let _ = done.send(result);
            }
            "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_owned()
        } else {
            // init/error and anything else: accepted, not used.
            "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_owned()
        };
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The path of a workspace binary built by `cargo build --workspace --bins`
/// (which `tests/run` does before the tests), next to this test's target dir.
///
/// # Panics
/// When it is missing, saying how to build it.
pub fn function_binary(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test binary> -> target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: run `tests/run` (it builds the function binaries) or `cargo build --workspace --bins`",
        path.display()
    );
    path
}

/// A command that runs a function binary as Lambda runs it: a clean
/// environment (but `PATH`), the variables Lambda sets, pointed at `api`,
/// output discarded (callers may pipe it).
pub fn lambda_command(
    binary: &std::path::Path,
    function: &str,
    api: &RuntimeApi,
) -> std::process::Command {
    let mut command = std::process::Command::new(binary);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("AWS_LAMBDA_RUNTIME_API", api.address())
        .env("AWS_LAMBDA_FUNCTION_NAME", function)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
        .env(
            "AWS_LAMBDA_LOG_GROUP_NAME",
            format!("/aws/lambda/{function}"),
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    command
}

/// [`lambda_command`] for the workspace binary `name` ([`function_binary`]),
/// its AWS clients pointed at this process's moto
/// ([`Moto::apply_env`](crate::Moto::apply_env)), logging at `warn`: the
/// function's own variables are added, then it is spawned.
pub fn function_command(name: &str, api: &RuntimeApi) -> std::process::Command {
    let mut command = lambda_command(&function_binary(name), name, api);
    crate::moto().apply_env(&mut command);
    command.env("RUST_LOG", "warn");
    command
}

/// [`function_command`] with the variables `env`, started.
///
/// # Panics
/// When the binary cannot be started.
pub fn spawn_function(name: &str, api: &RuntimeApi, env: &[(&str, &str)]) -> std::process::Child {
    function_command(name, api)
        .envs(env.iter().copied())
        .spawn()
        .unwrap_or_else(|e| panic!("start the {name} binary: {e}"))
}

/// Stops `child` (started with its stderr piped) and returns what it wrote
/// to stderr.
///
/// # Panics
/// When it cannot be killed, its stderr was not piped, or it cannot be read.
pub fn stderr_of(mut child: std::process::Child) -> String {
    use std::io::Read;
    child.kill().expect("kill the function");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr piped")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    child.wait().expect("reap the function");
    stderr
}

/// A child's stdout and stderr (both piped), each read to its end on a
/// thread of its own while the caller watches the process: a full pipe
/// would block it.
#[derive(Debug)]
pub struct PipedOutput {
    out: std::thread::JoinHandle<std::io::Result<String>>,
    err: std::thread::JoinHandle<std::io::Result<String>>,
}

impl PipedOutput {
    /// Starts reading `child`'s stdout and stderr.
    ///
    /// # Panics
    /// When either was not piped.
    pub fn read(child: &mut std::process::Child) -> Self {
        fn to_end(
            mut pipe: impl std::io::Read + Send + 'static,
        ) -> std::thread::JoinHandle<std::io::Result<String>> {
            std::thread::spawn(move || {
                let mut s = String::new();
                pipe.read_to_string(&mut s).map(|_| s)
            })
        }
        Self {
            out: to_end(child.stdout.take().expect("stdout piped")),
            err: to_end(child.stderr.take().expect("stderr piped")),
        }
    }

    /// Waits for both to end (the process exited): `(stdout, stderr)`.
    ///
    /// # Panics
    /// When a pipe could not be read.
    pub fn join(self) -> (String, String) {
        let out = self
            .out
            .join()
            .expect("stdout reader")
            .expect("read stdout");
        let err = self
            .err
            .join()
            .expect("stderr reader")
            .expect("read stderr");
        (out, err)
    }
}
