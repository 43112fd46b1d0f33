//! Configuration of the engine and of the DynamoDB table layout.

use std::time::Duration;

/// Environment variable that turns idempotency off (the handler runs
/// unprotected): set it to `true` or `1` in an emergency only.
pub const DISABLED_ENV: &str = "IDEMPOTENCY_DISABLED";

/// Environment variable turning batch commits off (see
/// [`Config::batch_commits`]): `false`, `0`, `no` or `off` commits each
/// record of an optimistic batch in its own transaction. Unset or any other
/// value: on.
pub const BATCH_COMMITS_ENV: &str = "IDEMPOTENCY_BATCH_COMMITS";

/// Environment variable overriding how long records live, in seconds (see
/// [`Config::expires_after_from_env`]).
pub const EXPIRES_AFTER_ENV: &str = "IDEMPOTENCY_EXPIRES_AFTER_SECONDS";

/// Environment variable holding the function's record id prefix (see
/// [`Config::prefix_from_env`]). The template sets it from the same value
/// that scopes the function's role on the idempotency table to ids
/// `<prefix>#*` (`dynamodb:LeadingKeys`).
pub const PREFIX_ENV: &str = "IDEMPOTENCY_KEY_PREFIX";

/// The longest record id prefix: a record id is `<prefix>#<64 hex digits>`
/// and DynamoDB's partition key values hold at most 2048 bytes.
pub const MAX_PREFIX_BYTES: usize = 2048 - 1 - 64;

/// A record id prefix that cannot scope a function's records.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PrefixError {
    /// The prefix is empty.
    #[error("{PREFIX_ENV}: the key prefix is empty")]
    Empty,
    /// The prefix is longer than [`MAX_PREFIX_BYTES`].
    #[error("{PREFIX_ENV}: the key prefix is {0} bytes, more than {MAX_PREFIX_BYTES}")]
    TooLong(usize),
    /// The prefix holds a character outside ASCII letters, digits, `.`, `-`
    /// and `_`.
    #[error(
        "{PREFIX_ENV}={prefix:?}: {character:?} is not allowed in a key prefix (ASCII letters, \
         digits, '.', '-', '_')"
    )]
    Character {
        /// The prefix.
        prefix: String,
        /// The first character refused.
        character: char,
    },
    /// The function keys its records under a fixed prefix, and the
    /// environment names another.
    #[error("{PREFIX_ENV}={set:?}: this function keys its records under {fixed:?} only")]
    Fixed {
        /// The prefix the environment names.
        set: String,
        /// The function's own.
        fixed: String,
    },
}

/// Checks a record id prefix: 1 to [`MAX_PREFIX_BYTES`] ASCII letters,
/// digits, `.`, `-` or `_`. Refused, among others: `#` (the separator: the
/// records of a prefix `a#b` would fall inside the scope `a#*` of prefix
/// `a`), `*` and `?` (wildcards of the IAM condition `StringLike`), `$`,
/// `{` and `}` (IAM policy variables).
pub fn check_prefix(prefix: &str) -> Result<(), PrefixError> {
    if prefix.is_empty() {
        return Err(PrefixError::Empty);
    }
    if prefix.len() > MAX_PREFIX_BYTES {
        return Err(PrefixError::TooLong(prefix.len()));
    }
    match prefix
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
    {
        Some(character) => Err(PrefixError::Character {
            prefix: prefix.to_owned(),
            character,
        }),
        None => Ok(()),
    }
}

/// A variable of the environment whose value the engine cannot use
/// ([`Config::from_env`]): the message names the variable and its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// A value that is none of those the variable takes.
    #[error("{var}={value:?} is not {expected}")]
    Value {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it takes.
        expected: &'static str,
    },
    /// [`PREFIX_ENV`] names a prefix [`check_prefix`] refuses.
    #[error(transparent)]
    Prefix(#[from] PrefixError),
    /// [`EXPIRES_AFTER_ENV`] sets a lifetime shorter than the lease.
    #[error("{EXPIRES_AFTER_ENV}={value:?} is shorter than the lease")]
    Lifetime {
        /// Its value.
        value: String,
        /// The lifetime and the lease.
        #[source]
        source: LifetimeError,
    },
}

/// The variables [`Config::from_env`] reads, every one the engine honours:
/// the record id prefix, the record lifetime, the kill switch, batch
/// commits and the tenant scope. (The store's are read where the store is
/// chosen, [`StoreChoice::from_env`](crate::StoreChoice::from_env); the
/// whole list: [`crate::env`].)
pub const ENGINE_ENV: [&str; 5] = [
    PREFIX_ENV,
    EXPIRES_AFTER_ENV,
    DISABLED_ENV,
    BATCH_COMMITS_ENV,
    crate::tenant::TENANT_SCOPE_ENV,
];

/// A record lifetime shorter than the lease ([`Config::check_lifetime`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the record lifetime ({} s) is shorter than the lease ({} s): an expired record can be \
     claimed, so a second delivery could run while the first still holds its lease; keep \
     records at least as long as the lease ({EXPIRES_AFTER_ENV}, Config::expires_after), or \
     shorten the lease (Config::lease)",
    .expires_after.as_secs(),
    .lease.as_secs_f64()
)]
#[non_exhaustive]
pub struct LifetimeError {
    /// The record lifetime.
    pub expires_after: Duration,
    /// The lease.
    pub lease: Duration,
}

/// The item size DynamoDB accepts (400 KB), kept a little under: AWS counts
/// 409,600 bytes, some emulators fewer.
pub const DEFAULT_MAX_ITEM_BYTES: usize = 400_000;

/// What to do with a response too large to store in one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OversizedResponse {
    /// Record the completion without the response body; duplicates are
    /// recognised but replay no body (`Outcome::Replayed(None)`).
    #[default]
    StoreWithoutBody,
    /// Treat the response as a terminal handler error, decided before
    /// anything commits: staged writes do not commit, and the error is
    /// recorded or the claim released per [`TerminalErrors`]. (Effects a
    /// handler made itself are not undone: keep the default for those.)
    Fail,
}

/// What to do when a handler returns a terminal error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TerminalErrors {
    /// Release the claim and report the error: a redelivery runs the handler
    /// again (until the queue's redrive policy moves the message to a DLQ).
    #[default]
    Release,
    /// Store the error as the key's outcome (Stripe style): duplicates get
    /// the same rejection without running the handler.
    Record,
}

/// How a handler's staged writes and its idempotency record are written.
///
/// | mode | requests per new message | a crash after the handler |
/// | --- | --- | --- |
/// | [`ClaimThenComplete`](CommitMode::ClaimThenComplete) | 2, or 3 with staged writes | repeats the staged writes after the lease |
/// | [`Fenced`](CommitMode::Fenced) | 2 | applies nothing; the redelivery runs again |
/// | [`Optimistic`](CommitMode::Optimistic) | 1 | applies nothing; the redelivery runs again |
///
/// A handler whose effects happen outside the store (an HTTP call, a
/// message sent) gets the same claim/complete protection in every mode but
/// [`Optimistic`](CommitMode::Optimistic), which does not claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CommitMode {
    /// Claim (one conditional write), run, apply the staged writes on their
    /// own (one transaction without the record), then complete. The classic
    /// approach: the writes and the completion are not atomic, so a crash or
    /// a failed completion between them applies the writes again after the
    /// lease. For naturally idempotent writes, or to compare.
    ClaimThenComplete,
    /// Claim, run, then one commit holding the staged writes and the
    /// completion under the owner fence (a plain conditional write when
    /// there are none). A crash before the commit applies nothing; a stale
    /// owner's commit fails.
    #[default]
    Fenced,
    /// No claim: one transaction whose record write carries the claim
    /// condition. Concurrent duplicates may both run; exactly one commits.
    /// Only for handlers whose effects are all staged writes.
    Optimistic,
}

impl CommitMode {
    /// Parses `claim-then-complete` (also `claim-complete`), `fenced` or
    /// `optimistic`, case-insensitively.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "claim-then-complete" | "claim-complete" => Some(CommitMode::ClaimThenComplete),
            "fenced" => Some(CommitMode::Fenced),
            "optimistic" => Some(CommitMode::Optimistic),
            _ => None,
        }
    }

    /// The name [`CommitMode::parse`] reads.
    pub fn as_str(self) -> &'static str {
        match self {
            CommitMode::ClaimThenComplete => "claim-then-complete",
            CommitMode::Fenced => "fenced",
            CommitMode::Optimistic => "optimistic",
        }
    }
}

/// Engine configuration, one per handler.
#[derive(Debug, Clone)]
pub struct Config {
    /// Record id prefix: namespaces the keys of one handler.
    pub prefix: String,
    /// How long a completed record lives (the TTL written to `expiration`).
    pub expires_after: Duration,
    /// How long an in-progress claim is held before another invocation may
    /// take it over; capped by the invocation's remaining time.
    pub lease: Duration,
    /// Store a hash of the payload and report a different payload under the
    /// same key as [`Outcome::PayloadMismatch`](crate::Outcome::PayloadMismatch).
    pub validate_payload: bool,
    /// Store the handler's response for replay (off: only the fact of completion).
    pub store_responses: bool,
    /// Largest record the engine writes.
    pub max_item_bytes: usize,
    /// Policy for responses over `max_item_bytes`.
    pub oversized: OversizedResponse,
    /// Policy for terminal handler errors.
    pub terminal_errors: TerminalErrors,
    /// How staged writes and the record are committed.
    pub commit_mode: CommitMode,
    /// Kill switch: run handlers without idempotency.
    pub disabled: bool,
    /// Bound on claim attempts when the record changes between the
    /// conditional put and the read of the existing record.
    pub max_claim_attempts: u32,
    /// Completed records kept in a per-process LRU cache, so a duplicate
    /// seen by the same execution environment costs no request. 0 (the
    /// default) turns it off: a cached record is only as fresh as its TTL.
    pub local_cache: usize,
    /// In [`CommitMode::Optimistic`], commit the new records of a batch
    /// together, in as few transactions as the store allows (DynamoDB: 100
    /// actions, 4 MB, one action per item), instead of one transaction per
    /// record. On by default; [`BATCH_COMMITS_ENV`] turns it off. The
    /// other modes always commit per record.
    pub batch_commits: bool,
    /// The commit mode for records in a store that cannot join one
    /// transaction with the business tables' writes (Valkey): `Some`
    /// accepts such a store at start ([`Backend::from_env`](crate::Backend::from_env)),
    /// the engine then committing in this mode (one whose writes commit on
    /// their own, e.g. [`CommitMode::ClaimThenComplete`]); `None` (the
    /// default) refuses it, naming the function.
    pub store_without_transactions: Option<CommitMode>,
    /// How keys are scoped when an invocation carries a tenant id (Lambda's
    /// tenant isolation mode): per tenant by default; from
    /// [`TENANT_SCOPE_ENV`](crate::tenant::TENANT_SCOPE_ENV).
    pub tenant_scope: crate::tenant::TenantScope,
}

impl Config {
    /// Configuration for the handler named `handler`: the prefix is
    /// `<function name>.<handler>`, with the function name from
    /// `AWS_LAMBDA_FUNCTION_NAME` (`local` outside Lambda). The kill switch is
    /// read from [`DISABLED_ENV`].
    pub fn new(handler: &str) -> Self {
        let function =
            std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "local".to_owned());
        Self::with_prefix(format!("{function}.{handler}"))
    }

    /// Configuration with an explicit prefix, stable across refactorings and
    /// function renames. It takes the kill switch, batch commits and the
    /// tenant scope from the environment leniently (a value it does not
    /// know is off, on, per tenant); a function's start reads them strictly
    /// with [`Config::from_env`] / [`Config::read_env`].
    pub fn with_prefix(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            expires_after: Duration::from_secs(60 * 60),
            lease: Duration::from_secs(60),
            validate_payload: true,
            store_responses: true,
            max_item_bytes: DEFAULT_MAX_ITEM_BYTES,
            oversized: OversizedResponse::default(),
            terminal_errors: TerminalErrors::default(),
            commit_mode: CommitMode::default(),
            disabled: disabled_from_env(),
            max_claim_attempts: 3,
            local_cache: 0,
            batch_commits: batch_commits_from_env(),
            store_without_transactions: None,
            tenant_scope: crate::tenant::TenantScope::from_env(),
        }
    }

    /// Configuration with the code's `prefix` and every variable the engine
    /// honours ([`ENGINE_ENV`]) read from the environment: a bad value is
    /// an error naming the variable, never a silent default. What a
    /// function with defaults of its own calls is [`Config::read_env`].
    pub fn from_env(prefix: impl Into<String>) -> Result<Self, EnvError> {
        Self::with_prefix(prefix).read_env()
    }

    /// This configuration (the code's defaults) with what the environment
    /// sets of [`ENGINE_ENV`] over it:
    ///
    /// | variable | sets | takes |
    /// | --- | --- | --- |
    /// | [`PREFIX_ENV`] | [`Config::prefix`] | a prefix [`check_prefix`] accepts |
    /// | [`EXPIRES_AFTER_ENV`] | [`Config::expires_after`] | whole seconds, at least the lease |
    /// | [`DISABLED_ENV`] | [`Config::disabled`] | `true`/`1`/`yes`/`on`, `false`/`0`/`no`/`off` |
    /// | [`BATCH_COMMITS_ENV`] | [`Config::batch_commits`] | as [`DISABLED_ENV`] |
    /// | [`TENANT_SCOPE_ENV`](crate::tenant::TENANT_SCOPE_ENV) | [`Config::tenant_scope`] | `tenant`, `shared` |
    ///
    /// Unset (or, but for the prefix, blank), a variable leaves the code's
    /// value.
    pub fn read_env(self) -> Result<Self, EnvError> {
        self.read_vars(|var| std::env::var(var).ok())
    }

    /// [`Config::read_env`] over the variables `var` gives (tests, a
    /// function reading its settings from elsewhere).
    pub fn read_vars(self, var: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let set = |name: &'static str| var(name).filter(|v| !v.trim().is_empty());
        let mut config = self.prefix_from(var(PREFIX_ENV).as_deref())?;
        if let Some(value) = set(EXPIRES_AFTER_ENV) {
            let bad = || EnvError::Value {
                var: EXPIRES_AFTER_ENV,
                value: value.clone(),
                expected: "a positive whole number of seconds",
            };
            let secs = value.trim().parse::<u64>().map_err(|_| bad())?;
            if secs == 0 {
                return Err(bad());
            }
            config = config.expires_after(Duration::from_secs(secs));
            config
                .check_lifetime()
                .map_err(|source| EnvError::Lifetime { value, source })?;
        }
        let flag = |name: &'static str| -> Result<Option<bool>, EnvError> {
            set(name)
                .map(|value| {
                    parse_switch(&value).ok_or(EnvError::Value {
                        var: name,
                        value,
                        expected: "true, false, 1, 0, yes, no, on or off",
                    })
                })
                .transpose()
        };
        if let Some(disabled) = flag(DISABLED_ENV)? {
            config.disabled = disabled;
        }
        if let Some(on) = flag(BATCH_COMMITS_ENV)? {
            config.batch_commits = on;
        }
        if let Some(value) = set(crate::tenant::TENANT_SCOPE_ENV) {
            config.tenant_scope =
                crate::tenant::TenantScope::parse(&value).ok_or(EnvError::Value {
                    var: crate::tenant::TENANT_SCOPE_ENV,
                    value,
                    expected: "tenant or shared",
                })?;
        }
        Ok(config)
    }

    /// Sets [`Config::tenant_scope`].
    pub fn tenant_scope(mut self, scope: crate::tenant::TenantScope) -> Self {
        self.tenant_scope = scope;
        self
    }

    /// Sets [`Config::commit_mode`].
    pub fn commit_mode(mut self, mode: CommitMode) -> Self {
        self.commit_mode = mode;
        self
    }

    /// Sets [`Config::store_without_transactions`]: records in a store that
    /// cannot join the tables' transaction are accepted, committing in
    /// `mode`.
    pub fn accept_store_without_transactions(mut self, mode: CommitMode) -> Self {
        self.store_without_transactions = Some(mode);
        self
    }

    /// Sets [`Config::expires_after`].
    pub fn expires_after(mut self, ttl: Duration) -> Self {
        self.expires_after = ttl;
        self
    }

    /// Sets [`Config::expires_after`] from [`EXPIRES_AFTER_ENV`] (whole
    /// seconds) when it is set: the deployment says how long a message can
    /// still arrive (its queue's retention plus its DLQ's). An unparsable or
    /// zero value is an error, not a silent default, and so is a lifetime
    /// shorter than the lease ([`Config::check_lifetime`]).
    pub fn expires_after_from_env(self) -> Result<Self, String> {
        self.expires_after_from(std::env::var(EXPIRES_AFTER_ENV).ok().as_deref())
    }

    /// [`Config::expires_after_from_env`] with the variable's value given.
    pub fn expires_after_from(self, value: Option<&str>) -> Result<Self, String> {
        let Some(v) = value else { return Ok(self) };
        match v.trim().parse::<u64>() {
            Ok(secs) if secs > 0 => {
                let config = self.expires_after(Duration::from_secs(secs));
                config
                    .check_lifetime()
                    .map_err(|e| format!("{EXPIRES_AFTER_ENV}={v:?}: {e}"))?;
                Ok(config)
            }
            _ => Err(format!(
                "{EXPIRES_AFTER_ENV}={v:?} is not a positive whole number of seconds"
            )),
        }
    }

    /// Refuses a record lifetime shorter than the lease. An expired record
    /// can be claimed (`#expiration < :now`), so a record that expired
    /// while its claim's lease still ran would let a second delivery claim
    /// the key while the first still runs. The record keeps its lifetime in
    /// whole seconds, compared here as kept. The lease in effect is the
    /// shorter of this lease and the invocation's remaining time (so of
    /// the function's timeout): the configured lease bounds it, and the
    /// function's timeout, unknown here, needs no part in the check.
    ///
    /// Checked where the environment is read
    /// ([`Config::expires_after_from_env`]), where an engine is built
    /// ([`Idempotency::try_new`](crate::Idempotency::try_new),
    /// [`Backend::from_env`](crate::Backend::from_env)), and per message by
    /// an engine built with [`Idempotency::new`](crate::Idempotency::new).
    pub fn check_lifetime(&self) -> Result<(), LifetimeError> {
        if Duration::from_secs(self.expires_after.as_secs()) < self.lease {
            return Err(LifetimeError {
                expires_after: self.expires_after,
                lease: self.lease,
            });
        }
        Ok(())
    }

    /// Sets [`Config::commit_mode`] from the variable `var` when it is set
    /// (`optimistic`, `fenced`, `claim-then-complete`): for a function whose
    /// deployment picks its mode. An unknown mode is an error, not a silent
    /// default.
    pub fn commit_mode_from_env(self, var: &str) -> Result<Self, String> {
        match std::env::var(var) {
            Err(_) => Ok(self),
            Ok(v) => CommitMode::parse(&v)
                .map(|mode| self.commit_mode(mode))
                .ok_or_else(|| format!("{var}={v:?} is not a mode")),
        }
    }

    /// Sets [`Config::prefix`] from [`PREFIX_ENV`] when it is set: the
    /// deployment names the prefix its role may write (the template derives
    /// both from one value). Unset (a local run, a test), the prefix stays
    /// the code's. A prefix [`check_prefix`] refuses is an error, not a
    /// silent default.
    pub fn prefix_from_env(self) -> Result<Self, PrefixError> {
        self.prefix_from(std::env::var(PREFIX_ENV).ok().as_deref())
    }

    /// [`Config::prefix_from_env`] with the variable's value given.
    pub fn prefix_from(mut self, value: Option<&str>) -> Result<Self, PrefixError> {
        if let Some(prefix) = value {
            check_prefix(prefix)?;
            self.prefix = prefix.to_owned();
        }
        Ok(self)
    }

    /// Refuses a prefix other than `fixed`: for a function that derives
    /// more than its record ids from its prefix (e.g. the stable ids of its
    /// outbox messages, announced in its response).
    pub fn require_prefix(self, fixed: &str) -> Result<Self, PrefixError> {
        if self.prefix == fixed {
            Ok(self)
        } else {
            Err(PrefixError::Fixed {
                set: self.prefix,
                fixed: fixed.to_owned(),
            })
        }
    }

    /// Sets [`Config::lease`].
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets [`Config::validate_payload`].
    pub fn validate_payload(mut self, on: bool) -> Self {
        self.validate_payload = on;
        self
    }

    /// Sets [`Config::store_responses`].
    pub fn store_responses(mut self, on: bool) -> Self {
        self.store_responses = on;
        self
    }

    /// Sets [`Config::oversized`].
    pub fn on_oversized(mut self, policy: OversizedResponse) -> Self {
        self.oversized = policy;
        self
    }

    /// Sets [`Config::terminal_errors`].
    pub fn on_terminal_error(mut self, policy: TerminalErrors) -> Self {
        self.terminal_errors = policy;
        self
    }

    /// Sets [`Config::max_item_bytes`].
    pub fn max_item_bytes(mut self, bytes: usize) -> Self {
        self.max_item_bytes = bytes;
        self
    }

    /// Sets [`Config::local_cache`] (entries; 0 turns it off).
    pub fn local_cache(mut self, entries: usize) -> Self {
        self.local_cache = entries;
        self
    }

    /// Sets [`Config::batch_commits`] (overrides the environment).
    pub fn batch_commits(mut self, on: bool) -> Self {
        self.batch_commits = on;
        self
    }

    /// Sets [`Config::disabled`] (overrides the environment).
    pub fn disabled(mut self, disabled: bool) -> Self {
        self.disabled = disabled;
        self
    }
}

fn disabled_from_env() -> bool {
    std::env::var(DISABLED_ENV).is_ok_and(|v| parse_flag(&v))
}

fn batch_commits_from_env() -> bool {
    std::env::var(BATCH_COMMITS_ENV).map_or(true, |v| !parse_off(&v))
}

fn parse_off(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "0" | "false" | "no" | "off"
    )
}

/// A switch's value: `Some(true)` for on, `Some(false)` for off, `None`
/// for anything else.
fn parse_switch(v: &str) -> Option<bool> {
    if parse_flag(v) {
        Some(true)
    } else if parse_off(v) {
        Some(false)
    } else {
        None
    }
}

pub(crate) fn parse_flag(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse() {
        for on in ["1", "true", "TRUE", " yes ", "on"] {
            assert!(parse_flag(on), "{on}");
        }
        for off in ["", "0", "false", "no", "off", "disabled"] {
            assert!(!parse_flag(off), "{off}");
        }
    }

    #[test]
    fn explicit_prefix_and_builders() {
        let c = Config::with_prefix("payments.v1")
            .lease(Duration::from_secs(5))
            .expires_after(Duration::from_secs(7))
            .store_responses(false)
            .disabled(true);
        assert_eq!(c.prefix, "payments.v1");
        assert_eq!(c.lease, Duration::from_secs(5));
        assert_eq!(c.expires_after, Duration::from_secs(7));
        assert!(!c.store_responses);
        assert!(c.disabled);
    }

    #[test]
    fn the_environment_names_the_prefix_or_the_code_keeps_its_own() {
        let code = Config::with_prefix("payments.credit");
        assert_eq!(
            code.clone().prefix_from(None).unwrap().prefix,
            "payments.credit"
        );
        let set = code.clone().prefix_from(Some("payments.v2")).unwrap();
        assert_eq!(set.prefix, "payments.v2");
        assert_eq!(
            code.clone().prefix_from(Some("")).unwrap_err(),
            PrefixError::Empty
        );
        for bad in [
            "orders#x",
            "a*",
            "a?",
            "${aws:userid}",
            "a b",
            "caf\u{e9}",
            "a/b",
        ] {
            let err = code.clone().prefix_from(Some(bad)).unwrap_err();
            assert!(matches!(err, PrefixError::Character { .. }), "{bad}: {err}");
        }
        let long = "p".repeat(MAX_PREFIX_BYTES + 1);
        assert_eq!(
            code.clone().prefix_from(Some(&long)).unwrap_err(),
            PrefixError::TooLong(MAX_PREFIX_BYTES + 1)
        );
        // The longest prefix still makes a partition key DynamoDB accepts.
        let longest = "p".repeat(MAX_PREFIX_BYTES);
        let key = crate::IdempotencyKey::new(&longest, &serde_json::json!("k")).unwrap();
        assert_eq!(key.as_str().len(), 2048);
    }

    #[test]
    fn a_fixed_prefix_refuses_another() {
        let c = Config::with_prefix("orders.record");
        assert!(c.clone().require_prefix("orders.record").is_ok());
        let err = c
            .prefix_from(Some("orders.other"))
            .unwrap()
            .require_prefix("orders.record")
            .unwrap_err();
        assert!(err.to_string().contains("orders.record"), "{err}");
        assert!(err.to_string().contains(PREFIX_ENV), "{err}");
    }

    #[test]
    fn a_lifetime_shorter_than_the_lease_is_refused_with_both_numbers() {
        let code = Config::with_prefix("payments.credit");
        assert_eq!(code.lease, Duration::from_secs(60));
        let err = code.clone().expires_after_from(Some("30")).unwrap_err();
        assert!(err.contains(EXPIRES_AFTER_ENV), "{err}");
        assert!(err.contains("(30 s)") && err.contains("(60 s)"), "{err}");
        let set = code.clone().expires_after_from(Some("60")).unwrap();
        assert_eq!(set.expires_after, Duration::from_secs(60));
        assert!(code.clone().expires_after_from(Some("0")).is_err());
        assert_eq!(
            code.clone().expires_after_from(None).unwrap().expires_after,
            code.expires_after
        );
        // The record keeps whole seconds: 60.5 s lives 60 s, short of a
        // 60.5 s lease; a lease under a second shows its fraction.
        let half = Duration::from_millis(60_500);
        let err = code.clone().expires_after(half).lease(half);
        let err = err.check_lifetime().unwrap_err();
        assert!(err.to_string().contains("(60 s)"), "{err}");
        assert!(err.to_string().contains("(60.5 s)"), "{err}");
        let ok = code
            .clone()
            .expires_after(Duration::from_secs(1))
            .lease(Duration::from_millis(300));
        assert_eq!(ok.check_lifetime(), Ok(()));
        // A shorter lease makes a short lifetime valid: the lease is what
        // a record must outlive.
        let short = code
            .expires_after(Duration::from_secs(30))
            .lease(Duration::from_secs(30));
        assert_eq!(short.check_lifetime(), Ok(()));
    }

    /// The environment of a test: the variables set, nothing else.
    fn vars(set: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let set: std::collections::HashMap<String, String> = set
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| set.get(name).cloned()
    }

    fn read(set: &[(&str, &str)]) -> Result<Config, EnvError> {
        Config::with_prefix("payments.credit")
            .disabled(false)
            .batch_commits(true)
            .tenant_scope(crate::tenant::TenantScope::PerTenant)
            .read_vars(vars(set))
    }

    #[test]
    fn nothing_set_keeps_the_codes_configuration() {
        let code = Config::with_prefix("payments.credit")
            .expires_after(Duration::from_secs(7200))
            .disabled(false)
            .batch_commits(false)
            .tenant_scope(crate::tenant::TenantScope::Shared);
        let read = code.clone().read_vars(vars(&[])).unwrap();
        assert_eq!(read.prefix, "payments.credit");
        assert_eq!(read.expires_after, Duration::from_secs(7200));
        assert!(!read.disabled && !read.batch_commits);
        assert_eq!(read.tenant_scope, crate::tenant::TenantScope::Shared);
        // Blank values are unset.
        let blank = code
            .read_vars(vars(&[(DISABLED_ENV, " "), (EXPIRES_AFTER_ENV, "")]))
            .unwrap();
        assert!(!blank.disabled);
        assert_eq!(blank.expires_after, Duration::from_secs(7200));
    }

    #[test]
    fn the_environment_sets_each_variable_the_engine_honours() {
        assert_eq!(
            read(&[(PREFIX_ENV, "payments.v2")]).unwrap().prefix,
            "payments.v2"
        );
        assert_eq!(
            read(&[(EXPIRES_AFTER_ENV, "86400")]).unwrap().expires_after,
            Duration::from_secs(86400)
        );
        assert!(read(&[(DISABLED_ENV, "true")]).unwrap().disabled);
        assert!(!read(&[(DISABLED_ENV, "off")]).unwrap().disabled);
        assert!(!read(&[(BATCH_COMMITS_ENV, "0")]).unwrap().batch_commits);
        assert!(read(&[(BATCH_COMMITS_ENV, "yes")]).unwrap().batch_commits);
        assert_eq!(
            read(&[(crate::tenant::TENANT_SCOPE_ENV, "shared")])
                .unwrap()
                .tenant_scope,
            crate::tenant::TenantScope::Shared
        );
        // Every variable of the list is one of those read here.
        assert_eq!(ENGINE_ENV.len(), 5);
        for var in ENGINE_ENV {
            assert!(
                read(&[(var, "not a value of any of them #")]).is_err(),
                "{var} is read"
            );
        }
    }

    #[test]
    fn a_bad_value_is_an_error_naming_the_variable() {
        for (var, value) in [
            (PREFIX_ENV, "orders#x"),
            (EXPIRES_AFTER_ENV, "ten"),
            (EXPIRES_AFTER_ENV, "0"),
            (EXPIRES_AFTER_ENV, "30"),
            (DISABLED_ENV, "ture"),
            (BATCH_COMMITS_ENV, "maybe"),
            (crate::tenant::TENANT_SCOPE_ENV, "per-team"),
        ] {
            let err = read(&[(var, value)]).unwrap_err();
            let text = err.to_string();
            assert!(text.contains(var), "{var}={value}: {text}");
            assert!(text.contains(value), "{var}={value}: {text}");
        }
        // A lifetime under the lease says both numbers in its source.
        let err = read(&[(EXPIRES_AFTER_ENV, "30")]).unwrap_err();
        let source = std::error::Error::source(&err).expect("the lifetime and the lease");
        assert!(source.to_string().contains("(60 s)"), "{source}");
    }

    #[test]
    fn default_prefix_names_function_and_handler() {
        let c = Config::new("charge");
        assert!(c.prefix.ends_with(".charge"), "{}", c.prefix);
    }
}
