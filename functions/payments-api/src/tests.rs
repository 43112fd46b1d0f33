use super::*;
use shared::MemoryStore;
use std::time::Duration;

fn app() -> App {
    let store = MemoryStore::new();
    let engine = Idempotency::new(store.clone(), App::config().disabled(false));
    App::new(engine, Accounts::memory(store, "accounts"))
}

async fn invoke(app: &App, event: &Value) -> Value {
    let ctx = shared::runtime::local_context(1, Duration::from_secs(30));
    let response = app
        .handle(LambdaEvent::new(event.clone(), ctx))
        .await
        .unwrap();
    serde_json::to_value(response).unwrap()
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
    let mut event = sample(include_str!("../../../events/payments-api-http.json"));
    event["body"] = serde_json::json!(r#"{"account_id":"a","amount_cents":-5}"#);
    assert_eq!(invoke(&app, &event).await["statusCode"], 400);
    event["body"] = serde_json::json!(r#"{"account_id":"a","amount_cents":5,"extra":1}"#);
    assert_eq!(invoke(&app, &event).await["statusCode"], 400);
    event["body"] = serde_json::json!(r#"{"account_id":" ","amount_cents":5}"#);
    let r = invoke(&app, &event).await;
    assert_eq!(r["statusCode"], 422, "{r}");
    assert_eq!(r["headers"]["content-type"], "application/problem+json");
    event["rawPath"] = serde_json::json!("/refunds");
    assert_eq!(invoke(&app, &event).await["statusCode"], 404);
    event["rawPath"] = serde_json::json!("/payments");
    event["requestContext"]["http"]["method"] = serde_json::json!("GET");
    assert_eq!(invoke(&app, &event).await["statusCode"], 405);
}
