//! `payments-api` against moto, each case of the HTTP adapter's table run
//! twice: in process (the library's `App`) and through the real binary under
//! a local Lambda Runtime API. Then concurrency (20 requests with one key
//! against two processes) and bad input.

use lambda_idempotency::http::{HttpProcessor, HttpRequest, HttpResponse, Problem};
use lambda_idempotency::{DynamoDbStore, HandlerError, Idempotency, store::TableConfig};
use lambda_runtime::LambdaEvent;
use payments::Accounts;
use payments_api::App;
use serde_json::{Value, json};
use std::process::Child;
use std::time::Duration;
use test_kit::events::sample;
use test_kit::runtime_api::{Invocation, RuntimeApi, function_command};
use test_kit::{Fault, FaultPlan, PaymentTables, moto, now_ms, payment_tables};

/// The app over the test's tables on moto.
pub(crate) async fn app(t: &PaymentTables) -> App {
    app_with(t, |http| http).await
}

/// The app over the test's tables, its adapter set up by `configure`.
async fn app_with(
    t: &PaymentTables,
    configure: impl FnOnce(HttpProcessor) -> HttpProcessor,
) -> App {
    let ddb = moto().dynamodb().await;
    let engine = Idempotency::new(
        DynamoDbStore::new(ddb.clone(), TableConfig::new(&t.idempotency)),
        App::config().disabled(false),
    );
    App::with_http(
        configure(HttpProcessor::new(engine)),
        Accounts::from_table(lambda_idempotency::Table::dynamodb(ddb, &t.accounts)),
    )
}

/// The `payments-api` binary as Lambda runs it, on the test's tables.
pub(crate) fn spawn(api: &RuntimeApi, t: &PaymentTables, mode: &str) -> Child {
    spawn_with(api, t, mode, &[])
}

/// [`spawn`] with more environment variables.
fn spawn_with(api: &RuntimeApi, t: &PaymentTables, mode: &str, env: &[(&str, &str)]) -> Child {
    function_command("payments-api", api)
        .envs(t.env())
        .env("PAYMENTS_COMMIT_MODE", mode)
        .envs(env.iter().copied())
        .spawn()
        .expect("start the payments-api binary")
}

/// An HTTP API (2.0) `POST /payments` with `key` and `body`, from the
/// sample's IAM caller.
pub(crate) fn post(key: Option<&str>, body: &str) -> Value {
    let mut event = sample("payments-api-http.json");
    match key {
        Some(key) => event["headers"]["idempotency-key"] = json!(key),
        None => {
            event["headers"]
                .as_object_mut()
                .unwrap()
                .remove("idempotency-key");
        }
    }
    event["body"] = json!(body);
    event
}

/// `event` from a JWT caller of the usual issuer.
fn as_caller(event: Value, sub: &str) -> Value {
    as_jwt(event, "https://issuer.example", sub)
}

/// `event` from the JWT caller `iss` + `sub`.
fn as_jwt(mut event: Value, iss: &str, sub: &str) -> Value {
    event["requestContext"]["authorizer"] =
        json!({"jwt": {"claims": {"iss": iss, "sub": sub}, "scopes": null}});
    event
}

/// `event` without any authorizer block.
fn anonymous(mut event: Value) -> Value {
    event["requestContext"]
        .as_object_mut()
        .unwrap()
        .remove("authorizer");
    event
}

/// The Lambda authorizer sample (simple responses) with `key`, `body` and
/// the caller `user` in its context.
fn via_lambda_authorizer(key: &str, body: &str, user: &str) -> Value {
    let mut event = sample("payments-api-lambda-authorizer.json");
    event["headers"]["idempotency-key"] = json!(key);
    event["body"] = json!(body);
    event["requestContext"]["authorizer"]["lambda"]["userId"] = json!(user);
    event
}

enum Driver {
    InProcess(App),
    Binary { api: RuntimeApi, child: Child },
}

impl Driver {
    fn name(&self) -> &'static str {
        match self {
            Driver::InProcess(_) => "in-process",
            Driver::Binary { .. } => "binary",
        }
    }

    async fn call(&self, event: &Value) -> Value {
        match self {
            Driver::InProcess(app) => {
                let ctx = lambda_idempotency::runtime::local_context(1, Duration::from_secs(30));
                let r = app
                    .handle(LambdaEvent::new(event.clone(), ctx))
                    .await
                    .expect("an HTTP answer");
                serde_json::to_value(r).unwrap()
            }
            Driver::Binary { api, .. } => {
                match api
                    .invoke(event.clone(), now_ms() + 30_000, Duration::from_secs(20))
                    .await
                {
                    Some(Invocation::Response(r)) => r,
                    other => panic!("binary: {other:?}"),
                }
            }
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Driver::Binary { child, .. } = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

async fn drivers() -> Vec<(Driver, PaymentTables)> {
    drivers_with(|http| http, &[]).await
}

/// The two drivers, set up alike: in process by `configure`, the binary by
/// the environment variables `env`.
async fn drivers_with(
    configure: impl FnOnce(HttpProcessor) -> HttpProcessor,
    env: &[(&str, &str)],
) -> Vec<(Driver, PaymentTables)> {
    let t1 = payment_tables("papi").await;
    let in_process = Driver::InProcess(app_with(&t1, configure).await);
    let t2 = payment_tables("papi").await;
    let api = RuntimeApi::start().await;
    let child = spawn_with(&api, &t2, "fenced", env);
    vec![(in_process, t1), (Driver::Binary { api, child }, t2)]
}

fn status(r: &Value) -> u64 {
    r["statusCode"].as_u64().unwrap_or_else(|| panic!("{r}"))
}

fn replayed(r: &Value) -> bool {
    r["headers"]["idempotent-replayed"] == "true"
}

fn problem_type(r: &Value) -> String {
    assert_eq!(
        r["headers"]["content-type"], "application/problem+json",
        "{r}"
    );
    let body: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["status"], r["statusCode"], "{body}");
    body["type"].as_str().unwrap().to_owned()
}

const BODY: &str = r#"{"account_id":"acct-1","amount_cents":250}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_request_credits_and_answers_201() {
    for (d, t) in drivers().await {
        let r = d.call(&post(Some("k-first"), BODY)).await;
        assert_eq!(status(&r), 201, "{}: {r}", d.name());
        assert!(!replayed(&r));
        let payment: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
        let location = format!("/payments/{}", payment["payment_id"].as_str().unwrap());
        assert_eq!(r["headers"]["location"], json!(location));
        assert_eq!(t.balance("acct-1").await, Some(250), "{}", d.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_key_same_request_replays_byte_for_byte() {
    for (d, t) in drivers().await {
        let first = d.call(&post(Some("k-replay"), BODY)).await;
        for _ in 0..2 {
            let again = d.call(&post(Some("k-replay"), BODY)).await;
            assert_eq!(status(&again), 201, "{}", d.name());
            assert!(replayed(&again), "{}: {again}", d.name());
            assert_eq!(again["body"], first["body"], "{}", d.name());
            assert_eq!(again["headers"]["location"], first["headers"]["location"]);
        }
        assert_eq!(t.balance("acct-1").await, Some(250), "{}", d.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_key_other_request_is_422() {
    for (d, t) in drivers().await {
        d.call(&post(Some("k-mismatch"), BODY)).await;
        let other = d
            .call(&post(
                Some("k-mismatch"),
                r#"{"account_id":"acct-1","amount_cents":999}"#,
            ))
            .await;
        assert_eq!(status(&other), 422, "{}: {other}", d.name());
        assert_eq!(problem_type(&other), Problem::KEY_REUSED);
        let mut elsewhere = post(Some("k-mismatch"), BODY);
        elsewhere["rawPath"] = json!("/v2/payments");
        assert_eq!(status(&d.call(&elsewhere).await), 422, "{}", d.name());
        assert_eq!(t.balance("acct-1").await, Some(250), "{}", d.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_key_in_flight_is_409_with_retry_after() {
    for (d, t) in drivers().await {
        // Another invocation holds the key: a request parked in its handler.
        let holder = HttpProcessor::new(app(&t).await.http().engine().clone());
        let accounts = app(&t).await.accounts().clone();
        let event = post(Some("k-flight"), BODY);
        let request = HttpRequest::from_event(event.clone()).unwrap();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
        let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
        let first = holder.process(&request, None, payments_api::parse, |p| async move {
            let _ = started_tx.send(());
            let _ = release_rx.await;
            payments_api::create(&accounts, p)
        });
        let second = async {
            started_rx.await.unwrap();
            let r = d.call(&event).await;
            release_tx.send(()).unwrap();
            r
        };
        let (first, second) = tokio::join!(first, second);
        assert_eq!(first.status, 201);
        assert_eq!(status(&second), 409, "{}: {second}", d.name());
        assert_eq!(problem_type(&second), Problem::IN_PROGRESS);
        assert_eq!(second["headers"]["retry-after"], "1");
        // Once the first is done, the retry gets its answer.
        let retry = d.call(&event).await;
        assert!(replayed(&retry), "{}: {retry}", d.name());
        assert_eq!(retry["body"].as_str().unwrap(), first.body);
        assert_eq!(t.balance("acct-1").await, Some(250), "{}", d.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_key_is_400() {
    for (d, t) in drivers().await {
        let r = d.call(&post(None, BODY)).await;
        assert_eq!(status(&r), 400, "{}: {r}", d.name());
        assert_eq!(problem_type(&r), Problem::KEY_MISSING);
        assert_eq!(t.balance("acct-1").await, None, "{}", d.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_or_too_long_key_is_400() {
    let too_long = "x".repeat(256);
    for (d, t) in drivers().await {
        for key in ["", "   ", too_long.as_str()] {
            let r = d.call(&post(Some(key), BODY)).await;
            assert_eq!(status(&r), 400, "{}: {key:?} {r}", d.name());
            assert_eq!(problem_type(&r), Problem::KEY_INVALID);
        }
        assert_eq!(t.balance("acct-1").await, None, "{}", d.name());
        // 255 characters is the limit, not over it.
        let r = d.call(&post(Some(&too_long[1..]), BODY)).await;
        assert_eq!(status(&r), 201, "{}", d.name());
    }
}

/// HTTP APIs (2.0) and function URLs fold a header sent twice into one
/// comma-joined value: a key with a comma is refused, never taken as a key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_sent_twice_folded_with_a_comma_is_400() {
    for (d, t) in drivers().await {
        for key in ["k-twice, k-twice", "k-one,k-two", "\"k-one\", \"k-two\""] {
            let r = d.call(&post(Some(key), BODY)).await;
            assert_eq!(status(&r), 400, "{}: {key:?} {r}", d.name());
            assert_eq!(problem_type(&r), Problem::KEY_INVALID);
        }
        assert_eq!(t.balance("acct-1").await, None, "{}", d.name());
    }
}

/// Alice, then Bob, each sending `k-lambda` with [`BODY`] through a Lambda
/// authorizer with simple responses: their answers.
async fn alice_and_bob(d: &Driver) -> (Value, Value) {
    let alice = d
        .call(&via_lambda_authorizer("k-lambda", BODY, "alice"))
        .await;
    let bob = d
        .call(&via_lambda_authorizer("k-lambda", BODY, "bob"))
        .await;
    (alice, bob)
}

/// A Lambda authorizer with simple responses puts the caller in its
/// context (`authorizer.lambda`), with no `principalId`: by default nobody
/// is identified, so every such request is 401, never one scope in which
/// Bob, sending Alice's key and body, gets Alice's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lambda_authorizer_caller_is_401_by_default_never_a_shared_scope() {
    for (d, t) in drivers().await {
        let (alice, bob) = alice_and_bob(&d).await;
        for r in [&alice, &bob] {
            assert_eq!(status(r), 401, "{}: {r}", d.name());
            assert_eq!(problem_type(r), Problem::NO_CALLER);
            assert!(!replayed(r), "{}", d.name());
        }
        assert_eq!(t.balance("acct-1").await, None, "{}", d.name());
    }
}

/// With the context key that names the caller set (in process:
/// `lambda_principal`; the binary: `IDEMPOTENCY_LAMBDA_AUTHORIZER_PRINCIPAL`),
/// each caller has its own keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lambda_authorizer_caller_is_named_by_the_context_key_set() {
    let env = [(lambda_idempotency::http::LAMBDA_PRINCIPAL_ENV, "/userId")];
    for (d, t) in drivers_with(|http| http.lambda_principal("/userId"), &env).await {
        let (alice, bob) = alice_and_bob(&d).await;
        assert_eq!((status(&alice), status(&bob)), (201, 201), "{}", d.name());
        assert!(!replayed(&bob), "{}: bob runs his own", d.name());
        let again = d
            .call(&via_lambda_authorizer("k-lambda", BODY, "alice"))
            .await;
        assert!(replayed(&again), "{}: {again}", d.name());
        assert_eq!(again["body"], alice["body"]);
        assert_eq!(t.balance("acct-1").await, Some(500), "{}", d.name());
    }
}

/// No authorizer at all: refused by default; one scope for every such
/// request only when chosen (`IDEMPOTENCY_ANONYMOUS_CALLERS`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_caller_is_401_unless_one_scope_is_chosen() {
    for (d, t) in drivers().await {
        let r = d.call(&anonymous(post(Some("k-anon"), BODY))).await;
        assert_eq!(status(&r), 401, "{}: {r}", d.name());
        assert_eq!(problem_type(&r), Problem::NO_CALLER);
        assert_eq!(t.balance("acct-1").await, None, "{}", d.name());
    }
    let env = [(lambda_idempotency::http::ANONYMOUS_ENV, "share-one-scope")];
    let one_scope =
        |http: HttpProcessor| http.anonymous(lambda_idempotency::http::Anonymous::ShareOneScope);
    for (d, t) in drivers_with(one_scope, &env).await {
        let first = d.call(&anonymous(post(Some("k-anon"), BODY))).await;
        assert_eq!(status(&first), 201, "{}: {first}", d.name());
        let again = d.call(&anonymous(post(Some("k-anon"), BODY))).await;
        assert!(replayed(&again), "{}: {again}", d.name());
        assert_eq!(t.balance("acct-1").await, Some(250), "{}", d.name());
    }
}

/// One subject at two issuers (two identity providers behind one API) is
/// two callers: a JWT caller is `iss` + `sub`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_callers_are_scoped_by_issuer_and_subject() {
    for (d, t) in drivers().await {
        let event = post(Some("k-jwt"), BODY);
        let a = d
            .call(&as_jwt(event.clone(), "https://idp-a.example", "u-1"))
            .await;
        let b = d
            .call(&as_jwt(event.clone(), "https://idp-b.example", "u-1"))
            .await;
        assert_eq!((status(&a), status(&b)), (201, 201), "{}", d.name());
        assert!(!replayed(&b), "{}: another issuer's answer", d.name());
        let no_issuer = d
            .call(&{
                let mut e = event.clone();
                e["requestContext"]["authorizer"] = json!({"jwt": {"claims": {"sub": "u-1"}}});
                e
            })
            .await;
        assert_eq!(status(&no_issuer), 401, "{}: {no_issuer}", d.name());
        assert_eq!(t.balance("acct-1").await, Some(500), "{}", d.name());
    }
}

/// A kept 4xx: a payment `payments` refuses is answered 422 and that answer
/// is replayed, never turned into a success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_payment_is_a_kept_422() {
    let refused = r#"{"account_id":"  ","amount_cents":5}"#;
    for (d, _t) in drivers().await {
        let first = d.call(&post(Some("k-422"), refused)).await;
        assert_eq!(status(&first), 422, "{}: {first}", d.name());
        assert_eq!(problem_type(&first), Problem::REJECTED);
        let again = d.call(&post(Some("k-422"), refused)).await;
        assert_eq!(status(&again), 422);
        assert!(replayed(&again), "{}: {again}", d.name());
        assert_eq!(again["body"], first["body"]);
    }
}

/// A 5xx is not kept: the store failing the commit answers 503 and releases
/// the key; the retry credits once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_releases_the_key() {
    for (d, t) in drivers().await {
        let plan = FaultPlan::new(1.0, &[Fault::ServerError])
            .target("TransactWriteItems")
            .max(3);
        moto().inject(&t.marker, &plan).await;
        let r = d.call(&post(Some("k-5xx"), BODY)).await;
        let injected = moto().clear_faults(&t.marker).await;
        assert_eq!(status(&r), 503, "{}: {r} ({injected})", d.name());
        assert_eq!(problem_type(&r), Problem::UNAVAILABLE);
        assert!(r["headers"]["retry-after"].is_string());
        assert_eq!(t.balance("acct-1").await, None, "{}", d.name());
        let retry = d.call(&post(Some("k-5xx"), BODY)).await;
        assert_eq!(status(&retry), 201, "{}: {retry}", d.name());
        assert!(!replayed(&retry), "it ran again");
        assert_eq!(t.balance("acct-1").await, Some(250), "{}", d.name());
    }
}

/// The samples of `events/` on moto: the HTTP API one in process, the
/// function URL one (IAM caller, base64 body, quoted key) through the binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_events_credit_once() {
    let mut all = drivers().await.into_iter();
    let (in_process, t1) = all.next().unwrap();
    let (binary, t2) = all.next().unwrap();
    for (d, t, file, account, amount) in [
        (&in_process, &t1, "payments-api-http.json", "acct-7", 2500),
        (
            &binary,
            &t2,
            "payments-api-function-url.json",
            "acct-8",
            999,
        ),
    ] {
        let event = sample(file);
        let first = d.call(&event).await;
        assert_eq!(status(&first), 201, "{file}: {first}");
        let again = d.call(&event).await;
        assert!(replayed(&again) && again["body"] == first["body"], "{file}");
        assert_eq!(t.balance(account).await, Some(amount), "{file}");
    }
}

/// 20 requests with one key at once against two processes: exactly one
/// credit; every other caller gets the replay (the same body) or a 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_requests_one_key_two_processes() {
    let t = payment_tables("papi").await;
    let apis = [RuntimeApi::start().await, RuntimeApi::start().await];
    let mut children: Vec<Child> = apis.iter().map(|api| spawn(api, &t, "fenced")).collect();
    for api in &apis {
        api.wait_first_poll(Duration::from_secs(10)).await;
    }
    // No payment_id: a second execution would answer another generated one.
    let event = post(Some("k-concurrent"), BODY);
    let calls = (0..20).map(|i| {
        let api = &apis[i % 2];
        let event = event.clone();
        async move {
            match api
                .invoke(event, now_ms() + 30_000, Duration::from_secs(30))
                .await
            {
                Some(Invocation::Response(r)) => r,
                other => panic!("{other:?}"),
            }
        }
    });
    let answers = futures_util::future::join_all(calls).await;
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
    let created: Vec<&Value> = answers.iter().filter(|r| status(r) == 201).collect();
    let fresh = created.iter().filter(|r| !replayed(r)).count();
    let conflicts = answers.iter().filter(|r| status(r) == 409).count();
    eprintln!(
        "20 requests: 1 executed, {} replayed, {conflicts} in progress",
        created.len() - 1
    );
    assert_eq!(fresh, 1, "exactly one execution answered: {answers:?}");
    for r in &created {
        assert_eq!(r["body"], created[0]["body"], "one body for every 201");
    }
    for r in answers.iter().filter(|r| status(r) != 201) {
        assert_eq!(status(r), 409, "{r}");
        assert_eq!(problem_type(r), Problem::IN_PROGRESS);
    }
    assert_eq!(t.balance("acct-1").await, Some(250));
}

/// Bad input, each answered on its own: nothing crashes, nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_answered() {
    for (d, t) in drivers().await {
        let name = d.name();
        // Not JSON: 400, the key untouched; the fixed body with the same key runs.
        let r = d.call(&post(Some("k-bad"), "amount=250")).await;
        assert_eq!(status(&r), 400, "{name}: {r}");
        assert_eq!(problem_type(&r), Problem::MALFORMED_REQUEST);
        let r = d.call(&post(Some("k-bad"), BODY)).await;
        assert_eq!(status(&r), 201, "{name}: {r}");
        // A base64 body (isBase64Encoded) is the same request as its text.
        let mut b64 = post(
            Some("k-bad"),
            "eyJhY2NvdW50X2lkIjoiYWNjdC0xIiwiYW1vdW50X2NlbnRzIjoyNTB9",
        );
        b64["isBase64Encoded"] = json!(true);
        let r = d.call(&b64).await;
        assert!(replayed(&r), "{name}: {r}");
        b64["body"] = json!("%%% not base64");
        let r = d.call(&b64).await;
        assert_eq!(status(&r), 400, "{name}: {r}");
        // Huge headers: 200 headers of 1 KiB and an 8 KiB one.
        let mut huge = post(Some("k-huge"), BODY);
        for i in 0..200 {
            huge["headers"][format!("x-filler-{i}")] = json!("f".repeat(1024));
        }
        huge["headers"]["cookie"] = json!("c".repeat(8192));
        let r = d.call(&huge).await;
        assert_eq!(status(&r), 201, "{name}: {r}");
        assert!(replayed(&d.call(&huge).await), "{name}");
        // Unicode keys are keys.
        for key in ["clé-🔑-支払い-1", "ключ"] {
            let r = d.call(&post(Some(key), BODY)).await;
            assert_eq!(status(&r), 201, "{name}: {key} {r}");
            assert!(!replayed(&r));
            assert!(
                replayed(&d.call(&post(Some(key), BODY)).await),
                "{name}: {key}"
            );
        }
        assert_eq!(t.balance("acct-1").await, Some(250 * 4), "{name}");
        // One key from two callers: two payments, each caller its own answer.
        let alice = d
            .call(&as_caller(post(Some("k-shared"), BODY), "alice"))
            .await;
        let bob = d
            .call(&as_caller(post(Some("k-shared"), BODY), "bob"))
            .await;
        assert_eq!((status(&alice), status(&bob)), (201, 201), "{name}");
        assert!(!replayed(&bob), "{name}: bob does not read alice's answer");
        assert_ne!(alice["body"], bob["body"], "{name}");
        let alice_again = d
            .call(&as_caller(post(Some("k-shared"), BODY), "alice"))
            .await;
        assert_eq!(alice_again["body"], alice["body"], "{name}");
        assert_eq!(t.balance("acct-1").await, Some(250 * 6), "{name}");
        // Not an HTTP event at all: an HTTP 400 all the same.
        let r = d.call(&json!({"Records": []})).await;
        assert_eq!(status(&r), 400, "{name}: {r}");
    }
}

/// A handler's 408, 425 and 429 ask for the same request again: they are
/// answered, not kept, and the retry runs and credits once (in process:
/// `payments-api` has no such answer of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_later_answers_release_the_key() {
    let t = payment_tables("papi").await;
    let app = app(&t).await;
    let accounts = app.accounts().clone();
    for (i, later) in [408, 425, 429].into_iter().enumerate() {
        let request = HttpRequest::from_event(post(Some(&format!("k-{later}")), BODY)).unwrap();
        let r = app
            .http()
            .process(&request, None, payments_api::parse, |_| async move {
                Ok::<_, HandlerError>(HttpResponse::new(later).header("retry-after", "1"))
            })
            .await;
        assert_eq!(r.status, later);
        assert_eq!(r.header_value("retry-after"), Some("1"));
        let accounts = accounts.clone();
        let r = app
            .http()
            .process(&request, None, payments_api::parse, |p| async move {
                payments_api::create(&accounts, p)
            })
            .await;
        assert_eq!(r.status, 201, "{later} released the key: {}", r.body);
        assert_eq!(r.header_value("idempotent-replayed"), None);
        let credited = 250 * (i64::try_from(i).unwrap() + 1);
        assert_eq!(t.balance("acct-1").await, Some(credited));
    }
}

/// A handler failing retryably answers 500 and keeps nothing (in process:
/// `payments-api` has no such path of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_handler_answers_500_and_a_retry_runs() {
    let t = payment_tables("papi").await;
    let app = app(&t).await;
    let request = HttpRequest::from_event(post(Some("k-500"), BODY)).unwrap();
    let r = app
        .http()
        .process(&request, None, payments_api::parse, |_| async {
            Err::<lambda_idempotency::http::HttpResponse, _>(HandlerError::retryable(
                "ledger unavailable",
            ))
        })
        .await;
    assert_eq!(r.status, 500);
    let accounts = app.accounts().clone();
    let r = app
        .http()
        .process(&request, None, payments_api::parse, |p| async move {
            payments_api::create(&accounts, p)
        })
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(t.balance("acct-1").await, Some(250));
}
