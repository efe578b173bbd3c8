"""Prometheus metrics and the health endpoints, served from one small HTTP server.

``/metrics`` (Prometheus text format), ``/healthz`` (liveness: the loop made progress
recently), ``/readyz`` (readiness: store open, partitions assigned, a heartbeat sent within
the session timeout, and fewer than ``STUCK_AFTER`` checkpoints failed in a row). Binds to
loopback by default; expose it deliberately with ``--metrics-host``.
"""

from __future__ import annotations

import errno
import ipaddress
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from streamdedup.errors import ConfigError


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only listens on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cannot_serve(what: str, host: str, port: int, exc: OSError, in_use: str,
                 elsewhere: str = "") -> ConfigError:
    """A server's port refused, in one line: ``in_use`` is the hint when the port is taken,
    ``elsewhere`` for any other refusal (metrics and the monitor say them alike)."""
    hint = in_use if exc.errno == errno.EADDRINUSE else elsewhere
    return ConfigError(f"cannot serve {what} on {host}:{port}: {exc.strerror or exc}"
                       + (f" ({hint})" if hint else ""))


class Metrics:
    """All of the service's metrics, in a registry of their own (tests can make many)."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.documents = Counter("streamdedup_documents", "documents judged (a batch a "
                                 "failed checkpoint rewound is judged, and counted, again)",
                                 registry=r)
        self.duplicates = Counter("streamdedup_duplicates", "verdicts that are duplicates",
                                  registry=r)
        self.dead_letters = Counter("streamdedup_dead_letters", "messages sent to the DLQ",
                                    ["reason"], registry=r)
        self.candidates = Histogram(
            "streamdedup_candidates", "distinct candidate sets per document", registry=r,
            buckets=(0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000),
        )
        self.stage_seconds = Histogram(
            "streamdedup_stage_seconds", "time per batch and stage", ["stage"], registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.batch_size = Histogram(
            "streamdedup_batch_size", "messages per poll", registry=r,
            buckets=(1, 5, 10, 50, 100, 250, 500, 1000, 2000),
        )
        self.lag = Gauge("streamdedup_consumer_lag", "messages behind the high watermark, "
                         "per partition held (each second; a partition given up is dropped)",
                         ["partition"], registry=r)
        self.store_documents = Gauge("streamdedup_store_documents", "documents in the store "
                                     "(taken every 15 s)",
                                     registry=r)
        self.store_bytes = Gauge("streamdedup_store_bytes", "store size on disk", registry=r)
        self.evicted = Counter("streamdedup_evicted", "removed by retention: what is "
                               "'documents' (by their own time) or 'sets' (by their newest; "
                               "a batch a failed checkpoint rewound evicts, and counts, again)",
                               ["what"], registry=r)
        self.retention_clock = Gauge(
            "streamdedup_retention_clock_seconds", "the retention clock: the newest "
            "announcement time seen (epoch seconds; 0 without retention)", registry=r)
        self.commit_failures = Counter("streamdedup_commit_failures",
                                       "checkpoints that had to be retried", ["stage"],
                                       registry=r)
        self.ready = False
        self.heartbeat = time.monotonic()

    def beat(self) -> None:
        self.heartbeat = time.monotonic()

    def render(self) -> bytes:
        return generate_latest(self.registry)


# /healthz answers 503 once the loop has not beaten (``Metrics.beat``) for this long; it
# beats at every poll, and while it waits for the broker or the store.
STALE_AFTER_S = 60.0


class HealthServer:
    """Serves metrics and health in a daemon thread; ``stop()`` closes the socket."""

    def __init__(self, metrics: Metrics, host: str, port: int):
        self.metrics = metrics
        handler = self._handler()
        try:
            self.server = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise cannot_serve("metrics", host, port, exc, "another consumer on this host? "
                               "give each its own --metrics-port, or 0") from None
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                       name="streamdedup-metrics")

    def start(self) -> HealthServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                m = owner.metrics
                if self.path.startswith("/metrics"):
                    self._send(200, m.render(), CONTENT_TYPE_LATEST)
                elif self.path.startswith("/healthz"):
                    alive = time.monotonic() - m.heartbeat < STALE_AFTER_S
                    self._send(200 if alive else 503, b"ok\n" if alive else b"stalled\n")
                elif self.path.startswith("/readyz"):
                    self._send(200 if m.ready else 503, b"ready\n" if m.ready else b"not ready\n")
                else:
                    self._send(404, b"not found\n")

            def _send(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                """Scrapes every few seconds would drown the service's own logs."""

        return Handler
