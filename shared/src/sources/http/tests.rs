//! The adapter on the memory store: each answer of the module's table.

use super::*;
use crate::key::IdempotencyKey;
use crate::store::MemoryStore;
use crate::write::Write;
use crate::{Item, Table, value::AttrValue};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// An HTTP API (2.0) event from an IAM caller (`AWS_IAM`).
pub(crate) fn event(method: &str, path: &str, key: Option<&str>, body: &str) -> Value {
    let mut event = bare_event(method, path, key, body);
    event["requestContext"]["authorizer"] = json!({"iam": {
        "accessKey": "AKIAIOSFODNN7EXAMPLE", "accountId": "123456789012",
        "callerId": "AIDACKCEVSQ6C2EXAMPLE", "cognitoIdentity": null, "principalOrgId": null,
        "userArn": "arn:aws:iam::123456789012:user/tests", "userId": "AIDACKCEVSQ6C2EXAMPLE"
    }});
    event
}

/// An HTTP API (2.0) event without an authorizer.
fn bare_event(method: &str, path: &str, key: Option<&str>, body: &str) -> Value {
    let mut headers = serde_json::Map::new();
    headers.insert("content-type".into(), json!("application/json"));
    if let Some(key) = key {
        headers.insert("idempotency-key".into(), json!(key));
    }
    json!({
        "version": "2.0",
        "routeKey": format!("{method} {path}"),
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "requestId": "r-1",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"}
        },
        "body": body,
        "isBase64Encoded": false
    })
}

fn with_principal(mut event: Value, sub: &str) -> Value {
    event["requestContext"]["authorizer"] = json!({"jwt": {
        "claims": {"iss": "https://issuer.example", "sub": sub}, "scopes": null
    }});
    event
}

fn request(event: Value) -> HttpRequest {
    HttpRequest::from_event(event).expect("an HTTP event")
}

struct Fixture {
    processor: HttpProcessor,
    runs: Arc<AtomicU32>,
}

fn fixture() -> Fixture {
    let engine = Idempotency::new(MemoryStore::new(), config("test.http").disabled(false));
    Fixture {
        processor: HttpProcessor::new(engine),
        runs: Arc::default(),
    }
}

impl Fixture {
    /// Runs a handler answering `status` with a body naming the run.
    async fn call(&self, event: Value, status: u16) -> HttpResponse {
        let runs = self.runs.clone();
        self.processor
            .process(
                &request(event),
                None,
                |r| r.json::<Value>(),
                |body| async move {
                    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                    Ok::<_, HandlerError>(
                        HttpResponse::json(status, &json!({"run": n, "got": body}))
                            .header("location", "/things/1")
                            .header("x-request-scratch", "not replayed"),
                    )
                },
            )
            .await
    }

    fn runs(&self) -> u32 {
        self.runs.load(Ordering::SeqCst)
    }
}

fn problem(response: &HttpResponse) -> Problem {
    assert_eq!(response.header_value("content-type"), Some(PROBLEM_JSON));
    serde_json::from_str(&response.body).expect("a problem body")
}

#[tokio::test]
async fn first_request_runs_and_a_retry_replays_byte_for_byte() {
    let f = fixture();
    let e = event("POST", "/things", Some("k-1"), r#"{"a":1}"#);
    let first = f.call(e.clone(), 201).await;
    assert_eq!(first.status, 201);
    assert_eq!(first.header_value(REPLAYED_HEADER), None);
    assert_eq!(
        first.header_value("x-request-scratch"),
        Some("not replayed")
    );
    let again = f.call(e, 201).await;
    assert_eq!(f.runs(), 1);
    assert_eq!(again.status, 201);
    assert_eq!(again.body, first.body, "byte for byte");
    assert_eq!(again.header_value(REPLAYED_HEADER), Some("true"));
    assert_eq!(again.header_value("location"), Some("/things/1"));
    assert_eq!(again.header_value("x-request-scratch"), None);
}

#[tokio::test]
async fn same_key_other_request_is_422() {
    let f = fixture();
    f.call(event("POST", "/things", Some("k"), r#"{"a":1}"#), 201)
        .await;
    for other in [
        event("POST", "/things", Some("k"), r#"{"a":2}"#),
        event("PUT", "/things", Some("k"), r#"{"a":1}"#),
        event("POST", "/other", Some("k"), r#"{"a":1}"#),
    ] {
        let r = f.call(other, 201).await;
        assert_eq!(r.status, 422);
        assert_eq!(problem(&r).kind, Problem::KEY_REUSED);
    }
    assert_eq!(f.runs(), 1);
}

#[tokio::test]
async fn same_key_in_flight_is_409_with_retry_after() {
    let f = fixture();
    let e = event("POST", "/things", Some("k"), "{}");
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let req = request(e.clone());
    let slow = f.processor.process(
        &req,
        None,
        |_| Ok(()),
        |()| async move {
            let _ = started_tx.send(());
            let _ = release_rx.await;
            Ok::<_, HandlerError>(HttpResponse::new(201))
        },
    );
    let second = async {
        let _ = started_rx.await;
        let r = f.call(e.clone(), 201).await;
        let _ = release_tx.send(());
        r
    };
    let (first, second) = tokio::join!(slow, second);
    assert_eq!(first.status, 201);
    assert_eq!(second.status, 409);
    assert_eq!(second.header_value("retry-after"), Some("1"));
    assert_eq!(problem(&second).kind, Problem::IN_PROGRESS);
    assert_eq!(f.runs(), 0, "the second did not run");
}

#[tokio::test]
async fn missing_empty_and_too_long_keys_are_400() {
    // The default limit: 255 characters.
    let f = fixture();
    let too_long = "k".repeat(256);
    for (key, kind) in [
        (None, Problem::KEY_MISSING),
        (Some(""), Problem::KEY_INVALID),
        (Some("  "), Problem::KEY_INVALID),
        (Some("\"\""), Problem::KEY_INVALID),
        (Some(too_long.as_str()), Problem::KEY_INVALID),
    ] {
        let r = f.call(event("POST", "/things", key, "{}"), 201).await;
        assert_eq!(r.status, 400, "{key:?}");
        assert_eq!(problem(&r).kind, kind, "{key:?}");
    }
    // The longest key accepted, counted in characters.
    let longest = "é".repeat(255);
    let r = f
        .call(event("POST", "/things", Some(&longest), "{}"), 201)
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(f.runs(), 1);
}

#[tokio::test]
async fn a_quoted_key_is_the_same_key() {
    let f = fixture();
    f.call(event("POST", "/t", Some("abc"), "{}"), 201).await;
    let r = f
        .call(event("POST", "/t", Some("\"abc\""), "{}"), 201)
        .await;
    assert_eq!(r.header_value(REPLAYED_HEADER), Some("true"));
    assert_eq!(f.runs(), 1);
}

#[tokio::test]
async fn client_errors_are_kept_server_errors_release_the_key() {
    let f = fixture();
    let e = event("POST", "/things", Some("k4"), "{}");
    let r = f.call(e.clone(), 404).await;
    assert_eq!(r.status, 404);
    let r = f.call(e, 201).await;
    assert_eq!((r.status, f.runs()), (404, 1), "the 404 is kept");
    let e = event("POST", "/things", Some("k5"), "{}");
    let r = f.call(e.clone(), 503).await;
    assert_eq!(r.status, 503, "the handler's own 5xx is answered");
    assert!(r.body.contains("\"run\":2"), "{}", r.body);
    let r = f.call(e, 201).await;
    assert_eq!((r.status, f.runs()), (201, 3), "the 503 released the key");
}

#[tokio::test]
async fn success_only_releases_client_errors() {
    let mut f = fixture();
    f.processor = f.processor.clone().keep(Keep::SuccessOnly);
    let e = event("POST", "/things", Some("k"), "{}");
    assert_eq!(f.call(e.clone(), 409).await.status, 409);
    assert_eq!(f.call(e, 200).await.status, 200);
    assert_eq!(f.runs(), 2);
}

#[tokio::test]
async fn handler_errors_and_panics() {
    let f = fixture();
    let e = event("POST", "/things", Some("k"), "{}");
    // Terminal: a 422 kept (the retry replays it without running).
    for _ in 0..2 {
        let r = f
            .processor
            .process(
                &request(e.clone()),
                None,
                |_| Ok(()),
                |()| async {
                    f.runs.fetch_add(1, Ordering::SeqCst);
                    Err::<HttpResponse, _>(HandlerError::terminal("amount too large"))
                },
            )
            .await;
        assert_eq!(r.status, 422);
        let p = problem(&r);
        assert_eq!(p.kind, Problem::REJECTED);
        assert_eq!(p.detail.as_deref(), Some("amount too large"));
    }
    assert_eq!(f.runs(), 1);
    // Retryable, then a panic: 500, released each time.
    let e = event("POST", "/things", Some("k2"), "{}");
    let r = f
        .processor
        .process(
            &request(e.clone()),
            None,
            |_| Ok(()),
            |()| async { Err::<HttpResponse, _>(HandlerError::retryable("database timeout")) },
        )
        .await;
    assert_eq!(r.status, 500);
    assert!(
        !r.body.contains("database timeout"),
        "internals stay in the log"
    );
    let r = f
        .processor
        .process(
            &request(e.clone()),
            None,
            |_| Ok(()),
            |()| async {
                panic!("boom");
                #[allow(unreachable_code)]
                Ok::<HttpResponse, HandlerError>(HttpResponse::new(200))
            },
        )
        .await;
    assert_eq!(r.status, 500);
    assert_eq!(f.call(e, 201).await.status, 201, "released: runs now");
}

#[tokio::test]
async fn a_parse_problem_does_not_touch_the_key() {
    let f = fixture();
    let r = f
        .call(event("POST", "/t", Some("k"), "not json"), 201)
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(problem(&r).kind, Problem::MALFORMED_REQUEST);
    // The fixed request with the same key runs: nothing was kept.
    let r = f.call(event("POST", "/t", Some("k"), "{}"), 201).await;
    assert_eq!((r.status, f.runs()), (201, 1));
}

#[tokio::test]
async fn keys_are_scoped_to_the_caller() {
    let f = fixture();
    let e = bare_event("POST", "/t", Some("shared-key"), "{}");
    let alice = f.call(with_principal(e.clone(), "alice"), 201).await;
    let bob = f.call(with_principal(e.clone(), "bob"), 201).await;
    assert_eq!(f.runs(), 2, "two callers, two keys");
    assert_ne!(alice.body, bob.body);
    let alice_again = f.call(with_principal(e.clone(), "alice"), 201).await;
    assert_eq!(alice_again.body, alice.body);
    assert_eq!(f.runs(), 2);
    // A configured header.
    let mut f2 = fixture();
    f2.processor = f2
        .processor
        .clone()
        .callers([Caller::Header("x-tenant".into())]);
    let r = f2.call(e.clone(), 201).await;
    assert_eq!(r.status, 401);
    assert_eq!(problem(&r).kind, Problem::NO_CALLER);
    let mut tenant = e;
    tenant["headers"]["x-tenant"] = json!("t-1");
    assert_eq!(f2.call(tenant, 201).await.status, 201);
}

/// An HTTP API event behind a Lambda authorizer with simple responses: the
/// authorizer's `context` under `requestContext.authorizer.lambda`, no
/// `principalId`.
fn with_lambda_context(mut event: Value, context: Value) -> Value {
    event["requestContext"]["authorizer"] = json!({ "lambda": context });
    event
}

/// Before: no principal pointer matched a simple-response context, and the
/// default shared scope gave Bob Alice's kept answer.
#[tokio::test]
async fn a_lambda_authorizer_naming_no_caller_is_401_never_a_shared_scope() {
    let f = fixture();
    let e = event("POST", "/t", Some("k-lambda"), r#"{"pay":1}"#);
    let alice = with_lambda_context(e.clone(), json!({"userId": "alice"}));
    let bob = with_lambda_context(e, json!({"userId": "bob"}));
    for r in [f.call(alice, 201).await, f.call(bob, 201).await] {
        assert_eq!(r.status, 401, "{}", r.body);
        assert_eq!(problem(&r).kind, Problem::NO_CALLER);
        assert_eq!(r.header_value(REPLAYED_HEADER), None);
    }
    assert_eq!(f.runs(), 0, "nobody ran, nobody read another's answer");
}

#[tokio::test]
async fn a_lambda_authorizer_context_names_the_caller_where_configured() {
    let mut f = fixture();
    f.processor = f.processor.clone().lambda_principal("/userId");
    let e = event("POST", "/t", Some("k-lambda"), "{}");
    let as_user = |id: Value| with_lambda_context(e.clone(), json!({"userId": id, "tier": "gold"}));
    let alice = f.call(as_user(json!("alice")), 201).await;
    let bob = f.call(as_user(json!("bob")), 201).await;
    assert_eq!((alice.status, bob.status), (201, 201));
    assert_eq!(bob.header_value(REPLAYED_HEADER), None, "bob runs his own");
    assert_eq!(f.runs(), 2);
    let again = f.call(as_user(json!("alice")), 201).await;
    assert_eq!(again.header_value(REPLAYED_HEADER), Some("true"));
    assert_eq!(again.body, alice.body);
    // A number is an id too; a context without the id is refused, even
    // with the shared anonymous scope chosen.
    assert_eq!(f.call(as_user(json!(42)), 201).await.status, 201);
    f.processor = f.processor.clone().anonymous(Anonymous::ShareOneScope);
    let r = f
        .call(with_lambda_context(e.clone(), json!({"tier": "gold"})), 201)
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(problem(&r).kind, Problem::NO_CALLER);
    // The pointer may be given without its leading slash.
    f.processor = f.processor.clone().lambda_principal("userId");
    let r = f.call(as_user(json!("alice")), 201).await;
    assert_eq!(r.header_value(REPLAYED_HEADER), Some("true"));
    assert_eq!(f.runs(), 3);
}

/// Every shape of authorizer block that names no caller is refused, whatever
/// the anonymous policy; the names it gives scope keys apart.
#[tokio::test]
async fn an_authorizer_block_without_a_caller_is_always_401() {
    let mut f = fixture();
    f.processor = f.processor.clone().anonymous(Anonymous::ShareOneScope);
    let e = bare_event("POST", "/t", Some("k-auth"), "{}");
    for authorizer in [
        json!({"jwt": {"claims": {"sub": "alice"}, "scopes": null}}),
        json!({"jwt": {"claims": {"iss": "https://issuer.example"}}}),
        json!({"jwt": {"claims": {"iss": " ", "sub": "alice"}}}),
        json!({"iam": {"accountId": "123456789012", "userArn": null}}),
        json!({"lambda": {}}),
        json!({"lambda": {"principalId": ""}}),
        json!({"something": "else"}),
    ] {
        let mut event = e.clone();
        event["requestContext"]["authorizer"] = authorizer.clone();
        let r = f.call(event, 201).await;
        assert_eq!(r.status, 401, "{authorizer}");
        assert_eq!(problem(&r).kind, Problem::NO_CALLER, "{authorizer}");
    }
    assert_eq!(f.runs(), 0);
    // `null`, or a block naming nothing, is no authorizer: the shared scope
    // chosen applies.
    let mut event = e.clone();
    event["requestContext"]["authorizer"] = Value::Null;
    assert_eq!(f.call(event, 201).await.status, 201);
    let mut event = e.clone();
    event["requestContext"]["authorizer"] = json!({});
    let r = f.call(event, 201).await;
    assert_eq!(r.header_value(REPLAYED_HEADER), Some("true"));
    assert_eq!(
        f.call(e, 201).await.header_value(REPLAYED_HEADER),
        Some("true")
    );
}

/// Before: requests without any caller identity shared one scope by default.
#[tokio::test]
async fn requests_without_a_caller_are_401_by_default() {
    let f = fixture();
    for _ in 0..2 {
        let r = f
            .call(bare_event("POST", "/t", Some("k-anon"), "{}"), 201)
            .await;
        assert_eq!(r.status, 401, "{}", r.body);
        assert_eq!(problem(&r).kind, Problem::NO_CALLER);
    }
    assert_eq!(f.runs(), 0);
}

#[tokio::test]
async fn one_shared_scope_for_anonymous_callers_only_when_chosen() {
    let mut f = fixture();
    f.processor = f.processor.clone().anonymous(Anonymous::ShareOneScope);
    let e = bare_event("POST", "/t", Some("k-anon"), "{}");
    let first = f.call(e.clone(), 201).await;
    let second = f.call(e.clone(), 201).await;
    assert_eq!((first.status, f.runs()), (201, 1));
    assert_eq!(second.header_value(REPLAYED_HEADER), Some("true"));
    // An identified caller is not in that scope.
    let alice = f.call(with_principal(e, "alice"), 201).await;
    assert_eq!(alice.header_value(REPLAYED_HEADER), None);
    assert_eq!(f.runs(), 2);
}

#[test]
fn anonymous_policies_parse_by_name() {
    assert_eq!("refuse".parse(), Ok(Anonymous::Refuse));
    assert_eq!(" share-one-scope ".parse(), Ok(Anonymous::ShareOneScope));
    let err = "shared".parse::<Anonymous>().unwrap_err();
    assert!(err.contains(ANONYMOUS_ENV), "{err}");
}

fn with_claims(mut event: Value, claims: Value) -> Value {
    event["requestContext"]["authorizer"] = json!({"jwt": {"claims": claims, "scopes": null}});
    event
}

/// Before: `sub` alone scoped a JWT caller, so one subject of two issuers
/// (two identity providers behind one API) shared answers.
#[tokio::test]
async fn jwt_callers_are_scoped_by_issuer_and_subject() {
    let f = fixture();
    let e = event("POST", "/t", Some("k-jwt"), "{}");
    let a = json!({"iss": "https://idp-a.example", "sub": "user-1"});
    let b = json!({"iss": "https://idp-b.example", "sub": "user-1"});
    let first = f.call(with_claims(e.clone(), a.clone()), 201).await;
    let other = f.call(with_claims(e.clone(), b), 201).await;
    assert_eq!((first.status, other.status), (201, 201));
    assert_eq!(other.header_value(REPLAYED_HEADER), None, "another issuer");
    assert_eq!(f.runs(), 2);
    let again = f.call(with_claims(e.clone(), a), 201).await;
    assert_eq!(again.header_value(REPLAYED_HEADER), Some("true"));
    // The same on a REST API's Cognito user pool authorizer (claims).
    let rest = |iss: &str| {
        json!({
            "resource": "/t", "path": "/t", "httpMethod": "POST",
            "headers": {"idempotency-key": "k-cognito"},
            "multiValueHeaders": {"idempotency-key": ["k-cognito"]},
            "requestContext": {"requestId": "r", "httpMethod": "POST",
                "authorizer": {"claims": {"iss": iss, "sub": "user-1", "token_use": "id"}}},
            "body": "{}", "isBase64Encoded": false
        })
    };
    f.call(
        rest("https://cognito-idp.us-east-1.amazonaws.com/pool-a"),
        201,
    )
    .await;
    let r = f
        .call(
            rest("https://cognito-idp.us-east-1.amazonaws.com/pool-b"),
            201,
        )
        .await;
    assert_eq!(r.header_value(REPLAYED_HEADER), None);
    assert_eq!(f.runs(), 4);
    // Claims without an issuer: refused, not scoped by the API key after.
    let mut no_iss = rest("");
    no_iss["requestContext"]["identity"] = json!({"apiKeyId": "key-1"});
    let r = f.call(no_iss, 201).await;
    assert_eq!(r.status, 401);
    assert_eq!(problem(&r).kind, Problem::NO_CALLER);
    assert_eq!(f.runs(), 4);
}

/// Before: a handler's 408, 425 and 429 were kept (they are below 500), so
/// the retry they ask for replayed them forever.
#[tokio::test]
async fn retry_later_answers_are_not_kept() {
    for status in [408, 425, 429] {
        let f = fixture();
        let e = event("POST", "/t", Some("k-later"), "{}");
        let r = f.call(e.clone(), status).await;
        assert_eq!(r.status, status, "the handler's own answer");
        let r = f.call(e.clone(), 201).await;
        assert_eq!((r.status, f.runs()), (201, 2), "{status} released the key");
        assert_eq!(r.header_value(REPLAYED_HEADER), None);
        assert!(!Keep::SuccessOnly.keeps(status) && !Keep::NotServerErrors.keeps(status));
    }
}

/// Before: HTTP APIs (2.0) and function URLs join a header sent twice into
/// one comma-separated value, which was taken as one key.
#[tokio::test]
async fn a_key_with_a_comma_is_400() {
    let f = fixture();
    for key in ["k-1,k-2", "k-1, k-1", "\"k-1\", \"k-2\"", "\"a,b\"", ","] {
        let e = event("POST", "/t", Some(key), "{}");
        let r = f.call(e, 201).await;
        assert_eq!(r.status, 400, "{key:?}");
        let p = problem(&r);
        assert_eq!(p.kind, Problem::KEY_INVALID, "{key:?}");
        assert!(p.detail.unwrap_or_default().contains("comma"), "{key:?}");
    }
    assert_eq!(f.runs(), 0);
}

#[tokio::test]
async fn a_missing_key_can_run_unprotected() {
    let mut f = fixture();
    f.processor = f.processor.clone().missing_key(MissingKey::RunUnprotected);
    for _ in 0..2 {
        assert_eq!(
            f.call(event("POST", "/t", None, "{}"), 201).await.status,
            201
        );
    }
    assert_eq!(f.runs(), 2);
}

#[tokio::test]
async fn bodies_base64_and_formats() {
    let f = fixture();
    let mut e = event("POST", "/t", Some("b64"), "");
    e["body"] = json!("eyJhIjoxfQ=="); // {"a":1}
    e["isBase64Encoded"] = json!(true);
    let r = f.call(e.clone(), 201).await;
    assert!(r.body.contains(r#""got":{"a":1}"#), "{}", r.body);
    // The same bytes sent as text: the same request.
    let plain = f
        .call(event("POST", "/t", Some("b64"), r#"{"a":1}"#), 201)
        .await;
    assert_eq!(plain.header_value(REPLAYED_HEADER), Some("true"));
    e["body"] = json!("not base64!");
    let p = HttpRequest::from_event(e).unwrap_err();
    assert_eq!(p.status, 400);
    assert!(p.detail.unwrap_or_default().contains("base64"));
    // A REST API (1.0) event, answered in its own shape.
    let rest = json!({
        "resource": "/t", "path": "/t", "httpMethod": "POST",
        "headers": {"Idempotency-Key": "rest-1"},
        "multiValueHeaders": {"Idempotency-Key": ["rest-1"]},
        "requestContext": {"requestId": "r", "httpMethod": "POST", "identity": {"apiKeyId": "key-1"}},
        "body": "{}", "isBase64Encoded": false
    });
    let req = request(rest);
    assert_eq!(req.format, EventFormat::RestApi);
    assert_eq!(req.api_key_id.as_deref(), Some("key-1"));
    assert_eq!(req.header("idempotency-key"), Some("rest-1"));
    // Not an HTTP event at all.
    let err = HttpRequest::from_event(json!({"Records": []})).unwrap_err();
    assert_eq!(err.status, 400);
}

#[tokio::test]
async fn staged_writes_commit_with_the_key_once() {
    let store = MemoryStore::new();
    let engine = Idempotency::new(store.clone(), config("test.http").disabled(false));
    let processor = HttpProcessor::new(engine);
    let table = Table::memory(store, "counters");
    let key = Item::from([("id".to_owned(), AttrValue::s("c"))]);
    let e = event("POST", "/t", Some("k"), "{}");
    for _ in 0..3 {
        let r = processor
            .process(
                &request(e.clone()),
                None,
                |_| Ok(()),
                |()| async {
                    Ok::<_, HandlerError>(
                        Staged::new(HttpResponse::new(201))
                            .write(Write::update("counters", key.clone()).add("n", 1)),
                    )
                },
            )
            .await;
        assert_eq!(r.status, 201);
    }
    let item = table.get(&key).await.unwrap().unwrap();
    assert_eq!(item.get("n"), Some(&AttrValue::n(1)));
}

/// An Application Load Balancer request (a Lambda target group), with its
/// headers single-valued or, with `lambda.multi_value_headers.enabled`,
/// multi-valued: no `requestContext.httpMethod`, no authorizer.
fn alb_event(key: &str, body: &str, multi_value: bool) -> Value {
    let mut event = json!({
        "requestContext": {"elb": {
            "targetGroupArn": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/t/abc"
        }},
        "httpMethod": "POST",
        "path": "/things",
        "body": body,
        "isBase64Encoded": false
    });
    let headers = json!({
        "idempotency-key": key,
        "content-type": "application/json",
        "x-amzn-trace-id": "Root=1-5c34e93e-4dea0086f9763ac0667b115a"
    });
    if multi_value {
        let multi: serde_json::Map<String, Value> = (headers.as_object().unwrap().iter())
            .map(|(k, v)| (k.clone(), json!([v])))
            .collect();
        event["multiValueHeaders"] = Value::Object(multi);
        event["multiValueQueryStringParameters"] = json!({});
    } else {
        event["headers"] = headers;
        event["queryStringParameters"] = json!({});
    }
    event
}

/// Before: every ALB request was refused 400, "malformed REST API (1.0)
/// event: missing field `httpMethod`" (it has one; it lacks
/// `requestContext.httpMethod`, which a load balancer never sends).
#[tokio::test]
async fn an_alb_request_executes_then_replays_answered_in_the_alb_shape() {
    for multi_value in [false, true] {
        let mut f = fixture();
        f.processor = f.processor.clone().anonymous(Anonymous::ShareOneScope);
        let e = alb_event("k-alb", r#"{"a":1}"#, multi_value);
        let request = request(e.clone());
        assert_eq!(
            request.format,
            EventFormat::Alb {
                multi_value_headers: multi_value
            }
        );
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/things")
        );
        assert_eq!(
            request.request_id.as_deref(),
            Some("Root=1-5c34e93e-4dea0086f9763ac0667b115a"),
            "the trace id names the request in the log"
        );
        let first = f.call(e.clone(), 201).await;
        let again = f.call(e, 201).await;
        assert_eq!((first.status, again.status, f.runs()), (201, 201, 1));
        assert_eq!(again.body, first.body, "byte for byte");
        assert_eq!(again.header_value(REPLAYED_HEADER), Some("true"));
        // The answer in ALB's shape, headers in the request's form.
        let rendered = serde_json::to_value(again.render(request.format)).unwrap();
        assert_eq!(rendered["statusCode"], 201);
        assert_eq!(rendered["statusDescription"], "201 Created");
        assert_eq!(rendered["isBase64Encoded"], false);
        assert_eq!(rendered["body"], first.body.as_str());
        let (used, unused) = if multi_value {
            ("multiValueHeaders", "headers")
        } else {
            ("headers", "multiValueHeaders")
        };
        let replayed = &rendered[used][REPLAYED_HEADER];
        let expected = if multi_value {
            json!(["true"])
        } else {
            json!("true")
        };
        assert_eq!(replayed, &expected, "{rendered}");
        assert_eq!(
            rendered[used]["location"],
            if multi_value {
                json!(["/things/1"])
            } else {
                json!("/things/1")
            }
        );
        let empty = rendered
            .get(unused)
            .is_none_or(|h| h.as_object().is_some_and(|h| h.is_empty()));
        assert!(empty, "only the request's form of headers: {rendered}");
    }
}

/// A load balancer has no authorizer: an ALB request is refused 401 (saying
/// so, and what to configure) unless a header caller or the shared scope is
/// chosen; headers claiming an authorizer's principal never name one.
#[tokio::test]
async fn an_alb_request_without_a_chosen_caller_is_401() {
    let f = fixture();
    let mut e = alb_event("k-alb", "{}", false);
    // Fields an ALB never sends are not read as a caller.
    e["requestContext"]["authorizer"] = json!({"principalId": "mallory"});
    e["requestContext"]["identity"] =
        json!({"apiKeyId": "key-1", "userArn": "arn:aws:iam::1:user/m"});
    let r = f.call(e.clone(), 201).await;
    assert_eq!(r.status, 401, "{}", r.body);
    let p = problem(&r);
    assert_eq!(p.kind, Problem::NO_CALLER);
    let detail = p.detail.unwrap_or_default();
    assert!(detail.contains("Application Load Balancer"), "{detail}");
    assert!(
        detail.contains("Caller::Header") && detail.contains("ShareOneScope"),
        "{detail}"
    );
    assert_eq!(f.runs(), 0);
    // A header the load balancer sets after authenticating (authenticate-oidc).
    let mut f = fixture();
    f.processor = f.processor.clone().callers([
        Caller::Principal,
        Caller::Header("x-amzn-oidc-identity".into()),
    ]);
    let as_user = |sub: &str| {
        let mut e = alb_event("k-alb", "{}", true);
        e["multiValueHeaders"]["x-amzn-oidc-identity"] = json!([sub]);
        e
    };
    let alice = f.call(as_user("alice"), 201).await;
    let bob = f.call(as_user("bob"), 201).await;
    assert_eq!((alice.status, bob.status, f.runs()), (201, 201, 2));
    assert_eq!(bob.header_value(REPLAYED_HEADER), None, "bob runs his own");
    let again = f.call(as_user("alice"), 201).await;
    assert_eq!(again.header_value(REPLAYED_HEADER), Some("true"));
    assert_eq!(f.runs(), 2);
}

/// A REST API (1.0) event on a route without an authorizer.
fn rest_event(key: &str, authorizer: Value) -> Value {
    json!({
        "resource": "/t", "path": "/t", "httpMethod": "POST",
        "headers": {"Idempotency-Key": key},
        "multiValueHeaders": {"Idempotency-Key": [key]},
        "requestContext": {"requestId": "r", "httpMethod": "POST", "authorizer": authorizer,
            "identity": {"apiKeyId": null, "userArn": null}},
        "body": "{}", "isBase64Encoded": false
    })
}

/// Before: `{"claims": null, "scopes": null}` (what a REST API route without
/// an authorizer can carry) was an authorizer naming no caller: 401 under
/// every setting, even the shared scope chosen, and an API key never scoped
/// it.
#[tokio::test]
async fn an_authorizer_block_naming_nothing_is_no_authorizer() {
    let empty = json!({"claims": null, "scopes": null});
    // Refused by default, as a request without any caller identity.
    let f = fixture();
    let r = f.call(rest_event("k-none", empty.clone()), 201).await;
    assert_eq!(r.status, 401);
    let detail = problem(&r).detail.unwrap_or_default();
    assert!(detail.contains("carries no caller identity"), "{detail}");
    // The shared scope chosen: it runs once and replays.
    let mut f = fixture();
    f.processor = f.processor.clone().anonymous(Anonymous::ShareOneScope);
    let first = f.call(rest_event("k-none", empty.clone()), 201).await;
    let again = f.call(rest_event("k-none", empty.clone()), 201).await;
    assert_eq!((first.status, again.status, f.runs()), (201, 201, 1));
    assert_eq!(again.header_value(REPLAYED_HEADER), Some("true"));
    // An API key scopes it.
    let f = fixture();
    let mut keyed = rest_event("k-none", empty);
    keyed["requestContext"]["identity"]["apiKeyId"] = json!("key-1");
    assert_eq!(f.call(keyed, 201).await.status, 201);
    // A block naming something that names no caller is still refused.
    let mut f = fixture();
    f.processor = f.processor.clone().anonymous(Anonymous::ShareOneScope);
    for named in [
        json!({"claims": {}, "scopes": null}),
        json!({"claims": null, "lambda": {}}),
    ] {
        let r = f.call(rest_event("k-named", named.clone()), 201).await;
        assert_eq!(r.status, 401, "{named}");
    }
}

/// Every failure of the one vocabulary has its problem answer: its status,
/// its problem type.
#[test]
fn each_failure_reason_maps_to_its_problem() {
    use crate::batch::FailureReason as F;
    use crate::error::{ErrorKind, KeyError};
    let handler = |kind| F::Handler {
        message: "no stock".into(),
        kind,
    };
    let cases = [
        (F::Parse("not JSON".into()), 400, Problem::MALFORMED_REQUEST),
        (F::Key(KeyError::Null), 400, Problem::KEY_INVALID),
        (
            F::InProgress {
                lease_expires_at_ms: None,
            },
            409,
            Problem::IN_PROGRESS,
        ),
        (F::PayloadMismatch, 422, Problem::KEY_REUSED),
        (handler(ErrorKind::Terminal), 422, Problem::REJECTED),
        (handler(ErrorKind::Retryable), 500, Problem::HANDLER_FAILED),
        (F::Panic("bug".into()), 500, Problem::HANDLER_FAILED),
        (F::Store("throttled".into()), 503, Problem::UNAVAILABLE),
        (
            F::Idempotency("lease lost".into()),
            503,
            Problem::UNAVAILABLE,
        ),
        (
            F::DuplicateOf {
                first: "r".into(),
                reason: Box::new(F::PayloadMismatch),
            },
            422,
            Problem::KEY_REUSED,
        ),
    ];
    for (reason, status, kind) in cases {
        let problem = Problem::of(&reason);
        assert_eq!(
            (problem.status, problem.kind.as_str()),
            (status, kind),
            "{reason}"
        );
    }
    assert_eq!(
        Problem::of(&handler(ErrorKind::Terminal)).detail.as_deref(),
        Some("no stock")
    );
}

/// On the one path the pipeline keys the request from the same material
/// as before (the caller's scope and the key), so a key kept by an earlier
/// version still replays; a refused request leaves no record.
#[tokio::test]
async fn the_pipeline_keys_a_request_by_its_caller_scoped_key() {
    let f = fixture();
    let e = with_principal(bare_event("POST", "/t", Some("k-scoped"), "{}"), "alice");
    let scope = request(e.clone())
        .caller(
            &[Caller::Principal, Caller::ApiKeyId],
            "/principalId",
            Anonymous::Refuse,
        )
        .expect("a caller");
    let engine = f.processor.engine();
    let key = engine
        .key(&json!({ "caller": scope, "key": "k-scoped" }))
        .unwrap();
    assert!(!stored(engine, &key).await);
    assert_eq!(f.call(e.clone(), 201).await.status, 201);
    assert!(stored(engine, &key).await, "kept under the scoped key");
    // Another caller, the same header: another key, nothing kept under it.
    let bob = with_principal(bare_event("POST", "/t", Some("k-scoped"), "{}"), "bob");
    let bob_scope = request(bob)
        .caller(
            &[Caller::Principal, Caller::ApiKeyId],
            "/principalId",
            Anonymous::Refuse,
        )
        .unwrap();
    let bob_key = engine
        .key(&json!({ "caller": bob_scope, "key": "k-scoped" }))
        .unwrap();
    assert!(!stored(engine, &bob_key).await);
    // A request refused before its handler (a malformed body) claims nothing.
    let refused = with_principal(bare_event("POST", "/t", Some("k-refused"), "{"), "alice");
    let response = f.call(refused, 201).await;
    assert_eq!(response.status, 400);
    let refused_key = engine
        .key(&json!({ "caller": scope, "key": "k-refused" }))
        .unwrap();
    assert!(!stored(engine, &refused_key).await);
    assert_eq!(f.runs(), 1);
}

/// Whether the store holds a record under `key`.
async fn stored(engine: &Idempotency, key: &IdempotencyKey) -> bool {
    let known = engine.prefetch(&[key]).await.expect("the store answers");
    known.get(key).is_some()
}

/// The log lines of one test: each event's level and fields.
#[derive(Clone, Default)]
struct Lines(Arc<std::sync::Mutex<Vec<(tracing::Level, String)>>>);

impl Lines {
    /// The level of the line whose fields hold `text`.
    fn level_of(&self, text: &str) -> Option<tracing::Level> {
        let lines = self.0.lock().unwrap();
        lines
            .iter()
            .find(|(_, m)| m.contains(text))
            .map(|(l, _)| *l)
    }

    /// The fields of the line that holds `text`.
    fn line_of(&self, text: &str) -> Option<String> {
        let lines = self.0.lock().unwrap();
        lines
            .iter()
            .find(|(_, m)| m.contains(text))
            .map(|(_, m)| m.clone())
    }
}

struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

impl tracing::Subscriber for Lines {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut message = String::new();
        event.record(&mut Message(&mut message));
        let level = *event.metadata().level();
        self.0.lock().unwrap().push((level, message));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// A request refused with a client error is normal operation for an API:
/// its line is a warning, as before the one path ([`Source::expected`]);
/// a handler that fails to answer is an error. Before the hook, the
/// pipeline logged every refused request as an error.
#[tokio::test(flavor = "current_thread")]
async fn a_client_error_is_logged_as_a_warning_a_server_error_as_an_error() {
    let lines = Lines::default();
    let _guard = tracing::subscriber::set_default(lines.clone());
    let f = fixture();
    let mut malformed = event("POST", "/t", Some("k-log-400"), "{");
    malformed["requestContext"]["requestId"] = json!("r-400");
    assert_eq!(f.call(malformed, 201).await.status, 400);
    assert_eq!(
        lines.level_of(r#"message_id="r-400""#),
        Some(tracing::Level::WARN)
    );
    let mut failing = event("POST", "/t", Some("k-log-500"), "{}");
    failing["requestContext"]["requestId"] = json!("r-500");
    let response = f
        .processor
        .process(
            &request(failing),
            None,
            |r| r.json::<Value>(),
            |_| async { Err::<HttpResponse, _>(HandlerError::retryable("down")) },
        )
        .await;
    assert_eq!(response.status, 500);
    assert_eq!(
        lines.level_of(r#"message_id="r-500""#),
        Some(tracing::Level::ERROR)
    );
    // Each line says what the answer did to the key, never that the
    // request "will be delivered again" (HTTP answers; it does not redeliver).
    let client = lines.line_of(r#"message_id="r-400""#).unwrap();
    assert!(client.contains("the key was not used"), "{client}");
    let server = lines.line_of(r#"message_id="r-500""#).unwrap();
    assert!(server.contains("the key is free for a retry"), "{server}");
    assert!(!server.contains("delivered again"), "{server}");
}
