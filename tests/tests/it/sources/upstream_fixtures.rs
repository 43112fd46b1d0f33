//! Every event fixture the `aws_lambda_events` package ships
//! (`src/fixtures/*.json` beside its `Cargo.toml`, found through `cargo
//! metadata`): the upstream's own view of what AWS sends. Each fixture of a
//! source we serve runs through its processor on a `MemoryStore`, with a
//! handler typed `Value`, `String` and bytes (`lambda_idempotency::Bytes`),
//! delivered twice: each record executes on the first delivery and replays
//! on the second, or fails (or is parked) alone, both times, with the reason
//! this table gives it. Every other fixture is listed with why it is not
//! served; a fixture in neither list (a new one upstream) fails the
//! catalogue test.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use lambda_idempotency::batch::{Prepare, Processor};
use lambda_idempotency::dynamodb_streams::{DynamoDbRecord, DynamoDbStreams};
use lambda_idempotency::eventbridge::{EventBridgeEvent, EventBridgeProcessor, EventPayload};
use lambda_idempotency::http::{self, Anonymous, Caller, HttpProcessor, HttpRequest, Problem};
use lambda_idempotency::kafka::{Kafka, KafkaMessage};
use lambda_idempotency::kinesis::{Kinesis, KinesisRecord};
use lambda_idempotency::sns::{Notification, Sns};
use lambda_idempotency::sqs::{Sqs, SqsRecord};
use lambda_idempotency::{
    Bytes, Config, HandlerError, Idempotency, KeySelector, MemoryStore, Outcome,
};
use lambda_runtime::LambdaEvent;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The directory of the fixtures: `src/fixtures` beside the manifest of the
/// `aws_lambda_events` package this workspace builds with (asked of `cargo
/// metadata` once per run).
fn fixtures_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(find_fixtures_dir)
}

fn find_fixtures_dir() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).unwrap();
    let manifests: Vec<&str> = (metadata["packages"].as_array().unwrap().iter())
        .filter(|p| p["name"] == "aws_lambda_events")
        .filter_map(|p| p["manifest_path"].as_str())
        .collect();
    let [manifest] = manifests[..] else {
        panic!("one aws_lambda_events package is expected, found {manifests:?}");
    };
    let dir = PathBuf::from(manifest)
        .with_file_name("src")
        .join("fixtures");
    assert!(dir.is_dir(), "{dir:?}");
    dir
}

fn fixture(name: &str) -> Value {
    let path = fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// The type of the handler's record: what the payload is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Value,
    Text,
    Bytes,
}

const KINDS: [Kind; 3] = [Kind::Value, Kind::Text, Kind::Bytes];

/// The batch and single-event sources, and HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Served {
    Sqs,
    Sns,
    Kinesis,
    DynamoDbStreams,
    Kafka,
    EventBridge,
}

/// What becomes of a record on both deliveries, when it does not execute
/// then replay.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// It fails, both times, with a reason holding this text.
    Fails(&'static str),
    /// A copy of an earlier record of its batch (the same id): replayed
    /// both times.
    Duplicate,
    /// Done without running: it can never succeed, so it is parked (and
    /// not delivered again); the reason holds this text.
    Parked(&'static str),
}

/// Record `record` of a fixture, for handlers of `kinds`, as `expect` says.
#[derive(Debug, Clone, Copy)]
struct Except {
    record: usize,
    kinds: &'static [Kind],
    expect: Expect,
}

const ALL: &[Kind] = &KINDS;
const VALUE: &[Kind] = &[Kind::Value];

const fn fails(record: usize, kinds: &'static [Kind], reason: &'static str) -> Except {
    Except {
        record,
        kinds,
        expect: Expect::Fails(reason),
    }
}

/// "Hello World" twice, for a handler that takes JSON.
const KINESIS_TEXT: [Except; 2] = [
    fails(
        0,
        VALUE,
        "data of record 49568167373333333333333333333333333333333333333333333333 is not JSON",
    ),
    // Behind its shard's failure (one partition key, `s1`): skipped, and
    // run when the retry reaches it.
    fails(
        1,
        VALUE,
        "not run: an earlier record it must follow \
         (49568167373333333333333333333333333333333333333333333333) failed",
    ),
];

/// The fixtures of the batch and event sources we serve, and the records
/// that do not execute then replay, with why.
const SERVED: &[(&str, Served, &[Except])] = &[
    // Plain text: a JSON handler cannot take it.
    (
        "example-sqs-event.json",
        Served::Sqs,
        &[fails(0, VALUE, "body of message MessageID_1 is not JSON")],
    ),
    ("example-sqs-event-obj.json", Served::Sqs, &[]),
    // A text Message is its text as a JSON string.
    ("example-sns-event.json", Served::Sns, &[]),
    ("example-sns-event-obj.json", Served::Sns, &[]),
    ("example-sns-event-pascal-case.json", Served::Sns, &[]),
    (
        "example-cloudwatch-alarm-sns-payload-single-metric.json",
        Served::Sns,
        &[],
    ),
    // One notification twice (the same MessageId): the copy replays.
    (
        "example-cloudwatch-alarm-sns-payload-multiple-metrics.json",
        Served::Sns,
        &[Except {
            record: 1,
            kinds: ALL,
            expect: Expect::Duplicate,
        }],
    ),
    ("example-kinesis-event.json", Served::Kinesis, &KINESIS_TEXT),
    (
        "example-kinesis-event-encrypted.json",
        Served::Kinesis,
        &KINESIS_TEXT,
    ),
    // Two changes under one SequenceNumber: the second is another payload
    // under the first's key.
    (
        "example-dynamodb-event.json",
        Served::DynamoDbStreams,
        &[fails(1, ALL, "already used with a different payload")],
    ),
    (
        "example-dynamodb-event-null-items.json",
        Served::DynamoDbStreams,
        &[fails(1, ALL, "already used with a different payload")],
    ),
    // A UUID as text: a record a JSON handler can never take is parked
    // (logged, by default), so its partition goes on.
    (
        "example-kafka-event.json",
        Served::Kafka,
        &[Except {
            record: 0,
            kinds: VALUE,
            expect: Expect::Parked("value of record AWSKafkaTopic-0@0 is not JSON"),
        }],
    ),
    (
        "example-eventbridge-event-obj.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-eventbridge-schedule.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-autoscaling-event-launch-successful.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-autoscaling-event-launch-unsuccessful.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-autoscaling-event-lifecycle-action.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-autoscaling-event-terminate-action.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-autoscaling-event-terminate-successful.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-autoscaling-event-terminate-unsuccessful.json",
        Served::EventBridge,
        &[],
    ),
    // An EventBridge envelope holding `alarmData` where `detail` belongs.
    (
        "example-cloudwatch-alarm-composite-with-suppressor-alarm.json",
        Served::EventBridge,
        &[fails(0, ALL, "not an EventBridge event: missing detail")],
    ),
    (
        "example-codebuild-phase-change.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-codebuild-state-change.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-codedeploy-deployment-event.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-codedeploy-instance-event.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-codepipeline-action-execution-stage-change-event.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-codepipeline-execution-stage-change-event.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-codepipeline-execution-state-change-event.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-ecr-image-scan-event-with-missing-severities.json",
        Served::EventBridge,
        &[],
    ),
    (
        "example-ecr-image-scan-event.json",
        Served::EventBridge,
        &[],
    ),
];

/// What an HTTP fixture, with an `Idempotency-Key` added, is answered under
/// the default callers (`Principal`, then `ApiKeyId`; anonymous refused)
/// and with one shared scope chosen: `None` runs it, `Some(detail)` is a
/// 401 `no-caller` whose detail holds `detail`. `json` says whether its body
/// is JSON (a `Value` handler's parse answers 400 otherwise).
struct HttpCase {
    file: &'static str,
    default: Option<&'static str>,
    shared: Option<&'static str>,
    json: bool,
}

const NO_CALLER: Option<&str> = Some("this request carries no caller identity");
const ALB_NO_CALLER: Option<&str> =
    Some("this Application Load Balancer request carries no caller identity");
const LAMBDA_CONTEXT: Option<&str> = Some("the Lambda authorizer's context");
const JWT_CLAIMS: Option<&str> = Some("the JWT authorizer's claims lack `iss` or `sub`");

const HTTP: &[HttpCase] = &[
    // REST API (1.0): a Lambda authorizer's principalId, IAM's userArn.
    HttpCase {
        file: "example-apigw-request.json",
        default: None,
        shared: None,
        json: true,
    },
    HttpCase {
        file: "example-apigw-request-catch-all.json",
        default: None,
        shared: None,
        json: true,
    },
    HttpCase {
        file: "example-apigw-request-multi-value-parameters.json",
        default: None,
        shared: None,
        json: true,
    },
    HttpCase {
        file: "example-apigw-restapi-openapi-request.json",
        default: None,
        shared: None,
        json: true,
    },
    HttpCase {
        file: "example-apigw-console-test-request.json",
        default: None,
        shared: None,
        json: true,
    },
    // REST API routes without authorization.
    HttpCase {
        file: "example-apigw-console-request.json",
        default: NO_CALLER,
        shared: None,
        json: true,
    },
    HttpCase {
        file: "example-apigw-sam-rest-request.json",
        default: NO_CALLER,
        shared: None,
        json: false,
    },
    // HTTP API (2.0): IAM names its caller; a JWT without `iss`, a Lambda
    // authorizer's context without the configured id, name none (refused
    // whatever the anonymous policy).
    HttpCase {
        file: "example-apigw-v2-request-iam.json",
        default: None,
        shared: None,
        json: true,
    },
    HttpCase {
        file: "example-apigw-v2-request-jwt-authorizer.json",
        default: JWT_CLAIMS,
        shared: JWT_CLAIMS,
        json: true,
    },
    HttpCase {
        file: "example-apigw-v2-request-lambda-authorizer.json",
        default: LAMBDA_CONTEXT,
        shared: LAMBDA_CONTEXT,
        json: true,
    },
    HttpCase {
        file: "example-apigw-v2-request-multi-value-parameters.json",
        default: LAMBDA_CONTEXT,
        shared: LAMBDA_CONTEXT,
        json: true,
    },
    HttpCase {
        file: "example-apigw-v2-request-no-authorizer.json",
        default: NO_CALLER,
        shared: None,
        json: false,
    },
    HttpCase {
        file: "example-apigw-sam-http-request.json",
        default: NO_CALLER,
        shared: None,
        json: false,
    },
    // Application Load Balancer: no authorizer.
    HttpCase {
        file: "example-alb-lambda-target-request-headers-only.json",
        default: ALB_NO_CALLER,
        shared: None,
        json: false,
    },
    HttpCase {
        file: "example-alb-lambda-target-request-multivalue-headers.json",
        default: ALB_NO_CALLER,
        shared: None,
        json: false,
    },
];

/// The fixtures that are not an event a source of ours serves, with why.
const NOT_SERVED: &[(&str, &str)] = &[
    // Responses and answers a function returns, not events it takes.
    ("example-alb-lambda-target-response.json", "a response"),
    ("example-apigw-response.json", "a response"),
    (
        "example-apigw-custom-auth-response.json",
        "an authorizer's answer",
    ),
    (
        "example-apigw-custom-auth-response-with-condition.json",
        "an authorizer's answer",
    ),
    (
        "example-apigw-custom-auth-response-with-single-value-action.json",
        "an authorizer's answer",
    ),
    (
        "example-apigw-custom-auth-response-with-single-value-resource.json",
        "an authorizer's answer",
    ),
    (
        "example-appsync-lambda-auth-response.json",
        "an authorizer's answer",
    ),
    (
        "example-cloudformation-custom-resource-provider-response.json",
        "a response",
    ),
    (
        "example-cloudformation-custom-resource-response.json",
        "a response",
    ),
    (
        "example-iot-custom-auth-response.json",
        "an authorizer's answer",
    ),
    ("example-kinesis-firehose-response.json", "a response"),
    ("example-lex-response.json", "a response"),
    (
        "example-sqs-batch-response.json",
        "a partial batch response",
    ),
    ("example-vpc-lattice-response.json", "a response"),
    // Authorizers: they decide whether a request may run, they run nothing.
    (
        "example-apigw-custom-auth-request.json",
        "an authorizer's event",
    ),
    (
        "example-apigw-custom-auth-request-type-request.json",
        "an authorizer's event",
    ),
    (
        "example-apigw-v2-custom-authorizer-v1-request.json",
        "an authorizer's event",
    ),
    (
        "example-apigw-v2-custom-authorizer-v2-request.json",
        "an authorizer's event",
    ),
    (
        "example-apigw-v2-custom-authorizer-v2-request-null-maps.json",
        "an authorizer's event",
    ),
    (
        "example-apigw-v2-custom-authorizer-v2-request-without-cookies.json",
        "an authorizer's event",
    ),
    (
        "example-apigw-v2-custom-authorizer-v2-request-without-identity-source.json",
        "an authorizer's event",
    ),
    (
        "example-apigw-v2-custom-authorizer-websocket-request.json",
        "an authorizer's event",
    ),
    (
        "example-appsync-lambda-auth-request.json",
        "an authorizer's event",
    ),
    (
        "example-iot-custom-auth-request.json",
        "an authorizer's event",
    ),
    (
        "example-iot-custom-auth-request-x509.json",
        "an authorizer's event",
    ),
    // WebSocket APIs: messages on a connection, no request to retry.
    (
        "example-apigw-websocket-request.json",
        "a WebSocket API message",
    ),
    (
        "example-apigw-websocket-request-disconnect-route.json",
        "a WebSocket API message",
    ),
    (
        "example-apigw-websocket-request-without-method.json",
        "a WebSocket API message",
    ),
    // Parts of events and other services' documents, not invocations.
    (
        "example-appsync-identity-cognito.json",
        "a part of an AppSync event",
    ),
    (
        "example-appsync-identity-iam.json",
        "a part of an AppSync event",
    ),
    (
        "example-dynamodb-event-record-with-optional-fields.json",
        "one stream record, not an event",
    ),
    (
        "example-sns-subscription-confirmation.json",
        "an SNS HTTP(S) endpoint's message, not a Lambda event",
    ),
    (
        "example-sns-unsubscribe-confirmation.json",
        "an SNS HTTP(S) endpoint's message, not a Lambda event",
    ),
    (
        "example-sqs-api-event-obj.json",
        "an SQS ReceiveMessage answer, not a Lambda event",
    ),
    (
        "example-cloudwatch-cloudtrail-assumed-role.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-cloudwatch-cloudtrail-unknown-federate.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-cloudwatch-cloudtrail-unknown-user-auth.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-controltower-create-managed-account.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-controltower-deregister-organizational-unit.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-controltower-disable-baseline.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-controltower-disable-guardrail.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-controltower-enable-baseline.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-controltower-enable-guardrail.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-controltower-precheck-organizational-unit.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-controltower-register-organizational-unit.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-controltower-reset-enabled-baseline.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-controltower-setup-landing-zone.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-controltower-update-enabled-baseline.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-controltower-update-landing-zone.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    (
        "example-controltower-update-managed-account.json",
        "a CloudTrail record, not an EventBridge event",
    ),
    // CloudWatch alarm actions invoking a function: not EventBridge events.
    (
        "example-cloudwatch-alarm-composite.json",
        "a CloudWatch alarm action's event, not EventBridge",
    ),
    (
        "example-cloudwatch-alarm-metric.json",
        "a CloudWatch alarm action's event, not EventBridge",
    ),
    // Synchronous services answering with the function's result.
    (
        "example-appsync-batchinvoke.json",
        "AppSync: a resolver's result, no at-least-once delivery",
    ),
    (
        "example-appsync-direct-resolver.json",
        "AppSync: a resolver's result, no at-least-once delivery",
    ),
    (
        "example-appsync-invoke.json",
        "AppSync: a resolver's result, no at-least-once delivery",
    ),
    (
        "example-bedrock-agent-runtime-event.json",
        "Bedrock agents: an action's result",
    ),
    (
        "example-bedrock-agent-runtime-event-without-parameters.json",
        "Bedrock agents: an action's result",
    ),
    (
        "example-bedrock-agent-runtime-event-without-request-body.json",
        "Bedrock agents: an action's result",
    ),
    (
        "example-clientvpn-connectionhandler-request.json",
        "Client VPN: a connection's verdict",
    ),
    (
        "example-cognito-event.json",
        "Cognito Sync: a dataset's sync",
    ),
    (
        "example-cognito-event-userpools-create-auth-challenge.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-create-auth-challenge-user-not-found.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-custommessage.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-define-auth-challenge.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-define-auth-challenge-optional-response-fields.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-define-auth-challenge-user-not-found.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-migrateuser.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-migrateuser-null-fields.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-postauthentication.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-postconfirmation.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-preauthentication.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-presignup.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-pretokengen.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-pretokengen-incoming.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-pretokengen-null-group-configuration.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-pretokengen-v2.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-pretokengen-v2-incoming.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-pretokengen-v2-null-group-configuration.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-verify-auth-challenge.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-verify-auth-challenge-null-answer-correct.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-verify-auth-challenge-optional-answer-correct.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-cognito-event-userpools-verify-auth-challenge-user-not-found.json",
        "a Cognito user pool trigger",
    ),
    (
        "example-connect-event.json",
        "Amazon Connect: a contact flow's answer",
    ),
    (
        "example-connect-event-without-queue.json",
        "Amazon Connect: a contact flow's answer",
    ),
    ("example-lex-event.json", "Lex: a bot's answer"),
    (
        "example-s3-object-lambda-event-get-object-assumed-role.json",
        "S3 Object Lambda: an object's answer",
    ),
    (
        "example-s3-object-lambda-event-get-object-iam.json",
        "S3 Object Lambda: an object's answer",
    ),
    (
        "example-s3-object-lambda-event-head-object-iam.json",
        "S3 Object Lambda: an object's answer",
    ),
    (
        "example-s3-object-lambda-event-list-objects-iam.json",
        "S3 Object Lambda: an object's answer",
    ),
    (
        "example-s3-object-lambda-event-list-objects-v2-iam.json",
        "S3 Object Lambda: an object's answer",
    ),
    (
        "example-kinesis-firehose-event.json",
        "Firehose transformation: records answered transformed",
    ),
    (
        "example-firehose-event.json",
        "Firehose transformation: records answered transformed",
    ),
    (
        "example-vpc-lattice-v1-request.json",
        "VPC Lattice: not a source of ours",
    ),
    (
        "example-vpc-lattice-v2-request.json",
        "VPC Lattice: not a source of ours",
    ),
    (
        "example-vpc-lattice-v2-request-base64.json",
        "VPC Lattice: not a source of ours",
    ),
    (
        "example-vpc-lattice-v2-request-roles-anywhere.json",
        "VPC Lattice: not a source of ours",
    ),
    // Asynchronous events of services without a processor of ours.
    (
        "example-activemq-event.json",
        "Amazon MQ (ActiveMQ): not a source of the library; served by tests/examples/amazon-mq",
    ),
    (
        "example-activemq-event-null-properties.json",
        "Amazon MQ (ActiveMQ): not a source of the library; served by tests/examples/amazon-mq",
    ),
    (
        "example-rabbitmq-event.json",
        "Amazon MQ (RabbitMQ): not a source of the library; served by tests/examples/amazon-mq",
    ),
    (
        "example-documentdb-delete-event.json",
        "DocumentDB change streams: not a source of ours",
    ),
    (
        "example-documentdb-drop-database-event.json",
        "DocumentDB change streams: not a source of ours",
    ),
    (
        "example-documentdb-drop-event.json",
        "DocumentDB change streams: not a source of ours",
    ),
    (
        "example-documentdb-insert-event.json",
        "DocumentDB change streams: not a source of ours",
    ),
    (
        "example-documentdb-invalidate-event.json",
        "DocumentDB change streams: not a source of ours",
    ),
    (
        "example-documentdb-rename-event.json",
        "DocumentDB change streams: not a source of ours",
    ),
    (
        "example-documentdb-replace-event.json",
        "DocumentDB change streams: not a source of ours",
    ),
    (
        "example-documentdb-update-event.json",
        "DocumentDB change streams: not a source of ours",
    ),
    (
        "example-s3-event.json",
        "S3 notifications: not a source of ours",
    ),
    (
        "example-s3-event-with-decoded.json",
        "S3 notifications: not a source of ours",
    ),
    (
        "example-ses-event.json",
        "SES receipt rules: not a source of ours",
    ),
    (
        "example-ses-bcc-event.json",
        "SES receipt rules: not a source of ours",
    ),
    (
        "example-ses-lambda-event.json",
        "SES receipt rules: not a source of ours",
    ),
    (
        "example-ses-s3-event.json",
        "SES receipt rules: not a source of ours",
    ),
    (
        "example-ses-sns-event.json",
        "SES receipt rules: not a source of ours",
    ),
    (
        "example-cloudwatch_logs-event.json",
        "CloudWatch Logs subscriptions: not a source of ours",
    ),
    (
        "example-code_commit-event.json",
        "CodeCommit triggers: not a source of ours",
    ),
    (
        "example-codedeploy-lifecycle-event.json",
        "CodeDeploy lifecycle hooks: answered by an API call",
    ),
    (
        "example-codepipeline_job-event.json",
        "CodePipeline jobs: answered by an API call",
    ),
    (
        "example-cloudformation-custom-resource-create-request.json",
        "CloudFormation custom resources: answered to a URL",
    ),
    (
        "example-cloudformation-custom-resource-delete-request.json",
        "CloudFormation custom resources: answered to a URL",
    ),
    (
        "example-cloudformation-custom-resource-update-request.json",
        "CloudFormation custom resources: answered to a URL",
    ),
    (
        "example-cloudformation-custom-resource-provider-create-request.json",
        "CloudFormation custom resources: answered to a URL",
    ),
    (
        "example-cloudformation-custom-resource-provider-delete-request.json",
        "CloudFormation custom resources: answered to a URL",
    ),
    (
        "example-cloudformation-custom-resource-provider-update-request.json",
        "CloudFormation custom resources: answered to a URL",
    ),
    (
        "example-config-event.json",
        "AWS Config rules: answered by an API call",
    ),
    (
        "example-iot_1_click-event.json",
        "IoT 1-Click: not a source of ours",
    ),
    (
        "example-iot_button-event.json",
        "IoT button: not a source of ours",
    ),
    (
        "example-secretsmanager-secret-rotation-event.json",
        "Secrets Manager rotation: not a source of ours",
    ),
];

/// Every fixture is served or listed, once, and every name listed is a
/// fixture: a new fixture upstream fails here until it is placed.
#[test]
fn every_fixture_is_served_or_listed_with_why() {
    let dir = fixtures_dir();
    let files: BTreeSet<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    assert!(files.len() >= 173, "{} fixtures in {dir:?}", files.len());
    let named: Vec<&str> = (SERVED.iter().map(|(f, ..)| *f))
        .chain(HTTP.iter().map(|c| c.file))
        .chain(NOT_SERVED.iter().map(|(f, _)| *f))
        .collect();
    let mut seen = BTreeSet::new();
    for name in &named {
        assert!(seen.insert(*name), "{name} is listed twice");
        assert!(
            files.contains(*name),
            "{name} is listed but is not a fixture"
        );
    }
    let unplaced: Vec<&String> = files
        .iter()
        .filter(|f| !seen.contains(f.as_str()))
        .collect();
    assert!(
        unplaced.is_empty(),
        "fixtures neither served nor listed as not served (with why): {unplaced:?}"
    );
}

fn engine() -> Idempotency {
    Idempotency::new(
        MemoryStore::new(),
        Config::with_prefix("upstream.fixtures").disabled(false),
    )
}

/// A record's outcome as compared: `Ok` its outcome (`executed`,
/// `replayed`, `parked: <why>`), `Err` the failure's text.
type Seen = Result<String, String>;

fn label<T>(outcome: &Outcome<T>) -> String {
    match outcome {
        Outcome::Executed(_) => "executed".to_owned(),
        Outcome::Replayed(_) => "replayed".to_owned(),
        Outcome::Parked { reason, .. } => format!("parked: {reason}"),
        Outcome::Rejected { error, .. } => format!("rejected: {error}"),
        _ => "another outcome".to_owned(),
    }
}

/// `event` delivered twice to `processor`, the handler taking `Rec`: each
/// record's outcome on each delivery.
async fn deliver_twice<S, Rec>(processor: &Processor<S>, event: &Value) -> [Vec<Seen>; 2]
where
    S: Prepare<Rec>,
{
    let mut deliveries = [Vec::new(), Vec::new()];
    for seen in &mut deliveries {
        let parsed = S::parse(event.clone()).unwrap_or_else(|e| panic!("{e}"));
        let report = processor
            .process(parsed, None, |_: Rec| async {
                Ok::<_, HandlerError>(json!("done"))
            })
            .await;
        *seen = (report.records.iter())
            .map(|r| r.outcome.as_ref().map(label).map_err(ToString::to_string))
            .collect();
    }
    deliveries
}

/// Each record executed then replayed, or as `except` says for `kind`.
fn check(file: &str, kind: Option<Kind>, except: &[Except], [first, second]: [Vec<Seen>; 2]) {
    assert!(!first.is_empty(), "{file}: no records");
    assert_eq!(first.len(), second.len(), "{file}");
    for (record, (first, second)) in first.iter().zip(&second).enumerate() {
        let what = format!("{file}, record {record}, handler {kind:?}");
        let expected = except
            .iter()
            .find(|e| e.record == record && kind.is_none_or(|k| e.kinds.contains(&k)));
        match expected.map(|e| &e.expect) {
            None => {
                assert_eq!(
                    first.as_deref(),
                    Ok("executed"),
                    "{what}: the first delivery"
                );
                assert_eq!(
                    second.as_deref(),
                    Ok("replayed"),
                    "{what}: the second delivery"
                );
            }
            Some(Expect::Duplicate) => {
                assert_eq!(
                    [first, second].map(|s| s.as_deref()),
                    [Ok("replayed"); 2],
                    "{what}"
                );
            }
            Some(Expect::Parked(reason)) => {
                for seen in [first, second] {
                    let parked = seen.as_deref().unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert!(
                        parked.starts_with("parked: ") && parked.contains(reason),
                        "{what}: {parked}"
                    );
                }
            }
            Some(Expect::Fails(reason)) => {
                for seen in [first, second] {
                    let failure = seen.as_ref().expect_err(&what);
                    assert!(failure.contains(reason), "{what}: {failure}");
                }
            }
        }
    }
}

/// Runs `file` of a batch source `S` with handlers typed `Value`, `String`
/// and bytes.
macro_rules! batch {
    ($source:ty, $record:ident, $file:expr, $fails:expr) => {{
        let event = fixture($file);
        for kind in KINDS {
            let processor = Processor::<$source>::new(engine(), KeySelector::Id);
            let seen = match kind {
                Kind::Value => deliver_twice::<$source, $record<Value>>(&processor, &event).await,
                Kind::Text => deliver_twice::<$source, $record<String>>(&processor, &event).await,
                Kind::Bytes => deliver_twice::<$source, $record<Bytes>>(&processor, &event).await,
            };
            check($file, Some(kind), $fails, seen);
        }
    }};
}

async fn run_batch(served: Served) {
    let mut ran = 0;
    for (file, _, fails) in SERVED.iter().filter(|(_, s, _)| *s == served) {
        match served {
            Served::Sqs => batch!(Sqs, SqsRecord, file, fails),
            Served::Sns => batch!(Sns, Notification, file, fails),
            Served::Kinesis => batch!(Kinesis, KinesisRecord, file, fails),
            Served::Kafka => batch!(Kafka, KafkaMessage, file, fails),
            Served::DynamoDbStreams => {
                // A change is one `DynamoDbRecord`, whatever the handler.
                let processor = Processor::<DynamoDbStreams>::new(engine(), KeySelector::Id);
                let seen = deliver_twice::<_, DynamoDbRecord>(&processor, &fixture(file)).await;
                check(file, None, fails, seen);
            }
            Served::EventBridge => unreachable!("one event per invocation"),
        }
        ran += 1;
    }
    assert!(ran > 0);
}

#[tokio::test]
async fn the_sqs_fixtures() {
    run_batch(Served::Sqs).await;
}

#[tokio::test]
async fn the_sns_fixtures() {
    run_batch(Served::Sns).await;
}

#[tokio::test]
async fn the_kinesis_fixtures() {
    run_batch(Served::Kinesis).await;
}

#[tokio::test]
async fn the_dynamodb_streams_fixtures() {
    run_batch(Served::DynamoDbStreams).await;
}

#[tokio::test]
async fn the_kafka_fixtures() {
    run_batch(Served::Kafka).await;
}

/// One EventBridge event delivered twice, its `detail` read as `D`.
async fn event_twice<D>(text: &str) -> [Vec<Seen>; 2]
where
    D: Serialize + DeserializeOwned,
{
    let processor = EventBridgeProcessor::new(engine());
    let mut deliveries = [Vec::new(), Vec::new()];
    for seen in &mut deliveries {
        let payload = EventPayload::from_text(text).unwrap();
        let outcome = processor
            .process(payload, None, |_: EventBridgeEvent<D>| async {
                Ok::<_, HandlerError>(json!("done"))
            })
            .await;
        *seen = vec![outcome.as_ref().map(label).map_err(ToString::to_string)];
    }
    deliveries
}

#[tokio::test]
async fn the_eventbridge_fixtures() {
    let dir = fixtures_dir();
    for (file, _, fails) in SERVED.iter().filter(|(_, s, _)| *s == Served::EventBridge) {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for kind in KINDS {
            let seen = match kind {
                Kind::Value => event_twice::<Value>(&text).await,
                Kind::Text => event_twice::<String>(&text).await,
                Kind::Bytes => event_twice::<Bytes>(&text).await,
            };
            check(file, Some(kind), fails, seen);
        }
    }
}

/// `event` with an `Idempotency-Key` header, in the form(s) of its headers.
fn with_key(mut event: Value, key: &str) -> Value {
    let multi_value = event.get("multiValueHeaders").is_some_and(Value::is_object);
    if multi_value {
        event["multiValueHeaders"]["Idempotency-Key"] = json!([key]);
    }
    if !multi_value || event.get("headers").is_some_and(Value::is_object) {
        if !event["headers"].is_object() {
            event["headers"] = json!({});
        }
        event["headers"]["Idempotency-Key"] = json!(key);
    }
    event
}

/// The status, the problem's type and detail (an error answer), and
/// whether the answer is a replay, of `processor`'s answer to `event` with
/// the body read as `kind`.
async fn answer(
    processor: &HttpProcessor,
    event: &Value,
    kind: Kind,
) -> (u16, Option<Problem>, bool) {
    let request = HttpRequest::from_event(event.clone()).unwrap_or_else(|p| panic!("{p}"));
    let created = |body: String| Ok::<_, HandlerError>(http::HttpResponse::new(201).text(body));
    let response = match kind {
        Kind::Value => {
            let handler = |body: Value| async move { created(body.to_string()) };
            processor
                .process(&request, None, |r| r.json::<Value>(), handler)
                .await
        }
        Kind::Text => {
            let text = |r: &HttpRequest| {
                String::from_utf8(r.body.clone()).map_err(|e| Problem::bad_request(e.to_string()))
            };
            let handler = |body: String| async move { created(body) };
            processor.process(&request, None, text, handler).await
        }
        Kind::Bytes => {
            let bytes = |r: &HttpRequest| Ok(Bytes(r.body.clone()));
            let handler = |body: Bytes| async move { created(format!("{} bytes", body.len())) };
            processor.process(&request, None, bytes, handler).await
        }
    };
    let problem = (response.header_value("content-type") == Some(http::PROBLEM_JSON))
        .then(|| serde_json::from_str(&response.body).unwrap());
    let replayed = response.header_value(http::REPLAYED_HEADER) == Some("true");
    (response.status, problem, replayed)
}

/// The HTTP fixtures as they are (no key: 400), then with a key under the
/// default callers and with one shared scope, each body read as `Value`,
/// `String` and bytes.
#[tokio::test]
async fn the_http_fixtures() {
    for case in HTTP {
        let event = fixture(case.file);
        let (status, problem, _) = answer(&HttpProcessor::new(engine()), &event, Kind::Bytes).await;
        assert_eq!(
            (status, problem.unwrap().kind.as_str()),
            (400, Problem::KEY_MISSING),
            "{}",
            case.file
        );
        let keyed = with_key(event, "k-fixture");
        for (policy, refused) in [
            (Anonymous::Refuse, case.default),
            (Anonymous::ShareOneScope, case.shared),
        ] {
            for kind in KINDS {
                let what = format!("{}, {policy:?}, handler {kind:?}", case.file);
                let processor = HttpProcessor::new(engine()).anonymous(policy);
                let first = answer(&processor, &keyed, kind).await;
                let second = answer(&processor, &keyed, kind).await;
                match refused {
                    Some(detail) => {
                        for (status, problem, replayed) in [first, second] {
                            let problem = problem.unwrap();
                            assert_eq!(
                                (status, problem.kind.as_str(), replayed),
                                (401, Problem::NO_CALLER, false),
                                "{what}"
                            );
                            let text = problem.detail.unwrap_or_default();
                            assert!(text.contains(detail), "{what}: {text}");
                        }
                    }
                    None if kind == Kind::Value && !case.json => {
                        for (status, problem, _) in [first, second] {
                            let problem = problem.unwrap();
                            assert_eq!(
                                (status, problem.kind.as_str()),
                                (400, Problem::MALFORMED_REQUEST),
                                "{what}"
                            );
                            let text = problem.detail.unwrap_or_default();
                            assert!(
                                text.contains("the body is empty")
                                    || text.contains("not the expected JSON"),
                                "{what}: {text}"
                            );
                        }
                    }
                    None => {
                        assert_eq!((first.0, first.2), (201, false), "{what}: executed");
                        assert_eq!((second.0, second.2), (201, true), "{what}: replayed");
                    }
                }
            }
        }
    }
}

/// Before: both load balancer fixtures were refused 400, "malformed REST
/// API (1.0) event: missing field `httpMethod`". Through `handle`, as
/// Lambda invokes the function: run once, replayed, answered in the load
/// balancer's shape with the request's form of headers; a header the load
/// balancer sets (`x-myheader` here) scopes the key when chosen; with no
/// caller chosen, 401.
#[tokio::test]
async fn the_load_balancer_fixtures_execute_then_replay_in_their_own_shape() {
    for (file, multi_value) in [
        ("example-alb-lambda-target-request-headers-only.json", false),
        (
            "example-alb-lambda-target-request-multivalue-headers.json",
            true,
        ),
    ] {
        let event = with_key(fixture(file), "k-alb");
        let (used, unused) = if multi_value {
            ("multiValueHeaders", "headers")
        } else {
            ("headers", "multiValueHeaders")
        };
        let header = |answer: &Value, name: &str| match &answer[used][name] {
            Value::Array(values) if multi_value => values.first().cloned(),
            Value::String(s) if !multi_value => Some(Value::from(s.clone())),
            Value::Null => None,
            other => panic!("{file}: {name} is {other}"),
        };
        let callers = [
            HttpProcessor::new(engine()).anonymous(Anonymous::ShareOneScope),
            HttpProcessor::new(engine())
                .callers([Caller::Principal, Caller::Header("x-myheader".into())]),
        ];
        for processor in &callers {
            let mut answers = Vec::new();
            for _ in 0..2 {
                let invoke = LambdaEvent::new(event.clone(), Default::default());
                let response = processor
                    .handle(
                        invoke,
                        |r| Ok(Bytes(r.body.clone())),
                        |body: Bytes| async move {
                            Ok::<_, HandlerError>(
                                http::HttpResponse::new(200).text(format!("{} bytes", body.len())),
                            )
                        },
                    )
                    .await
                    .unwrap();
                answers.push(serde_json::to_value(response).unwrap());
            }
            let [first, again] = &answers[..] else {
                unreachable!()
            };
            for answer in [first, again] {
                assert_eq!(answer["statusCode"], 200, "{file}: {answer}");
                assert_eq!(answer["statusDescription"], "200 OK", "{file}");
                assert_eq!(answer["isBase64Encoded"], false, "{file}");
                let empty = answer
                    .get(unused)
                    .is_none_or(|h| h.as_object().is_some_and(|h| h.is_empty()));
                assert!(empty, "{file}: only {used}: {answer}");
            }
            assert_eq!(first["body"], again["body"], "{file}: byte for byte");
            assert_eq!(
                header(first, http::REPLAYED_HEADER),
                None,
                "{file}: executed"
            );
            assert_eq!(
                header(again, http::REPLAYED_HEADER),
                Some(json!("true")),
                "{file}: replayed"
            );
        }
        let invoke = LambdaEvent::new(event.clone(), Default::default());
        let refused = HttpProcessor::new(engine())
            .handle(
                invoke,
                |_| Ok(()),
                |()| async { Ok::<_, HandlerError>(http::HttpResponse::new(200)) },
            )
            .await
            .unwrap();
        let refused = serde_json::to_value(refused).unwrap();
        assert_eq!(refused["statusCode"], 401, "{file}: {refused}");
        assert_eq!(refused["statusDescription"], "401 Unauthorized");
        let problem: Problem = serde_json::from_str(refused["body"].as_str().unwrap()).unwrap();
        assert!(
            problem
                .detail
                .unwrap_or_default()
                .contains("Application Load Balancer")
        );
    }
}
