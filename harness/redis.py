"""A local redis-server (Debian's package) on loopback, for tests, benchmarks and the demo.

``python -m harness.redis start|stop|status [--state-dir DIR]`` (``scripts/redis-local``):
``start`` runs one detached server on a free port, with the durable settings the Redis store
recommends (AOF, ``appendfsync always``; no RDB snapshots), and prints
``REDIS_URL=redis://127.0.0.1:PORT/0`` as its last line; ``stop`` ends it (SIGTERM, then
SIGKILL); ``status`` exits 0 if it answers PING, 3 if not. Tests run a server of their own in
the foreground (``RedisServer.run``), which dies with the test process.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

from streamdedup.replay.process import ChildProcess, free_port
from streamdedup.settings import cache_root

STATE_FILE = "redis.json"


class RedisError(RuntimeError):
    """The local redis-server could not be found, started or stopped."""


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One redis-server whose files (AOF, log, state) live in ``state_dir``."""

    def __init__(self, state_dir: Path | None = None) -> None:
        self.state_dir = Path(state_dir or cache_root() / "redis").absolute()
        self.proc: ChildProcess | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self._state()['port']}/0"

    def _state(self) -> dict[str, int]:
        try:
            return dict(json.loads((self.state_dir / STATE_FILE).read_text()))
        except (OSError, ValueError):
            raise RedisError(f"no redis-server was started in {self.state_dir}") from None

    def _argv(self, port: int, detach: bool) -> list[str]:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RedisError("no redis-server on PATH: scripts/setup installs Debian's "
                             "redis-server as root (apt-get install redis-server)")
        return [exe, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(self.state_dir),
                "--appendonly", "yes", "--appendfsync", "always", "--save", "",
                "--daemonize", "yes" if detach else "no",
                "--pidfile", str(self.state_dir / "redis.pid"),
                "--logfile", str(self.state_dir / "redis.log") if detach else ""]

    def _wait(self, port: int, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if _ping(port):
                return
            if self.proc is not None:
                self.proc.check_alive()
            time.sleep(0.05)
        raise RedisError(f"redis-server on port {port} did not answer within {timeout_s:.0f} s")

    def run(self) -> str:
        """Start in the foreground, as a child that dies with this process; the URL."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        self.proc = ChildProcess("redis-server", self._argv(port, detach=False),
                                 self.state_dir / "redis.log").start()
        (self.state_dir / STATE_FILE).write_text(json.dumps({"port": port}))
        self._wait(port)
        return self.url

    def start(self) -> str:
        """Start detached (or find it running); the URL."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        try:
            if _ping(self._state()["port"]):
                return self.url
        except RedisError:
            pass
        port = free_port()
        proc = ChildProcess("redis-server", self._argv(port, detach=True),
                            self.state_dir / "start.log")
        proc.start()
        if proc.wait(30) != 0:
            raise RedisError(f"redis-server did not start:\n{proc.tail()}")
        (self.state_dir / STATE_FILE).write_text(json.dumps({"port": port}))
        self._wait(port)
        return self.url

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(30)
            self.proc = None
            return
        pid_file = self.state_dir / "redis.pid"
        try:
            pid = int(pid_file.read_text())
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, signal.SIGTERM)
            for _ in range(300):
                os.kill(pid, 0)
                time.sleep(0.1)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/redis-local", description=__doc__)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("command", choices=("start", "stop", "status"))
    args = parser.parse_args(argv)
    server = RedisServer(args.state_dir)
    try:
        if args.command == "start":
            print(f"REDIS_URL={server.start()}")
        elif args.command == "stop":
            server.stop()
        else:
            port = server._state()["port"]
            if not _ping(port):
                print("not running")
                return 3
            print(f"running: {server.url}")
    except RedisError as exc:
        if args.command == "status":
            print("not running")
            return 3
        print(f"redis-local: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
