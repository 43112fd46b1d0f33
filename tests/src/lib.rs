//! Test tooling: a moto server (DynamoDB, SQS) started on 127.0.0.1 for the
//! test process, clients pointed at it, tables and queues with unique names,
//! and request capture.
//!
//! The server is `tests/moto/launcher.py` (moto's WSGI app with DynamoDB
//! requests serialized, see that file) run by the Python found in
//! `MOTO_PYTHON` or `target/moto-venv/bin/python` (what `tests/run` installs).
//! It starts once per test binary and exits when the test process does (it
//! watches its stdin).

#![allow(
    clippy::unwrap_used,
    reason = "test tooling: a failed step is a failed test"
)]

pub mod capture;
pub mod contract;
pub mod esm;
pub mod events;
pub mod runtime_api;

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
    // Held so the server's stdin stays open for the life of the process.
    _stdin: ChildStdin,
    _child: Child,
}

static MOTO: OnceLock<Moto> = OnceLock::new();

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
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
    MOTO.get_or_init(|| {
        let python = python();
        let launcher = workspace_root().join("tests/moto/launcher.py");
        let mut child = Command::new(&python)
            .arg(&launcher)
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
            _stdin: stdin,
            _child: child,
        }
    })
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
        shared::aws_sdk_config_loader()
            .endpoint_url(self.endpoint())
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "test", "test", None, None, "moto",
            ))
            .load()
            .await
    }

    /// A DynamoDB client for this server.
    pub async fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.sdk_config().await)
    }

    /// An SQS client for this server.
    pub async fn sqs(&self) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::new(&self.sdk_config().await)
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

    /// Forgets the request counts.
    pub async fn reset_counts(&self) {
        http_request(self.port, "POST", "/_launcher/counts/reset").await;
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

/// Creates an idempotency table (`id` S, TTL on `expiration`).
pub async fn create_idempotency_table(client: &aws_sdk_dynamodb::Client) -> String {
    create_table(client, "idempotency", "id", Some("expiration")).await
}
