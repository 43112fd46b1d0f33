//! Checks of `template.yaml` that a linter cannot make: every function's
//! idempotency records outlive every message that can still reach it.

use serde_yaml::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// SQS's default `MessageRetentionPeriod` (4 days).
const SQS_DEFAULT_RETENTION: u64 = 345_600;
/// EventBridge's default `MaximumEventAgeInSeconds` for a rule target (24 h).
const RULE_DEFAULT_MAX_AGE: u64 = 86_400;
/// Lambda's default maximum event age for asynchronous invocations (6 h).
const ASYNC_DEFAULT_MAX_AGE: u64 = 21_600;
/// A Kinesis stream's default `RetentionPeriodHours` (24 h).
const KINESIS_DEFAULT_RETENTION_HOURS: u64 = 24;

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
/// retries plus the on-failure queue's retention; for a Kinesis stream, its
/// retention (a mapping started again at the trim horizon reads every record
/// the stream still holds; the on-failure destination gets sequence number
/// ranges, not records).
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
            Some("Kinesis") => {
                let stream = target(&props["Stream"]).expect("the stream's ARN");
                let stream = &resources[&stream];
                assert_eq!(
                    stream["Type"].as_str(),
                    Some("AWS::Kinesis::Stream"),
                    "a stream"
                );
                3600 * number(
                    stream["Properties"].get("RetentionPeriodHours"),
                    KINESIS_DEFAULT_RETENTION_HOURS,
                )
            }
            _ => continue,
        };
        longest = Some(longest.map_or(life, |l| l.max(life)));
    }
    longest
}

/// Checks that every message-driven function of `resources` keeps its
/// records at least as long as a message can still reach it: its
/// `IDEMPOTENCY_EXPIRES_AFTER_SECONDS` set and at least
/// [`longest_message_life`], and its code's default lifetime (`defaults`,
/// by logical id) as long. The functions checked, or what is wrong.
fn records_outlive_messages(
    resources: &Value,
    defaults: &[(&str, Duration)],
) -> Result<usize, String> {
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
        let Some(expiry) = variables
            .get(lambda_idempotency::env::EXPIRES_AFTER_ENV)
            .map(|v| number(Some(v), 0))
        else {
            return Err(format!(
                "{id} does not set {}: its records would live the code default",
                lambda_idempotency::env::EXPIRES_AFTER_ENV
            ));
        };
        if expiry < life {
            return Err(format!(
                "{id}: records live {expiry} s but a message can still arrive {life} s after its \
                 first delivery (source retention + DLQ retention)"
            ));
        }
        let Some((_, default)) = defaults.iter().find(|(f, _)| *f == id) else {
            return Err(format!("{id}: a function this test does not know"));
        };
        if *default < Duration::from_secs(life) {
            return Err(format!(
                "{id}: the code's default lifetime {default:?} is shorter than {life} s"
            ));
        }
        checked += 1;
    }
    Ok(checked)
}

#[test]
fn records_outlive_every_message_of_their_function() {
    let template = template();
    let defaults = [
        ("PaymentsFunction", payments::RECORD_LIFETIME),
        ("OrdersFunction", orders::RECORD_LIFETIME),
        ("InventoryFunction", inventory::RECORD_LIFETIME),
        ("LedgerFunction", ledger::RECORD_LIFETIME),
    ];
    assert_eq!(
        records_outlive_messages(&template["Resources"], &defaults),
        Ok(defaults.len()),
        "every message-driven function checked"
    );
}

/// The check itself: a record lifetime shorter than a queue plus its DLQ
/// (1,000 s + 500 s) is refused, as is an unset one or a code default as
/// short; 1,500 s passes.
#[test]
fn a_lifetime_shorter_than_queue_plus_dlq_is_caught() {
    let text = |expiry: &str| {
        format!(
            r#"
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
      Environment:
        Variables: {{{expiry}}}
      Events:
        E:
          Type: SQS
          Properties:
            Queue: !GetAtt Q.Arn
"#
        )
    };
    let check = |expiry: &str, default: u64| {
        let t: Value = serde_yaml::from_str(&text(expiry)).unwrap();
        assert_eq!(longest_message_life(&t["Resources"], "F"), Some(1500));
        records_outlive_messages(&t["Resources"], &[("F", Duration::from_secs(default))])
    };
    let env = lambda_idempotency::env::EXPIRES_AFTER_ENV;
    assert_eq!(check(&format!("{env}: 1500"), 1500), Ok(1));
    let short = check(&format!("{env}: 1499"), 1500).unwrap_err();
    assert!(
        short.contains("records live 1499 s") && short.contains("1500 s after"),
        "{short}"
    );
    let unset = check("", 1500).unwrap_err();
    assert!(unset.contains("does not set"), "{unset}");
    let default = check(&format!("{env}: 1500"), 1499).unwrap_err();
    assert!(default.contains("default lifetime"), "{default}");
}

/// A Kinesis source: the stream's retention, in seconds (24 h when unset).
#[test]
fn a_kinesis_source_lives_its_streams_retention() {
    let text = |retention: &str| {
        format!(
            r#"
Resources:
  S:
    Type: AWS::Kinesis::Stream
    Properties: {{{retention}}}
  F:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        E:
          Type: Kinesis
          Properties:
            Stream: !GetAtt S.Arn
"#
        )
    };
    let life = |retention: &str| {
        let t: Value = serde_yaml::from_str(&text(retention)).unwrap();
        longest_message_life(&t["Resources"], "F")
    };
    assert_eq!(life("RetentionPeriodHours: 48"), Some(48 * 3600));
    assert_eq!(life(""), Some(24 * 3600));
}

/// `value` as CloudFormation sees it when `condition` is `holds`: the
/// chosen branch of an `!If [condition, a, b]` (`None` for
/// `!Ref AWS::NoValue`), any other value as is.
fn when<'a>(value: &'a Value, condition: &str, holds: bool) -> Option<&'a Value> {
    let chosen = match intrinsic(value) {
        Some((name, args)) if name == "If" && args[0].as_str() == Some(condition) => {
            &args[if holds { 1 } else { 2 }]
        }
        _ => value,
    };
    (!chosen.is_null() && reference(chosen) != Some("AWS::NoValue")).then_some(chosen)
}

/// The condition that switches payments-api to tenant isolation.
const PER_TENANT: &str = "PaymentsApiPerTenant";

/// What Lambda refuses on a tenant-isolated function (`TenancyConfig`):
/// a function URL, provisioned concurrency, SnapStart, and any event
/// source but a REST API (an HTTP API cannot pass the tenant id), for
/// every function of the template with [`PER_TENANT`] set to `per_tenant`.
fn tenant_isolation_problems(template: &Value, per_tenant: bool) -> Vec<String> {
    let mut problems = Vec::new();
    for (id, function) in resources_of(template, "AWS::Serverless::Function") {
        let properties = &function["Properties"];
        let Some(tenancy) = properties
            .get("TenancyConfig")
            .and_then(|v| when(v, PER_TENANT, per_tenant))
        else {
            continue;
        };
        if tenancy["TenantIsolationMode"].as_str() != Some("PER_TENANT") {
            problems.push(format!("{id}: TenancyConfig {tenancy:?}"));
        }
        for refused in [
            "FunctionUrlConfig",
            "ProvisionedConcurrencyConfig",
            "SnapStart",
        ] {
            if properties
                .get(refused)
                .and_then(|v| when(v, PER_TENANT, per_tenant))
                .is_some()
            {
                problems.push(format!("{id}: {refused} on a tenant-isolated function"));
            }
        }
        let events = properties
            .get("Events")
            .and_then(|v| when(v, PER_TENANT, per_tenant));
        for (name, event) in events.and_then(Value::as_mapping).into_iter().flatten() {
            let event = when(event, PER_TENANT, per_tenant);
            let type_ = event.and_then(|e| e["Type"].as_str());
            if event.is_some() && type_ != Some("Api") {
                problems.push(format!(
                    "{id}: event {} ({type_:?}) on a tenant-isolated function",
                    name.as_str().unwrap_or("?")
                ));
            }
        }
    }
    problems
}

/// `PaymentsApiTenancy=per-tenant` makes payments-api tenant-isolated
/// (`TenancyConfig` PER_TENANT) without its function URL (nor the URL's
/// output) or its HTTP API route, invoked directly with a tenant id;
/// `none` (the default) leaves it as it was. No other function is
/// tenant-isolated, and no setting gives one what Lambda refuses it.
#[test]
fn payments_api_per_tenant_is_tenant_isolated_and_reachable_only_with_a_tenant_id() {
    let template = template();
    let parameter = &template["Parameters"]["PaymentsApiTenancy"];
    assert_eq!(parameter["Default"].as_str(), Some("none"));
    let allowed: Vec<&str> = parameter["AllowedValues"]
        .as_sequence()
        .expect("AllowedValues")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(allowed, ["none", "per-tenant"]);
    let condition = intrinsic(&template["Conditions"][PER_TENANT]).expect("a condition");
    assert_eq!(condition.0, "Equals");
    assert_eq!(reference(&condition.1[0]), Some("PaymentsApiTenancy"));
    assert_eq!(condition.1[1].as_str(), Some("per-tenant"));

    let function = &template["Resources"]["PaymentsApiFunction"]["Properties"];
    let tenancy = when(&function["TenancyConfig"], PER_TENANT, true).expect("TenancyConfig");
    assert_eq!(tenancy["TenantIsolationMode"].as_str(), Some("PER_TENANT"));
    assert!(when(&function["FunctionUrlConfig"], PER_TENANT, true).is_none());
    assert!(when(&function["Events"], PER_TENANT, true).is_none());
    assert!(when(&function["TenancyConfig"], PER_TENANT, false).is_none());
    assert!(when(&function["FunctionUrlConfig"], PER_TENANT, false).is_some());
    assert!(when(&function["Events"], PER_TENANT, false).is_some());
    // The URL's output exists only with the URL.
    let shared = intrinsic(&template["Conditions"]["PaymentsApiShared"]).expect("a condition");
    assert_eq!(shared.0, "Not");
    assert_eq!(
        intrinsic(&shared.1[0]).map(|(n, v)| (n, v.as_str())),
        Some(("Condition".to_owned(), Some(PER_TENANT)))
    );
    assert_eq!(
        template["Outputs"]["PaymentsApiFunctionUrl"]["Condition"].as_str(),
        Some("PaymentsApiShared")
    );

    for per_tenant in [false, true] {
        assert_eq!(
            tenant_isolation_problems(&template, per_tenant),
            Vec::<String>::new(),
            "per_tenant {per_tenant}"
        );
        let isolated: Vec<&str> = resources_of(&template, "AWS::Serverless::Function")
            .into_iter()
            .filter(|(_, f)| {
                f["Properties"]
                    .get("TenancyConfig")
                    .and_then(|v| when(v, PER_TENANT, per_tenant))
                    .is_some()
            })
            .map(|(id, _)| id)
            .collect();
        let expected: &[&str] = if per_tenant {
            &["PaymentsApiFunction"]
        } else {
            &[]
        };
        assert_eq!(isolated, expected);
    }
}

/// A tenant-isolated function with a function URL, or an HTTP API or queue
/// event, is caught.
#[test]
fn a_tenant_isolated_function_with_a_url_or_a_non_rest_event_is_caught() {
    let real = template();
    let mut with_url = real.clone();
    with_url["Resources"]["PaymentsApiFunction"]["Properties"]["FunctionUrlConfig"] =
        serde_yaml::from_str("{AuthType: AWS_IAM}").unwrap();
    assert_eq!(
        tenant_isolation_problems(&with_url, true),
        ["PaymentsApiFunction: FunctionUrlConfig on a tenant-isolated function"]
    );
    assert!(tenant_isolation_problems(&with_url, false).is_empty());

    let mut with_http_api = real.clone();
    with_http_api["Resources"]["PaymentsApiFunction"]["Properties"]["Events"] =
        serde_yaml::from_str("{CreatePayment: {Type: HttpApi}}").unwrap();
    assert_eq!(
        tenant_isolation_problems(&with_http_api, true),
        [
            r#"PaymentsApiFunction: event CreatePayment (Some("HttpApi")) on a tenant-isolated function"#
        ]
    );

    let mut orders = real;
    orders["Resources"]["OrdersFunction"]["Properties"]["TenancyConfig"] =
        serde_yaml::from_str("{TenantIsolationMode: PER_TENANT}").unwrap();
    let problems = tenant_isolation_problems(&orders, false);
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("OrdersFunction: event") && p.contains("SQS")),
        "{problems:?}"
    );
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
        function["Environment"]["Variables"].get(lambda_idempotency::env::EXPIRES_AFTER_ENV),
        0,
    );
    assert_eq!(
        expiry,
        lambda_idempotency::http::DEFAULT_RETENTION.as_secs()
    );
    // Its entry points when not tenant-isolated (PaymentsApiTenancy=none).
    let url = when(&function["FunctionUrlConfig"], PER_TENANT, false).expect("a function URL");
    assert_eq!(url["AuthType"].as_str(), Some("AWS_IAM"));
    let api = &resources["PaymentsHttpApi"]["Properties"]["Auth"];
    assert_eq!(api["DefaultAuthorizer"].as_str(), Some("AWS_IAM"));
    let event = &when(&function["Events"], PER_TENANT, false).expect("events")["CreatePayment"];
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
        [
            "AccountsTable",
            "IdempotencyTable",
            "IdempotencyTable",
            "PaymentsApiLogGroup"
        ]
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

// ------------------------------------------------------------------------
// Operations: alarms that notify, the idempotency table kept, the modes that can be
// deployed, log groups where Lambda puts them, the dashboard, samconfig.

/// The intrinsic function of a tagged value (`!If [..]` -> `("If", [..])`).
fn intrinsic(value: &Value) -> Option<(String, &Value)> {
    match value {
        Value::Tagged(tagged) => Some((
            tagged.tag.to_string().trim_start_matches('!').to_owned(),
            &tagged.value,
        )),
        _ => None,
    }
}

/// `!Ref NAME` -> `NAME`.
fn reference(value: &Value) -> Option<&str> {
    match value {
        Value::Tagged(tagged) if tagged.tag == "!Ref" => tagged.value.as_str(),
        _ => None,
    }
}

/// The string of a `!Sub "..."` (the short form only).
fn sub(value: &Value) -> Option<&str> {
    match value {
        Value::Tagged(tagged) if tagged.tag == "!Sub" => tagged.value.as_str(),
        _ => None,
    }
}

/// The resources of `type_`, by logical id.
fn resources_of<'a>(template: &'a Value, type_: &str) -> Vec<(&'a str, &'a Value)> {
    template["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some(type_))
        .map(|(id, r)| (id.as_str().expect("a logical id"), r))
        .collect()
}

/// Alarms whose `AlarmActions` or `OKActions` are not
/// `!If [NotifiesAlarms, [!Ref AlarmTopicArn], !Ref AWS::NoValue]`.
fn alarms_without_actions(template: &Value) -> Vec<String> {
    let wired = |value: &Value| {
        let Some((name, args)) = intrinsic(value) else {
            return false;
        };
        let Some([condition, then, otherwise]) = args.as_sequence().map(Vec::as_slice) else {
            return false;
        };
        name == "If"
            && condition.as_str() == Some("NotifiesAlarms")
            && then
                .as_sequence()
                .is_some_and(|s| s.len() == 1 && reference(&s[0]) == Some("AlarmTopicArn"))
            && reference(otherwise) == Some("AWS::NoValue")
    };
    resources_of(template, "AWS::CloudWatch::Alarm")
        .into_iter()
        .filter(|(_, alarm)| {
            !wired(&alarm["Properties"]["AlarmActions"])
                || !wired(&alarm["Properties"]["OKActions"])
        })
        .map(|(id, _)| id.to_owned())
        .collect()
}

#[test]
fn every_alarm_notifies_the_alarm_topic() {
    let template = template();
    let parameter = &template["Parameters"]["AlarmTopicArn"];
    assert_eq!(parameter["Type"].as_str(), Some("String"));
    assert_eq!(
        parameter["Default"].as_str(),
        Some(""),
        "the topic is optional"
    );
    let condition = &template["Conditions"]["NotifiesAlarms"];
    let (not, args) = intrinsic(condition).expect("NotifiesAlarms is !Not [..]");
    assert_eq!(not, "Not");
    let (equals, args) = intrinsic(&args[0]).expect("!Not [!Equals [..]]");
    assert_eq!(equals, "Equals");
    assert_eq!(reference(&args[0]), Some("AlarmTopicArn"));
    assert_eq!(args[1].as_str(), Some(""));

    let alarms = resources_of(&template, "AWS::CloudWatch::Alarm");
    assert!(alarms.len() >= 20, "{} alarms", alarms.len());
    assert_eq!(
        alarms_without_actions(&template),
        Vec::<String>::new(),
        "alarms that would notify nobody"
    );
}

/// The check itself: an alarm without actions, or with only one of them, is
/// caught.
#[test]
fn an_alarm_without_actions_is_caught() {
    let text = r#"
Resources:
  Wired:
    Type: AWS::CloudWatch::Alarm
    Properties:
      AlarmActions: !If [NotifiesAlarms, [!Ref AlarmTopicArn], !Ref AWS::NoValue]
      OKActions: !If [NotifiesAlarms, [!Ref AlarmTopicArn], !Ref AWS::NoValue]
  Silent:
    Type: AWS::CloudWatch::Alarm
    Properties:
      Namespace: AWS/SQS
  HalfWired:
    Type: AWS::CloudWatch::Alarm
    Properties:
      AlarmActions: !If [NotifiesAlarms, [!Ref AlarmTopicArn], !Ref AWS::NoValue]
"#;
    let t: Value = serde_yaml::from_str(text).unwrap();
    assert_eq!(alarms_without_actions(&t), ["Silent", "HalfWired"]);
}

/// The alarms on `namespace`/`metric` whose dimension `dimension` points at
/// `target` (by `!Ref` or `!GetAtt`).
fn alarms_on(
    template: &Value,
    namespace: &str,
    metric: &str,
    dimension: &str,
    resource: &str,
) -> usize {
    resources_of(template, "AWS::CloudWatch::Alarm")
        .into_iter()
        .filter(|(_, a)| {
            let p = &a["Properties"];
            p["Namespace"].as_str() == Some(namespace)
                && p["MetricName"].as_str() == Some(metric)
                && p["Dimensions"].as_sequence().is_some_and(|ds| {
                    ds.iter().any(|d| {
                        d["Name"].as_str() == Some(dimension)
                            && target(&d["Value"]).as_deref() == Some(resource)
                    })
                })
        })
        .count()
}

/// Every queue a message ends in when it is given up on: SQS redrive
/// targets, rule DLQs, on-failure destinations (asynchronous invocations
/// and stream mappings), stream records' parking queues
/// (`PARKING_QUEUE_URL`).
fn dead_letter_queues(template: &Value) -> Vec<String> {
    let mut dlqs = Vec::new();
    for (_, queue) in resources_of(template, "AWS::SQS::Queue") {
        if let Some(dlq) = queue["Properties"]["RedrivePolicy"]
            .get("deadLetterTargetArn")
            .and_then(target)
        {
            dlqs.push(dlq);
        }
    }
    for (_, function) in resources_of(template, "AWS::Serverless::Function") {
        let props = &function["Properties"];
        if let Some(q) = props["Environment"]["Variables"]
            .get(lambda_idempotency::parking::PARKING_QUEUE_ENV)
            .and_then(target)
        {
            dlqs.push(q);
        }
        if let Some(q) = props["EventInvokeConfig"]["DestinationConfig"]["OnFailure"]
            .get("Destination")
            .and_then(target)
        {
            dlqs.push(q);
        }
        for (_, event) in props["Events"].as_mapping().into_iter().flatten() {
            let p = &event["Properties"];
            for q in [
                p["DeadLetterConfig"].get("Arn"),
                p["DestinationConfig"]["OnFailure"].get("Destination"),
            ]
            .into_iter()
            .flatten()
            .filter_map(target)
            {
                dlqs.push(q);
            }
        }
    }
    dlqs.sort();
    dlqs.dedup();
    dlqs
}

#[test]
fn every_function_source_queue_and_dlq_has_its_alarms() {
    let template = template();
    let functions = resources_of(&template, "AWS::Serverless::Function");
    assert!(functions.len() >= 4);
    for (id, function) in &functions {
        for metric in ["Errors", "Throttles"] {
            assert_eq!(
                alarms_on(&template, "AWS/Lambda", metric, "FunctionName", id),
                1,
                "{id}: one alarm on its {metric}"
            );
        }
        // Functions with idempotency records (they set their lifetime) can
        // meet records claimed by another invocation.
        if function["Properties"]["Environment"]["Variables"]
            .get(lambda_idempotency::env::EXPIRES_AFTER_ENV)
            .is_some()
        {
            assert_eq!(
                alarms_on(
                    &template,
                    lambda_idempotency::metrics::NAMESPACE,
                    "InProgressConflict",
                    "service",
                    id
                ),
                1,
                "{id}: one alarm on its in-progress conflicts"
            );
        }
        for (_, event) in function["Properties"]["Events"]
            .as_mapping()
            .into_iter()
            .flatten()
        {
            if event["Type"].as_str() == Some("SQS") {
                let queue = target(&event["Properties"]["Queue"]).expect("the queue");
                assert_eq!(
                    alarms_on(
                        &template,
                        "AWS/SQS",
                        "ApproximateAgeOfOldestMessage",
                        "QueueName",
                        &queue
                    ),
                    1,
                    "{id}: one alarm on the age of {queue}'s oldest message"
                );
            }
            if event["Type"].as_str() == Some("Kinesis") {
                assert_eq!(
                    alarms_on(&template, "AWS/Lambda", "IteratorAge", "FunctionName", id),
                    1,
                    "{id}: one alarm on how far behind its stream it is"
                );
            }
        }
    }
    let dlqs = dead_letter_queues(&template);
    assert!(dlqs.len() >= 5, "{dlqs:?}");
    for dlq in dlqs {
        assert_eq!(
            alarms_on(
                &template,
                "AWS/SQS",
                "ApproximateNumberOfMessagesVisible",
                "QueueName",
                &dlq
            ),
            1,
            "one alarm on messages in {dlq}"
        );
    }
}

/// The logical id of the idempotency table (what `IDEMPOTENCY_TABLE` names).
fn idempotency_table(template: &Value) -> String {
    let table = &template["Globals"]["Function"]["Environment"]["Variables"]
        [lambda_idempotency::env::TABLE_ENV];
    reference(table)
        .expect("IDEMPOTENCY_TABLE is a !Ref to the table")
        .to_owned()
}

#[test]
fn the_idempotency_table_and_the_business_tables_are_retained_protected_and_recoverable() {
    let template = template();
    let records_table = idempotency_table(&template);
    let tables = resources_of(&template, "AWS::DynamoDB::Table");
    assert!(
        tables.iter().any(|(id, _)| *id == records_table),
        "{records_table} is a table"
    );
    for (id, table) in tables {
        assert_eq!(table["DeletionPolicy"].as_str(), Some("Retain"), "{id}");
        assert_eq!(
            table["UpdateReplacePolicy"].as_str(),
            Some("Retain"),
            "{id}"
        );
        let props = &table["Properties"];
        assert_eq!(
            props["DeletionProtectionEnabled"].as_bool(),
            Some(true),
            "{id}"
        );
        assert_eq!(
            props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"].as_bool(),
            Some(true),
            "{id}"
        );
    }
}

/// `(condition, statement)` for every statement of every role's policies,
/// `condition` being the `!If` that guards it (if any).
fn statements(template: &Value) -> Vec<(&str, Option<&str>, &Value)> {
    let mut out = Vec::new();
    for (role, resource) in resources_of(template, "AWS::IAM::Role") {
        for policy in resource["Properties"]["Policies"]
            .as_sequence()
            .into_iter()
            .flatten()
        {
            for statement in policy["PolicyDocument"]["Statement"]
                .as_sequence()
                .into_iter()
                .flatten()
            {
                match intrinsic(statement) {
                    Some((name, args)) if name == "If" => {
                        let condition = args[0].as_str();
                        for branch in [&args[1], &args[2]] {
                            if reference(branch) != Some("AWS::NoValue") {
                                out.push((role, condition, branch));
                            }
                        }
                    }
                    _ => out.push((role, None, statement)),
                }
            }
        }
    }
    out
}

fn actions(statement: &Value) -> Vec<&str> {
    match &statement["Action"] {
        Value::String(s) => vec![s.as_str()],
        Value::Sequence(s) => s.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn claim_then_complete_is_not_deployable_and_only_releasing_modes_may_delete() {
    let template = template();
    let parameter = &template["Parameters"]["PaymentsCommitMode"];
    let allowed: Vec<&str> = parameter["AllowedValues"]
        .as_sequence()
        .expect("AllowedValues")
        .iter()
        .map(|v| v.as_str().expect("a mode"))
        .collect();
    assert!(allowed.contains(&parameter["Default"].as_str().expect("a default")));
    for value in &allowed {
        let mode = lambda_idempotency::CommitMode::parse(value)
            .unwrap_or_else(|| panic!("{value} is not a mode payments reads"));
        assert_ne!(
            mode,
            lambda_idempotency::CommitMode::ClaimThenComplete,
            "{value}: a crash between the credit and the completion credits twice"
        );
    }
    // The code keeps the mode (benchmarks, tests).
    assert_eq!(
        lambda_idempotency::CommitMode::parse("claim-then-complete"),
        Some(lambda_idempotency::CommitMode::ClaimThenComplete)
    );

    // DeleteItem on the idempotency table: a release, which only a mode that claims
    // before the effect does. Granted only under a condition that holds
    // exactly in such modes.
    let records_table = idempotency_table(&template);
    let mut conditional = 0;
    let mut pinned_releasing = 0;
    for (role, condition, statement) in statements(&template) {
        if target(&statement["Resource"]).as_deref() != Some(records_table.as_str())
            || !actions(statement).contains(&"dynamodb:DeleteItem")
        {
            continue;
        }
        let Some(condition) = condition else {
            // A function whose mode is pinned to one that releases (not a
            // parameter) may delete unconditionally.
            let pinned = pinned_mode(&template, role).unwrap_or_else(|| {
                panic!("{role} may delete idempotency records in every mode: grant it only in modes that release")
            });
            assert_eq!(
                pinned,
                lambda_idempotency::CommitMode::Fenced,
                "{role}: DeleteItem granted, but its function's pinned mode does not release"
            );
            pinned_releasing += 1;
            continue;
        };
        let (equals, args) = intrinsic(&template["Conditions"][condition])
            .unwrap_or_else(|| panic!("{condition}: an !Equals"));
        assert_eq!(equals, "Equals", "{condition}");
        assert_eq!(
            reference(&args[0]),
            Some("PaymentsCommitMode"),
            "{condition}"
        );
        let mode = lambda_idempotency::CommitMode::parse(args[1].as_str().expect("a mode"))
            .expect("a mode");
        assert_eq!(
            mode,
            lambda_idempotency::CommitMode::Fenced,
            "{condition}: the mode that releases"
        );
        conditional += 1;
    }
    assert_eq!(
        conditional, 1,
        "fenced payments may still release its claims"
    );
    assert_eq!(pinned_releasing, 1, "payments-api (fenced) releases");
}

/// The commit mode a role's function pins in its environment
/// (`PAYMENTS_COMMIT_MODE` as a literal, not a parameter).
fn pinned_mode(template: &Value, role: &str) -> Option<lambda_idempotency::CommitMode> {
    resources_of(template, "AWS::Serverless::Function")
        .into_iter()
        .find(|(_, function)| target(&function["Properties"]["Role"]).as_deref() == Some(role))
        .and_then(|(_, function)| {
            function["Properties"]["Environment"]["Variables"]["PAYMENTS_COMMIT_MODE"].as_str()
        })
        .and_then(lambda_idempotency::CommitMode::parse)
}

#[test]
fn log_groups_are_named_after_their_functions() {
    let template = template();
    let resources = &template["Resources"];
    for (id, function) in resources_of(&template, "AWS::Serverless::Function") {
        let props = &function["Properties"];
        let binary = function["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .unwrap_or_else(|| panic!("{id}: BuildProperties.Binary"));
        let name = sub(&props["FunctionName"]).unwrap_or_else(|| panic!("{id}: a FunctionName"));
        assert_eq!(name, format!("${{AWS::StackName}}-{binary}"), "{id}");
        let group = reference(&props["LoggingConfig"]["LogGroup"])
            .unwrap_or_else(|| panic!("{id}: LoggingConfig.LogGroup is a !Ref"));
        let group = &resources[group];
        assert_eq!(group["Type"].as_str(), Some("AWS::Logs::LogGroup"), "{id}");
        assert_eq!(
            sub(&group["Properties"]["LogGroupName"]),
            Some(format!("/aws/lambda/{name}").as_str()),
            "{id}: its logs where Lambda would put them"
        );
        assert!(
            group["Properties"].get("RetentionInDays").is_some(),
            "{id}: logs expire"
        );
    }
}

#[test]
fn the_dashboard_shows_every_function() {
    let template = template();
    let dashboards = resources_of(&template, "AWS::CloudWatch::Dashboard");
    let [(_, dashboard)] = dashboards.as_slice() else {
        panic!("one dashboard");
    };
    let body = sub(&dashboard["Properties"]["DashboardBody"]).expect("a !Sub body");
    // Every ${X} or ${X.Attr} names a resource, parameter or pseudo parameter.
    let mut rest = body;
    while let Some(start) = rest.find("${") {
        let end = rest[start..].find('}').expect("closed ${") + start;
        let name = &rest[start + 2..end];
        let id = name.split('.').next().unwrap_or(name);
        assert!(
            id.starts_with("AWS::")
                || template["Resources"].get(id).is_some()
                || template["Parameters"].get(id).is_some(),
            "${{{name}}} names nothing"
        );
        rest = &rest[end..];
    }
    let body: serde_json::Value = serde_json::from_str(body).expect("the body is JSON");
    let widgets = body["widgets"].as_array().expect("widgets");
    // Each widget's metrics, with "." expanded from the row above.
    let mut rows: Vec<Vec<String>> = Vec::new();
    for widget in widgets {
        let mut previous: Vec<String> = Vec::new();
        for metric in widget["properties"]["metrics"].as_array().expect("metrics") {
            let row: Vec<String> = metric
                .as_array()
                .expect("a metric row")
                .iter()
                .filter_map(serde_json::Value::as_str)
                .enumerate()
                .map(|(i, s)| {
                    if s == "." {
                        previous.get(i).cloned().unwrap_or_default()
                    } else {
                        s.to_owned()
                    }
                })
                .collect();
            previous.clone_from(&row);
            rows.push(row);
        }
    }
    let shows = |namespace: &str, metric: &str, dimension: &str, value: String| {
        rows.iter().any(|r| {
            r.len() >= 4
                && r[0] == namespace
                && r[1] == metric
                && r[2] == dimension
                && r[3] == value
        })
    };
    for (id, function) in resources_of(&template, "AWS::Serverless::Function") {
        for metric in ["Invocations", "Errors", "Throttles"] {
            assert!(
                shows("AWS/Lambda", metric, "FunctionName", format!("${{{id}}}")),
                "{id}: {metric}"
            );
        }
        let props = &function["Properties"];
        if props["Environment"]["Variables"]
            .get(lambda_idempotency::env::EXPIRES_AFTER_ENV)
            .is_some()
        {
            for metric in [
                "Processed",
                "Replayed",
                "Failed",
                "Rejected",
                "InProgressConflict",
            ] {
                assert!(
                    shows(
                        lambda_idempotency::metrics::NAMESPACE,
                        metric,
                        "service",
                        format!("${{{id}}}")
                    ),
                    "{id}: {metric}"
                );
            }
        }
        // A function that parks stream records shows how many.
        if props["Environment"]["Variables"]
            .get(lambda_idempotency::parking::PARKING_QUEUE_ENV)
            .is_some()
        {
            assert!(
                shows(
                    lambda_idempotency::metrics::NAMESPACE,
                    "Parked",
                    "service",
                    format!("${{{id}}}")
                ),
                "{id}: Parked"
            );
        }
        for (_, event) in props["Events"].as_mapping().into_iter().flatten() {
            if event["Type"].as_str() == Some("SQS") {
                let queue = target(&event["Properties"]["Queue"]).expect("the queue");
                assert!(
                    shows(
                        "AWS/SQS",
                        "ApproximateAgeOfOldestMessage",
                        "QueueName",
                        format!("${{{queue}.QueueName}}")
                    ),
                    "{id}: the age of {queue}'s oldest message"
                );
            }
            if event["Type"].as_str() == Some("Kinesis") {
                assert!(
                    shows(
                        "AWS/Lambda",
                        "IteratorAge",
                        "FunctionName",
                        format!("${{{id}}}")
                    ),
                    "{id}: its iterator age"
                );
            }
        }
    }
    for dlq in dead_letter_queues(&template) {
        assert!(
            shows(
                "AWS/SQS",
                "ApproximateNumberOfMessagesVisible",
                "QueueName",
                format!("${{{dlq}.QueueName}}")
            ),
            "{dlq}'s depth"
        );
    }
}

#[test]
fn samconfig_builds_and_deploys_one_architecture() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../samconfig.toml"))
        .expect("samconfig.toml");
    let config: toml::Table = text.parse().expect("samconfig.toml parses");
    let template = template();
    let allowed: Vec<&str> = template["Parameters"]["Architecture"]["AllowedValues"]
        .as_sequence()
        .expect("Architecture's AllowedValues")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let macros = template["Transform"].as_sequence().is_some_and(|t| {
        t.iter()
            .any(|t| t.as_str() == Some("AWS::LanguageExtensions"))
    });
    let mut envs = 0;
    for (env, commands) in &config {
        let Some(commands) = commands.as_table() else {
            continue; // version = 0.1
        };
        let parameters = |command: &str| commands.get(command).and_then(|c| c.get("parameters"));
        let overrides = parameters("global")
            .and_then(|p| p.get("parameter_overrides"))
            .and_then(toml::Value::as_str)
            .unwrap_or_else(|| panic!("[{env}.global.parameters] sets parameter_overrides"));
        let architecture = overrides
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("Architecture="))
            .unwrap_or_else(|| panic!("{env}: the overrides set Architecture"));
        assert!(allowed.contains(&architecture), "{env}: {architecture}");
        for command in ["build", "deploy", "sync"] {
            assert!(
                parameters(command)
                    .and_then(|p| p.get("parameter_overrides"))
                    .is_none(),
                "[{env}.{command}.parameters] sets its own parameter_overrides: build and \
                 deploy could disagree on the architecture"
            );
        }
        let build = parameters("build").unwrap_or_else(|| panic!("{env}: build parameters"));
        assert_eq!(
            build.get("beta_features").and_then(toml::Value::as_bool),
            Some(true),
            "{env}: rust-cargolambda is a beta feature"
        );
        let deploy = parameters("deploy").unwrap_or_else(|| panic!("{env}: deploy parameters"));
        let capabilities = deploy
            .get("capabilities")
            .and_then(toml::Value::as_str)
            .unwrap_or_default();
        assert!(
            capabilities.contains("CAPABILITY_IAM"),
            "{env}: {capabilities}"
        );
        // A macro CloudFormation runs server-side needs its acknowledgement.
        if macros {
            assert!(
                capabilities.contains("CAPABILITY_AUTO_EXPAND"),
                "{env}: the template lists AWS::LanguageExtensions: {capabilities}"
            );
        }
        envs += 1;
    }
    assert!(envs >= 2, "default and arm64");
}

// ------------------------------------------------------------------------
// Key scopes: each function reads and writes only its own records.

/// The variable the relay reads its allowlist from.
const OUTBOX_ALLOWLIST_ENV: &str = outbox_relay::ALLOWLIST_ENV;

/// Item actions whose request always carries the items' partition keys, so
/// that `ForAllValues` on `dynamodb:LeadingKeys` checks every one of them
/// (a request without keys, e.g. a `Scan`, satisfies `ForAllValues`
/// vacuously).
const KEYED_ACTIONS: [&str; 8] = [
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchGetItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:Query",
];

/// Table actions that read the table's description, never an item: the
/// store's check at start (`DescribeTable`: replicas and multi-Region
/// consistency). Granted unscoped, alone in their statement.
const METADATA_ACTIONS: [&str; 1] = ["dynamodb:DescribeTable"];

/// What the relay's stream mapping calls on the table's stream.
const STREAM_ACTIONS: [&str; 4] = [
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
];

/// A template value as text: a literal as it is, `!Ref X` as `ref:X`,
/// `!GetAtt X.Y` as `getatt:X.Y`, `!FindInMap` looked up in `Mappings`,
/// `!Sub` with its variables (then `${X}` and `${X.Y}` as above) and
/// `!Join` resolved. `None` for anything else.
fn resolve(template: &Value, value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Tagged(_) => {
            let (name, args) = intrinsic(value)?;
            match name.as_str() {
                "Ref" => Some(format!("ref:{}", args.as_str()?)),
                "GetAtt" => Some(format!(
                    "getatt:{}",
                    match args {
                        Value::String(s) => s.clone(),
                        Value::Sequence(parts) => parts
                            .iter()
                            .map(Value::as_str)
                            .collect::<Option<Vec<_>>>()?
                            .join("."),
                        _ => return None,
                    }
                )),
                "FindInMap" => {
                    let [map, top, second] = args.as_sequence()?.as_slice() else {
                        return None;
                    };
                    let (map, top, second) = (
                        resolve(template, map)?,
                        resolve(template, top)?,
                        resolve(template, second)?,
                    );
                    template["Mappings"][map.as_str()][top.as_str()][second.as_str()]
                        .as_str()
                        .map(str::to_owned)
                }
                "Sub" => {
                    let (text, vars) = match args {
                        Value::String(s) => (s.as_str(), None),
                        Value::Sequence(parts) => (parts.first()?.as_str()?, parts.get(1)),
                        _ => return None,
                    };
                    let mut out = String::new();
                    let mut rest = text;
                    while let Some(start) = rest.find("${") {
                        out.push_str(&rest[..start]);
                        let end = rest[start..].find('}')? + start;
                        let name = &rest[start + 2..end];
                        match vars.and_then(|v| v.get(name)) {
                            Some(var) => out.push_str(&resolve(template, var)?),
                            None if name.contains('.') => out.push_str(&format!("getatt:{name}")),
                            None => out.push_str(&format!("ref:{name}")),
                        }
                        rest = &rest[end + 1..];
                    }
                    out.push_str(rest);
                    Some(out)
                }
                "Join" => {
                    let [separator, items] = args.as_sequence()?.as_slice() else {
                        return None;
                    };
                    let items = items
                        .as_sequence()?
                        .iter()
                        .map(|item| resolve(template, item))
                        .collect::<Option<Vec<_>>>()?;
                    Some(items.join(separator.as_str()?))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// One value or a list of them, as a list.
fn one_or_many(value: &Value) -> Vec<&Value> {
    match value {
        Value::Sequence(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// The functions whose execution role is `role`.
fn functions_of_role<'a>(template: &'a Value, role: &str) -> Vec<(&'a str, &'a Value)> {
    resources_of(template, "AWS::Serverless::Function")
        .into_iter()
        .filter(|(_, f)| target(&f["Properties"]["Role"]).as_deref() == Some(role))
        .collect()
}

/// The key prefix a function is given (its `IDEMPOTENCY_KEY_PREFIX`).
fn function_prefix(template: &Value, function: &Value) -> Option<String> {
    function["Properties"]["Environment"]["Variables"]
        .get(lambda_idempotency::env::PREFIX_ENV)
        .and_then(|v| resolve(template, v))
}

/// Every grant on the idempotency table that is not scoped to the record
/// ids of the role's function (`ForAllValues:StringLike` on
/// `dynamodb:LeadingKeys` = `["<its prefix>#*"]`), every action on it whose
/// request may carry no key, every stream grant beyond reading it, and every
/// business-table grant scoped as if its keys were record ids.
fn key_scope_problems(template: &Value) -> Vec<String> {
    let records_table = idempotency_table(template);
    let table = [
        format!("getatt:{records_table}.Arn"),
        format!("ref:{records_table}"),
    ];
    let stream = format!("getatt:{records_table}.StreamArn");
    let mut problems = Vec::new();
    for (role, _, statement) in statements(template) {
        if statement["Effect"].as_str() != Some("Allow") {
            continue;
        }
        let sid = statement["Sid"].as_str().unwrap_or("(no Sid)");
        let resources: Vec<String> = one_or_many(&statement["Resource"])
            .into_iter()
            .map(|r| resolve(template, r).unwrap_or_else(|| format!("{r:?}")))
            .collect();
        let acts = actions(statement);
        let dynamodb: Vec<&str> = acts
            .iter()
            .copied()
            .filter(|a| a.starts_with("dynamodb:") || *a == "*")
            .collect();
        let on_table = |r: &String| r == "*" || table.iter().any(|t| r.starts_with(t.as_str()));
        let scoped = statement["Condition"]["ForAllValues:StringLike"].get("dynamodb:LeadingKeys");
        if dynamodb.is_empty() {
            continue;
        }
        if resources.contains(&stream) {
            for action in &dynamodb {
                if !STREAM_ACTIONS.contains(action) {
                    problems.push(format!("{role}/{sid}: {action} on the table's stream"));
                }
            }
        }
        if !resources.iter().any(on_table) {
            if scoped.is_some() && resources.iter().any(|r| *r != stream) {
                problems.push(format!(
                    "{role}/{sid}: a business table scoped by dynamodb:LeadingKeys: {resources:?}"
                ));
            }
            continue;
        }
        if resources.iter().any(|r| !on_table(r)) {
            problems.push(format!(
                "{role}/{sid}: the idempotency table granted together with {resources:?}: one \
                 scope cannot fit both"
            ));
        }
        if dynamodb.iter().all(|a| METADATA_ACTIONS.contains(a)) {
            if scoped.is_some() {
                problems.push(format!(
                    "{role}/{sid}: {dynamodb:?} carries no keys: a LeadingKeys scope on it \
                     would pass vacuously"
                ));
            }
            continue;
        }
        for action in &dynamodb {
            if !KEYED_ACTIONS.contains(action) {
                problems.push(format!(
                    "{role}/{sid}: {action} on the idempotency table: a request without keys \
                     passes ForAllValues on dynamodb:LeadingKeys"
                ));
            }
        }
        let prefixes: Vec<Option<String>> = functions_of_role(template, role)
            .into_iter()
            .map(|(_, f)| function_prefix(template, f))
            .collect();
        let prefix = match prefixes.as_slice() {
            [Some(prefix)] => prefix,
            [None] => {
                problems.push(format!(
                    "{role}/{sid}: its function has no {} to scope the table by",
                    lambda_idempotency::env::PREFIX_ENV
                ));
                continue;
            }
            other => {
                problems.push(format!(
                    "{role}/{sid}: grants the idempotency table to {} functions",
                    other.len()
                ));
                continue;
            }
        };
        let Some(scope) = scoped else {
            problems.push(format!(
                "{role}/{sid}: {dynamodb:?} on the idempotency table not scoped by \
                 ForAllValues:StringLike dynamodb:LeadingKeys"
            ));
            continue;
        };
        let scope: Vec<Option<String>> = one_or_many(scope)
            .into_iter()
            .map(|v| resolve(template, v))
            .collect();
        let expected = format!("{prefix}#*");
        if scope != [Some(expected.clone())] {
            problems.push(format!(
                "{role}/{sid}: scoped to {scope:?}, but its function's prefix is {prefix:?} \
                 (scope {expected:?})"
            ));
        }
    }
    problems
}

#[test]
fn every_grant_on_the_idempotency_table_is_scoped_to_its_functions_prefix() {
    let template = template();
    assert_eq!(
        key_scope_problems(&template),
        Vec::<String>::new(),
        "grants on the idempotency table"
    );
    // Each writer's prefix is valid and is its code's own: a new prefix
    // would forget every record (messages in flight would apply again).
    let own = [
        ("PaymentsFunction", payments::App::config().prefix),
        ("OrdersFunction", orders::RECORD_PREFIX.to_owned()),
        ("InventoryFunction", inventory::App::config().prefix),
        ("PaymentsApiFunction", payments_api::App::config().prefix),
        ("LedgerFunction", ledger::App::config().prefix),
    ];
    let mut prefixes = Vec::new();
    for (id, function) in resources_of(&template, "AWS::Serverless::Function") {
        let Some(prefix) = function_prefix(&template, function) else {
            // Only the relay has no records of its own.
            assert_eq!(id, "OutboxRelayFunction", "{id} has no key prefix");
            continue;
        };
        lambda_idempotency::config::check_prefix(&prefix).unwrap_or_else(|e| panic!("{id}: {e}"));
        let (_, code) = own
            .iter()
            .find(|(f, _)| *f == id)
            .unwrap_or_else(|| panic!("{id}: a function this test does not know"));
        assert_eq!(
            &prefix, code,
            "{id}: the template's prefix is not its code's"
        );
        prefixes.push(prefix);
    }
    assert_eq!(prefixes.len(), own.len(), "every writer has its prefix");
    prefixes.sort();
    prefixes.dedup();
    assert_eq!(prefixes.len(), own.len(), "no two writers share a prefix");

    // Every writer's role has grants on the table, and all are scoped
    // (counted: the check above did not pass by finding none).
    let records_table = idempotency_table(&template);
    let mut scoped_roles: Vec<&str> = statements(&template)
        .into_iter()
        .filter(|(_, _, s)| {
            one_or_many(&s["Resource"])
                .into_iter()
                .any(|r| resolve(&template, r) == Some(format!("getatt:{records_table}.Arn")))
        })
        // The table's description carries no keys to scope by.
        .filter(|(_, _, s)| actions(s) != METADATA_ACTIONS)
        .map(|(role, _, s)| {
            assert!(
                s["Condition"]["ForAllValues:StringLike"]
                    .get("dynamodb:LeadingKeys")
                    .is_some(),
                "{role}"
            );
            role
        })
        .collect();
    scoped_roles.sort_unstable();
    scoped_roles.dedup();
    assert_eq!(
        scoped_roles,
        [
            "InventoryRole",
            "LedgerRole",
            "OrdersRole",
            "PaymentsApiRole",
            "PaymentsRole"
        ]
    );
    // The relay only reads the stream: no grant on the table itself.
    for (role, _, statement) in statements(&template) {
        if role == "OutboxRelayRole" {
            for r in one_or_many(&statement["Resource"]) {
                assert_ne!(
                    resolve(&template, r),
                    Some(format!("getatt:{records_table}.Arn")),
                    "the relay may not touch records"
                );
            }
        }
    }
}

/// The check itself: a grant without the scope, a scope of another
/// function's prefix, an unkeyed action, a grant on the stream beyond
/// reading it and a scoped business table are caught; the scoped grant is
/// not.
#[test]
fn an_unscoped_or_misscoped_grant_is_caught() {
    let text = r##"
Mappings:
  KeyPrefixes:
    A: {Prefix: a.handler}
    B: {Prefix: b.handler}
Globals:
  Function:
    Environment:
      Variables:
        IDEMPOTENCY_TABLE: !Ref Ledger
Resources:
  Ledger:
    Type: AWS::DynamoDB::Table
  Accounts:
    Type: AWS::DynamoDB::Table
  FnA:
    Type: AWS::Serverless::Function
    Properties:
      Role: !GetAtt RoleA.Arn
      Environment:
        Variables:
          IDEMPOTENCY_KEY_PREFIX: !FindInMap [KeyPrefixes, A, Prefix]
  RoleA:
    Type: AWS::IAM::Role
    Properties:
      Policies:
        - PolicyDocument:
            Statement:
              - Sid: Scoped
                Effect: Allow
                Action: [dynamodb:PutItem, dynamodb:BatchGetItem]
                Resource: !GetAtt Ledger.Arn
                Condition:
                  ForAllValues:StringLike:
                    dynamodb:LeadingKeys:
                      - !Sub ["${P}#*", {P: !FindInMap [KeyPrefixes, A, Prefix]}]
              - Sid: Unscoped
                Effect: Allow
                Action: dynamodb:DeleteItem
                Resource: !GetAtt Ledger.Arn
              - !If
                - SomeMode
                - Sid: OtherPrefix
                  Effect: Allow
                  Action: dynamodb:UpdateItem
                  Resource: !GetAtt Ledger.Arn
                  Condition:
                    ForAllValues:StringLike:
                      dynamodb:LeadingKeys:
                        - !Sub ["${P}#*", {P: !FindInMap [KeyPrefixes, B, Prefix]}]
                - !Ref AWS::NoValue
              - Sid: NoSeparator
                Effect: Allow
                Action: dynamodb:GetItem
                Resource: !GetAtt Ledger.Arn
                Condition:
                  ForAllValues:StringLike:
                    dynamodb:LeadingKeys: [a.handler*]
              - Sid: Unkeyed
                Effect: Allow
                Action: dynamodb:Scan
                Resource: !GetAtt Ledger.Arn
                Condition:
                  ForAllValues:StringLike:
                    dynamodb:LeadingKeys: ["a.handler#*"]
              - Sid: StreamWrite
                Effect: Allow
                Action: [dynamodb:GetRecords, dynamodb:PutItem]
                Resource: !GetAtt Ledger.StreamArn
              - Sid: ScopedBusiness
                Effect: Allow
                Action: dynamodb:UpdateItem
                Resource: !GetAtt Accounts.Arn
                Condition:
                  ForAllValues:StringLike:
                    dynamodb:LeadingKeys: ["a.handler#*"]
              - Sid: Business
                Effect: Allow
                Action: dynamodb:UpdateItem
                Resource: !GetAtt Accounts.Arn
"##;
    let t: Value = serde_yaml::from_str(text).unwrap();
    let problems = key_scope_problems(&t);
    let sids: Vec<&str> = problems
        .iter()
        .map(|p| p.split(':').next().unwrap())
        .collect();
    assert_eq!(
        sids,
        [
            "RoleA/Unscoped",
            "RoleA/OtherPrefix",
            "RoleA/NoSeparator",
            "RoleA/Unkeyed",
            "RoleA/StreamWrite",
            "RoleA/ScopedBusiness",
        ],
        "{problems:#?}"
    );
    assert!(
        problems[1].contains("\"b.handler#*\"") && problems[1].contains("\"a.handler\""),
        "{}",
        problems[1]
    );

    // The same two failure modes in the real template: a grant's scope
    // removed, and a scope naming another function's prefix.
    let mut real = template();
    let scope = records_statement(&mut real, "PaymentsApiRole")
        .remove("Condition")
        .unwrap();
    let problems = key_scope_problems(&real);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].starts_with("PaymentsApiRole/IdempotencyRecords"));
    assert!(problems[0].contains("not scoped"), "{}", problems[0]);

    let mut other = scope;
    let text = serde_yaml::to_string(&other)
        .unwrap()
        .replace("PaymentsApi", "Payments");
    other = serde_yaml::from_str(&text).unwrap();
    records_statement(&mut real, "PaymentsApiRole").insert("Condition".into(), other);
    let problems = key_scope_problems(&real);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].contains("\"payments.credit#*\"")
            && problems[0].contains("\"payments-api.create\""),
        "{}",
        problems[0]
    );
}

/// The `IdempotencyRecords` statement of `role`'s first policy.
fn records_statement<'a>(template: &'a mut Value, role: &str) -> &'a mut serde_yaml::Mapping {
    template["Resources"][role]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_sequence_mut()
        .unwrap()
        .iter_mut()
        .find(|s| s["Sid"].as_str() == Some("IdempotencyRecords"))
        .unwrap()
        .as_mapping_mut()
        .unwrap()
}

// ------------------------------------------------------------------------
// The relay's allowlist: each writer's prefix, to the destinations it is
// configured to write into its outbox entries.

/// The destinations (queues, buses) a function's environment names, as
/// [`resolve`] writes them.
fn destinations_of(template: &Value, function: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (name, value) in function["Properties"]["Environment"]["Variables"]
        .as_mapping()
        .into_iter()
        .flatten()
    {
        // The parking queue is the function's own dead-letter queue, sent
        // to directly, not through the outbox.
        if matches!(
            name.as_str(),
            Some(
                lambda_idempotency::env::PREFIX_ENV
                    | lambda_idempotency::parking::PARKING_QUEUE_ENV
            )
        ) {
            continue;
        }
        let Some(id) = target(value) else { continue };
        let kind = template["Resources"][id.as_str()]["Type"].as_str();
        if matches!(kind, Some("AWS::SQS::Queue" | "AWS::Events::EventBus")) {
            out.extend(resolve(template, value));
        }
    }
    out
}

/// How the relay's `OUTBOX_ALLOWLIST` differs from what the writers are
/// configured to publish: the value is a JSON object of key prefix to a
/// list of destinations, each writer's prefix with exactly the queues and
/// buses in its environment, every allowlisted destination one the relay's
/// role may send to.
fn allowlist_problems(template: &Value) -> Vec<String> {
    let relays: Vec<_> = resources_of(template, "AWS::Serverless::Function")
        .into_iter()
        .filter(|(_, f)| {
            f["Properties"]["Environment"]["Variables"]
                .get(OUTBOX_ALLOWLIST_ENV)
                .is_some()
        })
        .collect();
    let [(relay_id, relay)] = relays.as_slice() else {
        return vec![format!(
            "{} relays set {OUTBOX_ALLOWLIST_ENV}",
            relays.len()
        )];
    };
    let Some(text) = resolve(
        template,
        &relay["Properties"]["Environment"]["Variables"][OUTBOX_ALLOWLIST_ENV],
    ) else {
        return vec![format!(
            "{relay_id}: {OUTBOX_ALLOWLIST_ENV} does not resolve"
        )];
    };
    let allowlist: BTreeMap<String, Vec<String>> = match serde_json::from_str(&text) {
        Ok(a) => a,
        Err(e) => {
            return vec![format!(
                "{relay_id}: {OUTBOX_ALLOWLIST_ENV} is not a JSON object of lists: {e}: {text}"
            )];
        }
    };
    let mut problems = Vec::new();
    let mut expected: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (id, function) in resources_of(template, "AWS::Serverless::Function") {
        let destinations = destinations_of(template, function);
        match function_prefix(template, function) {
            Some(prefix) if !destinations.is_empty() => {
                expected.entry(prefix).or_default().extend(destinations);
            }
            None if !destinations.is_empty() && id != *relay_id => {
                problems.push(format!("{id}: publishes without a key prefix"));
            }
            _ => {}
        }
    }
    for (prefix, listed) in &allowlist {
        let set: BTreeSet<String> = listed.iter().cloned().collect();
        if set.len() != listed.len() {
            problems.push(format!("{prefix}: a destination listed twice"));
        }
        match expected.get(prefix) {
            None => problems.push(format!(
                "{prefix}: allowed to publish, but no writer has this prefix and a destination"
            )),
            Some(wanted) if *wanted != set => problems.push(format!(
                "{prefix}: allowed {set:?}, but its writer publishes to {wanted:?}"
            )),
            Some(_) => {}
        }
    }
    for prefix in expected.keys() {
        if !allowlist.contains_key(prefix) {
            problems.push(format!("{prefix}: a writer with destinations left out"));
        }
    }
    // The relay's role may send to every allowlisted queue.
    let role = target(&relay["Properties"]["Role"]).unwrap_or_default();
    let sendable: BTreeSet<String> = statements(template)
        .into_iter()
        .filter(|(r, _, s)| *r == role && actions(s).contains(&"sqs:SendMessage"))
        .flat_map(|(_, _, s)| one_or_many(&s["Resource"]).into_iter().filter_map(target))
        .collect();
    for destination in allowlist.values().flatten() {
        if let Some(queue) = destination.strip_prefix("ref:")
            && template["Resources"][queue]["Type"].as_str() == Some("AWS::SQS::Queue")
            && !sendable.contains(queue)
        {
            problems.push(format!(
                "{queue}: allowlisted, but the relay may not send to it"
            ));
        }
    }
    problems
}

#[test]
fn the_relay_allows_each_writer_exactly_its_destinations() {
    let template = template();
    assert_eq!(allowlist_problems(&template), Vec::<String>::new());
    // Not vacuous: orders' notifications queue, under orders' prefix.
    let orders = &template["Resources"]["OrdersFunction"];
    let queue = resolve(
        &template,
        &orders["Properties"]["Environment"]["Variables"][orders::NOTIFICATIONS_QUEUE_URL_ENV],
    )
    .unwrap();
    assert_eq!(queue, "ref:NotificationsQueue");
    let text = resolve(
        &template,
        &template["Resources"]["OutboxRelayFunction"]["Properties"]["Environment"]["Variables"]
            [OUTBOX_ALLOWLIST_ENV],
    )
    .unwrap();
    let allowlist: BTreeMap<String, Vec<String>> = serde_json::from_str(&text).unwrap();
    assert_eq!(
        allowlist,
        BTreeMap::from([(orders::RECORD_PREFIX.to_owned(), vec![queue])])
    );
    // The relay's own parser takes it: with the queue's URL for its `Ref`,
    // orders' entries to it are permitted, another writer's are not.
    let url = "https://sqs.us-east-1.amazonaws.com/123456789012/s-NotificationsQueue-1.fifo";
    let deployed = outbox_relay::Allowlist::parse(&text.replace("ref:NotificationsQueue", url))
        .expect("the relay reads the template's allowlist");
    let to_queue = outbox_relay::Destination::Sqs {
        queue_url: url.to_owned(),
    };
    let orders_key = format!("{}#00", orders::RECORD_PREFIX);
    assert_eq!(deployed.permits(&orders_key, &to_queue), Ok(()));
    assert!(deployed.permits("payments.credit#00", &to_queue).is_err());
    // Refused entries are alarmed like poison ones.
    for metric in ["OutboxPoison", "OutboxRefused"] {
        assert_eq!(
            alarms_on(
                &template,
                lambda_idempotency::metrics::NAMESPACE,
                metric,
                "service",
                "OutboxRelayFunction"
            ),
            1,
            "{metric}"
        );
    }
}

/// The check itself: a prefix no writer has, a destination left out or
/// added, a writer left out, and a value that is not JSON are caught.
#[test]
fn a_wrong_allowlist_is_caught() {
    let base = r##"
Mappings:
  KeyPrefixes:
    W: {Prefix: w.handler}
Resources:
  Q:
    Type: AWS::SQS::Queue
  Other:
    Type: AWS::SQS::Queue
  Writer:
    Type: AWS::Serverless::Function
    Properties:
      Environment:
        Variables:
          IDEMPOTENCY_KEY_PREFIX: !FindInMap [KeyPrefixes, W, Prefix]
          QUEUE_URL: !Ref Q
  RelayRole:
    Type: AWS::IAM::Role
    Properties:
      Policies:
        - PolicyDocument:
            Statement:
              - Effect: Allow
                Action: sqs:SendMessage
                Resource: !GetAtt Q.Arn
  Relay:
    Type: AWS::Serverless::Function
    Properties:
      Role: !GetAtt RelayRole.Arn
      Environment:
        Variables:
          OUTBOX_ALLOWLIST: @VALUE@
"##;
    let problems = |allowlist: &str| {
        let t: Value = serde_yaml::from_str(&base.replace("@VALUE@", allowlist)).unwrap();
        allowlist_problems(&t)
    };
    let good = r#"!Sub ['{"${W}": ["${Q}"]}', {W: !FindInMap [KeyPrefixes, W, Prefix]}]"#;
    assert_eq!(problems(good), Vec::<String>::new());
    let other_prefix = r#"!Sub '{"x.handler": ["${Q}"]}'"#;
    let p = problems(other_prefix);
    assert!(
        p.iter()
            .any(|p| p.starts_with("x.handler: allowed to publish")),
        "{p:?}"
    );
    assert!(
        p.iter().any(|p| p.starts_with("w.handler: a writer")),
        "{p:?}"
    );
    let missing = r#"!Sub ['{"${W}": []}', {W: !FindInMap [KeyPrefixes, W, Prefix]}]"#;
    assert!(problems(missing)[0].contains("but its writer publishes to"));
    let extra =
        r#"!Sub ['{"${W}": ["${Q}", "${Other}"]}', {W: !FindInMap [KeyPrefixes, W, Prefix]}]"#;
    let p = problems(extra);
    assert!(
        p.iter().any(|p| p.contains("but its writer publishes to")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|p| p.starts_with("Other: allowlisted, but the relay may not")),
        "{p:?}"
    );
    let not_json = r#"!Sub ['{${W}: [${Q}]}', {W: !FindInMap [KeyPrefixes, W, Prefix]}]"#;
    assert!(problems(not_json)[0].contains("is not a JSON object"));
}

/// `ledger` parks the stream records that can never succeed in a queue of
/// its own: kept 14 days (SQS's longest), messages up to 1 MiB, encrypted,
/// alarmed on any message; its role may send to that queue and nothing else
/// may.
#[test]
fn the_ledger_parks_in_its_own_alarmed_queue() {
    let template = template();
    let ledger = &template["Resources"]["LedgerFunction"]["Properties"];
    let queue = ledger["Environment"]["Variables"]
        .get(lambda_idempotency::parking::PARKING_QUEUE_ENV)
        .and_then(target)
        .expect("ledger has a parking queue");
    let resources = &template["Resources"];
    assert_eq!(retention(resources, &queue), 1_209_600, "14 days");
    let props = &resources[queue.as_str()]["Properties"];
    assert_eq!(
        number(props.get("MaximumMessageSize"), 0),
        lambda_idempotency::parking::SQS_MAX_MESSAGE_BYTES as u64
    );
    assert_eq!(props["SqsManagedSseEnabled"].as_bool(), Some(true));
    assert_eq!(
        alarms_on(
            &template,
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            "QueueName",
            &queue
        ),
        1
    );
    let role = target(&ledger["Role"]).unwrap();
    let senders: Vec<(&str, Vec<String>)> = statements(&template)
        .into_iter()
        .filter(|(_, _, s)| {
            one_or_many(&s["Resource"])
                .into_iter()
                .filter_map(target)
                .any(|r| r == queue)
        })
        .map(|(r, _, s)| (r, actions(s).into_iter().map(str::to_owned).collect()))
        .collect();
    assert_eq!(
        senders,
        [(role.as_str(), vec!["sqs:SendMessage".to_owned()])]
    );
    let parking_statement = statements(&template)
        .into_iter()
        .find(|(r, _, s)| {
            *r == role
                && one_or_many(&s["Resource"])
                    .into_iter()
                    .filter_map(target)
                    .any(|r| r == queue)
        })
        .unwrap()
        .2;
    assert_eq!(
        one_or_many(&parking_statement["Resource"]).len(),
        1,
        "that queue only"
    );
}

// ------------------------------------------------------------------------
// Encryption, access logs, the Valkey cache's capacity.

#[test]
fn every_queue_is_encrypted_at_rest() {
    let template = template();
    let queues = resources_of(&template, "AWS::SQS::Queue");
    assert!(queues.len() >= 8);
    for (id, queue) in queues {
        let props = &queue["Properties"];
        assert!(
            props["SqsManagedSseEnabled"].as_bool() == Some(true)
                || props.get("KmsMasterKeyId").is_some(),
            "{id}: neither SSE-SQS nor a KMS key"
        );
    }
}

#[test]
fn the_http_api_logs_every_request_to_a_retained_group() {
    let template = template();
    let settings = &template["Resources"]["PaymentsHttpApi"]["Properties"]["AccessLogSettings"];
    let group = target(&settings["DestinationArn"]).expect("a log group's Arn");
    let group = &template["Resources"][group.as_str()];
    assert_eq!(group["Type"].as_str(), Some("AWS::Logs::LogGroup"));
    assert!(
        group["Properties"].get("RetentionInDays").is_some(),
        "logs expire"
    );
    let format = settings["Format"].as_str().expect("a format");
    let line: serde_json::Value = serde_json::from_str(format).expect("one JSON line");
    for field in ["requestId", "caller", "routeKey", "status"] {
        assert!(line.get(field).is_some(), "{field}");
    }
    assert!(
        !format.to_ascii_lowercase().contains("idempotency-key"),
        "the key stays out of the logs"
    );
}

/// Any eviction, and data stored past 80 % of the cap the cache is created
/// with (one parameter for both), alarm; both exist only with the cache.
#[test]
fn the_valkey_cache_alarms_before_it_loses_records() {
    let template = template();
    let cache = &template["Resources"]["IdempotencyCache"]["Properties"];
    let cap = reference(&cache["CacheUsageLimits"]["DataStorage"]["Maximum"])
        .expect("the cap is a parameter");
    assert_eq!(template["Parameters"][cap]["Type"].as_str(), Some("Number"));
    assert_eq!(
        cache["CacheUsageLimits"]["DataStorage"]["Unit"].as_str(),
        Some("GB")
    );
    assert_eq!(
        alarms_on(
            &template,
            "AWS/ElastiCache",
            "Evictions",
            "clusterId",
            "IdempotencyCache"
        ),
        1,
        "one alarm on evictions"
    );
    let storage: Vec<_> = resources_of(&template, "AWS::CloudWatch::Alarm")
        .into_iter()
        .filter(|(_, a)| {
            a["Properties"]["Metrics"]
                .as_sequence()
                .into_iter()
                .flatten()
                .any(|m| {
                    let metric = &m["MetricStat"]["Metric"];
                    metric["MetricName"].as_str() == Some("BytesUsedForCache")
                        && metric["Namespace"].as_str() == Some("AWS/ElastiCache")
                        && metric["Dimensions"][0]["Name"].as_str() == Some("clusterId")
                        && target(&metric["Dimensions"][0]["Value"]).as_deref()
                            == Some("IdempotencyCache")
                })
        })
        .collect();
    let [(_, alarm)] = storage.as_slice() else {
        panic!("one alarm on the bytes stored");
    };
    let expression = alarm["Properties"]["Metrics"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m["ReturnData"].as_bool() == Some(true))
        .and_then(|m| sub(&m["Expression"]))
        .expect("a returned !Sub expression");
    assert!(
        expression.contains(&format!("${{{cap}}}")),
        "{expression}: the cap the cache has"
    );
    let threshold = number(alarm["Properties"].get("Threshold"), 0);
    assert!((1..100).contains(&threshold), "{threshold} %");
    for (id, alarm) in resources_of(&template, "AWS::CloudWatch::Alarm") {
        if alarm["Properties"]["Namespace"].as_str() == Some("AWS/ElastiCache")
            || std::ptr::eq(alarm, storage[0].1)
        {
            assert_eq!(alarm["Condition"].as_str(), Some("UseValkey"), "{id}");
        }
    }
}

/// Every role that claims records in the idempotency table (`PutItem` on
/// it) may also describe it: the store checks the table at start
/// (`DescribeTable`, docs/stores/dynamodb.md, "Global tables") and refuses to start without.
#[test]
fn every_role_writing_records_may_describe_the_table() {
    let template = template();
    let records_table = idempotency_table(&template);
    let on_table = |statement: &Value| {
        one_or_many(&statement["Resource"])
            .into_iter()
            .filter_map(|r| resolve(&template, r))
            .any(|r| r == format!("getatt:{records_table}.Arn"))
    };
    let mut writers = std::collections::BTreeSet::new();
    let mut describers = std::collections::BTreeSet::new();
    for (role, _, statement) in statements(&template) {
        if statement["Effect"].as_str() != Some("Allow") || !on_table(statement) {
            continue;
        }
        let acts = actions(statement);
        if acts.contains(&"dynamodb:PutItem") {
            writers.insert(role.to_owned());
        }
        if acts.contains(&"dynamodb:DescribeTable") {
            describers.insert(role.to_owned());
        }
    }
    assert!(writers.len() >= 4, "{writers:?}");
    assert_eq!(
        writers, describers,
        "roles writing records vs describing the table"
    );
}
