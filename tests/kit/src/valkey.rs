//! A real `redis-server` (or `valkey-server`) on a free 127.0.0.1 port with
//! persistence off (`--save '' --appendonly no`), started by the tests as
//! moto is: once per test binary ([`valkey`]), or one of a test's own
//! ([`Valkey::start`]) that it may stop and restart.
//!
//! The server runs under a small `sh` watchdog that reads the test
//! process's pipe: when the test process exits (even by a crash) the pipe
//! closes and the watchdog kills the server.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use lambda_idempotency::store::valkey::ValkeyTimeouts;
use lambda_idempotency::{ValkeyStore, clock::Clock};

/// What a test without a server says.
pub const HOW_TO_GET_VALKEY: &str = "a Valkey/Redis server is needed for this test: run \
    `tests/run` (it installs Debian's redis-server when missing), or `apt-get install \
    redis-server`, or set VALKEY_SERVER to a valkey-server/redis-server binary";

/// A running server.
#[derive(Debug)]
pub struct Valkey {
    port: u16,
    pid: u32,
    // Held so the watchdog's stdin stays open while the server should run.
    stdin: Option<ChildStdin>,
    watchdog: Child,
}

static VALKEY: OnceLock<Valkey> = OnceLock::new();

/// The server of this test process, started on first use.
///
/// # Panics
/// When no server can be started, with a message saying how to get one.
pub fn valkey() -> &'static Valkey {
    VALKEY.get_or_init(Valkey::start)
}

fn server_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("VALKEY_SERVER") {
        return PathBuf::from(p);
    }
    for name in ["valkey-server", "redis-server"] {
        for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!("{HOW_TO_GET_VALKEY} (no valkey-server or redis-server on PATH)")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free loopback port: {e}"))
}

impl Valkey {
    /// Starts a server of its own on a free port; it stops when dropped.
    ///
    /// # Panics
    /// When no server can be started, with a message saying how to get one.
    pub fn start() -> Valkey {
        let mut last = String::new();
        // A port found free may be taken before the server binds it: retry.
        for _ in 0..3 {
            match Self::spawn(free_port()) {
                Ok(server) => return server,
                Err(e) => last = e,
            }
        }
        panic!("{HOW_TO_GET_VALKEY} ({last})")
    }

    fn spawn(port: u16) -> Result<Valkey, String> {
        let binary = server_binary();
        // The watchdog prints the server's pid, then waits for its stdin to
        // close, kills the server and reaps it (no zombie left behind).
        let script = r#"
"$0" --port "$1" --bind 127.0.0.1 --save '' --appendonly no --protected-mode yes \
     --loglevel warning --logfile '' >/dev/null 2>&1 &
pid=$!
echo "$pid"
cat >/dev/null
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
"#;
        let mut watchdog = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(&binary)
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("sh: {e}"))?;
        let stdin = watchdog.stdin.take().expect("piped stdin");
        let mut line = String::new();
        BufReader::new(watchdog.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .map_err(|e| format!("reading the watchdog: {e}"))?;
        let pid = line
            .trim()
            .parse()
            .map_err(|_| format!("watchdog said {line:?}"))?;
        let server = Valkey {
            port,
            pid,
            stdin: Some(stdin),
            watchdog,
        };
        server
            .wait_ready(Duration::from_secs(5))
            .map_err(|e| format!("{} did not answer on port {port}: {e}", binary.display()))?;
        Ok(server)
    }

    fn wait_ready(&self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        let client = redis::Client::open(self.url()).map_err(|e| e.to_string())?;
        loop {
            let answer = client
                .get_connection_with_timeout(Duration::from_millis(200))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            match answer {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => return Err(e.to_string()),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id (fault tests kill it).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A store on this server with the default timeouts and keys under a
    /// prefix of their own (tests share the server).
    pub async fn store(&self) -> ValkeyStore {
        self.store_with(ValkeyTimeouts::default()).await
    }

    /// [`Valkey::store`] with these timeouts.
    pub async fn store_with(&self, timeouts: ValkeyTimeouts) -> ValkeyStore {
        ValkeyStore::connect(&self.url(), timeouts)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "connecting to {}: {}",
                    self.url(),
                    lambda_idempotency::report(&e)
                )
            })
            .with_key_prefix(format!("{}:", crate::unique_name("t")))
    }

    /// [`Valkey::store`] whose key TTLs follow `clock`.
    pub async fn store_on(&self, clock: impl Clock + 'static) -> ValkeyStore {
        self.store().await.with_clock(clock)
    }

    /// A plain connection, for setting up foreign keys and reading TTLs.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .unwrap_or_else(|e| panic!("connecting to {}: {e}", self.url()))
    }

    /// Commands the server has run since it started (or since
    /// [`Valkey::reset_stats`]), by name: `INFO commandstats`.
    pub async fn command_counts(&self) -> std::collections::BTreeMap<String, u64> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.connection().await)
            .await
            .expect("INFO commandstats");
        info.lines()
            .filter_map(|l| l.strip_prefix("cmdstat_"))
            .filter_map(|l| {
                let (name, rest) = l.split_once(':')?;
                let calls = rest.strip_prefix("calls=")?.split(',').next()?;
                Some((name.to_owned(), calls.parse().ok()?))
            })
            .collect()
    }

    /// Forgets the command counts (`CONFIG RESETSTAT`).
    pub async fn reset_stats(&self) {
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async::<()>(&mut self.connection().await)
            .await
            .expect("CONFIG RESETSTAT");
    }

    /// Kills the server (`SIGKILL`: nothing saved, as a crash or a node
    /// replacement without persistence) and starts a new one on the same
    /// port, empty.
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match Self::spawn(self.port) {
                Ok(new) => {
                    *self = new;
                    return;
                }
                Err(e) if Instant::now() > deadline => panic!("restarting: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Kills the server now (the watchdog with it).
    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg("-9")
            .arg(self.pid.to_string())
            .status();
        drop(self.stdin.take());
        let _ = self.watchdog.wait();
    }
}

impl Drop for Valkey {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.watchdog.wait();
    }
}
