"""Writes events/kinesis-payments-kpl.json: a Kinesis batch whose records were
packed by the awslabs KPL-format aggregator (PyPI aws-kinesis-agg 1.2.3), an
implementation independent of the library's deaggregation (the package
imports six without declaring it).

    python3 -m venv /tmp/kpl-venv
    /tmp/kpl-venv/bin/pip install 'aws-kinesis-agg==1.2.3' 'protobuf==7.36.2' 'six==1.17.0'
    /tmp/kpl-venv/bin/python tests/kit/kpl/kinesis_payments_kpl.py > events/kinesis-payments-kpl.json

The output is deterministic: the same bytes on every run.
"""

import base64
import json
import sys

from aws_kinesis_agg.aggregator import RecordAggregator
from aws_kinesis_agg.deaggregator import deaggregate_records

STREAM = "arn:aws:kinesis:us-east-1:123456789012:stream/payments"
SHARD = "shardId-000000000002"
ROLE = "arn:aws:iam::123456789012:role/payments-stream-consumer"
# 56-digit sequence numbers, increasing, as a shard gives them.
FIRST_SEQUENCE = 49658009251370745322364452741839613349526093727455690800
STEP = 1329227995784915872903807060280344576


def payment(payment_id, account, cents, at):
    return json.dumps(
        {
            "payment_id": payment_id,
            "account_id": account,
            "amount_cents": cents,
            "created_at": "2026-12-03T00:00:%06.3fZ" % at,
        },
        separators=(",", ":"),
    ).encode()


def aggregate(user_records):
    """One Kinesis record's (partition key, data) packed from `user_records`:
    (partition key, data, explicit hash key or None) each."""
    aggregator = RecordAggregator()
    for pk, data, ehk in user_records:
        full = aggregator.add_user_record(pk, data, ehk)
        assert full is None, "the test aggregates fit one record"
    pk, _ehk, data = aggregator.clear_and_get().get_contents()
    return pk, data


# The Kinesis records of the batch, in sequence order: aggregates packed by
# the aggregator, and one plain record put without aggregation.
RECORDS = [
    aggregate(
        [
            ("acct-1", payment("pay-3001", "acct-1", 1500, 0.101), None),
            ("acct-2", payment("pay-3002", "acct-2", 700, 0.212), None),
            (
                "acct-1",
                payment("pay-3003", "acct-1", 250, 0.323),
                "170141183460469231731687303715884105728",
            ),
            ("acct-3", payment("pay-3004", "acct-3", 4200, 0.434), None),
        ]
    ),
    ("acct-2", payment("pay-3005", "acct-2", 900, 0.545)),
    aggregate(
        [
            ("acct-3", payment("pay-3006", "acct-3", 100, 0.656), None),
            # The producer's retry of pay-3001: the same payment again, in
            # another aggregate, under a new sequence number.
            ("acct-1", payment("pay-3001", "acct-1", 1500, 0.101), None),
            ("acct-1", payment("pay-3007", "acct-1", 3300, 0.767), None),
        ]
    ),
]


def event():
    records = []
    for i, (pk, data) in enumerate(RECORDS):
        sequence = str(FIRST_SEQUENCE + i * STEP)
        records.append(
            {
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": pk,
                    "sequenceNumber": sequence,
                    "data": base64.b64encode(data).decode(),
                    "approximateArrivalTimestamp": 1796256000.125 + i,
                },
                "eventSource": "aws:kinesis",
                "eventVersion": "1.0",
                "eventID": "%s:%s" % (SHARD, sequence),
                "eventName": "aws:kinesis:record",
                "invokeIdentityArn": ROLE,
                "awsRegion": "us-east-1",
                "eventSourceARN": STREAM,
            }
        )
    return {"Records": records}


def check(event):
    """The aggregator's own deaggregator reads the batch back: 8 user records."""
    users = list(deaggregate_records(json.loads(json.dumps(event))["Records"]))
    got = [
        (
            u["kinesis"]["partitionKey"],
            json.loads(base64.b64decode(u["kinesis"]["data"]))["payment_id"],
            u["kinesis"].get("subSequenceNumber"),
        )
        for u in users
    ]
    assert got == [
        ("acct-1", "pay-3001", 0),
        ("acct-2", "pay-3002", 1),
        ("acct-1", "pay-3003", 2),
        ("acct-3", "pay-3004", 3),
        ("acct-2", "pay-3005", None),
        ("acct-3", "pay-3006", 0),
        ("acct-1", "pay-3001", 1),
        ("acct-1", "pay-3007", 2),
    ], got


if __name__ == "__main__":
    e = event()
    check(e)
    json.dump(e, sys.stdout, indent=2)
    sys.stdout.write("\n")
