//! Checks of `template.yaml` that a linter cannot make: every function's
//! idempotency records outlive every message that can still reach it.

use serde_yaml::Value;
use std::time::Duration;

/// SQS's default `MessageRetentionPeriod` (4 days).
const SQS_DEFAULT_RETENTION: u64 = 345_600;
/// EventBridge's default `MaximumEventAgeInSeconds` for a rule target (24 h).
const RULE_DEFAULT_MAX_AGE: u64 = 86_400;
/// Lambda's default maximum event age for asynchronous invocations (6 h).
const ASYNC_DEFAULT_MAX_AGE: u64 = 21_600;

fn template() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml"))
        .expect("template.yaml");
    serde_yaml::from_str(&text).expect("template.yaml parses")
}

/// The logical id a `!GetAtt X.Arn` (or `!Ref X`) points to.
fn target(value: &Value) -> Option<String> {
    match value {
        Value::Tagged(tagged) => match tagged.value.as_str() {
            Some(s) => Some(s.split('.').next().unwrap_or(s).to_owned()),
            None => tagged
                .value
                .as_sequence()
                .and_then(|s| s.first())
                .and_then(Value::as_str)
                .map(str::to_owned),
        },
        _ => None,
    }
}

fn number(value: Option<&Value>, default: u64) -> u64 {
    match value {
        Some(Value::Number(n)) => n.as_u64().expect("a whole number"),
        Some(Value::String(s)) => s.parse().expect("a whole number"),
        None => default,
        Some(other) => panic!("not a number: {other:?}"),
    }
}

/// How long a message can stay in queue `id` (its retention).
fn retention(resources: &Value, id: &str) -> u64 {
    let queue = &resources[id];
    assert_eq!(
        queue["Type"].as_str(),
        Some("AWS::SQS::Queue"),
        "{id} is a queue"
    );
    number(
        queue["Properties"].get("MessageRetentionPeriod"),
        SQS_DEFAULT_RETENTION,
    )
}

/// The longest time after its first delivery that a message can still
/// reach the function `id` (so its record must live at least that long):
/// for an SQS source, the queue's retention plus its DLQ's (a redrive from
/// the DLQ starts a new life in the queue); for an EventBridge rule, the
/// rule's retries plus its DLQ's retention, or Lambda's asynchronous
/// retries plus the on-failure queue's retention.
fn longest_message_life(resources: &Value, id: &str) -> Option<u64> {
    let function = &resources[id]["Properties"];
    let mut longest = None::<u64>;
    for (_, event) in function["Events"].as_mapping()? {
        let props = &event["Properties"];
        let life = match event["Type"].as_str() {
            Some("SQS") => {
                let queue = target(&props["Queue"]).expect("the queue's ARN");
                let source = retention(resources, &queue);
                let dlq = resources[&queue]["Properties"]["RedrivePolicy"]
                    .get("deadLetterTargetArn")
                    .and_then(target)
                    .map_or(0, |dlq| retention(resources, &dlq));
                source + dlq
            }
            Some("EventBridgeRule") => {
                let rule_age = number(
                    props["RetryPolicy"].get("MaximumEventAgeInSeconds"),
                    RULE_DEFAULT_MAX_AGE,
                );
                let rule_dlq = props["DeadLetterConfig"]
                    .get("Arn")
                    .and_then(target)
                    .map_or(0, |dlq| retention(resources, &dlq));
                let invoke = &function["EventInvokeConfig"];
                let async_age = number(
                    invoke.get("MaximumEventAgeInSeconds"),
                    ASYNC_DEFAULT_MAX_AGE,
                );
                let on_failure = invoke["DestinationConfig"]["OnFailure"]
                    .get("Destination")
                    .and_then(target)
                    .map_or(0, |q| retention(resources, &q));
                (rule_age + rule_dlq).max(rule_age + async_age + on_failure)
            }
            _ => continue,
        };
        longest = Some(longest.map_or(life, |l| l.max(life)));
    }
    longest
}

#[test]
fn records_outlive_every_message_of_their_function() {
    let template = template();
    let resources = &template["Resources"];
    let defaults = [
        ("PaymentsFunction", payments::RECORD_LIFETIME),
        ("OrdersFunction", orders::RECORD_LIFETIME),
        ("InventoryFunction", inventory::RECORD_LIFETIME),
    ];
    let mut checked = 0;
    for (id, resource) in resources.as_mapping().expect("Resources") {
        let id = id.as_str().expect("a logical id");
        if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let Some(life) = longest_message_life(resources, id) else {
            continue;
        };
        let variables = &resource["Properties"]["Environment"]["Variables"];
        let expiry = number(
            variables.get(shared::EXPIRES_AFTER_ENV),
            u64::MAX, // unset: checked below
        );
        assert_ne!(
            expiry,
            u64::MAX,
            "{id} does not set {}: its records would live the code default",
            shared::EXPIRES_AFTER_ENV
        );
        assert!(
            expiry >= life,
            "{id}: records live {expiry} s but a message can still arrive {life} s after its \
             first delivery (source retention + DLQ retention)"
        );
        let (_, default) = defaults
            .iter()
            .find(|(f, _)| *f == id)
            .unwrap_or_else(|| panic!("{id}: a function this test does not know"));
        assert!(
            *default >= Duration::from_secs(life),
            "{id}: the code's default lifetime {default:?} is shorter than {life} s"
        );
        checked += 1;
    }
    assert_eq!(
        checked,
        defaults.len(),
        "every message-driven function checked"
    );
}

/// The check itself: a record lifetime shorter than a queue plus its DLQ
/// fails it.
#[test]
fn a_lifetime_shorter_than_queue_plus_dlq_is_caught() {
    let text = r#"
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties:
      MessageRetentionPeriod: 1000
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt D.Arn
  D:
    Type: AWS::SQS::Queue
    Properties:
      MessageRetentionPeriod: 500
  F:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        E:
          Type: SQS
          Properties:
            Queue: !GetAtt Q.Arn
"#;
    let t: Value = serde_yaml::from_str(text).unwrap();
    assert_eq!(longest_message_life(&t["Resources"], "F"), Some(1500));
}

/// `payments-api` keeps keys as long as the library's HTTP default, takes
/// IAM-signed requests only, and its role touches only its two tables and
/// its log group.
#[test]
fn payments_api_keeps_keys_24h_behind_iam_with_its_own_role() {
    let template = template();
    let resources = &template["Resources"];
    let function = &resources["PaymentsApiFunction"]["Properties"];
    let expiry = number(
        function["Environment"]["Variables"].get(shared::EXPIRES_AFTER_ENV),
        0,
    );
    assert_eq!(expiry, shared::http::DEFAULT_RETENTION.as_secs());
    assert_eq!(
        function["FunctionUrlConfig"]["AuthType"].as_str(),
        Some("AWS_IAM")
    );
    let api = &resources["PaymentsHttpApi"]["Properties"]["Auth"];
    assert_eq!(api["DefaultAuthorizer"].as_str(), Some("AWS_IAM"));
    let event = &function["Events"]["CreatePayment"];
    assert_eq!(event["Type"].as_str(), Some("HttpApi"));
    assert_eq!(
        event["Properties"]["Path"].as_str(),
        Some(payments_api::PATH)
    );
    assert_eq!(
        target(&function["Role"]).as_deref(),
        Some("PaymentsApiRole")
    );
    let statements =
        resources["PaymentsApiRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            .as_sequence()
            .expect("statements");
    let mut resources_named = Vec::new();
    for statement in statements {
        let actions: Vec<&str> = match &statement["Action"] {
            Value::String(a) => vec![a.as_str()],
            Value::Sequence(s) => s.iter().filter_map(Value::as_str).collect(),
            other => panic!("actions {other:?}"),
        };
        assert!(
            actions
                .iter()
                .all(|a| a.starts_with("dynamodb:") || a.starts_with("logs:")),
            "{actions:?}"
        );
        assert!(!actions.iter().any(|a| a.contains('*')), "{actions:?}");
        resources_named.push(target(&statement["Resource"]).expect("one named resource"));
    }
    resources_named.sort();
    assert_eq!(
        resources_named,
        ["AccountsTable", "IdempotencyTable", "PaymentsApiLogGroup"]
    );
}

/// `ValkeyCache=serverless` wires inventory to the cache: the store and a
/// TLS URL from the cache's endpoint in its environment, its VPC settings
/// on a security group the cache admits on the Valkey ports, and the VPC
/// access policy on its role; with `none`, none of it exists.
#[test]
fn valkey_cache_is_wired_to_inventory() {
    let t = template();
    let resources = &t["Resources"];
    let cache = &resources["IdempotencyCache"];
    assert_eq!(
        cache["Type"].as_str(),
        Some("AWS::ElastiCache::ServerlessCache")
    );
    assert_eq!(cache["Properties"]["Engine"].as_str(), Some("valkey"));
    for id in [
        "IdempotencyCache",
        "ValkeyClientSecurityGroup",
        "ValkeyClientToCacheEgress",
        "ValkeyCacheSecurityGroup",
    ] {
        assert_eq!(
            resources[id]["Condition"].as_str(),
            Some("UseValkey"),
            "{id}"
        );
    }
    let function = &resources["InventoryFunction"]["Properties"];
    let text = |v: &Value| serde_yaml::to_string(v).unwrap();
    let env = &function["Environment"]["Variables"];
    let store = text(&env["IDEMPOTENCY_STORE"]);
    assert!(
        store.contains("UseValkey") && store.contains("valkey"),
        "{store}"
    );
    let url = text(&env["VALKEY_URL"]);
    assert!(
        url.contains("rediss://${IdempotencyCache.Endpoint.Address}"),
        "{url}"
    );
    let vpc = text(&function["VpcConfig"]);
    assert!(
        vpc.contains("UseValkey") && vpc.contains("ValkeyClientSecurityGroup"),
        "{vpc}"
    );
    let ingress = &resources["ValkeyCacheSecurityGroup"]["Properties"]["SecurityGroupIngress"][0];
    assert_eq!(
        target(&ingress["SourceSecurityGroupId"]).as_deref(),
        Some("ValkeyClientSecurityGroup")
    );
    assert_eq!(number(ingress.get("FromPort"), 0), 6379);
    let role = text(&resources["InventoryRole"]["Properties"]["ManagedPolicyArns"]);
    assert!(role.contains("AWSLambdaVPCAccessExecutionRole"), "{role}");
}
