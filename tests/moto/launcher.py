#!/usr/bin/env python3
"""moto server for the test suite, with DynamoDB requests served one at a time.

moto's DynamoDB backend is not safe under concurrent requests (transactions
deep-copy and restore whole tables without a lock: two concurrent conditional
transactions can both win). This launcher wraps moto's WSGI app so requests whose
X-Amz-Target starts with `DynamoDB_` run under one lock, with the whole response
body read inside it. SQS and the rest stay concurrent (long polls).

It also counts requests per X-Amz-Target operation:
  GET  /_launcher/counts   -> {"DynamoDB_20120810.PutItem": 3, ...}
  POST /_launcher/counts/reset
and can add a simulated network round trip to every AWS request (slept
outside the lock, as a network would add it), for benchmarks:
  POST /_launcher/latency/<ms>
and, for crash tests, kills a process right after the n-th DynamoDB request
from now has been answered (its response written):
  POST /_launcher/kill-after/<n>/<pid>/<marker>
counting only the DynamoDB requests whose body contains <marker> (a table
name), so tests running side by side do not disturb each other (pid 0
disarms a marker).

Binds 127.0.0.1 only. Prints `READY <port>` on stdout once listening. Exits when
its stdin closes, so it never outlives the test process that started it.
"""

import argparse
import io
import json
import os
import sys
import signal
import threading
import time

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server


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


class SerializedDynamoDB:
    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.counts = {}
        self.counts_lock = threading.Lock()
        self.latency_s = 0.0
        self.kills = {}  # marker -> {"n": int, "pid": int, "seen": int}

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
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if self.latency_s:
            time.sleep(self.latency_s)
        if target:
            with self.counts_lock:
                self.counts[target] = self.counts.get(target, 0) + 1
        if not target.startswith("DynamoDB_"):
            return self.app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        request_body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(request_body)
        with self.lock:
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
        start_response(status, headers, exc_info)
        victim = None
        with self.counts_lock:
            for marker, kill in list(self.kills.items()):
                if marker in request_body:
                    kill["seen"] += 1
                    if kill["seen"] == kill["n"]:
                        victim = kill["pid"]
                        del self.kills[marker]
        if victim is not None:
            return KillAfterResponse(body, victim)
        return [body]

    def serve_counts(self, environ, start_response):
        with self.counts_lock:
            if environ.get("REQUEST_METHOD") == "POST":
                self.counts.clear()
            body = json.dumps(self.counts).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args()

    app = SerializedDynamoDB(DomainDispatcherApplication(create_backend_app))
    server = make_server(
        "127.0.0.1", args.port, app, threaded=True, request_handler=MotoRequestHandler
    )
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
