"""Processes' resources from /proc (no psutil needed): ``rss_mb``, ``open_fds`` and ``Sampler``,
which samples every registered consumer in a daemon thread (peak RSS, and a series over time
for the ones it is told to track); and a store's size on disk, ``dir_bytes``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from streamdedup.process import ChildProcess


def rss_mb(pid: int) -> float | None:
    """Resident set size from /proc (no psutil needed)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def dir_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (a store directory: database, WAL, snapshot)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


class Sampler:
    """Samples RSS and open fds of every registered process in a daemon thread."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.every_s = every_s
        self.procs: dict[str, ChildProcess] = {}
        self.peak_rss: dict[str, float] = {}
        self.series: dict[str, list[tuple[float, float, int]]] = {}
        self.track: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="chaos-sampler")
        self._lock = threading.Lock()

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def register(self, proc: ChildProcess) -> None:
        with self._lock:
            self.procs[proc.name] = proc

    def sample(self) -> None:
        with self._lock:
            procs = list(self.procs.values())
        for proc in procs:
            pid = proc.pid
            if pid is None or not proc.alive():
                continue
            rss, fds = rss_mb(pid), open_fds(pid)
            if rss is None or fds is None:
                continue
            self.peak_rss[proc.name] = max(self.peak_rss.get(proc.name, 0.0), rss)
            if proc.name in self.track:
                self.series.setdefault(proc.name, []).append((time.monotonic(), rss, fds))

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    @property
    def peak_mb(self) -> float:
        return max(self.peak_rss.values(), default=0.0)
