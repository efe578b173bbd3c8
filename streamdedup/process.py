"""A child process: the consumer a replay starts, and (in ``harness/``) a Redis server; the
local broker (``harness/broker.py``, a JVM it starts itself) takes its ports and its
death-with-parent from here.

Written once, here, for the product's replay and for the development harness (chaos runs,
benchmarks, the local broker), because they all need the same four things:

- **a free port** below the kernel's ephemeral range: a port from that range can be handed
  to some client socket while a server is down between stop and restart, and a client dialling
  a dead port inside it can even connect to itself (TCP simultaneous open);
- **no orphans**: on Linux the child gets SIGKILL when its parent dies (PR_SET_PDEATHSIG);
- **its output kept**: every line goes to a log file as it comes and stays in memory, so a
  caller can wait for a line, count lines, or show the tail when the child dies;
- **a polite stop**: SIGTERM (the consumer finishes its batch and commits), SIGKILL only when
  it does not exit in time.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from streamdedup.errors import StreamdedupError

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def port_free(host: str, port: int) -> bool:
    """Whether a listener could bind host:port now (SO_REUSEADDR, as the JVM's server sockets)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1", avoid: Sequence[int] = (), *, paired: int = 0) -> int:
    """A port free on ``host`` now, below the ephemeral range (20000 up to its start);
    an OS-chosen port where that range leaves no room. ``paired``: ``port + paired`` must be
    free and below the range too (a Redis Cluster node's bus listens 10,000 above its port;
    in the ephemeral range, an outgoing connection took it: "bind: Address already in
    use")."""
    low = 32768
    with contextlib.suppress(OSError, ValueError):
        low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    if low - paired > 20000:
        rng = random.Random()
        for _ in range(200):
            port = rng.randrange(20000, low - paired)
            if (port not in avoid and port + paired not in avoid and port_free(host, port)
                    and port_free(host, port + paired)):
                return port
    if paired:
        raise StreamdedupError(f"no free port pair {paired} apart below the ephemeral range "
                               f"(from {low})")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _pdeathsig() -> Callable[[], None] | None:
    """A preexec function that makes a child die with this process (Linux only).

    Resolved here, before any fork: the child then only calls an already-loaded function.
    PR_SET_PDEATHSIG fires when the *thread* that forked exits, so start children from a
    thread that lives as long as they should (the main thread)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def set_pdeathsig() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    return set_pdeathsig


die_with_parent = _pdeathsig()


class ChildProcess:
    """One child process; its output (stdout and stderr) is logged and kept line by line."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path,
                 env: Mapping[str, str] | None = None, cwd: Path | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.lines: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self._reader: threading.Thread | None = None

    def start(self) -> ChildProcess:
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, env=env, cwd=self.cwd, preexec_fn=die_with_parent,
        )
        self.started_at = time.monotonic()
        self._reader = threading.Thread(target=self._read, daemon=True,
                                        name=f"log-{self.name}")
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with self.log_path.open("a", encoding="utf-8") as log:
            log.write(f"=== {' '.join(self.argv)}\n")
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.lines.append(line)
                log.write(line + "\n")
                log.flush()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        """Raise with the last lines of output if the child has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            raise StreamdedupError(
                f"{self.name} exited with status {self.proc.returncode}\n{self.log_tail()}"
            )

    def wait_ready(self, url: str, timeout_s: float) -> None:
        """Until ``url`` answers 200 (the consumer's /readyz); raise if the child dies first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.check_alive()
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1.0) as resp:
                if resp.status == 200:
                    return
            time.sleep(0.1)
        raise StreamdedupError(f"{self.name} was not ready after {timeout_s:.0f} s\n"
                               + self.log_tail())

    def signal(self, sig: int) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int | None:
        """The exit status, or None if still running after ``timeout``."""
        if self.proc is None:
            return None
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        if self._reader is not None:
            self._reader.join(timeout=5)
        return rc

    def kill(self) -> int | None:
        self.signal(signal.SIGKILL)
        return self.wait(30)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait; SIGKILL only if it does not stop in time."""
        if self.proc is None:
            return None
        self.signal(signal.SIGTERM)
        rc = self.wait(timeout)
        return rc if rc is not None else self.kill()

    def count(self, pattern: re.Pattern[str]) -> int:
        return sum(1 for line in list(self.lines) if pattern.search(line))

    def grep(self, pattern: re.Pattern[str]) -> list[str]:
        return [line for line in list(self.lines) if pattern.search(line)]

    def tail(self, n: int = 25) -> str:
        return "\n".join(list(self.lines)[-n:])

    def log_tail(self, lines: int = 30) -> str:
        return f"--- last lines of {self.log_path}:\n{self.tail(lines)}"
