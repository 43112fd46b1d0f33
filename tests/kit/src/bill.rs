//! The bill: what the requests a function sends cost, by the services'
//! documented rules, from the moto launcher's ledger
//! ([`crate::Moto::ledger`]: each request as served, with the items a
//! DynamoDB request names as they stood before and after it).
//!
//! DynamoDB request units, each rule from the Developer Guide:
//! - a write unit per 1 KB of item, rounded up per item; a read unit per
//!   4 KB, strongly consistent; half of it eventually consistent
//!   (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html>,
//!   and the on-demand price list's key terms,
//!   <https://aws.amazon.com/dynamodb/pricing/on-demand/>);
//! - `PutItem` by the larger of the item it replaces and the new one;
//!   `UpdateItem` by the larger of the item before and after; `DeleteItem`
//!   by the deleted item; `BatchGetItem` and `BatchWriteItem` item by item,
//!   each rounded up on its own ("Capacity Unit Consumption for Writes",
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ProvisionedThroughput.html#ItemSizeCalculations.Writes>);
//!   a delete of no item one write unit (`BatchWriteItem`,
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html>);
//!   a read of no item still consumes its read units (the first page);
//! - a failed conditional write still consumes write units: for an
//!   existing item by the larger of it and the new item, for no item one
//!   unit (the same section, and "Conditional writes" in
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/WorkingWithItems.html#WorkingWithItems.ConditionalUpdate>).
//!   The item a failed `UpdateItem` would have made is not computed: it is
//!   sized as the item that stood (exact whenever the update does not move
//!   the item across a KB, as every update here does not);
//! - a transaction: "two underlying reads or writes of every item in the
//!   transaction: one to prepare the transaction and one to commit",
//!   each item sized as by its single-item rule, a `ConditionCheck` by its
//!   item ("Capacity management for transactions",
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling>);
//! - a cancelled transaction: the guide does not say what it costs. The
//!   service's answer carries no `ConsumedCapacity` (measured on DynamoDB
//!   by paritysuite/dynamodb-conformance, pull request 67). The bill
//!   charges it as if applied (an upper bound) and reports those units
//!   apart ([`Bill::wru_cancelled`]), so a reader can take either bound;
//! - `DescribeTable` (control plane) is not a data read or write and is not
//!   billed in request units (the on-demand price list bills "the data
//!   reads and writes your application performs on your tables"); reads of
//!   a DynamoDB stream by a Lambda trigger are free ("Read requests made by
//!   Lambda-based consumers of DynamoDB Streams are free",
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CostOptimization_StreamsUsage.html>),
//!   so the stream mapping's requests are counted
//!   ([`Bill::stream_requests`]), not priced.
//!
//! Item sizes use the library's one rule ([`lambda_idempotency::value::item_size`]).
//!
//! SQS: every action is a request, and "each 64 KB chunk of a payload is
//! billed as 1 request" (<https://aws.amazon.com/sqs/pricing/>), FIFO and
//! standard queues at their own prices; a message's size is the library's
//! ([`lambda_idempotency::outbox::sqs_message_size`]). EventBridge `PutEvents`: billed
//! per event, "each 64 KB chunk of a payload is billed as 1 event"
//! (<https://aws.amazon.com/eventbridge/pricing/>), an entry sized by
//! [`lambda_idempotency::outbox::event_entry_size`].
//!
//! Lambda ([`lambda_gb_seconds`]): a request per invocation and the
//! invocation's duration, its wall time from start to return rounded up to
//! 1 ms, times the memory configured
//! (<https://aws.amazon.com/lambda/pricing/>). CPU comes in proportion to
//! memory, one vCPU at 1,769 MB
//! (<https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html>):
//! at 128 MB a function gets 128/1769 of a vCPU, so each millisecond of CPU
//! it needs takes ~13.8 ms of wall time.

use lambda_idempotency::value::AttrValue;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// Bytes per write unit.
pub const WRITE_UNIT_BYTES: usize = 1024;
/// Bytes per read unit.
pub const READ_UNIT_BYTES: usize = 4096;
/// Bytes per billed SQS request or EventBridge event.
pub const CHUNK_BYTES: usize = 64 * 1024;
/// The memory at which a Lambda function has one full vCPU.
pub const ONE_VCPU_MB: f64 = 1769.0;

/// A request the bill has no documented rule for: it refuses to guess.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BillError {
    /// An operation without a rule here (Query, Scan, PartiQL, ...).
    #[error("no billing rule for {target}")]
    NoRule {
        /// The `X-Amz-Target` of the request.
        target: String,
    },
    /// A DynamoDB error answer other than a failed condition or a
    /// cancelled transaction (a throttle, a validation error).
    #[error("{target} answered {error}: no documented charge")]
    UnbilledError {
        /// The `X-Amz-Target` of the request.
        target: String,
        /// The error type.
        error: String,
    },
    /// An entry without the item sizes its rule needs.
    #[error("{target}: the ledger entry lacks {what}")]
    Incomplete {
        /// The `X-Amz-Target` of the request.
        target: String,
        /// What is missing.
        what: &'static str,
    },
}

/// How a read is charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Half a unit per 4 KB.
    Eventual,
    /// One unit per 4 KB.
    Strong,
    /// Two units per 4 KB.
    Transactional,
}

/// Write units for an item of `bytes` (at least one).
pub fn write_units(bytes: usize) -> f64 {
    bytes.div_ceil(WRITE_UNIT_BYTES).max(1) as f64
}

/// Read units for an item of `bytes` (at least one 4 KB step).
pub fn read_units(bytes: usize, read: Read) -> f64 {
    let steps = bytes.div_ceil(READ_UNIT_BYTES).max(1) as f64;
    match read {
        Read::Eventual => steps / 2.0,
        Read::Strong => steps,
        Read::Transactional => 2.0 * steps,
    }
}

/// What a run's requests cost, in the services' units.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bill {
    /// DynamoDB write request units.
    pub wru: f64,
    /// Of [`Bill::wru`], the units of cancelled transactions (charged as
    /// if applied: an upper bound; DynamoDB reports none).
    pub wru_cancelled: f64,
    /// DynamoDB read request units.
    pub rru: f64,
    /// DynamoDB requests (data and control plane).
    pub dynamodb_requests: u64,
    /// DynamoDB requests by operation.
    pub by_operation: BTreeMap<String, u64>,
    /// DynamoDB Streams requests (a Lambda trigger's: free).
    pub stream_requests: u64,
    /// Billed SQS requests on standard queues (64 KB chunks).
    pub sqs_standard: f64,
    /// Billed SQS requests on FIFO queues (64 KB chunks).
    pub sqs_fifo: f64,
    /// Billed EventBridge events (64 KB chunks).
    pub events: f64,
}

impl Bill {
    /// Prices every entry of a ledger.
    pub fn of(ledger: &[Value]) -> Result<Self, BillError> {
        let mut bill = Bill::default();
        for entry in ledger {
            bill.add(entry)?;
        }
        Ok(bill)
    }

    /// Adds one ledger entry (none for a request the launcher answered
    /// with an injected fault: it never reached the service).
    pub fn add(&mut self, entry: &Value) -> Result<(), BillError> {
        if entry.get("fault").is_some() {
            return Ok(());
        }
        let target = entry["target"].as_str().unwrap_or_default();
        let op = target.rsplit('.').next().unwrap_or_default();
        if target.starts_with("DynamoDBStreams_") {
            self.stream_requests += 1;
            return Ok(());
        }
        if target.starts_with("AmazonSQS.") {
            self.add_sqs(op, &entry["request"]);
            return Ok(());
        }
        if target.starts_with("AWSEvents.") {
            self.events += match op {
                "PutEvents" => entry["request"]["Entries"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|e| {
                        let size = lambda_idempotency::outbox::event_entry_size(
                            e["Source"].as_str().unwrap_or_default(),
                            e["DetailType"].as_str().unwrap_or_default(),
                            e["Detail"].as_str().unwrap_or_default(),
                        );
                        chunks(size)
                    })
                    .sum(),
                _ => 0.0,
            };
            return Ok(());
        }
        if !target.starts_with("DynamoDB_") {
            return Ok(());
        }
        self.dynamodb_requests += 1;
        *self.by_operation.entry(op.to_owned()).or_default() += 1;
        let (wru, rru) = dynamodb_units(entry)?;
        self.wru += wru;
        self.rru += rru;
        if entry["error"] == "TransactionCanceledException" {
            self.wru_cancelled += wru;
        }
        Ok(())
    }

    fn add_sqs(&mut self, op: &str, request: &Value) {
        let fifo = request["QueueUrl"]
            .as_str()
            .is_some_and(|u| u.ends_with(".fifo"));
        let billed = match op {
            "SendMessage" => chunks(message_size(request)),
            "SendMessageBatch" => {
                let size: usize = request["Entries"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(message_size)
                    .sum();
                chunks(size)
            }
            _ => 1.0,
        };
        if fifo {
            self.sqs_fifo += billed;
        } else {
            self.sqs_standard += billed;
        }
    }
}

/// 64 KB chunks of a payload of `bytes` (at least one).
fn chunks(bytes: usize) -> f64 {
    bytes.div_ceil(CHUNK_BYTES).max(1) as f64
}

/// An SQS message's size by the library's rule: its body and string
/// attributes (the relay's `outbox_id` counted by the rule itself).
fn message_size(message: &Value) -> usize {
    let attributes: std::collections::BTreeMap<String, String> = message["MessageAttributes"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(name, _)| name.as_str() != lambda_idempotency::outbox::OUTBOX_ID)
        .map(|(name, v)| {
            (
                name.clone(),
                v["StringValue"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    lambda_idempotency::outbox::sqs_message_size(
        message["MessageBody"].as_str().unwrap_or_default(),
        &attributes,
    )
}

/// An item in DynamoDB JSON (`{"name": {"S": "..."}}`) as attribute
/// values (parsing only; sizes come from [`lambda_idempotency::value::item_size`]).
pub fn parse_item(item: &Value) -> HashMap<String, AttrValue> {
    item.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), parse_value(v)))
        .collect()
}

fn parse_value(v: &Value) -> AttrValue {
    let Some((ty, inner)) = v.as_object().and_then(|o| o.iter().next()) else {
        return AttrValue::Null;
    };
    let strings = |x: &Value| -> Vec<String> {
        x.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    // Binary values travel in base64: their raw size is 3/4 of the text.
    let raw = |s: &str| vec![0u8; s.trim_end_matches('=').len() * 3 / 4];
    match ty.as_str() {
        "S" => AttrValue::S(inner.as_str().unwrap_or_default().to_owned()),
        "N" => AttrValue::N(inner.as_str().unwrap_or_default().to_owned()),
        "B" => AttrValue::B(raw(inner.as_str().unwrap_or_default())),
        "BOOL" => AttrValue::Bool(inner.as_bool().unwrap_or_default()),
        "L" => AttrValue::L(
            inner
                .as_array()
                .into_iter()
                .flatten()
                .map(parse_value)
                .collect(),
        ),
        "M" => AttrValue::M(parse_item(inner)),
        "SS" => AttrValue::Ss(strings(inner)),
        "NS" => AttrValue::Ns(strings(inner)),
        "BS" => AttrValue::Bs(strings(inner).iter().map(|s| raw(s)).collect()),
        _ => AttrValue::Null,
    }
}

/// The size of an item in DynamoDB JSON; `None` (no item) is 0 bytes.
fn size(item: &Value) -> usize {
    if item.is_null() {
        0
    } else {
        lambda_idempotency::value::item_size(&parse_item(item))
    }
}

/// (write units, read units) of one DynamoDB ledger entry.
pub fn dynamodb_units(entry: &Value) -> Result<(f64, f64), BillError> {
    let target = entry["target"].as_str().unwrap_or_default();
    let op = target.rsplit('.').next().unwrap_or_default();
    let request = &entry["request"];
    let error = entry["error"].as_str().unwrap_or_default();
    let status_ok = entry["status"].as_u64() == Some(200);
    let incomplete = |what| BillError::Incomplete {
        target: target.to_owned(),
        what,
    };
    if !status_ok
        && error != "ConditionalCheckFailedException"
        && error != "TransactionCanceledException"
    {
        return Err(BillError::UnbilledError {
            target: target.to_owned(),
            error: error.to_owned(),
        });
    }
    let items = entry["items"].as_array();
    let item = |i: usize| -> Result<(&Value, &Value), BillError> {
        let it = items
            .and_then(|items| items.get(i))
            .ok_or_else(|| incomplete("the items it names"))?;
        Ok((&it["before"], &it["after"]))
    };
    let failed = error == "ConditionalCheckFailedException";
    match op {
        "DescribeTable" | "ListTables" | "CreateTable" | "DeleteTable" | "UpdateTimeToLive"
        | "DescribeTimeToLive" => Ok((0.0, 0.0)),
        "PutItem" | "UpdateItem" | "DeleteItem" => {
            let (before, after) = item(0)?;
            let new = match op {
                "PutItem" => size(&request["Item"]),
                "UpdateItem" if !failed => size(after),
                _ => 0,
            };
            let bytes = if failed && before.is_null() {
                // A failed condition on no item: one write unit.
                0
            } else {
                size(before).max(new)
            };
            Ok((write_units(bytes), 0.0))
        }
        "GetItem" => {
            let (before, _) = item(0)?;
            let read = if request["ConsistentRead"] == Value::Bool(true) {
                Read::Strong
            } else {
                Read::Eventual
            };
            Ok((0.0, read_units(size(before), read)))
        }
        "BatchGetItem" => {
            if entry["unprocessed"].as_u64().unwrap_or(0) > 0 {
                return Err(incomplete("which keys were processed"));
            }
            let mut rru = 0.0;
            let mut i = 0;
            for (_, spec) in request["RequestItems"].as_object().into_iter().flatten() {
                let read = if spec["ConsistentRead"] == Value::Bool(true) {
                    Read::Strong
                } else {
                    Read::Eventual
                };
                for _ in spec["Keys"].as_array().into_iter().flatten() {
                    rru += read_units(size(item(i)?.0), read);
                    i += 1;
                }
            }
            Ok((0.0, rru))
        }
        "BatchWriteItem" => {
            let mut wru = 0.0;
            let mut i = 0;
            for (_, writes) in request["RequestItems"].as_object().into_iter().flatten() {
                for _ in writes.as_array().into_iter().flatten() {
                    let (before, after) = item(i)?;
                    wru += write_units(size(before).max(size(after)));
                    i += 1;
                }
            }
            Ok((wru, 0.0))
        }
        "TransactWriteItems" => {
            let mut wru = 0.0;
            for (i, action) in request["TransactItems"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let (before, after) = item(i)?;
                let new = match action.get("Put") {
                    Some(put) => size(&put["Item"]),
                    None => size(after),
                };
                wru += 2.0 * write_units(size(before).max(new));
            }
            Ok((wru, 0.0))
        }
        "TransactGetItems" => {
            let n = request["TransactItems"].as_array().map_or(0, Vec::len);
            let rru = (0..n)
                .map(|i| Ok(read_units(size(item(i)?.0), Read::Transactional)))
                .sum::<Result<f64, BillError>>()?;
            Ok((0.0, rru))
        }
        _ => Err(BillError::NoRule {
            target: target.to_owned(),
        }),
    }
}

/// Lambda GB-seconds of one invocation at `memory_mb`, from what it took
/// on a machine with a full core: `cpu` of CPU time within `wall` of wall
/// time. At `memory_mb` below [`ONE_VCPU_MB`] the CPU part stretches by
/// `1769 / memory_mb` (the function's share of a vCPU); the rest (waiting
/// on DynamoDB) stays. The duration is rounded up to 1 ms, as billed.
pub fn lambda_gb_seconds(
    cpu: std::time::Duration,
    wall: std::time::Duration,
    memory_mb: f64,
) -> f64 {
    let cpu_s = cpu.as_secs_f64().min(wall.as_secs_f64());
    let waiting = wall.as_secs_f64() - cpu_s;
    let stretch = (ONE_VCPU_MB / memory_mb).max(1.0);
    let billed_ms = ((waiting + cpu_s * stretch) * 1000.0).ceil();
    billed_ms / 1000.0 * memory_mb / 1024.0
}

/// On-demand prices in US dollars, per unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    /// A DynamoDB write request unit.
    pub wru: f64,
    /// A DynamoDB read request unit.
    pub rru: f64,
    /// A Lambda request (invocation).
    pub lambda_request: f64,
    /// A Lambda GB-second, arm64.
    pub gb_second_arm: f64,
    /// An SQS request, standard queue.
    pub sqs_standard: f64,
    /// An SQS request, FIFO queue.
    pub sqs_fifo: f64,
    /// An EventBridge custom event (`PutEvents`).
    pub event: f64,
}

impl Prices {
    /// US East (N. Virginia), the public on-demand price lists (first
    /// tiers, free tiers not deducted) as of 2026-12-01: DynamoDB
    /// Standard table class on-demand $0.625 per million write request
    /// units and $0.125 per million read request units
    /// (<https://aws.amazon.com/dynamodb/pricing/on-demand/>); Lambda $0.20
    /// per million requests and, arm64, $0.0000133334 per GB-second
    /// (<https://aws.amazon.com/lambda/pricing/>); SQS $0.40 per million
    /// requests on standard queues and $0.50 on FIFO queues
    /// (<https://aws.amazon.com/sqs/pricing/>); EventBridge $1.00 per
    /// million custom events (<https://aws.amazon.com/eventbridge/pricing/>).
    pub const US_EAST_1: Prices = Prices {
        wru: 0.625e-6,
        rru: 0.125e-6,
        lambda_request: 0.20e-6,
        gb_second_arm: 0.000_013_333_4,
        sqs_standard: 0.40e-6,
        sqs_fifo: 0.50e-6,
        event: 1.00e-6,
    };

    /// Dollars for what `bill` counts (cancelled transactions included).
    pub fn requests(&self, bill: &Bill) -> f64 {
        bill.wru * self.wru
            + bill.rru * self.rru
            + bill.sqs_standard * self.sqs_standard
            + bill.sqs_fifo * self.sqs_fifo
            + bill.events * self.event
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item_of(bytes: usize) -> Value {
        // "id" (2 bytes) + a string of the rest.
        json!({"id": {"S": "x".repeat(bytes - 2)}})
    }

    fn entry(target: &str, request: Value, items: Value) -> Value {
        json!({"target": format!("DynamoDB_20120810.{target}"), "request": request, "status": 200, "items": items})
    }

    fn failed(mut e: Value, error: &str) -> Value {
        e["status"] = json!(400);
        e["error"] = json!(error);
        e
    }

    /// The documented examples: a 500-byte item is one write unit, 1.6 KB
    /// is two; a 3,500-byte item one strongly consistent read unit, 8 KB
    /// two, eventually consistent half of that, transactional twice.
    #[test]
    fn units_round_up_per_item() {
        assert_eq!(write_units(500), 1.0);
        assert_eq!(write_units(1024), 1.0);
        assert_eq!(write_units(1025), 2.0);
        assert_eq!(write_units(1638), 2.0);
        assert_eq!(read_units(3500, Read::Strong), 1.0);
        assert_eq!(read_units(8 * 1024, Read::Strong), 2.0);
        assert_eq!(read_units(8 * 1024, Read::Eventual), 1.0);
        assert_eq!(read_units(8 * 1024, Read::Transactional), 4.0);
        assert_eq!(read_units(10 * 1024, Read::Strong), 3.0);
        // A read of nothing still costs its minimum.
        assert_eq!(read_units(0, Read::Eventual), 0.5);
        assert_eq!(write_units(0), 1.0);
    }

    #[test]
    fn put_and_update_pay_for_the_larger_item() {
        let put = entry(
            "PutItem",
            json!({"Item": item_of(500)}),
            json!([{"before": item_of(1500), "after": item_of(500)}]),
        );
        assert_eq!(dynamodb_units(&put).unwrap(), (2.0, 0.0));
        let grow = entry(
            "UpdateItem",
            json!({}),
            json!([{"before": item_of(900), "after": item_of(2100)}]),
        );
        assert_eq!(dynamodb_units(&grow).unwrap(), (3.0, 0.0));
        let shrink = entry(
            "UpdateItem",
            json!({}),
            json!([{"before": item_of(2100), "after": item_of(900)}]),
        );
        assert_eq!(dynamodb_units(&shrink).unwrap(), (3.0, 0.0));
        let delete = entry(
            "DeleteItem",
            json!({}),
            json!([{"before": item_of(1500), "after": null}]),
        );
        assert_eq!(dynamodb_units(&delete).unwrap(), (2.0, 0.0));
    }

    /// A failed condition on an item costs by the larger of it and the new
    /// item; on no item, one unit.
    #[test]
    fn failed_conditional_writes_are_charged() {
        let put = failed(
            entry(
                "PutItem",
                json!({"Item": item_of(3000)}),
                json!([{"before": item_of(1500), "after": item_of(1500)}]),
            ),
            "ConditionalCheckFailedException",
        );
        assert_eq!(dynamodb_units(&put).unwrap(), (3.0, 0.0));
        let absent = failed(
            entry(
                "UpdateItem",
                json!({}),
                json!([{"before": null, "after": null}]),
            ),
            "ConditionalCheckFailedException",
        );
        assert_eq!(dynamodb_units(&absent).unwrap(), (1.0, 0.0));
        let big_absent = failed(
            entry(
                "PutItem",
                json!({"Item": item_of(5000)}),
                json!([{"before": null, "after": null}]),
            ),
            "ConditionalCheckFailedException",
        );
        assert_eq!(dynamodb_units(&big_absent).unwrap(), (1.0, 0.0));
    }

    /// Two underlying writes per item; the cancelled one counted as if
    /// applied, and reported apart.
    #[test]
    fn transactions_cost_two_units_per_item() {
        let tx = entry(
            "TransactWriteItems",
            json!({"TransactItems": [{"Update": {}}, {"Put": {"Item": item_of(300)}}, {"ConditionCheck": {}}]}),
            json!([
                {"before": item_of(200), "after": item_of(1100)},
                {"before": null, "after": item_of(300)},
                {"before": item_of(100), "after": item_of(100)},
            ]),
        );
        assert_eq!(dynamodb_units(&tx).unwrap(), (2.0 * 2.0 + 2.0 + 2.0, 0.0));
        let mut bill = Bill::default();
        let cancelled = failed(tx, "TransactionCanceledException");
        bill.add(&cancelled).unwrap();
        assert_eq!((bill.wru, bill.wru_cancelled), (8.0, 8.0));
        let get = entry(
            "TransactGetItems",
            json!({"TransactItems": [{"Get": {}}, {"Get": {}}]}),
            json!([{"before": item_of(500), "after": item_of(500)}, {"before": null, "after": null}]),
        );
        assert_eq!(dynamodb_units(&get).unwrap(), (0.0, 4.0));
    }

    /// BatchGetItem sizes each item on its own: 1.5 KB and 6.5 KB are
    /// 4 KB + 8 KB, three units strongly consistent (the guide's example).
    #[test]
    fn batch_get_rounds_each_item() {
        let batch = entry(
            "BatchGetItem",
            json!({"RequestItems": {"t": {"Keys": [{}, {}], "ConsistentRead": true}}}),
            json!([
                {"before": item_of(1536), "after": item_of(1536)},
                {"before": item_of(6656), "after": item_of(6656)},
            ]),
        );
        assert_eq!(dynamodb_units(&batch).unwrap(), (0.0, 3.0));
        let eventual = entry(
            "GetItem",
            json!({}),
            json!([{"before": item_of(100), "after": item_of(100)}]),
        );
        assert_eq!(dynamodb_units(&eventual).unwrap(), (0.0, 0.5));
    }

    #[test]
    fn unknown_operations_and_errors_are_refused() {
        let query = json!({"target": "DynamoDB_20120810.Query", "request": {}, "status": 200, "items": null});
        assert!(matches!(
            dynamodb_units(&query),
            Err(BillError::NoRule { .. })
        ));
        let throttled = failed(
            entry(
                "PutItem",
                json!({}),
                json!([{"before": null, "after": null}]),
            ),
            "ThrottlingException",
        );
        assert!(matches!(
            dynamodb_units(&throttled),
            Err(BillError::UnbilledError { .. })
        ));
        let describe = entry("DescribeTable", json!({}), json!([]));
        assert_eq!(dynamodb_units(&describe).unwrap(), (0.0, 0.0));
    }

    #[test]
    fn sqs_and_eventbridge_count_64_kb_chunks() {
        let mut bill = Bill::default();
        let small = json!({"MessageBody": "x", "MessageAttributes": {}});
        let big = json!({"MessageBody": "y".repeat(70_000)});
        bill.add(&json!({"target": "AmazonSQS.SendMessageBatch", "request": {"QueueUrl": "http://q/a.fifo", "Entries": [small, small]}}))
            .unwrap();
        bill.add(&json!({"target": "AmazonSQS.SendMessage", "request": {"QueueUrl": "http://q/b", "MessageBody": big["MessageBody"]}}))
            .unwrap();
        assert_eq!((bill.sqs_fifo, bill.sqs_standard), (1.0, 2.0));
        let entry = json!({"Source": "s", "DetailType": "d", "Detail": "{}"});
        bill.add(&json!({"target": "AWSEvents.PutEvents", "request": {"Entries": [entry, entry, entry]}}))
            .unwrap();
        assert_eq!(bill.events, 3.0);
        bill.add(&json!({"target": "DynamoDBStreams_20120810.GetRecords", "request": {}}))
            .unwrap();
        assert_eq!((bill.stream_requests, bill.dynamodb_requests), (1, 0));
    }

    #[test]
    fn items_parse_for_the_librarys_size_rule() {
        let item = json!({"id": {"S": "abc"}, "n": {"N": "12"}, "m": {"M": {"k": {"BOOL": true}}}, "l": {"L": [{"NULL": true}]}});
        // id 2+3, n 1+2, m 1+(3+1+1+1), l 1+(3+1+1)
        assert_eq!(size(&item), 5 + 3 + 7 + 6);
    }

    /// CPU stretches below one vCPU; waiting does not; rounded up to 1 ms.
    #[test]
    fn lambda_duration_scales_the_cpu_part() {
        use std::time::Duration;
        let ms = Duration::from_millis;
        // 1769 MB: 10 ms of wall time, 1.7289 GB.
        let full = lambda_gb_seconds(ms(2), ms(10), 1769.0);
        assert!((full - 0.010 * 1769.0 / 1024.0).abs() < 1e-12, "{full}");
        // 128 MB: 8 ms waiting + 2 ms x 13.82 = 35.64 -> 36 ms at 0.125 GB.
        let small = lambda_gb_seconds(ms(2), ms(10), 128.0);
        assert!((small - 0.036 * 0.125).abs() < 1e-12, "{small}");
        // Above one vCPU nothing speeds up.
        let big = lambda_gb_seconds(ms(2), ms(10), 3538.0);
        assert!((big - 0.010 * 3538.0 / 1024.0).abs() < 1e-12, "{big}");
    }
}
