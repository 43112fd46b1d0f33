//! The adapter on the memory store: each answer of the module's table.

use super::*;
use crate::store::MemoryStore;
use crate::write::Write;
use crate::{AttrValue, Item, Table};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// An HTTP API (2.0) event.
pub(crate) fn event(method: &str, path: &str, key: Option<&str>, body: &str) -> Value {
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
    event["requestContext"]["authorizer"] =
        json!({"jwt": {"claims": {"sub": sub}, "scopes": null}});
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
    let f = fixture();
    let too_long = "k".repeat(DEFAULT_MAX_KEY_LENGTH + 1);
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
    let longest = "é".repeat(DEFAULT_MAX_KEY_LENGTH);
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
    let e = event("POST", "/t", Some("shared-key"), "{}");
    let alice = f.call(with_principal(e.clone(), "alice"), 201).await;
    let bob = f.call(with_principal(e.clone(), "bob"), 201).await;
    let anonymous = f.call(e.clone(), 201).await;
    assert_eq!(f.runs(), 3, "three callers, three keys");
    assert_ne!(alice.body, bob.body);
    assert_ne!(bob.body, anonymous.body);
    let alice_again = f.call(with_principal(e.clone(), "alice"), 201).await;
    assert_eq!(alice_again.body, alice.body);
    assert_eq!(f.runs(), 3);
    // A configured header, and refusing anonymous callers.
    let mut f2 = fixture();
    f2.processor = f2
        .processor
        .clone()
        .callers([Caller::Header("x-tenant".into())])
        .anonymous(Anonymous::Refuse);
    let r = f2.call(e.clone(), 201).await;
    assert_eq!(r.status, 401);
    assert_eq!(problem(&r).kind, Problem::NO_CALLER);
    let mut tenant = e;
    tenant["headers"]["x-tenant"] = json!("t-1");
    assert_eq!(f2.call(tenant, 201).await.status, 201);
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
