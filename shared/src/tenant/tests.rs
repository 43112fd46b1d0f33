//! Two tenants of a tenant-isolated function send the same key: each
//! runs, each replays only its own answer; without a tenant, as before.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};

use lambda_runtime::tower::{Service, ServiceBuilder, ServiceExt};
use lambda_runtime::{Context, LambdaEvent, service_fn};
use serde_json::{Value, json};

use crate::eventbridge::{EventBridgeProcessor, EventResponse};
use crate::http::{HttpProcessor, HttpResponse};
use crate::layer::IdempotencyLayer;
use crate::sqs::SqsProcessor;
use crate::testkit::{event_json, memory_engine};
use crate::{HandlerError, IdempotencyKey, KeySelector, Outcome, Store};

/// An invocation's context, of `tenant` when given.
fn ctx(tenant: Option<&str>) -> Context {
    let mut ctx = Context::default();
    ctx.request_id = "r-1".to_owned();
    ctx.tenant_id = tenant.map(str::to_owned);
    ctx
}

/// Counts runs: each run answers its number.
#[derive(Clone, Default)]
struct Runs(Arc<AtomicU32>);

impl Runs {
    fn next(&self) -> u32 {
        self.0.fetch_add(1, SeqCst) + 1
    }
    fn count(&self) -> u32 {
        self.0.load(SeqCst)
    }
}

#[tokio::test]
async fn eventbridge_tenants_never_replay_each_other() {
    let (engine, _, _) = memory_engine();
    let processor = EventBridgeProcessor::new(engine);
    let runs = Runs::default();
    let invoke = |tenant: &'static str| {
        let event = serde_json::from_value(event_json("inventory-order-placed.json")).unwrap();
        let runs = runs.clone();
        let processor = processor.clone();
        async move {
            let answer = processor
                .handle(
                    LambdaEvent::new(event, ctx(Some(tenant))),
                    |_: crate::eventbridge::EventBridgeEvent<Value>| async move {
                        Ok::<_, HandlerError>(json!({"run": runs.next(), "tenant": tenant}))
                    },
                )
                .await
                .unwrap();
            match answer {
                EventResponse::Done(v) => v,
                _ => panic!("a response"),
            }
        }
    };
    let a = invoke("tenant-a").await;
    let b = invoke("tenant-b").await;
    assert_eq!(a, json!({"run": 1, "tenant": "tenant-a"}));
    assert_eq!(
        b,
        json!({"run": 2, "tenant": "tenant-b"}),
        "tenant-b's own work ran"
    );
    assert_eq!(
        invoke("tenant-a").await,
        a,
        "tenant-a replays its own answer"
    );
    assert_eq!(
        invoke("tenant-b").await,
        b,
        "tenant-b replays its own answer"
    );
    assert_eq!(runs.count(), 2);
}

#[tokio::test]
async fn batch_tenants_both_execute_and_keep_their_own_records() {
    let (engine, store, _) = memory_engine();
    let processor = SqsProcessor::new(engine.clone(), KeySelector::pointer("/order_id"));
    let runs = Runs::default();
    let invoke = |tenant: Option<&'static str>| {
        let event = event_json("orders-standard.json");
        let (runs, processor) = (runs.clone(), processor.clone());
        async move {
            processor
                .handle(
                    LambdaEvent::new(event, ctx(tenant)),
                    |_: crate::sqs::SqsRecord<Value>| {
                        let n = runs.next();
                        async move { Ok::<_, HandlerError>(json!({"run": n})) }
                    },
                )
                .await
                .unwrap();
        }
    };
    invoke(Some("tenant-a")).await;
    let records = runs.count();
    assert!(records > 0);
    invoke(Some("tenant-b")).await;
    assert_eq!(runs.count(), 2 * records, "tenant-b's records ran");
    invoke(Some("tenant-a")).await;
    invoke(Some("tenant-b")).await;
    assert_eq!(runs.count(), 2 * records, "each tenant's duplicates replay");
    // Without a tenant: the key as before (records kept before still
    // count), a third set of records.
    invoke(None).await;
    assert_eq!(runs.count(), 3 * records);
    let first: Value = serde_json::from_str(
        event_json("orders-standard.json")["Records"][0]["body"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let unscoped = engine.key(&first["order_id"]).unwrap();
    let expected = IdempotencyKey::new(&engine.config().prefix, &first["order_id"]).unwrap();
    assert_eq!(unscoped, expected);
    assert!(store.get(unscoped.as_str()).await.unwrap().is_some());
}

#[tokio::test]
async fn layer_tenants_never_replay_each_other() {
    let (engine, _, _) = memory_engine();
    let runs = Runs::default();
    let counter = runs.clone();
    let mut service = ServiceBuilder::new()
        .layer(IdempotencyLayer::new(
            engine,
            KeySelector::pointer("/payment_id"),
        ))
        .service(service_fn(move |event: LambdaEvent<Value>| {
            let n = counter.next();
            let tenant = event.context.tenant_id.clone();
            async move { Ok::<_, lambda_runtime::Error>(json!({"run": n, "tenant": tenant})) }
        }));
    let mut invoke = async |tenant: Option<&str>| {
        let event = LambdaEvent::new(json!({"payment_id": "pay-1"}), ctx(tenant));
        service
            .ready()
            .await
            .unwrap()
            .call(event)
            .await
            .unwrap()
            .into_outcome()
    };
    let a = invoke(Some("a")).await;
    assert_eq!(a, Outcome::Executed(json!({"run": 1, "tenant": "a"})));
    let b = invoke(Some("b")).await;
    assert_eq!(
        b,
        Outcome::Executed(json!({"run": 2, "tenant": "b"})),
        "b's own run"
    );
    let again_a = invoke(Some("a")).await;
    assert_eq!(
        again_a,
        Outcome::Replayed(Some(json!({"run": 1, "tenant": "a"})))
    );
    let again_b = invoke(Some("b")).await;
    assert_eq!(
        again_b,
        Outcome::Replayed(Some(json!({"run": 2, "tenant": "b"})))
    );
    // A tenant id that runs into the key: still its own record.
    let joined = invoke(Some("a#pay-1")).await;
    assert!(matches!(joined, Outcome::Executed(_)));
    assert_eq!(runs.count(), 3);
}

/// An HTTP API (2.0) request with an `Idempotency-Key`, from an IAM caller.
fn http_event() -> Value {
    json!({
        "version": "2.0", "routeKey": "POST /orders", "rawPath": "/orders", "rawQueryString": "",
        "headers": {"content-type": "application/json", "idempotency-key": "k-1"},
        "requestContext": {
            "requestId": "r-1",
            "http": {"method": "POST", "path": "/orders", "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
            "authorizer": {"iam": {
                "accessKey": "AKIAIOSFODNN7EXAMPLE", "accountId": "123456789012",
                "callerId": "AIDACKCEVSQ6C2EXAMPLE", "cognitoIdentity": null, "principalOrgId": null,
                "userArn": "arn:aws:iam::123456789012:user/tests", "userId": "AIDACKCEVSQ6C2EXAMPLE"
            }}
        },
        "body": "{}", "isBase64Encoded": false
    })
}

#[tokio::test]
async fn http_tenants_never_replay_each_other() {
    let (engine, _, _) = memory_engine();
    let processor = HttpProcessor::new(engine);
    let runs = Runs::default();
    let invoke = |tenant: &'static str| {
        let event = http_event();
        let (runs, processor) = (runs.clone(), processor.clone());
        async move {
            let answer = processor
                .handle(
                    LambdaEvent::new(event, ctx(Some(tenant))),
                    |r| r.json::<Value>(),
                    |_| async move {
                        let n = runs.next();
                        Ok::<_, HandlerError>(HttpResponse::json(201, &json!({"run": n})))
                    },
                )
                .await
                .unwrap();
            let answer = serde_json::to_value(answer).unwrap();
            serde_json::from_str::<Value>(answer["body"].as_str().unwrap()).unwrap()
        }
    };
    assert_eq!(invoke("a").await, json!({"run": 1}));
    assert_eq!(invoke("b").await, json!({"run": 2}), "b's own run");
    assert_eq!(invoke("a").await, json!({"run": 1}));
    assert_eq!(invoke("b").await, json!({"run": 2}));
    assert_eq!(runs.count(), 2);
}

#[tokio::test]
async fn a_shared_scope_shares_keys_across_tenants() {
    let (engine, _, _) = crate::testkit::engine_with(
        crate::Config::with_prefix("shared")
            .disabled(false)
            .tenant_scope(crate::tenant::TenantScope::Shared),
    );
    let a = engine.for_tenant(Some("a")).key(&json!("k")).unwrap();
    let b = engine.for_tenant(Some("b")).key(&json!("k")).unwrap();
    assert_eq!(a, b);
    assert_eq!(a, engine.key(&json!("k")).unwrap());
    assert_eq!(
        crate::tenant::TenantScope::parse(" Shared "),
        Some(crate::tenant::TenantScope::Shared)
    );
    assert_eq!(
        crate::tenant::TenantScope::parse("tenant"),
        Some(crate::tenant::TenantScope::PerTenant)
    );
    assert_eq!(crate::tenant::TenantScope::parse("sharde"), None);
}
