//! The "Deploy and check" commands of `docs/operations.md` (its section
//! "Getting started: deploy and check"), run as written with the AWS CLI
//! (PyPI `awscli`, installed by `tests/run`) against a moto server of this
//! test's own: every shell block of the section not marked `AWS only`, in
//! order, in one bash script, after a stack of the same queues, DLQs, log
//! group and EventBridge rule was created in moto's CloudFormation (so the
//! page's `describe-stacks` helper answers). The script's `aws` is the CLI
//! with `--endpoint-url` (the AWS CLI v1 ignores `AWS_ENDPOINT_URL` for SQS).
//! moto implements neither `start-message-move-task` nor
//! `list-message-move-tasks`: for those the script checks that the CLI
//! accepted the command and sent the request (moto answers 500).
//!
//! Then the messages are checked where they land: each body parses as the
//! function's input type, the FIFO message carries its group and
//! deduplication id, the event reached the rule's target, the log and metric
//! commands printed what the function wrote.

use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use test_kit::Moto;

const HOW_TO_GET_THE_CLI: &str = "the AWS CLI is needed for this test: run `tests/run` (it \
    installs `awscli` into <target>/awscli-venv), or set AWS_CLI to an `aws` executable";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn aws_cli() -> PathBuf {
    let path = std::env::var_os("AWS_CLI").map_or_else(
        || {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(|| workspace_root().join("target"), PathBuf::from);
            target.join("awscli-venv/bin/aws")
        },
        PathBuf::from,
    );
    assert!(
        path.is_file(),
        "{HOW_TO_GET_THE_CLI} ({} missing)",
        path.display()
    );
    path
}

/// The page that holds the deploy-and-check commands, and their section.
const PAGE: &str = "docs/operations.md";
const SECTION: &str = "## Getting started: deploy and check";

/// The shell blocks of the deploy-and-check section of [`PAGE`]: `(runs,
/// text)`, `runs` false for the blocks marked `# AWS only`.
fn deploy_blocks() -> Vec<(bool, String)> {
    let page = std::fs::read_to_string(workspace_root().join(PAGE)).expect(PAGE);
    let start = page
        .find(&format!("\n{SECTION}\n"))
        .unwrap_or_else(|| panic!("{PAGE} has no \"{SECTION}\" section"));
    let section = &page[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut blocks = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "```sh" {
            continue;
        }
        let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        let runs = !body
            .first()
            .is_some_and(|l| l.trim_start().starts_with("# AWS only"));
        blocks.push((runs, body.join("\n")));
    }
    blocks
}

/// The queues, DLQs, log group and rule the page's commands touch, with
/// the template's output names (the functions themselves are not in moto).
const STACK: &str = r#"
Resources:
  PaymentsDLQ:
    Type: AWS::SQS::Queue
    Properties: {FifoQueue: true, QueueName: payments-dlq.fifo}
  PaymentsQueue:
    Type: AWS::SQS::Queue
    Properties:
      FifoQueue: true
      QueueName: payments.fifo
      RedrivePolicy: {deadLetterTargetArn: !GetAtt PaymentsDLQ.Arn, maxReceiveCount: 5}
  OrdersQueue:
    Type: AWS::SQS::Queue
    Properties: {QueueName: orders}
  OrderPlacedProbe:
    Type: AWS::SQS::Queue
    Properties: {QueueName: order-placed-probe}
  OrderPlacedRule:
    Type: AWS::Events::Rule
    Properties:
      EventPattern: {source: [shop.orders], detail-type: [OrderPlaced]}
      Targets:
        - {Arn: !GetAtt OrderPlacedProbe.Arn, Id: probe}
  PaymentsLogGroup:
    Type: AWS::Logs::LogGroup
    Properties: {LogGroupName: /aws/lambda/idempotent-handlers-payments}
Outputs:
  PaymentsQueueUrl: {Value: !Ref PaymentsQueue}
  PaymentsDLQUrl: {Value: !Ref PaymentsDLQ}
  PaymentsDLQArn: {Value: !GetAtt PaymentsDLQ.Arn}
  OrdersQueueUrl: {Value: !Ref OrdersQueue}
  PaymentsLogGroupName: {Value: !Ref PaymentsLogGroup}
  PaymentsFunctionName: {Value: idempotent-handlers-payments}
"#;

/// Runs the payments binary locally on the sample event twice, as Lambda
/// would log it: its stderr lines (JSON logs and EMF lines).
fn payments_log_lines() -> Vec<String> {
    let binary = test_kit::runtime_api::function_binary("payments");
    let event = workspace_root().join("events/payments-fifo.json");
    let output = Command::new(binary)
        .arg("--event")
        .arg(&event)
        .arg(&event)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
        .env("AWS_LAMBDA_FUNCTION_NAME", "idempotent-handlers-payments")
        .stdin(Stdio::null())
        .output()
        .expect("run payments");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stderr)
        .expect("UTF-8 logs")
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_deploy_and_check_commands_run_against_moto() {
    let cli = aws_cli();
    let blocks = deploy_blocks();
    let script: Vec<&str> = blocks
        .iter()
        .filter(|(runs, _)| *runs)
        .map(|(_, b)| b.as_str())
        .collect();
    let all = script.join("\n");
    for command in [
        "aws cloudformation describe-stacks",
        "aws sqs send-message --queue-url \"$(out PaymentsQueueUrl)\"",
        "--message-group-id",
        "--message-deduplication-id",
        "aws sqs send-message --queue-url \"$(out OrdersQueueUrl)\"",
        "aws events put-events",
        "aws logs filter-log-events",
        "aws cloudwatch get-metric-statistics",
        "aws sqs start-message-move-task",
    ] {
        assert!(all.contains(command), "the run blocks have `{command}`");
    }
    let skipped: Vec<&String> = blocks
        .iter()
        .filter(|(runs, _)| !*runs)
        .map(|(_, b)| b)
        .collect();
    assert!(
        skipped.iter().any(|b| b.contains("sam build")),
        "the build/deploy block is the AWS-only one: {skipped:?}"
    );

    let moto = Moto::start(&[]);
    let endpoint = moto.endpoint();
    let config = moto.sdk_config().await;
    let cfn_env = [
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_PAGER", ""),
    ];
    let run_cli = |args: &[&str]| {
        let output = Command::new(&cli)
            .arg("--endpoint-url")
            .arg(&endpoint)
            .args(args)
            .envs(cfn_env)
            .env_remove("AWS_PROFILE")
            .output()
            .expect("run the AWS CLI");
        assert!(
            output.status.success(),
            "aws {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("UTF-8")
    };
    run_cli(&[
        "cloudformation",
        "create-stack",
        "--stack-name",
        "idempotent-handlers",
        "--template-body",
        STACK,
    ]);

    // What the deployed function would have logged and measured.
    let lines = payments_log_lines();
    let emf: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("_aws").is_some())
        .collect();
    assert_eq!(emf.len(), 2, "one EMF line per invocation");
    let processed: u64 = emf
        .iter()
        .map(|v| v["Processed"].as_u64().expect("Processed"))
        .sum();
    assert!(processed > 0);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis();
    let events: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::json!({"timestamp": now_ms, "message": l}))
        .collect();
    let group = "/aws/lambda/idempotent-handlers-payments";
    run_cli(&[
        "logs",
        "create-log-stream",
        "--log-group-name",
        group,
        "--log-stream-name",
        "s1",
    ]);
    run_cli(&[
        "logs",
        "put-log-events",
        "--log-group-name",
        group,
        "--log-stream-name",
        "s1",
        "--log-events",
        &Value::from(events).to_string(),
    ]);
    for v in &emf {
        run_cli(&[
            "cloudwatch",
            "put-metric-data",
            "--namespace",
            lambda_idempotency::metrics::NAMESPACE,
            "--metric-data",
            &serde_json::json!([{
                "MetricName": "Processed",
                "Value": v["Processed"],
                "Unit": "Count",
                "Dimensions": [{"Name": "service", "Value": v["service"]}],
            }])
            .to_string(),
        ]);
    }
    // One message waiting in the DLQ for the redrive block.
    let sqs = aws_sdk_sqs::Client::new(&config);
    let outputs: Value = serde_json::from_str(&run_cli(&[
        "cloudformation",
        "describe-stacks",
        "--stack-name",
        "idempotent-handlers",
        "--query",
        "Stacks[0].Outputs",
    ]))
    .expect("outputs");
    let output = |key: &str| {
        outputs
            .as_array()
            .expect("outputs")
            .iter()
            .find(|o| o["OutputKey"] == key)
            .and_then(|o| o["OutputValue"].as_str())
            .unwrap_or_else(|| panic!("output {key}"))
            .to_owned()
    };
    sqs.send_message()
        .queue_url(output("PaymentsDLQUrl"))
        .message_group_id("acct-9")
        .message_deduplication_id("pay-9")
        .message_body(r#"{"payment_id":"pay-9","account_id":"acct-9","amount_cents":1}"#)
        .send()
        .await
        .expect("a message in the DLQ");

    // The page's blocks, in order, in one shell.
    let preamble = format!(
        r#"set -euo pipefail
aws() {{
  case "$1 $2" in
    "sqs start-message-move-task"|"sqs list-message-move-tasks")
      # moto does not implement these: the CLI must accept the command and send it.
      if err=$(AWS_MAX_ATTEMPTS=1 {cli} --endpoint-url {endpoint} "$@" 2>&1); then
        echo "moto answered $2: run it for real in this test" >&2; return 1
      fi
      case "$err" in
        *"when calling the "*" operation"*) echo "SENT $2" ;;
        *) echo "$err" >&2; return 1 ;;
      esac ;;
    *) {cli} --endpoint-url {endpoint} "$@" ;;
  esac
}}
"#,
        cli = cli.display()
    );
    let run = Command::new("bash")
        .arg("-c")
        .arg(format!("{preamble}\n{all}\n"))
        .envs(cfn_env)
        .env_remove("AWS_PROFILE")
        .current_dir(workspace_root())
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "the commands of {PAGE} failed:\n{stderr}\nstdout:\n{stdout}"
    );

    // Logs: the batch summaries the function wrote.
    assert_eq!(
        stdout.matches("batch processed").count(),
        2,
        "filter-log-events printed both batch summaries:\n{stdout}"
    );
    // Metrics: the Processed sum of the EMF lines.
    assert!(
        stdout.lines().any(|l| l.trim() == format!("{processed}.0")),
        "get-metric-statistics printed Sum {processed}:\n{stdout}"
    );
    // The DLQ's depth, then the redrive request sent.
    assert!(
        stdout.contains("\"ApproximateNumberOfMessages\": \"1\""),
        "{stdout}"
    );
    assert!(stdout.contains("SENT start-message-move-task"), "{stdout}");
    assert!(stdout.contains("SENT list-message-move-tasks"), "{stdout}");

    // The payment: one message, in its group, under its deduplication id,
    // a body payments accepts.
    let received = sqs
        .receive_message()
        .queue_url(output("PaymentsQueueUrl"))
        .max_number_of_messages(10)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .expect("receive payments");
    let messages = received.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    let attributes = messages[0].attributes().expect("system attributes");
    assert_eq!(
        attributes
            .get(&MessageSystemAttributeName::MessageGroupId)
            .map(String::as_str),
        Some("acct-1")
    );
    assert_eq!(
        attributes
            .get(&MessageSystemAttributeName::MessageDeduplicationId)
            .map(String::as_str),
        Some("pay-1")
    );
    let payment: payments::Payment =
        serde_json::from_str(messages[0].body().expect("a body")).expect("a payment body");
    assert_eq!(payment.payment_id, "pay-1");
    assert_eq!(payment.account_id, "acct-1");

    // The order: a body orders accepts.
    let received = sqs
        .receive_message()
        .queue_url(output("OrdersQueueUrl"))
        .max_number_of_messages(10)
        .send()
        .await
        .expect("receive orders");
    assert_eq!(received.messages().len(), 1);
    let order: orders::OrderEvent =
        serde_json::from_str(received.messages()[0].body().expect("a body"))
            .expect("an order body");
    assert_eq!(order.event_id, "evt-1");

    // The event: matched the rule's pattern (the template's), a detail
    // inventory accepts.
    let probe = sqs
        .get_queue_url()
        .queue_name("order-placed-probe")
        .send()
        .await
        .expect("probe queue")
        .queue_url()
        .expect("url")
        .to_owned();
    let received = sqs
        .receive_message()
        .queue_url(probe)
        .max_number_of_messages(10)
        .send()
        .await
        .expect("receive the event");
    assert_eq!(received.messages().len(), 1, "the rule matched the event");
    let envelope: Value =
        serde_json::from_str(received.messages()[0].body().expect("a body")).expect("an envelope");
    assert_eq!(envelope["source"], "shop.orders");
    assert_eq!(envelope["detail-type"], "OrderPlaced");
    let placed: inventory::OrderPlaced =
        serde_json::from_value(envelope["detail"].clone()).expect("an OrderPlaced detail");
    assert_eq!(placed.order_id, "ord-1");

    // The DLQ is untouched (moto moved nothing); the queue attribute names
    // the page reads exist.
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(output("PaymentsDLQUrl"))
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .send()
        .await
        .expect("DLQ attributes");
    assert!(attributes.attributes().is_some());
}
