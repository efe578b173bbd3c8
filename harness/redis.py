"""Local redis-servers (Debian's package) on loopback, for tests, benchmarks and the demo.

``python -m harness.redis start [--cluster N] | stop | status [--state-dir DIR]``
(``scripts/redis-local``): ``start`` runs one detached server (or N cluster masters, slots
split evenly by ``redis-cli --cluster create``) on free ports, with the durable settings the
Redis store recommends (AOF, ``appendfsync always``; no RDB snapshots), and prints
``REDIS_URL=redis://127.0.0.1:PORT/0`` (a cluster: ``REDIS_URL=redis://127.0.0.1:PORT``) as
its last line; ``stop`` ends them (SIGTERM, then SIGKILL); ``status`` exits 0 if every node
answers PING, 3 if not. Tests run servers of their own in the foreground (``RedisServer.run``),
which die with the test process and can be SIGKILLed and restarted on the same port.
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
from typing import Any

from streamdedup.process import ChildProcess, free_port, port_free
from streamdedup.settings import cache_root

STATE_FILE = "redis.json"
CLUSTER_BUS = 10000  # a cluster node's bus port is its port + 10,000 (Redis' default)


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
    """One redis-server, or the masters of a Redis Cluster (``cluster`` > 0), whose files
    (AOF, logs, state) live in ``state_dir``: node i in ``node<i>/``. ``durable=False``: no
    AOF, for a baseline measured as its users run it (datasketch's Redis storage)."""

    def __init__(self, state_dir: Path | None = None, cluster: int = 0,
                 durable: bool = True) -> None:
        self.state_dir = Path(state_dir or cache_root() / "redis").absolute()
        self.cluster = cluster
        self.durable = durable
        self.procs: dict[int, ChildProcess] = {}

    @property
    def url(self) -> str:
        state = self._state()
        if state["cluster"]:
            return f"redis://127.0.0.1:{state['ports'][0]}"
        return f"redis://127.0.0.1:{state['ports'][0]}/0"

    @property
    def ports(self) -> list[int]:
        return list(self._state()["ports"])

    def _state(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.state_dir / STATE_FILE).read_text()))
        except (OSError, ValueError):
            raise RedisError(f"no redis-server was started in {self.state_dir}") from None

    def _argv(self, node: int, port: int, detach: bool) -> list[str]:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RedisError("no redis-server on PATH: scripts/setup installs Debian's "
                             "redis-server as root (apt-get install redis-server)")
        home = self.state_dir / f"node{node}"
        home.mkdir(parents=True, exist_ok=True)
        argv = [exe, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(home),
                "--appendonly", "yes" if self.durable else "no", "--appendfsync", "always",
                "--save", "",
                "--daemonize", "yes" if detach else "no",
                "--pidfile", str(home / "redis.pid"),
                "--logfile", str(home / "redis.log") if detach else ""]
        if self.cluster:
            argv += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                     "--cluster-node-timeout", "5000"]
        return argv

    def _wait(self, port: int, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if _ping(port):
                return
            for proc in self.procs.values():
                proc.check_alive()
            time.sleep(0.05)
        raise RedisError(f"redis-server on port {port} did not answer within {timeout_s:.0f} s")

    def _ports(self) -> list[int]:
        """The ports of the last start if each is free again or still has its node (a
        stopped server comes back with its data, a cluster with its slots; a cluster with
        one node down gets that node back), else new ones (a cluster then starts empty: its
        nodes' files name the old ports). Never while some of its nodes run: that start
        deleted the running nodes' files and left them orphaned."""
        recorded = self._recorded_kind()
        if recorded is not None and recorded != self.cluster:
            self._refuse_other_kind(recorded)
        try:
            state = self._state()
            ports = list(state["ports"])
            if not all(port_free("127.0.0.1", p) or _ping(p) for p in ports):
                raise RedisError("not reusable")
        except (RedisError, KeyError):
            running = [p for p in self._recorded_ports() if _ping(p)]
            if running:
                raise RedisError(
                    f"nodes of {self.state_dir} still run on ports "
                    f"{', '.join(map(str, running))}, and another program holds the port of "
                    f"one that does not: stop them first (scripts/redis-local --state-dir "
                    f"{self.state_dir} stop)") from None
            ports = []
            for _ in range(max(1, self.cluster)):
                ports.append(free_port(avoid=[*ports, *(p + CLUSTER_BUS for p in ports)],
                                       paired=CLUSTER_BUS if self.cluster else 0))
            for home in self.state_dir.glob("node*"):
                if self.cluster:
                    shutil.rmtree(home)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        record = self.state_dir / (STATE_FILE + ".new")  # whole or not at all
        record.write_text(json.dumps({"ports": ports, "cluster": self.cluster}))
        record.replace(self.state_dir / STATE_FILE)
        return ports

    def _refuse_other_kind(self, recorded: int) -> None:
        """A state directory holds one server or one cluster: started as the other kind, it
        wrote over the record, and the next start as the first kind deleted every node's
        files (a stopped cluster's data, lost to a `start` without ``--cluster``)."""
        def kind(n: int) -> str:
            return f"a Redis Cluster of {n} masters" if n else "one redis-server"

        again = f"--cluster {recorded}" if recorded else "without --cluster"
        raise RedisError(f"{self.state_dir} holds {kind(recorded)}, not {kind(self.cluster)}: "
                         f"start it {again}, or give another --state-dir for a new one")

    def _recorded_kind(self) -> int | None:
        """The cluster size the state directory's record names (0: one server), else what
        its nodes' files say (a cluster node keeps a ``nodes.conf``: a record emptied by a
        crash let a cluster start over a server's files), else None (nothing there)."""
        try:
            return int(self._state().get("cluster", 0))
        except (RedisError, TypeError, ValueError):
            pass
        homes = [h for h in self.state_dir.glob("node*") if any(h.iterdir())]
        clustered = [h for h in homes if (h / "nodes.conf").exists()]
        return len(clustered) if clustered else 0 if homes else None

    def _recorded_ports(self) -> list[int]:
        try:
            return list(self._state()["ports"])
        except (RedisError, KeyError, TypeError):
            return []

    def run(self) -> str:
        """Start in the foreground, as children that die with this process; the URL."""
        for node, port in enumerate(self._ports()):
            self._run_node(node, port)
        self._form_cluster()
        return self.url

    def _run_node(self, node: int, port: int) -> None:
        self.procs[node] = ChildProcess(f"redis-server-{node}",
                                        self._argv(node, port, detach=False),
                                        self.state_dir / f"node{node}" / "redis.log").start()
        self._wait(port)

    def kill(self, node: int = 0) -> None:
        """SIGKILL one node started by ``run`` (a crash: only what its AOF holds survives)."""
        self.procs[node].kill()

    def restart(self, node: int = 0) -> None:
        """Start a killed node again on its port, from its own files."""
        self._run_node(node, self.ports[node])
        if self.cluster:
            self._wait_cluster_ok()

    def start(self) -> str:
        """Start detached (or find them running); the URL."""
        try:
            if all(_ping(p) for p in self.ports):
                return self.url
        except RedisError:
            pass
        for node, port in enumerate(self._ports()):
            if _ping(port):
                continue  # a node of this cluster still up: the others are brought back
            proc = ChildProcess("redis-server", self._argv(node, port, detach=True),
                                self.state_dir / "start.log")
            proc.start()
            if proc.wait(30) != 0:
                raise RedisError(f"redis-server did not start:\n{proc.tail()}")
            self._wait(port)
        self._form_cluster()
        return self.url

    def _form_cluster(self) -> None:
        """Give the masters the 16384 slots (evenly) and wait until every node says ok; a
        cluster restarted on its old ports re-forms from its nodes' files."""
        if not self.cluster:
            return
        if all(_cluster_ok(p) for p in self.ports):
            return
        if all(_cluster_known(p) for p in self.ports):
            self._wait_cluster_ok()
            return
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RedisError("no redis-cli on PATH (Debian's redis-tools, which redis-server "
                             "depends on)")
        proc = ChildProcess("redis-cli", [cli, "--cluster", "create",
                                          *(f"127.0.0.1:{p}" for p in self.ports),
                                          "--cluster-replicas", "0", "--cluster-yes"],
                            self.state_dir / "create.log").start()
        if proc.wait(60) != 0:
            raise RedisError(f"redis-cli --cluster create failed:\n{proc.tail()}")
        self._wait_cluster_ok()

    def _wait_cluster_ok(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(_cluster_ok(p) for p in self.ports):
                return
            time.sleep(0.1)
        raise RedisError(f"the cluster did not reach cluster_state:ok in {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.procs:
            for proc in self.procs.values():
                proc.stop(30)
            self.procs.clear()
            return
        for home in sorted(self.state_dir.glob("node*")):
            try:
                pid = int((home / "redis.pid").read_text())
            except (OSError, ValueError):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
                for _ in range(300):
                    os.kill(pid, 0)
                    time.sleep(0.1)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _cluster_info(port: int) -> bytes:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"CLUSTER INFO\r\n")
            return s.recv(4096)
    except OSError:
        return b""


def _cluster_ok(port: int) -> bool:
    return b"cluster_state:ok" in _cluster_info(port)


def _cluster_known(port: int) -> bool:
    """The node already belongs to a cluster with slots (restarted from its files)."""
    return b"cluster_slots_assigned:16384" in _cluster_info(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/redis-local", description=__doc__)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("command", choices=("start", "stop", "status"))
    parser.add_argument("--cluster", type=int, default=0, metavar="N",
                        help="a Redis Cluster of N masters (N >= 3) instead of one server; "
                        "stop and status take it too")
    args = parser.parse_args(argv)
    if args.cluster and args.cluster < 3:
        parser.error("--cluster needs at least 3 masters (redis-cli --cluster create does)")
    state_dir = args.state_dir or cache_root() / ("redis-cluster" if args.cluster else "redis")
    server = RedisServer(state_dir, args.cluster)
    try:
        if args.command == "start":
            print(f"REDIS_URL={server.start()}")
        elif args.command == "stop":
            server.stop()
        else:
            if not all(_ping(p) for p in server.ports):
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
