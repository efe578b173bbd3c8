"""A single-node KRaft Kafka broker assembled from Maven Central jars.

Why this exists: development and CI machines have no Docker engine and reach no network but the
package registries, so the only way to test against a *real* broker is to resolve Apache Kafka's
published jars with Maven (once, into a cache outside the repo) and run ``kafka.Kafka`` as a plain
JVM process bound to loopback ports.  Only the jars are cached; a broker's data lives in its state
directory and is removed by :meth:`LocalBroker.stop` unless asked to keep it (for restart tests).

CLI: ``python -m harness.broker {fetch,start,stop,status,topics,consumer-groups}``; ``start``
prints ``BOOTSTRAP=host:port`` as its last stdout line (``scripts/kafka-local`` wraps this);
``topics`` and ``consumer-groups`` are Kafka's own tools, run from the same jars.
Development harness, not part of the product: the test fixtures, ``scripts/demo``,
``scripts/replay.py``, the chaos runs and the benchmarks start their broker with it; a user's
``streamdedup run`` and ``replay`` are given the bootstrap address of a broker they run.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import hashlib
import ipaddress
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from streamdedup.process import die_with_parent, free_port, port_free
from streamdedup.settings import cache_root

__all__ = [
    "KAFKA_VERSION",
    "POM_XML",
    "BrokerError",
    "BrokerStatus",
    "LocalBroker",
    "default_cache_dir",
    "default_state_dir",
    "fetch_jars",
    "main",
]

log = logging.getLogger(__name__)

KAFKA_VERSION = "4.1.1"
LOG4J_VERSION = "2.24.3"

# kafka_2.13 brings the broker, clients, scala and log4j-api/core but no SLF4J binding (its
# slf4j-api is 1.7.x), so without log4j-slf4j-impl every broker log line would go nowhere.
POM_XML = f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.streamdedup</groupId>
  <artifactId>streamdedup-kafka-broker-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>{KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <!-- kafka-topics.sh and kafka-consumer-groups.sh (the README's steps): what they need
           beside this jar the broker's jars hold; its own dependencies (connect-runtime and
           a Jakarta JSON provider) serve other tools -->
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>{KAFKA_VERSION}</version>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>{LOG4J_VERSION}</version>
    </dependency>
  </dependencies>
</project>
"""

_MARKER = ".complete"
_MVN_TIMEOUT_S = 1800.0
_READY_MARKER = "Kafka Server started"
_STATE_FILE = "state.json"
# Everything LocalBroker creates in its state dir; stop() removes exactly these.
_OWNED_ENTRIES = (
    "data",
    "logs",
    "server.properties",
    "log4j2.properties",
    _STATE_FILE,
    ".lock",
)


# The Kafka distribution's scripts that the README's steps use (deleting a replay's topics,
# adding partitions, resetting a group's offsets), by the name after "kafka-" and before ".sh".
TOOLS = {
    "topics": "org.apache.kafka.tools.TopicCommand",
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
}


class BrokerError(RuntimeError):
    """The local broker could not be fetched, started or stopped."""


def default_cache_dir() -> Path:
    """Where the jars are cached: the product's cache root (``$STREAMDEDUP_CACHE``)."""
    return cache_root()


def default_state_dir(cache_dir: Path | None = None) -> Path:
    """Where the CLI's broker keeps its config, data and logs (one broker per cache)."""
    return (cache_dir or default_cache_dir()) / "broker"


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    """Serialise fetches/starts across processes (parallel test workers, two shells)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pom_digest() -> str:
    return hashlib.sha256(POM_XML.encode()).hexdigest()[:16]


def _jars_complete(base: Path) -> bool:
    marker = base / _MARKER
    libs = base / "libs"
    return (
        marker.is_file()
        and marker.read_text().strip() == _pom_digest()
        and any(libs.glob(f"kafka_2.13-{KAFKA_VERSION}.jar"))
        and any(libs.glob(f"kafka-tools-{KAFKA_VERSION}.jar"))
    )


def fetch_jars(cache_dir: Path | None = None) -> Path:
    """Resolve the broker's runtime jars into ``<cache>/kafka-<ver>/libs`` and return that dir.

    Maven runs only when the cache is missing or was made from a different pom; a marker file is
    written after a complete copy, and the copy goes through a temp dir so an interrupted fetch
    never leaves a half-filled ``libs`` that looks usable.
    """
    base = (cache_dir or default_cache_dir()) / f"kafka-{KAFKA_VERSION}"
    libs = base / "libs"
    if _jars_complete(base):
        return libs
    with _flock(base / ".fetch.lock"):
        if _jars_complete(base):
            return libs
        mvn = shutil.which("mvn")
        if mvn is None:
            raise BrokerError(
                "Maven ('mvn') is not on PATH; it is needed once to fetch Kafka's jars "
                "(apt-get install maven)"
            )
        pom = base / "pom.xml"
        pom.write_text(POM_XML)
        partial = base / "libs.partial"
        shutil.rmtree(partial, ignore_errors=True)
        cmd = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={partial}",
        ]
        log.info(
            "fetching Kafka %s jars with Maven into %s (first run may take minutes)",
            KAFKA_VERSION,
            libs,
        )
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=_MVN_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise BrokerError(f"mvn did not finish within {_MVN_TIMEOUT_S:.0f}s") from exc
        if proc.returncode != 0 or not any(partial.glob("kafka_2.13-*.jar")):
            tail = _tail_text((proc.stdout or "") + (proc.stderr or ""), 40)
            raise BrokerError(
                f"fetching Kafka jars failed (mvn exit {proc.returncode}): {' '.join(cmd)}\n{tail}"
            )
        shutil.rmtree(libs, ignore_errors=True)
        partial.rename(libs)
        (base / _MARKER).write_text(_pom_digest() + "\n")
        log.info("fetched %d jars in %.1fs", len(list(libs.glob("*.jar"))), time.monotonic() - t0)
    return libs


def _tail_text(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _tail_file(path: Path, lines: int = 40) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 64 * 1024))
            return _tail_text(fh.read().decode("utf-8", "replace"), lines)
    except OSError:
        return f"(no {path.name})"


def _error_lines(path: Path, offset: int, limit: int = 8) -> str:
    """The first ERROR/FATAL lines logged since offset: the cause, before the stack-trace noise."""
    found: list[str] = []
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            for raw in fh:
                line = raw.decode("utf-8", "replace").rstrip()
                if "] ERROR " in line or "] FATAL " in line:
                    found.append(line[:500])
                    if len(found) >= limit:
                        break
    except OSError:
        pass
    return "\n".join(found)


def _new_cluster_id() -> str:
    """A Kafka-style cluster id: 16 random bytes, url-safe base64 without padding."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka refuses ids that look like CLI flags
            return text


def _find_java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise BrokerError("no 'java' on PATH (or $JAVA_HOME); Kafka needs Java 17+")
    return java


def _pid_state(pid: int) -> str | None:
    """The /proc state letter of pid, or None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return "?"
    return stat.rsplit(")", 1)[-1].split()[0]


def _pid_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@dataclass
class BrokerStatus:
    """What :meth:`LocalBroker.status` reports."""

    running: bool
    pid: int | None
    bootstrap: str | None
    state_dir: Path
    data_kept: bool
    log_path: Path

    def describe(self) -> str:
        if self.running:
            return f"running pid={self.pid} BOOTSTRAP={self.bootstrap} state={self.state_dir}"
        kept = f" (data kept for restart on {self.bootstrap})" if self.data_kept else ""
        return f"not running{kept} state={self.state_dir}"


@dataclass
class _State:
    host: str
    port: int
    controller_port: int
    cluster_id: str
    pid: int | None = None
    keep: bool = False
    kafka_version: str = KAFKA_VERSION
    started_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


class LocalBroker:
    """One combined broker+controller KRaft node on loopback, run from the cached Maven jars.

    All state (ports, pid, cluster id) is kept in ``<state_dir>/state.json`` so that a different
    process — e.g. ``scripts/kafka-local stop`` — can manage a broker started elsewhere.
    ``stop(keep_data=True)`` or ``kill()`` followed by ``start()`` brings the same node back on the
    same ports with its data, which restart/reliability tests rely on.
    """

    def __init__(
        self,
        state_dir: Path | str | None = None,
        *,
        cache_dir: Path | str | None = None,
        host: str = "127.0.0.1",
        startup_timeout: float = 90.0,
        stop_timeout: float = 30.0,
        heap_min: str = "256m",
        heap_max: str = "512m",
        die_with_parent: bool = False,
        extra_properties: Mapping[str, str] | None = None,
    ) -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"LocalBroker binds loopback addresses only, not {host!r}")
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.state_dir = (
            Path(state_dir) if state_dir is not None else default_state_dir(self.cache_dir)
        ).absolute()
        self.host = host
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.heap_min = heap_min
        self.heap_max = heap_max
        self.die_with_parent = die_with_parent
        self.extra_properties = dict(extra_properties or {})
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    # -- paths -------------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self.state_dir / "data"

    @property
    def log_path(self) -> Path:
        """The broker's log4j log (the first place to look when something is off)."""
        return self.state_dir / "logs" / "broker.log"

    @property
    def console_path(self) -> Path:
        return self.state_dir / "logs" / "console.log"

    @property
    def properties_path(self) -> Path:
        return self.state_dir / "server.properties"

    @property
    def _state_path(self) -> Path:
        return self.state_dir / _STATE_FILE

    # -- public API --------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``host:port`` of the PLAINTEXT listener (stable across stop(keep_data)/start)."""
        state = self._read_state()
        if state is None:
            raise BrokerError(f"no broker has been started in {self.state_dir}")
        return state.bootstrap

    @property
    def port(self) -> int:
        state = self._read_state()
        if state is None:
            raise BrokerError(f"no broker has been started in {self.state_dir}")
        return state.port

    @property
    def pid(self) -> int | None:
        state = self._read_state()
        return state.pid if state is not None and self._alive(state.pid) else None

    def is_running(self) -> bool:
        return self.pid is not None

    def status(self) -> BrokerStatus:
        state = self._read_state()
        running = state is not None and self._alive(state.pid)
        return BrokerStatus(
            running=running,
            pid=state.pid if running and state is not None else None,
            bootstrap=state.bootstrap if state is not None else None,
            state_dir=self.state_dir,
            data_kept=bool(state is not None and not running and state.keep),
            log_path=self.log_path,
        )

    def start(self) -> str:
        """Start (or resume, or find already running) the broker; return its bootstrap address.

        A fresh start picks new ports, formats the storage and generates a cluster id.  If the
        state dir holds formatted data whose ports are still free (after ``stop(keep_data=True)``,
        ``kill()`` or a crash), the node resumes with the same ports, cluster id and data.
        """
        with _flock(self.state_dir / ".lock"):
            state = self._read_state()
            if state is not None and self._alive(state.pid):
                return state.bootstrap
            libs = fetch_jars(self.cache_dir)
            java = _find_java()
            formatted = (self.data_dir / "meta.properties").is_file()
            ports_free = state is not None and all(
                port_free(self.host, p) for p in (state.port, state.controller_port)
            )
            if state is not None and formatted and ports_free:
                log.info("resuming broker in %s on %s", self.state_dir, state.bootstrap)
                self._write_config(state)
            else:
                if state is not None and state.keep:
                    why = "its data is missing" if not formatted else "its ports are in use"
                    raise BrokerError(
                        f"cannot resume the broker kept in {self.state_dir} on "
                        f"{state.bootstrap}: {why}"
                    )
                self._remove_owned(final=False)
                port = free_port(self.host)
                controller = free_port(self.host, avoid=(port,))
                state = _State(self.host, port, controller, _new_cluster_id())
                self._write_config(state)
                self._format(java, libs, state)
            state.pid = self._launch(java, libs)
            state.keep = False
            state.started_at = time.time()
            self._write_state(state)
            try:
                self._wait_ready(state)
            except BaseException:
                self._terminate(state.pid, grace=5.0)
                state.pid = None
                self._write_state(state)
                raise
            log.info("broker pid %d ready on %s", state.pid, state.bootstrap)
            return state.bootstrap

    def stop(self, keep_data: bool = False) -> None:
        """SIGTERM the broker (SIGKILL after ``stop_timeout``); then delete its files.

        With ``keep_data=True`` config, data and ports are kept so that ``start()`` resumes them.
        """
        with _flock(self.state_dir / ".lock"):
            state = self._read_state()
            if state is not None and self._alive(state.pid):
                assert state.pid is not None
                self._terminate(state.pid, grace=self.stop_timeout)
            self._reap()
            if keep_data and state is not None:
                state.pid = None
                state.keep = True
                self._write_state(state)
                return
        self._remove_owned()

    def kill(self) -> None:
        """SIGKILL the broker without a clean shutdown (a crash), keeping data for ``start()``."""
        with _flock(self.state_dir / ".lock"):
            state = self._read_state()
            if state is None:
                return
            if self._alive(state.pid):
                assert state.pid is not None
                self._terminate(state.pid, grace=0.0)
            self._reap()
            state.pid = None
            state.keep = True
            self._write_state(state)

    def restart(self) -> str:
        """Clean stop keeping data, then start again on the same address."""
        self.stop(keep_data=True)
        return self.start()

    def log_tail(self, lines: int = 40) -> str:
        return _tail_file(self.log_path, lines)

    def _startup_diagnostics(self) -> str:
        errors = _error_lines(self.log_path, self._log_offset) or "(none)"
        return (
            f"errors logged:\n{errors}\n--- tail of {self.log_path}:\n{self.log_tail(25)}\n"
            f"--- tail of {self.console_path}:\n{_tail_file(self.console_path, 10)}"
        )

    def __enter__(self) -> LocalBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LocalBroker(state_dir={str(self.state_dir)!r})"

    # -- internals ---------------------------------------------------------------------------

    def _read_state(self) -> _State | None:
        try:
            raw = json.loads(self._state_path.read_text())
            return _State(**raw)
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:
            raise BrokerError(f"unreadable broker state {self._state_path}: {exc}") from exc

    def _write_state(self, state: _State) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self._state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
        tmp.replace(self._state_path)

    def _alive(self, pid: int | None) -> bool:
        """Whether pid is a live (not zombie) JVM running *this* state dir's broker."""
        if not pid:
            return False
        if not Path("/proc/self").is_dir():  # no procfs: trust the pid
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        st = _pid_state(pid)
        if st is None or st in "ZX":
            return False
        cmdline = _pid_cmdline(pid)  # guards against the pid being reused by another process
        return "kafka.Kafka" in cmdline and str(self.properties_path) in cmdline

    def _remove_owned(self, *, final: bool = True) -> None:
        """Delete what this class created; ``final`` also drops the lock and the empty dir."""
        for name in _OWNED_ENTRIES:
            if name == ".lock" and not final:
                continue
            path = self.state_dir / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        if final:
            with contextlib.suppress(OSError):
                self.state_dir.rmdir()  # only if nothing else lives there

    def _write_config(self, state: _State) -> None:
        (self.state_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        host = f"[{state.host}]" if ":" in state.host else state.host
        props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "listeners": f"PLAINTEXT://{host}:{state.port},CONTROLLER://{host}:"
            f"{state.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{host}:{state.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.bootstrap.servers": f"{host}:{state.controller_port}",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.recovery.threads.per.data.dir": "1",
            # After a crash (kill()) the restarted node waits for its previous incarnation's
            # session to expire before unfencing itself; the 9 s default makes that slow.
            # Heartbeats stay in-process here, so a short session is safe.
            "broker.heartbeat.interval.ms": "1000",
            "broker.session.timeout.ms": "4000",
        }
        props.update(self.extra_properties)
        body = "".join(f"{k}={v}\n" for k, v in props.items())
        self.properties_path.write_text("# written by harness.broker\n" + body)
        log4j = (
            "status = warn\n"
            "appender.file.type = File\n"
            "appender.file.name = FILE\n"
            f"appender.file.fileName = {self.log_path}\n"
            "appender.file.append = true\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.file.ref = FILE\n"
            # Per-request and state-change chatter only drowns what matters.
            "logger.request.name = kafka.request.logger\n"
            "logger.request.level = WARN\n"
            "logger.state.name = state.change.logger\n"
            "logger.state.level = WARN\n"
        )
        (self.state_dir / "log4j2.properties").write_text(log4j)

    def _jvm_base(self, java: str, libs: Path, heap_min: str | None) -> list[str]:
        cmd = [java]
        if heap_min:
            cmd.append(f"-Xms{heap_min}")
        cmd += [
            f"-Xmx{self.heap_max}",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.state_dir / 'log4j2.properties'}",
            "-cp",
            str(libs / "*"),
        ]
        return cmd

    def _format(self, java: str, libs: Path, state: _State) -> None:
        cmd = [
            *self._jvm_base(java, libs, None),
            "kafka.tools.StorageTool",
            "format",
            "--standalone",
            "--cluster-id",
            state.cluster_id,
            "--config",
            str(self.properties_path),
        ]
        proc = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=self.state_dir,
        )
        if proc.returncode != 0:
            raise BrokerError(
                f"formatting KRaft storage failed (exit {proc.returncode})\n"
                f"{_tail_text(proc.stdout + proc.stderr, 30)}\n{self.log_tail(20)}"
            )

    def _launch(self, java: str, libs: Path) -> int:
        cmd = [
            *self._jvm_base(java, libs, self.heap_min),
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:+ExitOnOutOfMemoryError",
            "kafka.Kafka",
            str(self.properties_path),
        ]
        self.console_path.parent.mkdir(parents=True, exist_ok=True)
        # The log is appended to across restarts: only lines after this offset belong to this run.
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.console_path, "ab") as console:
            # A new session keeps the broker out of the caller's process group, so a Ctrl-C in
            # the shell that ran `kafka-local start` does not take it down.
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                cwd=self.state_dir,
                start_new_session=True,
                preexec_fn=die_with_parent if self.die_with_parent else None,
            )
        return self._proc.pid

    def _wait_ready(self, state: _State) -> None:
        """Until this run logged it started, the port accepts and metadata lists the broker."""
        deadline = time.monotonic() + self.startup_timeout
        last_error = "not started yet"
        scanned = self._log_offset
        carry = b""
        marker = _READY_MARKER.encode()
        started = False
        while True:
            # Our own child: ask it. Its /proc cmdline is still Python's between fork and
            # exec, so the cmdline check of _alive() would call a slow-starting JVM dead.
            alive = (self._proc.poll() is None) if self._proc is not None else (
                self._alive(state.pid))
            if not alive:
                code = self._proc.poll() if self._proc is not None else None
                raise BrokerError(
                    f"broker exited during startup (exit {code})\n{self._startup_diagnostics()}"
                )
            if not started:
                with contextlib.suppress(FileNotFoundError), open(self.log_path, "rb") as fh:
                    fh.seek(scanned)
                    chunk = fh.read()
                    scanned += len(chunk)
                    started = marker in carry + chunk
                    carry = (carry + chunk)[-len(marker) :]
            if started:
                try:
                    _probe_metadata(state.host, state.port)
                    return
                except Exception as exc:
                    last_error = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"broker on {state.bootstrap} not ready after {self.startup_timeout:.0f}s "
                    f"({last_error})\n{self._startup_diagnostics()}"
                )
            time.sleep(0.25)

    def _terminate(self, pid: int | None, grace: float) -> None:
        if not pid:
            return
        if grace > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            if self._wait_gone(pid, grace):
                return
            log.warning("broker pid %d ignored SIGTERM for %.0fs; sending SIGKILL", pid, grace)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if not self._wait_gone(pid, 15.0):
            raise BrokerError(f"broker pid {pid} survived SIGKILL")

    def _wait_gone(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if self._proc is not None and self._proc.pid == pid:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=0.1)
            if not self._alive(pid):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def _reap(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None


def create_topics(admin: Any, topics: Mapping[str, int],
                  configs: Mapping[str, str] | None = None, timeout_s: float = 30.0) -> None:
    """Create ``topics`` (name -> partitions, replication 1) through a ``KafkaAdminClient``,
    or one made for the call when ``admin`` is a bootstrap address, and return once every
    partition has a leader: a client that uses a topic straight after its creation otherwise
    meets "unknown topic" or waits for a metadata refresh. The one way the harness, the
    benchmarks and the tests make topics."""
    from kafka.admin import KafkaAdminClient, NewTopic

    if isinstance(admin, str):
        client = KafkaAdminClient(bootstrap_servers=admin, client_id="streamdedup-harness")
        try:
            return create_topics(client, topics, configs, timeout_s)
        finally:
            client.close()

    admin.create_topics([NewTopic(name, num_partitions=n, replication_factor=1,
                                  topic_configs=dict(configs or {}))
                         for name, n in topics.items()])
    deadline = time.monotonic() + timeout_s
    for name, n in topics.items():
        while not _leaders_ready(admin, name, n):
            if time.monotonic() > deadline:
                raise BrokerError(f"topic {name} has no leaders after {timeout_s:.0f} s")
            time.sleep(0.1)


def _leaders_ready(admin: Any, topic: str, partitions: int) -> bool:
    # kafka-python 2.x and 3.x name the metadata fields differently.
    for meta in admin.describe_topics([topic]):
        if meta.get("error_code", 0) != 0:
            return False
        parts = meta.get("partitions") or []
        leaders = [p.get("leader_id", p.get("leader", -1)) for p in parts]
        return len(leaders) == partitions and all(x is not None and x >= 0 for x in leaders)
    return False


def _probe_metadata(host: str, port: int) -> None:
    """Check that a client can connect and the broker answers metadata listing itself.

    Uses kafka-python when importable (the project depends on it); a bare interpreter without it
    (``kafka-local`` before ``scripts/setup``) settles for a TCP connect after the start marker.
    """
    with socket.create_connection((host, port), timeout=2.0):
        pass
    try:
        from kafka import KafkaAdminClient
    except ImportError:
        return
    admin = KafkaAdminClient(
        bootstrap_servers=f"{host}:{port}",
        client_id="streamdedup-broker-probe",
        request_timeout_ms=5000,
    )
    try:
        brokers = admin.describe_cluster().get("brokers") or []
        if not any(not b.get("is_fenced", False) for b in brokers):
            raise BrokerError(f"metadata lists no unfenced broker yet: {brokers}")
    finally:
        admin.close()


def run_tool(name: str, args: Sequence[str], broker: LocalBroker) -> int:
    """Kafka's ``kafka-<name>.sh`` with ``args`` from the cached jars, against ``broker``
    unless ``args`` name another ``--bootstrap-server``; its exit status."""
    asks_help = any(a in ("-h", "--help", "--version") for a in args)  # no broker needed
    if not asks_help and "--bootstrap-server" not in args and not any(
        a.startswith("--bootstrap-server=") for a in args
    ):
        if not broker.is_running():
            raise BrokerError(
                "the local broker is not running: start it, or give --bootstrap-server"
            )
        args = ["--bootstrap-server", broker.bootstrap, *args]
    libs = fetch_jars(broker.cache_dir)
    cmd = [_find_java(), "-Djava.awt.headless=true", "-cp", str(libs / "*"), TOOLS[name], *args]
    return subprocess.run(cmd, check=False).returncode


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.broker {fetch,start,stop,status,topics,consumer-groups}``; see
    ``scripts/kafka-local``."""
    parser = argparse.ArgumentParser(
        prog="kafka-local",
        description="Run a local single-node KRaft Kafka broker from Maven Central jars.",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="jar cache (default: $STREAMDEDUP_CACHE or ~/.cache/streamdedup)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="broker config/data/logs (default: <cache-dir>/broker)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help="only resolve the broker jars into the cache")
    p_start = sub.add_parser("start", help="start the broker; last stdout line BOOTSTRAP=h:p")
    p_start.add_argument("--timeout", type=float, default=90.0, help="startup timeout (s)")
    p_stop = sub.add_parser("stop", help="stop the broker and delete its data")
    p_stop.add_argument(
        "--keep-data",
        action="store_true",
        help="keep data and ports so that the next start resumes them",
    )
    sub.add_parser("status", help="exit 0 if running, 3 if not")
    for tool in TOOLS:  # add_help=False: --help is the tool's
        sub.add_parser(tool, add_help=False,
                       help=f"Kafka's kafka-{tool}.sh, against the local broker unless "
                       "--bootstrap-server is given")
    args, passed = parser.parse_known_args(argv)
    if passed and args.command not in TOOLS:
        parser.error(f"unrecognized arguments: {' '.join(passed)}")
    ours = [a for a in passed if a.split("=")[0] in ("--cache-dir", "--state-dir")]
    if ours:  # Kafka's tool would answer with a Java stack trace
        parser.error(f"{ours[0].split('=')[0]} goes before the command "
                     f"(kafka-local {ours[0].split('=')[0]} DIR {args.command} ...)")

    logging.basicConfig(level=logging.WARNING, format="kafka-local: %(message)s", stream=sys.stderr)
    log.setLevel(logging.INFO)
    cache_dir = args.cache_dir or default_cache_dir()
    try:
        if args.command == "fetch":
            libs = fetch_jars(cache_dir)
            print(f"kafka {KAFKA_VERSION} jars: {libs}")
            return 0
        broker = LocalBroker(args.state_dir, cache_dir=cache_dir)
        if args.command in TOOLS:
            return run_tool(args.command, passed, broker)
        if args.command == "start":
            broker.startup_timeout = args.timeout
            was_running = broker.is_running()
            bootstrap = broker.start()
            if was_running:
                print(f"already running (pid {broker.pid})", file=sys.stderr)
            else:
                print(f"log: {broker.log_path}", file=sys.stderr)
            print(f"BOOTSTRAP={bootstrap}", flush=True)
            return 0
        if args.command == "stop":
            running = broker.is_running()
            broker.stop(keep_data=args.keep_data)
            print("stopped" if running else "was not running")
            return 0
        status = broker.status()
        print(status.describe())
        return 0 if status.running else 3
    except BrokerError as exc:
        print(f"kafka-local: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
