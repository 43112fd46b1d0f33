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

Binds 127.0.0.1 only. Prints `READY <port>` on stdout once listening. Exits when
its stdin closes, so it never outlives the test process that started it.
"""

import argparse
import json
import os
import sys
import threading
import time

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server


class SerializedDynamoDB:
    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.counts = {}
        self.counts_lock = threading.Lock()
        self.latency_s = 0.0

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_launcher/counts"):
            return self.serve_counts(environ, start_response)
        if path.startswith("/_launcher/latency/"):
            self.latency_s = float(path.rsplit("/", 1)[1]) / 1000.0
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
