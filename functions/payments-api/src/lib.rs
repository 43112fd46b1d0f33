//! `payments-api`: `POST /payments` with an `Idempotency-Key` header credits
//! an account exactly once, whatever the client retries.
//!
//! The credit is the `payments` function's: the same validation, the same
//! staged `ADD balance_cents`, committed in one `TransactWriteItems` with
//! the key's record ([`payments::stage_payment`]). The HTTP side is the
//! library's adapter ([`lambda_idempotency::http`]): the key scoped to the caller (a
//! request without one is refused 401), the first answer replayed to
//! retries, 409 while in flight, 422 for a key reused with another body.
//!
//! | request | answer | kept with the key |
//! | --- | --- | --- |
//! | a valid payment | 201 with the payment, `Location: /payments/{id}` | yes |
//! | a body that is not the JSON of a payment | 400 | no: fix it, retry with the same key |
//! | a payment `payments` refuses (empty `account_id`, amount too large) | 422 | yes (a 4xx answer, never a success) |
//! | another method or path | 405 / 404 | no |

use lambda_idempotency::http::{
    HttpEventResponse, HttpProcessor, HttpRequest, HttpResponse, Problem,
};
use lambda_idempotency::{CommitMode, Config, HandlerError, Idempotency, write::Staged};
use lambda_runtime::LambdaEvent;
use payments::{Accounts, Applied, Payment, stage_payment};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The route: `POST /payments` (under any stage prefix).
pub const PATH: &str = "/payments";

/// The body of `POST /payments`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaymentRequest {
    /// The client's reference; a new UUID when absent (it is part of the
    /// kept answer, so every retry sees the same one).
    #[serde(default)]
    pub payment_id: Option<String>,
    /// The account to credit.
    pub account_id: String,
    /// A non-negative whole number of cents.
    pub amount_cents: u64,
}

impl PaymentRequest {
    /// The payment it asks for.
    pub fn payment(self) -> Payment {
        Payment {
            payment_id: self
                .payment_id
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            account_id: self.account_id,
            amount_cents: self.amount_cents,
        }
    }
}

/// The request's payment, or the answer that refuses it before the key is
/// used: 404 / 405 off the route, 400 for a body that is not a payment.
pub fn parse(request: &HttpRequest) -> Result<PaymentRequest, Problem> {
    let path = request.path.trim_end_matches('/');
    if !path.ends_with(PATH) {
        return Err(Problem::new(404, "about:blank", "Not Found")
            .detail(format!("no route for {}", request.path)));
    }
    if request.method != "POST" {
        return Err(Problem::new(405, "about:blank", "Method Not Allowed")
            .detail(format!("{PATH} takes POST, not {}", request.method)));
    }
    request.json()
}

/// The payment as the answer and the credit to commit with the key: 201
/// with the payment; a payment `payments` refuses is a terminal error (a
/// kept 422).
pub fn create(
    accounts: &Accounts,
    request: PaymentRequest,
) -> Result<Staged<HttpResponse>, HandlerError> {
    let staged = stage_payment(accounts, &request.payment(), None)?;
    Ok(staged.map(|applied: Applied| {
        let location = format!("{PATH}/{}", applied.payment_id);
        HttpResponse::json(201, &applied).header("location", location)
    }))
}

/// The function: its adapter and accounts table, built once per execution
/// environment.
#[derive(Debug, Clone)]
pub struct App {
    http: HttpProcessor,
    accounts: Accounts,
}

impl App {
    /// The function over `engine` (see [`App::config`]) and `accounts`; the
    /// engine's store must reach the accounts table.
    pub fn new(engine: Idempotency, accounts: Accounts) -> Self {
        Self {
            http: HttpProcessor::new(engine),
            accounts,
        }
    }

    /// Engine configuration: keys under `payments-api.create` (`from_env`:
    /// the deployment's `IDEMPOTENCY_KEY_PREFIX` when set), kept 24 h
    /// (`IDEMPOTENCY_EXPIRES_AFTER_SECONDS` overrides), lease 60 s, fenced
    /// commits (a claim, then one `TransactWriteItems` with the credit and
    /// the answer), so a retry while the first is in flight gets a 409.
    pub fn config() -> Config {
        lambda_idempotency::http::config("payments-api.create").commit_mode(CommitMode::Fenced)
    }

    /// From the environment, as `payments` reads it ([`payments::connect`]);
    /// who the caller is per [`HttpProcessor::callers_from_env`] (requests
    /// without one are refused unless `IDEMPOTENCY_ANONYMOUS_CALLERS` is
    /// `share-one-scope`).
    pub async fn from_env() -> Result<Self, lambda_runtime::Error> {
        let (engine, accounts) = payments::connect(Self::config()).await?;
        let http = HttpProcessor::new(engine).callers_from_env()?;
        Ok(Self::with_http(http, accounts))
    }

    /// The function over an adapter configured by the caller (its engine
    /// as in [`App::new`]).
    pub fn with_http(http: HttpProcessor, accounts: Accounts) -> Self {
        Self { http, accounts }
    }

    /// The HTTP adapter.
    pub fn http(&self) -> &HttpProcessor {
        &self.http
    }

    /// The accounts table.
    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    /// Handles one HTTP API / function URL / REST API invocation.
    pub async fn handle(
        &self,
        event: LambdaEvent<Value>,
    ) -> Result<HttpEventResponse, lambda_runtime::Error> {
        let accounts = &self.accounts;
        self.http
            .handle(
                event,
                parse,
                |request| async move { create(accounts, request) },
            )
            .await
    }
}

#[cfg(test)]
mod tests;
