#!/usr/bin/env python3
"""moto server for the test suite, with DynamoDB requests served one at a time.

moto's DynamoDB backend is not safe under concurrent requests (transactions
deep-copy and restore whole tables without a lock: two concurrent conditional
transactions can both win). This launcher wraps moto's WSGI app so requests whose
X-Amz-Target starts with `DynamoDB_` run under one lock, with the whole response
body read inside it. SQS and the rest stay concurrent (long polls).

A transaction's backup covers only the items it touches instead of a deep copy
of whole tables (see `cheap_transaction_backups`): a transaction then costs the
same on a table of 1000 items as on an empty one (10 ms instead of ~45 ms).

It also counts requests per X-Amz-Target operation:
  GET  /_launcher/counts   -> {"DynamoDB_20120810.PutItem": 3, ...}
  POST /_launcher/counts/reset
and can add a simulated network round trip to every AWS request (slept
outside the lock, as a network would add it), for benchmarks:
  POST /_launcher/latency/<ms>
DynamoDB Streams requests share that lock (a stream read never sees half a
transaction), and a cancelled transaction leaves no stream records (see
`transaction_stream_rollback`).

For crash tests it kills a process right after the n-th scoped request
from now has been answered (its response written):
  POST /_launcher/kill-after/<n>/<pid>/<marker>
counting only the scoped requests (DynamoDB, DynamoDB Streams, SQS,
EventBridge) whose body contains <marker> (a table name, a queue URL, a bus:
give a test's resources a common prefix), so tests running side by side do
not disturb each other. Once the
kill has fired, further requests with <marker> are refused unapplied (HTTP
500) until the marker is disarmed (pid 0): a request the doomed process
sends between its n-th answer and the signal landing never takes effect.

Fault injection, scoped the same way (scoped requests whose body contains
<marker>; the first matching marker decides):
  POST   /_launcher/faults/<marker>?rate=0.1&kinds=throttle,throughput,500,reset,slow
         &seed=N&slow_ms=500&stall_ms=1000&max=N&target=TransactWriteItems
  GET    /_launcher/faults/<marker>  -> {"requests": 812, "injected": 80,
                                         "throttle": 17, ..., "active": true}
  DELETE /_launcher/faults/<marker>  (or rate=0): stop; the counts stay readable
Each matching request gets a fault with probability `rate` (a seeded RNG),
its kind drawn uniformly from `kinds`; `max` bounds the faults injected (then
injection stops), `target` restricts them to one operation (the X-Amz-Target
suffix). A POST starts fresh counts. A request answered by a fault that
never reached moto does not count for kill-after. Kinds:
  throttle    HTTP 400 ThrottlingException        } decided before moto sees
  throughput  HTTP 400 ProvisionedThroughput...   } the request: nothing is
  500         HTTP 500 InternalServerError        } applied
  reset       the connection is shut down without an answer (nothing applied)
  slow        applied, then answered `slow_ms` later (past the client's attempt
              timeout: the client cannot know whether it was applied)
  stall       held `stall_ms` before reaching moto, then applied and answered
              (a request overtaken by later ones: lease races)
  conflict    TransactWriteItems: HTTP 400 TransactionCanceledException
              whose first cancellation reason is TransactionConflict (the
              others None), as DynamoDB answers a transaction on an item
              another request is writing; PutItem, UpdateItem, DeleteItem:
              HTTP 400 TransactionConflictException, as DynamoDB answers a
              write on an item in an ongoing transaction; nothing applied
              (moto itself never answers either: it serves DynamoDB requests
              one at a time)
  partial     SendMessageBatch only: the second half of the entries (at least
              one) is not applied and answered in `Failed` (SenderFault
              false, InternalError), the rest goes to moto
The default kinds are the first five.

With `--keep-alive` connections stay open between requests (HTTP/1.1
keep-alive, as DynamoDB's and SQS's endpoints serve them) instead of werkzeug's
one connection per request: for benchmarks, where a TCP connect and teardown
per request would be billed to the client and no real endpoint charges it.

For the request-unit bill (benchmarks) it keeps a ledger of every DynamoDB,
DynamoDB Streams, SQS and EventBridge request it serves normally (not those
refused after a kill; one answered by an injected error or conflict, which
never reaches moto, is kept as {"target", "request", "fault": kind} only, for
tests that read what was sent):
  POST   /_launcher/ledger/reset  -> starts an empty ledger (and keeps one)
  GET    /_launcher/ledger        -> [{"target": "DynamoDB_20120810.PutItem",
                                      "request": {...}, "status": 400,
                                      "error": "ConditionalCheckFailedException",
                                      "reasons": [...], "items": [...]}, ...]
  DELETE /_launcher/ledger        -> stops keeping one
For a DynamoDB item request, `items` lists each item the request names (in
the request's order) with the item as it stood before the request and after
it, read from moto's tables under the DynamoDB lock: {"table": ..., "before":
{...} | null, "after": {...} | null} (DynamoDB JSON attributes), so the bill
can size them with the library's rule. `reasons` are a cancelled
transaction's cancellation reason codes; `unprocessed` the keys a
BatchGetItem left unprocessed. Query and Scan name no items (`items` null):
the bill refuses them rather than guess.

Binds 127.0.0.1 only. Prints `READY <port>` on stdout once listening. Exits when
its stdin closes, so it never outlives the test process that started it.
"""

import argparse
import io
import json
import os
import random
import signal
import socket
import sys
import threading
import time
import urllib.parse
import uuid

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server
from werkzeug.wsgi import LimitedStream


# Served one at a time (DynamoDB, DynamoDB Streams), and, with these, scoped
# by marker for faults and kill-after (SQS, EventBridge: their bodies name the
# queue URL or the bus).
LOCKED_TARGETS = ("DynamoDB_", "DynamoDBStreams_")
SCOPED_TARGETS = LOCKED_TARGETS + ("AmazonSQS.", "AWSEvents.")


class KillAfterResponse:
    """A response body whose close() (called once it is written) kills a pid."""

    def __init__(self, body, pid):
        self.body = body
        self.pid = pid

    def __iter__(self):
        return iter([self.body])

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# The requests a `conflict` fault answers: a transaction, or a single-item
# write on an item in another request's transaction.
CONFLICT_TARGETS = (".TransactWriteItems", ".PutItem", ".UpdateItem", ".DeleteItem")

FAULT_KINDS = ("throttle", "throughput", "500", "reset", "slow", "stall", "partial", "conflict")

# Error bodies as DynamoDB sends them (awsJson1_0): the SDK takes the code from
# `__type` after the `#`, and classifies ThrottlingException and
# ProvisionedThroughputExceededException as throttling, a 500 as transient.
FAULT_ERRORS = {
    "throttle": (
        "400 Bad Request",
        "com.amazonaws.dynamodb.v20120810#ThrottlingException",
        "Rate of requests exceeds the allowed throughput (injected fault).",
    ),
    "throughput": (
        "400 Bad Request",
        "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
        "The level of configured provisioned throughput for the table was exceeded "
        "(injected fault).",
    ),
    "500": (
        "500 Internal Server Error",
        "com.amazonaws.dynamodb.v20120810#InternalServerError",
        "Internal server error (injected fault).",
    ),
    # A `conflict` on a single-item write (not a fault kind of its own).
    "item-conflict": (
        "400 Bad Request",
        "com.amazonaws.dynamodb.v20120810#TransactionConflictException",
        "Transaction is ongoing for the item (injected fault).",
    ),
}


class Faults:
    """The fault plan of one marker, and what it injected."""

    def __init__(self, query):
        def one(name, default):
            values = query.get(name)
            return values[0] if values else default

        self.rate = float(one("rate", "0"))
        kinds = [k for k in one("kinds", ",".join(FAULT_KINDS[:5])).split(",") if k]
        unknown = [k for k in kinds if k not in FAULT_KINDS]
        if unknown or not kinds:
            raise ValueError(f"unknown fault kinds {unknown}; known: {FAULT_KINDS}")
        self.kinds = kinds
        self.rng = random.Random(int(one("seed", "0")))
        self.slow_s = float(one("slow_ms", "500")) / 1000.0
        self.stall_s = float(one("stall_ms", "1000")) / 1000.0
        max_faults = one("max", None)
        self.max = int(max_faults) if max_faults is not None else None
        self.target = one("target", None)
        self.active = self.rate > 0
        self.counts = {"requests": 0, "injected": 0}
        self.counts.update({k: 0 for k in FAULT_KINDS})

    def decide(self, target):
        """The fault for one matching request, or None (call under a lock)."""
        if self.target and not target.endswith("." + self.target):
            return None
        self.counts["requests"] += 1
        if not self.active or (self.max is not None and self.counts["injected"] >= self.max):
            return None
        if self.rng.random() >= self.rate:
            return None
        kind = self.rng.choice(self.kinds)
        if kind == "partial" and not target.endswith(".SendMessageBatch"):
            return None
        if kind == "conflict" and not target.endswith(CONFLICT_TARGETS):
            return None
        self.counts[kind] += 1
        self.counts["injected"] += 1
        return kind

    def report(self):
        return dict(self.counts, active=self.active)


def error_response(start_response, kind):
    status, error_type, message = FAULT_ERRORS[kind]
    body = json.dumps({"__type": error_type, "message": message}).encode()
    start_response(
        status,
        [
            ("Content-Type", "application/x-amz-json-1.0"),
            ("Content-Length", str(len(body))),
            ("x-amzn-RequestId", str(uuid.uuid4())),
        ],
    )
    return [body]


def conflict_response(start_response, request_body):
    """A TransactWriteItems cancelled by a conflicting request on its first
    item: one cancellation reason per item, as DynamoDB lists them."""
    try:
        items = json.loads(request_body or b"{}").get("TransactItems") or []
    except ValueError:
        items = []
    reasons = [{"Code": "None"} for _ in items] or [{"Code": "None"}]
    reasons[0] = {
        "Code": "TransactionConflict",
        "Message": "Transaction is ongoing for the item (injected fault)",
    }
    codes = ", ".join(r["Code"] for r in reasons)
    body = json.dumps(
        {
            "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "Message": "Transaction cancelled, please refer cancellation reasons for specific "
            f"reasons [{codes}]",
            "CancellationReasons": reasons,
        }
    ).encode()
    start_response(
        "400 Bad Request",
        [
            ("Content-Type", "application/x-amz-json-1.0"),
            ("Content-Length", str(len(body))),
            ("x-amzn-RequestId", str(uuid.uuid4())),
        ],
    )
    return [body]


def reset_connection(environ):
    """Drops the client's connection without an answer: the socket is shut
    down (the client reads end-of-stream where the answer should be: hyper's
    "connection closed before message completed", a transient dispatch
    failure for the SDK), and werkzeug sees a dropped connection."""
    sock = environ.get("werkzeug.socket")
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    raise ConnectionResetError("connection reset (injected fault)")


def cheap_transaction_backups():
    """Makes moto's TransactWriteItems cost independent of the table size.

    moto backs up every table a transaction touches with a deep copy of the
    whole table (to restore it when the transaction is cancelled): 10 ms on an
    empty table, ~40 ms at 1000 items, ~170 ms at 5000, per transaction. Here
    the backup is a shallow copy of the table whose touched items (the keys
    named by the transaction; an update changes its item in place) are deep
    copies: restoring it restores exactly what the transaction may have
    changed. Safe because DynamoDB requests are served one at a time (the
    keys travel in a thread-local all the same). Tables with a range key keep
    the full copy. `--full-transaction-backups` turns this off."""
    import copy as real_copy

    from moto.dynamodb import models as ddb_models
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    current = threading.local()
    original = ddb_models.DynamoDBBackend.transact_write_items

    def backup(table):
        if table.range_key_attr is not None:
            return real_copy.deepcopy(table)
        clone = real_copy.copy(table)
        clone.items = real_copy.copy(table.items)
        for key in current.keys.get(table.name, ()):
            if key in table.items:
                clone.items[key] = real_copy.deepcopy(table.items[key])
        return clone

    class CopyModule:
        """`copy` as moto's dynamodb models module sees it."""

        def __getattr__(self, name):
            return getattr(real_copy, name)

        @staticmethod
        def deepcopy(obj, memo=None):
            if isinstance(obj, Table) and getattr(current, "keys", None) is not None:
                return backup(obj)
            return real_copy.deepcopy(obj, memo)

    def transact_write_items(self, transact_items):
        keys = {}
        for item in transact_items:
            try:
                _, op = next(iter(item.items()))
                table = self.tables.get(op.get("TableName"))
                attrs = op.get("Key") or op.get("Item") or {}
                if table is not None and table.hash_key_attr in attrs:
                    keys.setdefault(table.name, []).append(
                        DynamoType(attrs[table.hash_key_attr])
                    )
            except (AttributeError, StopIteration, TypeError):
                pass  # malformed: moto reports it
        current.keys = keys
        try:
            return original(self, transact_items)
        finally:
            current.keys = None

    ddb_models.DynamoDBBackend.transact_write_items = transact_write_items
    ddb_models.copy = CopyModule()


def transaction_stream_rollback():
    """A cancelled TransactWriteItems leaves no DynamoDB stream records.

    moto appends a stream record to the table's shard as each item of a
    transaction is written, and on cancellation puts back its backup of the
    table. With the item-level backups above the shard is shared with the
    backup, so the records of the items written before the failing one would
    stay (a relay would publish messages of a transaction that never
    happened); with moto's whole-table backup the restored table gets a copy
    of the shard, so open shard iterators go on reading the old one and never
    see a later write. Here the shard's length is noted before the
    transaction; on cancellation it is cut back to that length and stays the
    restored table's shard (same object: iterators keep working). Sequence
    numbers of the dropped records are reused, which nobody can tell: stream
    requests are served under the same lock as DynamoDB's."""
    from moto.dynamodb import models as ddb_models

    original = ddb_models.DynamoDBBackend.transact_write_items

    def transact_write_items(self, transact_items):
        shards = []
        for table in self.tables.values():
            shard = getattr(table, "stream_shard", None)
            if shard is not None:
                shards.append((table.name, shard, len(shard.items)))
        try:
            return original(self, transact_items)
        except BaseException:
            for name, shard, length in shards:
                del shard.items[length:]
                restored = self.tables.get(name)
                if restored is not None and getattr(restored, "stream_shard", None) is not None:
                    restored.stream_shard = shard
                    shard.table = restored
            raise

    ddb_models.DynamoDBBackend.transact_write_items = transact_write_items


class KeepAliveRequestHandler(MotoRequestHandler):
    """Keeps a connection open after its answer. werkzeug closes every
    connection: http.server does not drain an unread request body before the
    next request line, and werkzeug's own drain after each answer reads the
    socket dry (it would eat the next request). Here the handler reads the
    socket through a stream limited to the request's Content-Length while the
    request runs, so both drains stop at the body's end. A chunked request
    still closes its connection. Nagle's algorithm is off: werkzeug writes
    the head and the body of an answer separately, and on a kept connection
    the body would wait for the client's delayed ACK (40 ms)."""

    disable_nagle_algorithm = True

    def parse_request(self):
        if not super().parse_request():
            return False
        self.connection_rfile = self.rfile
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        if chunked:
            self.close_connection = True
        else:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile = LimitedStream(self.connection_rfile, length)
        return True

    def send_header(self, keyword, value):
        if keyword.lower() == "connection" and value.lower() == "close":
            if not self.close_connection:
                return
        super().send_header(keyword, value)

    def run_wsgi(self):
        try:
            super().run_wsgi()
            if not self.close_connection:
                self.rfile.exhaust()
        except Exception:  # the client went away, or a fault dropped it
            self.close_connection = True
        finally:
            self.rfile = self.connection_rfile


def item_requests(target, request):
    """(table, key-or-item) pairs a DynamoDB item request names, in order;
    None for a request that names no items one by one (Query, Scan)."""
    op = target.rsplit(".", 1)[-1]
    if op in ("GetItem", "DeleteItem", "UpdateItem"):
        return [(request.get("TableName"), request.get("Key") or {})]
    if op == "PutItem":
        return [(request.get("TableName"), request.get("Item") or {})]
    if op in ("TransactWriteItems", "TransactGetItems"):
        pairs = []
        for entry in request.get("TransactItems") or []:
            for action in entry.values():
                pairs.append((action.get("TableName"), action.get("Key") or action.get("Item") or {}))
        return pairs
    if op == "BatchGetItem":
        return [
            (table, key)
            for table, spec in (request.get("RequestItems") or {}).items()
            for key in spec.get("Keys") or []
        ]
    if op == "BatchWriteItem":
        pairs = []
        for table, writes in (request.get("RequestItems") or {}).items():
            for w in writes:
                if "PutRequest" in w:
                    pairs.append((table, w["PutRequest"].get("Item") or {}))
                elif "DeleteRequest" in w:
                    pairs.append((table, w["DeleteRequest"].get("Key") or {}))
        return pairs
    if op in ("Query", "Scan", "ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction"):
        return None
    return []


def region_of(environ):
    """The region of a SigV4-signed request (its credential scope)."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    marker = "Credential="
    if marker in auth:
        scope = auth.split(marker, 1)[1].split(",", 1)[0].split("/")
        if len(scope) >= 3:
            return scope[2]
    return "us-east-1"


def stored_item(region, table_name, attrs):
    """The item moto stores at the key of `attrs` (DynamoDB JSON), or None."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType

    try:
        table = dynamodb_backends[DEFAULT_ACCOUNT_ID][region].tables.get(table_name)
        if table is None or table.hash_key_attr not in attrs:
            return None
        hash_key = DynamoType(attrs[table.hash_key_attr])
        range_key = None
        if table.range_key_attr is not None:
            if table.range_key_attr not in attrs:
                return None
            range_key = DynamoType(attrs[table.range_key_attr])
        item = table.get_item(hash_key, range_key)
    except Exception:  # a malformed request: moto answers it
        return None
    return json.loads(json.dumps(item.to_json()["Attributes"])) if item is not None else None


class SerializedDynamoDB:
    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.counts = {}
        self.counts_lock = threading.Lock()
        self.latency_s = 0.0
        self.kills = {}  # marker -> {"n": int, "pid": int, "seen": int}
        self.faults = {}  # marker (bytes) -> Faults
        self.ledger = None  # list of entries while kept

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_launcher/counts"):
            return self.serve_counts(environ, start_response)
        if path.startswith("/_launcher/latency/"):
            self.latency_s = float(path.rsplit("/", 1)[1]) / 1000.0
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]
        if path.startswith("/_launcher/kill-after/"):
            n, pid, marker = path.split("/")[-3:]
            with self.counts_lock:
                if int(pid) > 0:
                    self.kills[marker.encode()] = {"n": int(n), "pid": int(pid), "seen": 0}
                else:
                    self.kills.pop(marker.encode(), None)
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]
        if path.startswith("/_launcher/faults/"):
            return self.serve_faults(environ, start_response)
        if path.startswith("/_launcher/ledger"):
            return self.serve_ledger(environ, start_response)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if self.latency_s:
            time.sleep(self.latency_s)
        if target:
            with self.counts_lock:
                self.counts[target] = self.counts.get(target, 0) + 1
        # DynamoDB and DynamoDB Streams requests run one at a time (a stream
        # read never sees a transaction half applied); SQS and EventBridge
        # requests run concurrently (long polls) but are scoped for faults
        # and kills alike.
        locked = target.startswith(LOCKED_TARGETS)
        if not locked and not target.startswith(SCOPED_TARGETS):
            return self.app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        request_body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(request_body)
        with self.counts_lock:
            fenced = any(
                kill.get("fired") and marker in request_body
                for marker, kill in self.kills.items()
            )
        if fenced:
            return error_response(start_response, "500")
        fault, delay_s = self.fault_for(target, request_body)
        if fault == "partial":
            return self.partial_batch(environ, start_response, request_body)
        if fault in FAULT_ERRORS or fault == "conflict":
            self.ledger_fault(target, request_body, fault)
        if fault in FAULT_ERRORS:
            return error_response(start_response, fault)
        if fault == "conflict":
            if target.endswith(".TransactWriteItems"):
                return conflict_response(start_response, request_body)
            return error_response(start_response, "item-conflict")
        if fault == "reset":
            reset_connection(environ)
        if fault == "stall":
            time.sleep(delay_s)
        keep = self.ledger is not None
        named = None
        if keep:
            try:
                request = json.loads(request_body or b"{}")
            except ValueError:
                request = {}
            if target.startswith("DynamoDB_"):
                named = item_requests(target, request)
        if locked:
            with self.lock:
                if named:
                    region = region_of(environ)
                    before = [stored_item(region, t, a) for t, a in named]
                status, headers, exc_info, body = self.call_app(environ)
                if named:
                    after = [stored_item(region, t, a) for t, a in named]
        else:
            status, headers, exc_info, body = self.call_app(environ)
        if keep:
            entry = {"target": target, "request": request, "status": int(status.split()[0])}
            if not status.startswith("200"):
                try:
                    answer = json.loads(body or b"{}")
                except ValueError:
                    answer = {}
                entry["error"] = str(answer.get("__type", "")).rsplit("#", 1)[-1]
                entry["reasons"] = [
                    r.get("Code") for r in answer.get("CancellationReasons") or []
                ]
            elif target.endswith(".BatchGetItem"):
                try:
                    answer = json.loads(body or b"{}")
                except ValueError:
                    answer = {}
                entry["unprocessed"] = sum(
                    len(spec.get("Keys") or [])
                    for spec in (answer.get("UnprocessedKeys") or {}).values()
                )
            if named is None and target.startswith("DynamoDB_"):
                entry["items"] = None
            elif named:
                entry["items"] = [
                    {"table": t, "before": b, "after": a}
                    for (t, _), b, a in zip(named, before, after)
                ]
            with self.counts_lock:
                if self.ledger is not None:
                    self.ledger.append(entry)
        if fault == "slow":
            # Applied; the answer comes after the client has given up.
            time.sleep(delay_s)
        start_response(status, headers, exc_info)
        victim = None
        with self.counts_lock:
            for marker, kill in list(self.kills.items()):
                if marker in request_body and not kill.get("fired"):
                    kill["seen"] += 1
                    if kill["seen"] == kill["n"]:
                        victim = kill["pid"]
                        kill["fired"] = True
        if victim is not None:
            return KillAfterResponse(body, victim)
        return [body]

    def ledger_fault(self, target, request_body, fault):
        """Keeps a request answered by an injected error (it never reached
        moto) in the ledger, marked {"fault": kind}: a test reads what was
        sent; the bill leaves it out."""
        if self.ledger is None:
            return
        try:
            request = json.loads(request_body or b"{}")
        except ValueError:
            request = {}
        entry = {"target": target, "request": request, "fault": fault}
        with self.counts_lock:
            if self.ledger is not None:
                self.ledger.append(entry)

    def partial_batch(self, environ, start_response, request_body):
        """A SendMessageBatch whose second half of entries fails (per entry)."""
        request = json.loads(request_body or b"{}")
        entries = request.get("Entries") or []
        cut = len(entries) // 2
        kept, dropped = entries[:cut], entries[cut:]
        headers = [("Content-Type", "application/x-amz-json-1.0")]
        result = {"Successful": []}
        if kept:
            request["Entries"] = kept
            body = json.dumps(request).encode()
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
            status, headers, exc_info, answer = self.call_app(environ)
            if not status.startswith("200"):
                start_response(status, headers, exc_info)
                return [answer]
            result = json.loads(answer)
        result.setdefault("Failed", []).extend(
            {
                "Id": entry.get("Id"),
                "SenderFault": False,
                "Code": "InternalError",
                "Message": "entry failed (injected fault)",
            }
            for entry in dropped
        )
        body = json.dumps(result).encode()
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        start_response("200 OK", headers + [("Content-Length", str(len(body)))])
        return [body]

    def call_app(self, environ):
        """Runs moto on one request: (status, headers, exc_info, whole body)."""
        captured = {}

        def capture(status, headers, exc_info=None):
            captured["args"] = (status, headers, exc_info)
            return lambda _data: None

        result = self.app(environ, capture)
        try:
            body = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close:
                close()
        status, headers, exc_info = captured["args"]
        return status, headers, exc_info, body

    def fault_for(self, target, request_body):
        """(kind, delay in s) for one scoped request; kind None: no fault."""
        with self.counts_lock:
            for marker, faults in self.faults.items():
                if marker in request_body:
                    kind = faults.decide(target)
                    delay_s = {"slow": faults.slow_s, "stall": faults.stall_s}.get(kind, 0.0)
                    return kind, delay_s
        return None, 0.0

    def serve_faults(self, environ, start_response):
        method = environ.get("REQUEST_METHOD")
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        try:
            marker = path_marker(environ.get("PATH_INFO", ""), "/_launcher/faults/")
            with self.counts_lock:
                stop = method == "DELETE" or (
                    method == "POST" and float(query.get("rate", ["0"])[0]) <= 0
                )
                if stop:
                    if marker in self.faults:
                        self.faults[marker].active = False
                elif method == "POST":
                    self.faults[marker] = Faults(query)
                faults = self.faults.get(marker)
                report = faults.report() if faults else {"requests": 0, "injected": 0}
        except ValueError as e:
            body = str(e).encode()
            start_response(
                "400 Bad Request",
                [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))],
            )
            return [body]
        body = json.dumps(report).encode()
        start_response(
            "200 OK",
            [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
        )
        return [body]

    def serve_ledger(self, environ, start_response):
        method = environ.get("REQUEST_METHOD")
        with self.counts_lock:
            if method == "POST":
                self.ledger = []
            elif method == "DELETE":
                self.ledger = None
            body = json.dumps(self.ledger or []).encode()
        start_response(
            "200 OK",
            [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
        )
        return [body]

    def serve_counts(self, environ, start_response):
        with self.counts_lock:
            if environ.get("REQUEST_METHOD") == "POST":
                self.counts.clear()
            body = json.dumps(self.counts).encode()
        start_response(
            "200 OK",
            [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
        )
        return [body]


def path_marker(path, prefix):
    marker = urllib.parse.unquote(path[len(prefix):])
    if not marker:
        raise ValueError("empty marker")
    return marker.encode()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--full-transaction-backups",
        action="store_true",
        help="keep moto's whole-table copy per transaction (slow on large tables)",
    )
    parser.add_argument(
        "--keep-cancelled-stream-records",
        action="store_true",
        help="leave moto's stream records of cancelled transactions (to show the bug)",
    )
    parser.add_argument(
        "--keep-alive",
        action="store_true",
        help="keep connections open between requests (benchmarks)",
    )
    args = parser.parse_args()
    if not args.full_transaction_backups:
        cheap_transaction_backups()
    if not args.keep_cancelled_stream_records:
        transaction_stream_rollback()

    app = SerializedDynamoDB(DomainDispatcherApplication(create_backend_app))
    handler = KeepAliveRequestHandler if args.keep_alive else MotoRequestHandler
    server = make_server("127.0.0.1", args.port, app, threaded=True, request_handler=handler)
    port = server.server_address[1]

    def exit_when_stdin_closes():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            os._exit(0)

    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    print(f"READY {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
