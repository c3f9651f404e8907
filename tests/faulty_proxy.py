"""An HTTP proxy that fails on purpose: in front of the S3 server, it answers some requests with 500
(before or after forwarding them) and stalls others, as a flaky object store does; ``refuse`` answers
chosen requests with a chosen error (503 on the first part writes, 403 for wrong credentials).

No fault is a span of wall-clock time, which a loaded machine stretches: ``refuse`` decides from the
requests (``refused`` counts its answers, under the lock, so a rule may read it), and a stalled request
is held until its client gives up on it (closes the connection), ``stall_seconds`` at most; then it is
forwarded all the same (the store does the work after the client stopped listening). ``abandoned``
counts the stalls the client gave up on, ``outwaited`` those whose client was still listening at the limit
(a stall still held when a test reads the counts is in neither)."""

from __future__ import annotations

import http.client
import random
import select
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FaultyProxy:
    def __init__(
        self,
        upstream_port: int,
        *,
        error_rate: float = 0.0,
        stall_rate: float = 0.0,
        stall_seconds: float = 0.0,
        seed: int = 0,
        refuse: Callable[[str, str], tuple[int, str] | None] | None = None,
    ):
        self.refuse = refuse  # (method, path) -> (HTTP status, S3 error code) to answer instead, or None
        self.refused = 0
        self.abandoned = 0  # stalled requests whose client gave up (closed the connection) before an answer
        self.outwaited = 0  # stalled requests whose client still listened after ``stall_seconds``
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
                with proxy.lock:  # decided and counted at once: a rule reading ``refused`` sees every refusal
                    answer = proxy.refuse(self.command, self.path) if proxy.refuse else None
                    if answer is not None:
                        proxy.refused += 1
                if answer is not None:
                    return self._fail(*answer)
                fault = proxy._draw()
                with proxy.lock:
                    proxy.faults[fault] += 1
                if fault == "before":
                    return self._fail()
                gone = fault == "stall" and self._client_gives_up(proxy.stall_seconds)
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                data = response.read()
                if gone:  # the store did the work; nobody is listening for the answer
                    self.close_connection = True
                    return None
                if fault == "after":  # the store did the work, the client hears it failed
                    return self._fail()
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _client_gives_up(self, limit: float) -> bool:
                """Hold the request until its client closes the connection (its read timeout gave up on the
                answer), ``limit`` s at most; whether it did."""
                if not select.select([self.connection], [], [], limit)[0]:
                    with proxy.lock:
                        proxy.outwaited += 1
                    return False  # still listening after ``limit``: it gets a late answer
                try:
                    if self.connection.recv(1, socket.MSG_PEEK):
                        return False  # it sent more: still there
                except OSError:
                    pass  # reset: gone
                with proxy.lock:
                    proxy.abandoned += 1
                return True

            def _fail(self, status: int = 500, code: str = "InternalError") -> None:
                body = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
                self.send_response(status)
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
