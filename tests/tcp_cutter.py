"""A TCP proxy in front of Redis that goes dead after a number of ``LPUSH``es: a broker that stops in the
middle of a submission, at a point the test chooses rather than one a race picks; and a ``Blackhole`` that
accepts connections and never answers."""

from __future__ import annotations

import socket
import threading


class TcpCutter:
    def __init__(self, upstream_port: int, *, cut_after_pushes: int):
        self.upstream_port, self.limit = upstream_port, cut_after_pushes
        self.pushes, self.dead = 0, threading.Event()
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []

    def __enter__(self) -> TcpCutter:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self._die()

    def _accept(self) -> None:
        while not self.dead.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self.lock:
                self.sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, from_client: bool) -> None:
        try:
            while data := source.recv(65536):
                if from_client:
                    with self.lock:
                        self.pushes += data.upper().count(b"LPUSH")
                        if self.pushes > self.limit:
                            break
                target.sendall(data)
        except OSError:
            pass
        if from_client and self.pushes > self.limit:
            self._die()

    def _die(self) -> None:
        self.dead.set()
        for sock in [self.listener, *self.sockets]:
            try:
                sock.close()
            except OSError:
                pass


class Blackhole:
    """A TCP server that accepts connections and never answers: a broker behind a dead proxy, a firewall
    that drops replies, a TLS client's handshake waiting on a plain server."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []

    def __enter__(self) -> Blackhole:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        for sock in [self.listener, *self.sockets]:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                self.sockets.append(self.listener.accept()[0])  # held open, read from never
            except OSError:
                return
