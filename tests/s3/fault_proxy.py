#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""An HTTP/1.1 reverse proxy between ckpt's S3 storage and the test server, which fails requests on demand.

    fault_proxy.py --upstream 127.0.0.1:PORT [--port N] [--verify-sigv4 ACCESS:SECRET] [--region us-east-1]
                   [--exit-with-stdin]

Prints "PORT <n>" once it listens on 127.0.0.1 (port 0, the default, lets the system choose); exits on SIGTERM, and
with --exit-with-stdin also when its standard input ends (so that a runner killed itself leaves no proxy behind).

Requests are forwarded one upstream connection each, while the client's connection is kept alive, as a load
balancer in front of S3 does. Each request is classified into a kind (see classify), and the first fault rule that
matches its kind decides what happens to it instead of a plain forward. Rules, and a log of every request, are read
and changed through JSON endpoints under /__ckpt_proxy/ on the same port (tests/s3/README.md lists them).

With --verify-sigv4, every request's AWS Signature Version 4 is checked as S3 checks it, since the test server
accepts any signature: a request the proxy rejects would be rejected by S3.
"""

import argparse
import http.client
import http.server
import json
import os
import select
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
import urllib.parse
from xml.sax.saxutils import escape

from sigv4 import SigV4Verifier

CONTROL = "/__ckpt_proxy/"
KINDS = ("put", "upload_part", "copy_part", "copy", "initiate", "complete", "abort", "get", "head", "list",
         "list_uploads", "delete", "bucket", "service", "other")
# Headers that describe one connection, not the request: the proxy frames each side itself.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
              "expect"}
DEFAULT_S3_CODES = {400: "InvalidRequest", 403: "AccessDenied", 404: "NoSuchKey", 409: "OperationAborted",
                    412: "PreconditionFailed", 429: "SlowDown", 500: "InternalError", 501: "NotImplemented",
                    503: "SlowDown"}
STOPPING = threading.Event()
BLOCK = 65536


def classify(method, path, params, headers=None):
    """The S3 operation of a path-style request: /bucket, /bucket/key."""
    bucket, _, key = path.lstrip("/").partition("/")
    if not bucket:
        return "service"
    if not key:
        if method == "GET" and "uploads" in params:
            return "list_uploads"
        if method == "GET" and params.get("list-type") == ["2"]:
            return "list"
        return "bucket"
    if method == "PUT":
        copy = headers is not None and "x-amz-copy-source" in headers
        if "partNumber" in params and "uploadId" in params:
            return "copy_part" if copy else "upload_part"
        return "copy" if copy else "put"
    if method == "POST" and "uploads" in params:
        return "initiate"
    if method == "POST" and "uploadId" in params:
        return "complete"
    if method == "DELETE":
        return "abort" if "uploadId" in params else "delete"
    if method == "GET":
        return "get"
    if method == "HEAD":
        return "head"
    return "other"


def s3_error_xml(code, message, details=()):
    fields = [("Code", code), ("Message", message), *details]
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
            + "".join(f"<{name}>{escape(str(value))}</{name}>" for name, value in fields)
            + "</Error>").encode()


class RuleError(ValueError):
    pass


class ClientGone(Exception):
    """The client closed its connection in the middle of a request's body."""


class Rule:
    """One fault: {"kind", "action", ...}; see tests/s3/README.md for the fields of each action."""

    FIELDS = {"kind", "action", "times", "skip", "path_contains", "status", "s3_code", "message", "at", "bytes", "ms"}

    def __init__(self, spec):
        if not isinstance(spec, dict):
            raise RuleError(f"a rule is a JSON object, not {spec!r}")
        unknown = set(spec) - self.FIELDS
        if unknown:
            raise RuleError(f"unknown field(s) {sorted(unknown)} in rule {spec}")
        self.spec = dict(spec)
        self.kind = spec.get("kind")
        if self.kind != "*" and self.kind not in KINDS:
            raise RuleError(f"kind {self.kind!r} is not '*' or one of {list(KINDS)}")
        self.action = spec.get("action")
        self.times = self._int(spec, "times", 1, minimum=-1)
        self.skip = self._int(spec, "skip", 0)
        self.path_contains = spec.get("path_contains")
        self.bytes = self._int(spec, "bytes", None)
        self.ms = self._int(spec, "ms", None)
        self.applied = 0
        if self.action == "status":
            self.status = self._int(spec, "status", None, minimum=300)
            if self.status is None or self.status > 599:
                raise RuleError(f"action 'status' needs a status from 300 to 599: {spec}")
            default = DEFAULT_S3_CODES.get(self.status, "InternalError" if self.status >= 500 else "InvalidRequest")
            self.s3_code = spec.get("s3_code", default)
            self.message = spec.get("message", f"{self.s3_code} (a fault the test asked for)")
        elif self.action == "reset":
            self.at = spec.get("at", "request")
            if self.at not in ("request", "body", "response"):
                raise RuleError(f"'at' of a reset is 'request', 'body' or 'response', not {self.at!r}")
            if self.at == "body" and self.bytes is None:
                self.bytes = 0
        elif self.action == "truncate":
            if self.bytes is None:
                self.bytes = 0
        elif self.action != "stall":
            raise RuleError(f"action {self.action!r} is not one of status, reset, stall, truncate")

    @staticmethod
    def _int(spec, name, default, minimum=0):
        value = spec.get(name, default)
        if value is default:
            return value
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise RuleError(f"{name} must be an integer of at least {minimum}, not {value!r}")
        return value

    def matches(self, kind, path):
        return (self.times != 0 and self.kind in ("*", kind)
                and (self.path_contains is None or self.path_contains in path))

    def describe(self):
        return {**self.spec, "remaining_skip": self.skip, "remaining_times": self.times, "applied": self.applied}


class State:
    """The rules and the log, shared by the connections' threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []
        self.log = []

    def add_rules(self, specs):
        rules = [Rule(spec) for spec in (specs if isinstance(specs, list) else [specs])]
        with self.lock:
            self.rules.extend(rules)
        return len(rules)

    def take_rule(self, kind, path):
        """The rule to apply to this request, if any. A rule still skipping counts the request and lets the next
        rules see it."""
        with self.lock:
            for rule in self.rules:
                if not rule.matches(kind, path):
                    continue
                if rule.skip > 0:
                    rule.skip -= 1
                    continue
                if rule.times > 0:
                    rule.times -= 1
                rule.applied += 1
                return rule
        return None

    def record(self, kind, method, path, query):
        entry = {"kind": kind, "method": method, "path": path, "query": query, "status": None,
                 "upstream_status": None, "fault": None, "error": None, "body_bytes": 0}
        with self.lock:
            self.log.append(entry)
        return entry

    def update(self, entry, **fields):
        with self.lock:
            entry.update(fields)

    def snapshot(self):
        with self.lock:
            return {"log": [dict(entry) for entry in self.log], "faults": [rule.describe() for rule in self.rules]}


class RequestBody:
    """The request's body as it arrives (Content-Length or chunked), with the 100 Continue the client may wait for
    sent only when the body is wanted: a request answered without it never has its body sent."""

    def __init__(self, handler):
        self.handler = handler
        self.chunked = "chunked" in handler.headers.get("Transfer-Encoding", "").lower()
        self.length = 0 if self.chunked else int(handler.headers.get("Content-Length") or 0)
        self.present = self.chunked or self.length > 0
        self.done = not self.present
        self.received = 0  # bytes of the body read so far

    def chunks(self):
        handler = self.handler
        if handler.expecting:
            handler.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            handler.expecting = False
        rfile = handler.rfile
        if self.chunked:
            while True:
                size = int(rfile.readline(BLOCK).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while rfile.readline(BLOCK) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                yield from self._exactly(size)
                rfile.readline(BLOCK)
        else:
            yield from self._exactly(self.length)
        self.done = True

    def _exactly(self, size):
        while size > 0:
            data = self.handler.rfile.read(min(size, BLOCK))
            if not data:
                raise ClientGone()
            size -= len(data)
            self.received += len(data)
            yield data


class ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ckpt-fault-proxy"

    def parse_request(self):
        self.expecting = False
        return super().parse_request()

    def handle_expect_100(self):
        # Deferred to RequestBody: a fault or a rejected signature answers at once, without the body.
        self.expecting = True
        return True

    def log_message(self, format, *args):
        pass  # the request log is at /__ckpt_proxy/log

    def serve(self):
        url = urllib.parse.urlsplit(self.path)
        try:
            if url.path.startswith(CONTROL):
                self.control(url.path[len(CONTROL):].strip("/"))
            else:
                self.proxy(url)
        except (OSError, http.client.HTTPException, ClientGone):
            # The client went away, the connection was reset on purpose, or the server died in the middle of its
            # answer (the client then sees a body that ends early).
            self.close_connection = True

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_OPTIONS = do_PATCH = serve

    # -- control endpoints --

    def control(self, name):
        state = self.server.state
        body = RequestBody(self)
        raw = b"".join(body.chunks())
        try:
            spec = json.loads(raw) if raw.strip() else None
        except ValueError as err:
            return self.reply_json(400, {"error": f"the body is not JSON: {err}"})
        routes = {
            ("GET", "log"): lambda: state.snapshot()["log"],
            ("POST", "log/clear"): lambda: self._clear(state.log),
            ("GET", "faults"): lambda: state.snapshot()["faults"],
            ("POST", "faults"): lambda: {"added": state.add_rules(spec)},
            ("POST", "clear"): lambda: self._clear(state.rules),
        }
        route = routes.get((self.command, name))
        if route is None:
            known = ", ".join(f"{method} {CONTROL}{path}" for method, path in routes)
            return self.reply_json(404, {"error": f"no endpoint {self.command} {CONTROL}{name}; there are {known}"})
        try:
            self.reply_json(200, route())
        except RuleError as err:
            self.reply_json(400, {"error": str(err)})

    def _clear(self, items):
        with self.server.state.lock:
            items.clear()
        return {"cleared": True}

    def reply_json(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # -- proxying --

    def proxy(self, url):
        state = self.server.state
        params = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        kind = classify(self.command, url.path, params, self.headers)
        entry = state.record(kind, self.command, url.path, url.query)
        body = RequestBody(self)

        verifier = self.server.verifier
        problem = verifier.check(self.command, url.path, url.query, self.headers) if verifier else None
        if problem:
            status, code, message, details = problem
            state.update(entry, status=status, fault="sigv4", error=code)
            return self.reply_error(body, status, code, message, details)

        rule = state.take_rule(kind, url.path)
        action = rule.action if rule else None
        state.update(entry, fault=action)
        if action == "status":
            state.update(entry, status=rule.status, error=rule.s3_code)
            return self.reply_error(body, rule.status, rule.s3_code, rule.message, ())
        if action == "reset" and rule.at == "request":
            return self.reset()
        if action == "stall" and rule.bytes is None and not self.stall(rule.ms):
            return

        host, port = self.server.upstream
        upstream = http.client.HTTPConnection(host, port)
        try:
            try:
                if not self.send_upstream(upstream, url, body, rule if action == "reset" and rule.at == "body"
                                          else None):
                    return self.reset()  # at "body": the server has part of the body, and sees its client go
                response = upstream.getresponse()
            except (OSError, http.client.HTTPException) as err:
                # The server is down or went away (a test killed it): the client sees its connection end, as it
                # would with the server itself.
                state.update(entry, error=f"upstream: {err}")
                return self.reset()
            state.update(entry, upstream_status=response.status, body_bytes=body.received)
            if action == "reset":  # at "response": the server did the work, the client never hears of it
                response.read()
                return self.reset()
            state.update(entry, status=response.status)
            self.send_response_from(response, rule if action in ("truncate", "stall") else None)
        finally:
            upstream.close()

    def send_upstream(self, upstream, url, body, reset_rule):
        """Sends the request on; False when a reset rule stopped it after rule.bytes bytes of the body."""
        target = url.path + (f"?{url.query}" if url.query else "")
        upstream.putrequest(self.command, target, skip_host=True, skip_accept_encoding=True)
        for name, value in self.headers.items():
            if name.lower() not in HOP_BY_HOP:
                upstream.putheader(name, value)
        if body.chunked:
            upstream.putheader("Transfer-Encoding", "chunked")
        upstream.endheaders()
        if not body.present:
            return reset_rule is None
        budget = reset_rule.bytes if reset_rule else None
        for data in body.chunks():
            if budget is not None and len(data) >= budget:
                self._send_body(upstream, body, data[:budget])
                return False
            if budget is not None:
                budget -= len(data)
            self._send_body(upstream, body, data)
        if body.chunked:
            upstream.send(b"0\r\n\r\n")
        return reset_rule is None

    @staticmethod
    def _send_body(upstream, body, data):
        if not data:
            return
        upstream.send(b"%x\r\n%s\r\n" % (len(data), data) if body.chunked else data)

    def send_response_from(self, response, rule):
        """Forwards the response; a truncate or stall rule acts after rule.bytes bytes of its body."""
        has_body = self.command != "HEAD" and response.status not in (204, 304) and response.status >= 200
        headers = [(name, value) for name, value in response.getheaders() if name.lower() not in HOP_BY_HOP]
        if has_body and response.getheader("Content-Length") is None:
            content = response.read()  # framed by chunks or by the end of the connection: send it framed by length
            chunks = iter([content])
            headers.append(("Content-Length", str(len(content))))
        else:
            chunks = iter(lambda: response.read(BLOCK), b"")
        if self.close_connection:
            headers.append(("Connection", "close"))
        head = [f"HTTP/1.1 {response.status} {response.reason}"] + [f"{name}: {value}" for name, value in headers]
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        if rule is not None and rule.action == "truncate":
            self.close_connection = True  # an orderly close, also when there is nothing to cut
        if not has_body:
            return
        limit = rule.bytes if rule is not None and rule.bytes is not None else None
        sent = 0
        for data in chunks:
            if limit is not None and sent + len(data) >= limit:
                cut = limit - sent
                self.wfile.write(data[:cut])
                if rule.action == "truncate":
                    return  # the client sees a body shorter than its Content-Length
                if not self.stall(rule.ms):
                    return
                data, limit = data[cut:], None
            self.wfile.write(data)
            sent += len(data)

    def reply_error(self, body, status, code, message, details):
        """Answers with an S3 error without forwarding. A body the client has not sent yet (it waits for 100
        Continue) is not asked for: the connection is closed after the answer, as S3 does."""
        if body.present and not body.done:
            if self.expecting:
                self.close_connection = True
            else:
                for _ in body.chunks():
                    pass
        data = b"" if self.command == "HEAD" else s3_error_xml(code, message, details)
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amz-request-id", "ckpt-fault-proxy")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def reset(self):
        """Ends the connection with a TCP reset: SO_LINGER 0, and the socket's last reference closed."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()
        self.wfile.close()
        self.connection.close()

    def stall(self, ms):
        """Holds the request without sending a byte, for ms milliseconds or (None) until the client gives up.
        Returns whether to go on; when not, the connection is to be closed."""
        deadline = None if ms is None else time.monotonic() + ms / 1000
        while not STOPPING.is_set():
            wait = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if wait <= 0:
                return True
            readable, _, _ = select.select([self.connection], [], [], wait)
            if not readable:
                continue
            if deadline is None:
                # Forever: what the client still sends is never forwarded, so it can be read to see it leave.
                if not self.connection.recv(BLOCK):
                    break
            elif not self.connection.recv(1, socket.MSG_PEEK):
                break
            else:
                time.sleep(wait)  # the body waits in the socket until the stall is over
        self.close_connection = True
        return False


class ProxyServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A connection the proxy reset on purpose (or the client dropped) ends its handler with an I/O error:
        # expected, so not worth a traceback. Anything else is still printed.
        if isinstance(sys.exc_info()[1], (ValueError, OSError)):
            return
        super().handle_error(request, client_address)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the S3 server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--verify-sigv4", metavar="ACCESS:SECRET", help="check every request's SigV4 signature")
    parser.add_argument("--region", default="us-east-1", help="the region signatures must be made for")
    parser.add_argument("--exit-with-stdin", action="store_true", help="exit when standard input ends")
    args = parser.parse_args()
    host, _, port = args.upstream.rpartition(":")
    server = ProxyServer(("127.0.0.1", args.port), ProxyHandler)
    server.upstream = (host or "127.0.0.1", int(port))
    server.state = State()
    server.verifier = None
    if args.verify_sigv4:
        access, sep, secret = args.verify_sigv4.partition(":")
        if not sep:
            parser.error("--verify-sigv4 takes ACCESS:SECRET")
        server.verifier = SigV4Verifier(access, secret, args.region)

    def stop(signum, frame):
        STOPPING.set()
        threading.Thread(target=server.shutdown).start()  # shutdown() waits for serve_forever, in this thread

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.exit_with_stdin:
        def watch_stdin():
            while os.read(sys.stdin.fileno(), BLOCK):
                pass
            stop(None, None)

        threading.Thread(target=watch_stdin, daemon=True).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    sys.exit(main())
