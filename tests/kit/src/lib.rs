//! Test tooling: a moto server (DynamoDB, SQS, Kinesis, ...) started on 127.0.0.1 for the
//! test process, clients pointed at it, tables and queues with unique names,
//! and request capture; a real redis-server for the Valkey store ([`valkey`]).
//!
//! The server is `tests/kit/moto/launcher.py` (moto's WSGI app with DynamoDB
//! requests serialized, see that file) run by the Python found in
//! `MOTO_PYTHON` or `target/moto-venv/bin/python` (what `tests/run` installs).
//! It starts once per test binary and exits when the test process does (it
//! watches its stdin).

#![allow(
    clippy::unwrap_used,
    reason = "test tooling: a failed step is a failed test"
)]

/// Retries a stream request (Kinesis, DynamoDB Streams: the emulators'
/// reads) until it succeeds or `deadline` passes, counting each failure in
/// `stats.stream_errors`: `Some(answer)`, or `None` past the deadline.
macro_rules! retrying {
    ($stats:expr, $deadline:expr, $request:expr) => {{
        loop {
            match $request.send().await {
                Ok(out) => break Some(out),
                Err(_) if std::time::Instant::now() < $deadline => {
                    $stats.stream_errors += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(_) => {
                    $stats.stream_errors += 1;
                    break None;
                }
            }
        }
    }};
}

pub mod async_invoke;
pub mod bill;
pub mod capture;
pub mod contract;
pub mod crash;
pub mod esm;
pub mod events;
pub mod kafka_esm;
pub mod kinesis_esm;
pub mod runtime_api;
pub mod stream_esm;
pub mod valkey;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    TimeToLiveSpecification,
};

/// A running moto server.
#[derive(Debug)]
pub struct Moto {
    port: u16,
    keep_alive: bool,
    // Held so the server's stdin stays open for the life of the process.
    _stdin: ChildStdin,
    _child: Child,
}

static MOTO: OnceLock<Moto> = OnceLock::new();

fn workspace_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("MOTO_PYTHON") {
        return PathBuf::from(p);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let venv = target.join("moto-venv/bin/python");
    if venv.exists() {
        return venv;
    }
    workspace_root().join("target/moto-venv/bin/python")
}

const HOW_TO_GET_MOTO: &str = "moto server is needed for this test: run `tests/run` \
    (it installs moto into target/moto-venv and runs the suite), or set MOTO_PYTHON to a \
    python that has `pip install 'moto[server]==5.2.5'`";

/// The moto server of this test process, started on first use.
///
/// # Panics
/// When moto cannot be started, with a message saying how to get it.
pub fn moto() -> &'static Moto {
    MOTO.get_or_init(|| Moto::start(&[]))
}

/// The moto server of this process with connections kept open between
/// requests (`--keep-alive`), as DynamoDB's and SQS's endpoints keep them:
/// benchmarks call it before anything else starts [`moto`], so a client's CPU
/// per request is not inflated by a TCP connect and teardown per request.
///
/// # Panics
/// When moto cannot be started, or was already started without keep-alive.
pub fn moto_keep_alive() -> &'static Moto {
    let moto = MOTO.get_or_init(|| Moto::start(&["--keep-alive"]));
    assert!(
        moto.keep_alive,
        "moto was started without --keep-alive before moto_keep_alive() was called"
    );
    moto
}

impl Moto {
    /// Starts a server of its own with extra launcher arguments (a control
    /// test's non-default launcher); it stops when dropped.
    ///
    /// # Panics
    /// When moto cannot be started, with a message saying how to get it.
    pub fn start(args: &[&str]) -> Moto {
        let python = python();
        let launcher = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/moto/launcher.py"));
        let mut child = Command::new(&python)
            .arg(&launcher)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{HOW_TO_GET_MOTO} ({}: {e})", python.display()));
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("{HOW_TO_GET_MOTO} (reading launcher output: {e})"));
        let port = line
            .strip_prefix("READY ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| {
                let status = child.try_wait().ok().flatten();
                panic!("{HOW_TO_GET_MOTO} (launcher said {line:?}, exit {status:?})")
            });
        Moto {
            port,
            keep_alive: args.contains(&"--keep-alive"),
            _stdin: stdin,
            _child: child,
        }
    }
}

impl Moto {
    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// SDK configuration for this server: the crate's own loader (retries,
    /// timeouts) with the endpoint, a region and test credentials set.
    pub async fn sdk_config(&self) -> aws_config::SdkConfig {
        self.sdk_config_loader().load().await
    }

    /// The loader behind [`Moto::sdk_config`], for tests that change a
    /// setting (shorter timeouts, other retries).
    pub fn sdk_config_loader(&self) -> aws_config::ConfigLoader {
        lambda_idempotency::aws::aws_sdk_config_loader()
            .endpoint_url(self.endpoint())
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "test", "test", None, None, "moto",
            ))
    }

    /// The variables that point a process's AWS clients at this server
    /// (endpoint, region, test credentials).
    pub fn env(&self) -> [(&'static str, String); 4] {
        [
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_ACCESS_KEY_ID", "test".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
        ]
    }

    /// Points a child process's AWS clients at this server ([`Moto::env`]).
    pub fn apply_env(&self, command: &mut std::process::Command) {
        command.envs(self.env());
    }

    /// A DynamoDB client for this server.
    pub async fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.sdk_config().await)
    }

    /// An SQS client for this server.
    pub async fn sqs(&self) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::new(&self.sdk_config().await)
    }

    /// A DynamoDB Streams client for this server.
    pub async fn dynamodbstreams(&self) -> aws_sdk_dynamodbstreams::Client {
        aws_sdk_dynamodbstreams::Client::new(&self.sdk_config().await)
    }

    /// A Kinesis Data Streams client for this server.
    pub async fn kinesis(&self) -> aws_sdk_kinesis::Client {
        aws_sdk_kinesis::Client::new(&self.sdk_config().await)
    }

    /// An EventBridge client for this server.
    pub async fn eventbridge(&self) -> aws_sdk_eventbridge::Client {
        aws_sdk_eventbridge::Client::new(&self.sdk_config().await)
    }

    /// Requests served so far, by `X-Amz-Target` operation.
    pub async fn request_counts(&self) -> serde_json::Map<String, serde_json::Value> {
        let body = http_request(self.port, "GET", "/_launcher/counts").await;
        serde_json::from_str(&body).expect("counts are JSON")
    }
}

impl Moto {
    /// Adds a simulated network round trip of `ms` to every AWS request
    /// (0 turns it off). For benchmarks.
    pub async fn set_latency_ms(&self, ms: u64) {
        http_request(self.port, "POST", &format!("/_launcher/latency/{ms}")).await;
    }

    /// Kills `pid` right after the `n`-th DynamoDB request from now whose
    /// body contains `marker` (a table name) has been answered (crash tests).
    pub async fn kill_after(&self, n: u32, pid: u32, marker: &str) {
        http_request(
            self.port,
            "POST",
            &format!("/_launcher/kill-after/{n}/{pid}/{marker}"),
        )
        .await;
    }

    /// A crash trial's first invocation: once `child` polls `api` (its init,
    /// with the store's `DescribeTable`, is over), arms a kill of it right
    /// after its `n`-th DynamoDB request on `marker`'s tables is answered, invokes
    /// `event` with a deadline `lease` from now, waits for the answer or the
    /// kill ([`RuntimeApi::invoke_watching`](runtime_api::RuntimeApi::invoke_watching)),
    /// then disarms the kill.
    pub async fn invoke_killing_after(
        &self,
        n: u32,
        marker: &str,
        api: &runtime_api::RuntimeApi,
        child: &mut std::process::Child,
        event: serde_json::Value,
        lease: std::time::Duration,
    ) -> runtime_api::Watched {
        // Armed once the function's init is over (its first poll): the kill
        // counts the invocation's requests, not the table check at start.
        api.wait_first_poll(std::time::Duration::from_secs(20))
            .await;
        self.kill_after(n, child.id(), marker).await;
        let deadline = now_ms() + lease.as_millis() as u64;
        let watched = api
            .invoke_watching(child, event, deadline, std::time::Duration::from_secs(20))
            .await;
        // The launcher refuses the marker's requests once the kill has fired.
        self.kill_after(u32::MAX, 0, marker).await;
        watched
    }

    /// Starts an empty request ledger (every DynamoDB, DynamoDB Streams, SQS
    /// and EventBridge request served from now on, with the items each
    /// DynamoDB request names as they stood before and after it; a request
    /// answered by an injected fault as its request, marked `"fault"`): what
    /// [`bill`] prices, and what a test reads of the requests sent.
    pub async fn reset_ledger(&self) {
        http_request(self.port, "POST", "/_launcher/ledger/reset").await;
    }

    /// The ledger's entries so far (see `tests/kit/moto/launcher.py`).
    pub async fn ledger(&self) -> Vec<serde_json::Value> {
        let body = http_request(self.port, "GET", "/_launcher/ledger").await;
        serde_json::from_str(&body).expect("the ledger is JSON")
    }

    /// Stops keeping the ledger.
    pub async fn stop_ledger(&self) {
        http_request(self.port, "DELETE", "/_launcher/ledger").await;
    }

    /// Forgets the request counts.
    pub async fn reset_counts(&self) {
        http_request(self.port, "POST", "/_launcher/counts/reset").await;
    }

    /// Injects faults into the DynamoDB requests whose body contains
    /// `marker` (a table name, or a prefix shared by a test's tables): each
    /// gets one with probability `rate`, its kind drawn from `kinds` by an
    /// RNG seeded with `seed`. Replaces the marker's plan and its counts.
    pub async fn inject_faults(&self, marker: &str, rate: f64, kinds: &[Fault], seed: u64) {
        self.inject(marker, &FaultPlan::new(rate, kinds).seed(seed))
            .await;
    }

    /// [`Moto::inject_faults`] with every setting of the plan.
    pub async fn inject(&self, marker: &str, plan: &FaultPlan) {
        let body = http_request(
            self.port,
            "POST",
            &format!("/_launcher/faults/{}?{}", path_safe(marker), plan.query()),
        )
        .await;
        FaultCounts::parse(&body);
    }

    /// What was injected for `marker` so far (kept after
    /// [`Moto::clear_faults`]).
    pub async fn fault_counts(&self, marker: &str) -> FaultCounts {
        let body = http_request(
            self.port,
            "GET",
            &format!("/_launcher/faults/{}", path_safe(marker)),
        )
        .await;
        FaultCounts::parse(&body)
    }

    /// Stops injecting faults for `marker`; returns what was injected.
    pub async fn clear_faults(&self, marker: &str) -> FaultCounts {
        let body = http_request(
            self.port,
            "DELETE",
            &format!("/_launcher/faults/{}", path_safe(marker)),
        )
        .await;
        FaultCounts::parse(&body)
    }
}

/// A marker goes into a URL path as is: table-name characters only.
fn path_safe(marker: &str) -> &str {
    assert!(
        !marker.is_empty()
            && marker
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)),
        "a fault marker is made of table-name characters: {marker:?}"
    );
    marker
}

/// A fault the launcher injects into a DynamoDB request (see
/// `tests/kit/moto/launcher.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// HTTP 400 `ThrottlingException`, before moto sees the request.
    Throttle,
    /// HTTP 400 `ProvisionedThroughputExceededException`, before moto.
    Throughput,
    /// HTTP 500 `InternalServerError`, before moto.
    ServerError,
    /// The connection shut down without an answer, before moto.
    Reset,
    /// Applied, then answered after [`FaultPlan::slow`]: past the client's
    /// attempt timeout, an outcome the client cannot know.
    Slow,
    /// Held [`FaultPlan::stall`] before reaching moto, then applied and
    /// answered: a request overtaken by later ones.
    Stall,
    /// `TransactWriteItems`: HTTP 400 `TransactionCanceledException` with a
    /// `TransactionConflict` reason on its first item (a hot item another
    /// request is writing); `PutItem`, `UpdateItem`, `DeleteItem`: HTTP 400
    /// `TransactionConflictException` (the item is in another request's
    /// transaction). Before moto: nothing applied.
    Conflict,
}

impl Fault {
    /// The five kinds of the store-fault scenario (all but [`Fault::Stall`]).
    pub const STORE: [Fault; 5] = [
        Fault::Throttle,
        Fault::Throughput,
        Fault::ServerError,
        Fault::Reset,
        Fault::Slow,
    ];

    /// The launcher's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Throttle => "throttle",
            Fault::Throughput => "throughput",
            Fault::ServerError => "500",
            Fault::Reset => "reset",
            Fault::Slow => "slow",
            Fault::Stall => "stall",
            Fault::Conflict => "conflict",
        }
    }
}

/// What the launcher injects for one marker.
#[derive(Debug, Clone)]
pub struct FaultPlan {
    rate: f64,
    kinds: Vec<Fault>,
    seed: u64,
    slow: std::time::Duration,
    stall: std::time::Duration,
    max: Option<u64>,
    target: Option<String>,
    partial_batches: bool,
}

impl FaultPlan {
    /// Per-entry failures: with probability `rate`, a `SendMessageBatch`
    /// has the second half of its entries (at least one) not applied and
    /// answered in `Failed` (not the sender's fault); other requests pass.
    /// Counted in [`FaultCounts::injected`].
    pub fn partial_batches(rate: f64) -> Self {
        Self {
            partial_batches: true,
            ..Self::new(rate, &[])
        }
    }

    /// A fault with probability `rate` per request, of one of `kinds`
    /// (seed 0, slow answers 500 ms late, stalls of 1 s, no bound, every
    /// operation).
    pub fn new(rate: f64, kinds: &[Fault]) -> Self {
        Self {
            rate,
            kinds: kinds.to_vec(),
            seed: 0,
            slow: std::time::Duration::from_millis(500),
            stall: std::time::Duration::from_secs(1),
            max: None,
            target: None,
            partial_batches: false,
        }
    }

    /// The RNG seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// How late a [`Fault::Slow`] answer comes.
    pub fn slow(mut self, delay: std::time::Duration) -> Self {
        self.slow = delay;
        self
    }

    /// How long a [`Fault::Stall`] holds the request.
    pub fn stall(mut self, delay: std::time::Duration) -> Self {
        self.stall = delay;
        self
    }

    /// At most `n` faults, then none.
    pub fn max(mut self, n: u64) -> Self {
        self.max = Some(n);
        self
    }

    /// Only requests of this operation (`PutItem`, `TransactWriteItems`, ...).
    pub fn target(mut self, operation: &str) -> Self {
        self.target = Some(path_safe(operation).to_owned());
        self
    }

    fn query(&self) -> String {
        let mut kinds: Vec<&str> = self.kinds.iter().map(|k| k.as_str()).collect();
        if self.partial_batches {
            kinds.push("partial");
        }
        let mut q = format!(
            "rate={}&kinds={}&seed={}&slow_ms={}&stall_ms={}",
            self.rate,
            kinds.join(","),
            self.seed,
            self.slow.as_millis(),
            self.stall.as_millis()
        );
        if let Some(max) = self.max {
            q.push_str(&format!("&max={max}"));
        }
        if let Some(target) = &self.target {
            q.push_str(&format!("&target={target}"));
        }
        q
    }
}

/// Faults injected for one marker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Requests that matched the marker (and the target, if any).
    pub requests: u64,
    /// Faults injected, all kinds.
    pub injected: u64,
    /// Faults injected, by kind.
    pub by_kind: std::collections::BTreeMap<Fault, u64>,
}

impl FaultCounts {
    fn parse(body: &str) -> Self {
        let v: serde_json::Value = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("launcher fault answer {body:?}: {e}"));
        let n = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        let mut by_kind = std::collections::BTreeMap::new();
        for kind in Fault::STORE
            .into_iter()
            .chain([Fault::Stall, Fault::Conflict])
        {
            by_kind.insert(kind, n(kind.as_str()));
        }
        Self {
            requests: n("requests"),
            injected: n("injected"),
            by_kind,
        }
    }

    /// Faults of `kind` injected.
    pub fn get(&self, kind: Fault) -> u64 {
        self.by_kind.get(&kind).copied().unwrap_or(0)
    }
}

impl std::fmt::Display for FaultCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} faults in {} requests (",
            self.injected, self.requests
        )?;
        let mut first = true;
        for (kind, n) in self.by_kind.iter().filter(|(_, n)| **n > 0) {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{} {n}", kind.as_str())?;
        }
        f.write_str(")")
    }
}

/// A minimal HTTP/1.1 request to the launcher (no client crate needed).
async fn http_request(port: u16, method: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to moto");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await.expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    text.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

/// A name unique within this test process (and across processes by pid).
pub fn unique_name(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Creates a table with a string partition key `key` (on-demand), and the
/// TTL on `ttl_attribute` when given. Returns its name.
pub async fn create_table(
    client: &aws_sdk_dynamodb::Client,
    prefix: &str,
    key: &str,
    ttl_attribute: Option<&str>,
) -> String {
    create_table_named(client, unique_name(prefix), key, ttl_attribute).await
}

/// [`create_table`] with an exact name.
pub async fn create_table_named(
    client: &aws_sdk_dynamodb::Client,
    name: String,
    key: &str,
    ttl_attribute: Option<&str>,
) -> String {
    client
        .create_table()
        .table_name(&name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(key)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("attribute definition"),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name(key)
                .key_type(KeyType::Hash)
                .build()
                .expect("key schema"),
        )
        .send()
        .await
        .expect("create table on moto");
    if let Some(ttl) = ttl_attribute {
        client
            .update_time_to_live()
            .table_name(&name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(ttl)
                    .enabled(true)
                    .build()
                    .expect("ttl spec"),
            )
            .send()
            .await
            .expect("enable TTL on moto");
    }
    name
}

/// The tables of one payments test, named under a marker that scopes the
/// launcher's faults and kills to this test.
#[derive(Debug, Clone)]
pub struct PaymentTables {
    /// `<prefix>-<pid>-<n>.`: the dot ends it, so marker `…-1.` is not a part
    /// of `…-10.` (another test's tables).
    pub marker: String,
    /// The idempotency table (`id`, TTL on `expiration`).
    pub idempotency: String,
    /// The accounts table (`account_id`).
    pub accounts: String,
}

impl PaymentTables {
    /// The variables that point a payments function (`payments`,
    /// `payments-api`, `ledger`) at these tables.
    pub fn env(&self) -> [(&'static str, &str); 2] {
        [
            ("IDEMPOTENCY_TABLE", self.idempotency.as_str()),
            ("ACCOUNTS_TABLE", self.accounts.as_str()),
        ]
    }

    /// The balance of `account` in these tables ([`balance`]).
    pub async fn balance(&self, account: &str) -> Option<i64> {
        balance(&self.accounts, account).await
    }
}

/// The `balance_cents` of `account` in the accounts table `accounts` on
/// this process's moto (a consistent read); `None` when it has none.
///
/// # Panics
/// When the table cannot be read.
pub async fn balance(accounts: &str, account: &str) -> Option<i64> {
    let out = moto()
        .dynamodb()
        .await
        .get_item()
        .table_name(accounts)
        .key(
            "account_id",
            aws_sdk_dynamodb::types::AttributeValue::S(account.to_owned()),
        )
        .consistent_read(true)
        .send()
        .await
        .expect("read balance");
    out.item()?.get("balance_cents")?.as_n().ok()?.parse().ok()
}

/// Every balance of the accounts table `accounts` on this process's moto,
/// by account (a consistent scan).
///
/// # Panics
/// When the table cannot be read, or an item has no balance.
pub async fn balances(accounts: &str) -> std::collections::BTreeMap<String, i64> {
    balances_on(moto(), accounts).await
}

/// [`balances`] on the moto `moto`.
///
/// # Panics
/// When the table cannot be read, or an item has no balance.
pub async fn balances_on(moto: &Moto, accounts: &str) -> std::collections::BTreeMap<String, i64> {
    let out = moto
        .dynamodb()
        .await
        .scan()
        .table_name(accounts)
        .consistent_read(true)
        .send()
        .await
        .expect("scan accounts");
    out.items()
        .iter()
        .map(|item| {
            let account = item["account_id"].as_s().unwrap().clone();
            let balance = item["balance_cents"].as_n().unwrap().parse().unwrap();
            (account, balance)
        })
        .collect()
}

/// Creates the idempotency and accounts tables of a payments test.
pub async fn payment_tables(prefix: &str) -> PaymentTables {
    payment_tables_on(moto(), prefix).await
}

/// [`payment_tables`] on a given server.
pub async fn payment_tables_on(moto: &Moto, prefix: &str) -> PaymentTables {
    let ddb = moto.dynamodb().await;
    let marker = format!("{}.", unique_name(prefix));
    let idempotency =
        create_table_named(&ddb, format!("{marker}idem"), "id", Some("expiration")).await;
    let accounts = create_table_named(&ddb, format!("{marker}acct"), "account_id", None).await;
    PaymentTables {
        marker,
        idempotency,
        accounts,
    }
}

/// Wall-clock epoch milliseconds.
pub fn now_ms() -> u64 {
    lambda_idempotency::clock::Clock::now_ms(&lambda_idempotency::clock::SystemClock)
}

/// Creates an idempotency table named `name` (`id` S, TTL on `expiration`)
/// with a DynamoDB stream of `view` (`NEW_IMAGE`, `NEW_AND_OLD_IMAGES`).
/// Returns the stream ARN.
pub async fn create_idempotency_table_with_stream(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
    view: aws_sdk_dynamodb::types::StreamViewType,
) -> String {
    use aws_sdk_dynamodb::types::StreamSpecification;
    let out = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("id")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("attribute definition"),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("id")
                .key_type(KeyType::Hash)
                .build()
                .expect("key schema"),
        )
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(view)
                .build()
                .expect("stream specification"),
        )
        .send()
        .await
        .expect("create table with a stream on moto");
    out.table_description()
        .and_then(|t| t.latest_stream_arn())
        .expect("a stream ARN")
        .to_owned()
}

/// Creates an idempotency table (`id` S, TTL on `expiration`).
pub async fn create_idempotency_table(client: &aws_sdk_dynamodb::Client) -> String {
    create_table(client, "idempotency", "id", Some("expiration")).await
}

/// A fresh table with a partition key `pk` and a sort key `sk` (both S) and
/// TTL on `expiration`: a single-table design's table, where records live
/// beside the team's items.
pub async fn create_composite_table(client: &aws_sdk_dynamodb::Client, prefix: &str) -> String {
    let name = unique_name(prefix);
    let attribute = |n: &str| {
        AttributeDefinition::builder()
            .attribute_name(n)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .expect("attribute definition")
    };
    let key = |n: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(n)
            .key_type(kind)
            .build()
            .expect("key schema")
    };
    client
        .create_table()
        .table_name(&name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute("pk"))
        .attribute_definitions(attribute("sk"))
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .send()
        .await
        .expect("create a composite table on moto");
    client
        .update_time_to_live()
        .table_name(&name)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .attribute_name("expiration")
                .enabled(true)
                .build()
                .expect("ttl spec"),
        )
        .send()
        .await
        .expect("enable TTL on moto");
    name
}
