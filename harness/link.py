"""A TCP link on loopback that a test can cut and mend: a network outage between a client
and a real server, without restarting the server (a restart changes its run id, which the
Redis store takes as data possibly lost; a blip must not).

``Link(port).start()`` listens on a free port and relays each connection to ``port``;
``cut()`` closes every connection and refuses new ones (accepted, then closed at once), as a
dropped network path looks to redis-py; ``mend()`` lets them through again.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

CHUNK = 65536


class Link:
    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.target = (host, port)
        self._listener = socket.create_server((host, 0))
        self.port: int = self._listener.getsockname()[1]
        self._cut = threading.Event()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> Link:
        threading.Thread(target=self._accept, daemon=True, name="link-accept").start()
        return self

    def cut(self) -> None:
        self._cut.set()
        with self._lock:
            for s in self._open:
                _close(s)
            self._open.clear()

    def mend(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._listener)

    def __enter__(self) -> Link:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                _close(client)
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._open |= {client, server}
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._relay, args=(a, b), daemon=True,
                                 name="link-relay").start()

    def _relay(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(CHUNK):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open -= {source, sink}
            _close(source)
            _close(sink)


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()
