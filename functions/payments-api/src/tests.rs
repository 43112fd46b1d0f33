use super::*;
use lambda_idempotency::MemoryStore;
use lambda_idempotency::http::Problem;
use lambda_idempotency::testing::{self, HttpEvent};

fn app() -> App {
    configured(|http| http)
}

/// The app with its adapter set up by `configure`.
fn configured(configure: impl FnOnce(HttpProcessor) -> HttpProcessor) -> App {
    let store = MemoryStore::new();
    let engine = Idempotency::new(store.clone(), App::config().disabled(false));
    App::with_http(
        configure(HttpProcessor::new(engine)),
        Accounts::memory(store, "accounts"),
    )
}

fn problem_type(response: &Value) -> String {
    assert_eq!(
        response["headers"]["content-type"],
        "application/problem+json"
    );
    let body: Value = serde_json::from_str(response["body"].as_str().unwrap()).unwrap();
    body["type"].as_str().unwrap().to_owned()
}

async fn invoke(app: &App, event: &Value) -> Value {
    let response = testing::invoke(|e| app.handle(e), event).await;
    serde_json::to_value(response.unwrap()).unwrap()
}

fn sample(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[tokio::test]
async fn the_samples_credit_once_and_replay() {
    for text in [
        include_str!("../../../events/payments-api-http.json"),
        include_str!("../../../events/payments-api-function-url.json"),
    ] {
        let app = app();
        let event = sample(text);
        let first = invoke(&app, &event).await;
        assert_eq!(first["statusCode"], 201, "{first}");
        let again = invoke(&app, &event).await;
        assert_eq!(again["statusCode"], 201);
        assert_eq!(again["body"], first["body"]);
        assert_eq!(again["headers"]["idempotent-replayed"], "true");
        let body: Value = serde_json::from_str(first["body"].as_str().unwrap()).unwrap();
        let account = body["account_id"].as_str().unwrap();
        let amount = body["amount_cents"].as_i64().unwrap();
        assert_eq!(app.accounts().balance(account).await.unwrap(), Some(amount));
    }
}

#[tokio::test]
async fn routes_and_bodies() {
    let app = app();
    let post = |body: &str| HttpEvent::post("/payments", body).idempotency_key("k-1");
    let event = post(r#"{"account_id":"a","amount_cents":-5}"#).http_api();
    assert_eq!(invoke(&app, &event).await["statusCode"], 400);
    let event = post(r#"{"account_id":"a","amount_cents":5,"extra":1}"#).http_api();
    assert_eq!(invoke(&app, &event).await["statusCode"], 400);
    let mut event = post(r#"{"account_id":" ","amount_cents":5}"#).http_api();
    let r = invoke(&app, &event).await;
    assert_eq!(r["statusCode"], 422, "{r}");
    assert_eq!(r["headers"]["content-type"], "application/problem+json");
    event["rawPath"] = serde_json::json!("/refunds");
    assert_eq!(invoke(&app, &event).await["statusCode"], 404);
    event["rawPath"] = serde_json::json!("/payments");
    event["requestContext"]["http"]["method"] = serde_json::json!("GET");
    assert_eq!(invoke(&app, &event).await["statusCode"], 405);
}

/// The Lambda authorizer sample (simple responses: the caller in
/// `authorizer.lambda`, no `principalId`) is refused by default, and runs
/// once per caller when the context key that names the caller is set.
#[tokio::test]
async fn a_lambda_authorizer_caller_is_refused_until_its_context_key_is_set() {
    let event = sample(include_str!(
        "../../../events/payments-api-lambda-authorizer.json"
    ));
    let app = app();
    let r = invoke(&app, &event).await;
    assert_eq!(r["statusCode"], 401, "{r}");
    assert_eq!(problem_type(&r), Problem::NO_CALLER);
    assert_eq!(app.accounts().balance("acct-9").await.unwrap(), None);

    let app = configured(|http| http.lambda_principal("/userId"));
    let first = invoke(&app, &event).await;
    assert_eq!(first["statusCode"], 201, "{first}");
    assert_eq!(
        invoke(&app, &event).await["headers"]["idempotent-replayed"],
        "true"
    );
    let mut other = event.clone();
    other["requestContext"]["authorizer"]["lambda"]["userId"] = serde_json::json!("user-7");
    let r = invoke(&app, &other).await;
    assert_eq!(r["statusCode"], 201);
    assert_eq!(
        r["headers"].get("idempotent-replayed"),
        None,
        "another caller"
    );
    assert_eq!(app.accounts().balance("acct-9").await.unwrap(), Some(2400));
}

/// A request without any caller identity (no authorizer) is refused; the
/// shared scope is there only when chosen.
#[tokio::test]
async fn a_request_without_a_caller_is_401_unless_one_scope_is_chosen() {
    let event = HttpEvent::post("/payments", r#"{"account_id":"a","amount_cents":5}"#)
        .idempotency_key("k-1")
        .caller(None)
        .http_api();
    let r = invoke(&app(), &event).await;
    assert_eq!(r["statusCode"], 401, "{r}");
    assert_eq!(problem_type(&r), Problem::NO_CALLER);
    let app = configured(|http| http.anonymous(lambda_idempotency::http::Anonymous::ShareOneScope));
    assert_eq!(invoke(&app, &event).await["statusCode"], 201);
    assert_eq!(
        invoke(&app, &event).await["headers"]["idempotent-replayed"],
        "true"
    );
}
