"""An HTTP proxy that fails on purpose: in front of the S3 server, it answers some requests with 500
(before or after forwarding them) and stalls others, as a flaky object store does."""

from __future__ import annotations

import http.client
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FaultyProxy:
    def __init__(
        self, upstream_port: int, *, error_rate: float, stall_rate: float, stall_seconds: float, seed: int = 0
    ):
        self.upstream_port, self.error_rate, self.stall_rate = upstream_port, error_rate, stall_rate
        self.stall_seconds, self.rng, self.lock = stall_seconds, random.Random(seed), threading.Lock()
        self.faults = {"before": 0, "after": 0, "stall": 0, "forwarded": 0}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.port = self.server.server_address[1]

    def _draw(self) -> str:
        with self.lock:
            x = self.rng.random()
        if x < self.error_rate / 2:
            return "before"
        if x < self.error_rate:
            return "after"
        return "stall" if x < self.error_rate + self.stall_rate else "forwarded"

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fault = proxy._draw()
                proxy.faults[fault] += 1
                if fault == "before":
                    return self._fail()
                if fault == "stall":
                    time.sleep(proxy.stall_seconds)
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                data = response.read()
                if fault == "after":  # the store did the work, the client hears it failed
                    return self._fail()
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _fail(self) -> None:
                body = b"<Error><Code>InternalError</Code><Message>injected</Message></Error>"
                self.send_response(500)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _any

        return Handler

    def __enter__(self) -> FaultyProxy:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
