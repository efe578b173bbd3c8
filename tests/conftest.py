# --- broker ---
# Where the real Kafka broker for `@pytest.mark.broker` tests comes from, in order:
#   1. $STREAMDEDUP_TEST_BOOTSTRAP ("host:port"), a broker someone already runs;
#   2. testcontainers' KafkaContainer, if a Docker engine answers a ping
#      (skip this probe with STREAMDEDUP_TEST_BROKER=local);
#   3. harness.broker.LocalBroker: a KRaft node from Maven Central jars in a tmp dir, started
#      once per session (needs java and, on the first run, mvn).
# With none available the tests fail under CI=true and are skipped (with the reason) elsewhere.
# The chosen source and why others were passed over are shown in pytest's terminal summary.
import contextlib
import os
import re
import shutil
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.broker import (
    KAFKA_VERSION,
    BrokerError,
    LocalBroker,
    create_topics,
    default_cache_dir,
)
from streamdedup.store.base import Store


@dataclass
class KafkaSource:
    """Which broker the session uses, and why the earlier options were not taken."""

    kind: str  # "env" | "testcontainers" | "local" | "none"
    bootstrap: str | None = None
    local: LocalBroker | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str:
        return "; ".join(self.notes) or self.kind


_KAFKA_SOURCE: list[KafkaSource] = []  # for the terminal summary


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _docker_unreachable_reason() -> str | None:
    """None when a Docker engine answers a ping, else why not (never raises)."""
    try:
        import docker
    except ImportError as exc:
        return f"docker SDK not installed ({exc})"
    try:
        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        return f"no Docker engine reachable ({type(exc).__name__}: {exc})"
    return None


def _start_kafka_container() -> tuple[Any, str]:
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:  # testcontainers < 4.14
        from testcontainers.kafka import KafkaContainer
    container = KafkaContainer()
    container.start()
    return container, container.get_bootstrap_server()


def _skip_or_fail(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"no Kafka broker for broker tests under CI: {reason}", pytrace=False)
    pytest.skip(f"no Kafka broker: {reason}")


@pytest.fixture(scope="session")
def _kafka_source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaSource]:
    env = os.environ.get("STREAMDEDUP_TEST_BOOTSTRAP", "").strip()
    if env:
        source = KafkaSource("env", env, notes=["from $STREAMDEDUP_TEST_BOOTSTRAP"])
        _KAFKA_SOURCE.append(source)
        yield source
        return

    notes: list[str] = []
    if os.environ.get("STREAMDEDUP_TEST_BROKER", "").strip().lower() == "local":
        notes.append("testcontainers not tried (STREAMDEDUP_TEST_BROKER=local)")
    else:
        why_not = _docker_unreachable_reason()
        if why_not is None:
            try:
                container, bootstrap = _start_kafka_container()
            except Exception as exc:
                why_not = f"KafkaContainer failed to start ({type(exc).__name__}: {exc})"
            else:
                source = KafkaSource("testcontainers", bootstrap, notes=["testcontainers"])
                _KAFKA_SOURCE.append(source)
                try:
                    yield source
                finally:
                    container.stop()
                return
        notes.append(f"testcontainers skipped: {why_not}")
        warnings.warn(
            f"Kafka via testcontainers skipped: {why_not}; falling back to a local KRaft broker",
            stacklevel=1,
        )

    broker = LocalBroker(
        tmp_path_factory.mktemp("kafka-broker"), die_with_parent=True, startup_timeout=120.0
    )
    try:
        bootstrap = broker.start()
    except (BrokerError, OSError) as exc:
        notes.append(f"local KRaft broker failed: {exc}")
        with contextlib.suppress(BrokerError, OSError):
            broker.stop()
        source = KafkaSource("none", notes=notes)
        _KAFKA_SOURCE.append(source)
        yield source
        return
    notes.append(f"local KRaft broker (log: {broker.log_path})")
    source = KafkaSource("local", bootstrap, local=broker, notes=notes)
    _KAFKA_SOURCE.append(source)
    try:
        yield source
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(_kafka_source: KafkaSource) -> str:
    """``host:port`` of a real Kafka broker shared by the session (see header for the order)."""
    if _kafka_source.bootstrap is None:
        _skip_or_fail(_kafka_source.reason)
    assert _kafka_source.bootstrap is not None
    return _kafka_source.bootstrap


@pytest.fixture(scope="session")
def local_broker(kafka_bootstrap: str, _kafka_source: KafkaSource) -> LocalBroker:
    """The session's LocalBroker itself, for tests that stop/kill and restart it.

    Such tests must leave it running (``start()`` again) for the tests after them.
    """
    if _kafka_source.local is None:
        pytest.skip(
            f"needs the session's LocalBroker, but the broker came from {_kafka_source.kind} "
            f"({kafka_bootstrap}); unset STREAMDEDUP_TEST_BOOTSTRAP / use "
            "STREAMDEDUP_TEST_BROKER=local"
        )
    return _kafka_source.local


@pytest.fixture
def kafka_topic_factory(
    kafka_bootstrap: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    """``make(partitions=1, prefix=None, configs=None) -> name``: a fresh, uniquely named topic
    (``configs``: topic-level settings such as ``max.message.bytes``), leaders ready.

    Topics are deleted (best effort) when the test ends.
    """
    from kafka import KafkaAdminClient

    admin: Any = None
    created: list[str] = []
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:60].strip("-")

    def make(partitions: int = 1, prefix: str | None = None,
             configs: dict[str, str] | None = None) -> str:
        nonlocal admin
        if admin is None:
            admin = KafkaAdminClient(
                bootstrap_servers=kafka_bootstrap,
                client_id="streamdedup-tests",
                request_timeout_ms=15000,
            )
        name = f"{prefix or 'sd-' + base}-{uuid.uuid4().hex[:10]}"
        created.append(name)
        create_topics(admin, {name: partitions}, configs)
        return name

    yield make

    if admin is not None:
        try:
            if created:
                admin.delete_topics(created, timeout_ms=10000)
        except Exception as exc:  # the broker may have been stopped by the test
            warnings.warn(f"could not delete test topics {created}: {exc}", stacklevel=1)
        finally:
            admin.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for source in _KAFKA_SOURCE:
        terminalreporter.write_sep("-", "kafka broker for tests")
        terminalreporter.write_line(
            f"{source.kind}: {source.bootstrap or 'unavailable'} — {source.reason}"
        )


# --- stores ---
# Every store backend the contract suite in tests/store/test_base.py runs against. A test asks for
# ``store`` (parametrized over all backends by default, or over a subset with
# ``@pytest.mark.parametrize("store", [...], indirect=True)``), or for ``make_store`` when it
# needs several stores or to reopen one. SQLite stores live in the test's tmp_path.
# ``kijiji_path`` is the historical dump for ``@pytest.mark.dump`` tests: $STREAMDEDUP_KIJIJI,
# else ../shared/data/kijiji_jobs.tsv next to the project; missing -> skip (fail under CI).

SUPPORTED_STORES = ("memory", "sqlite", "redis")
PROJECT_ROOT = Path(__file__).resolve().parents[1]


def _local_redis(tmp_path_factory: pytest.TempPathFactory, variable: str, cluster: int
                 ) -> Iterator[str]:
    """$variable if set, else Debian's redis-server (``cluster`` > 0: that many cluster
    masters) started on loopback by harness/redis.py. Missing: fails under CI=true, skips
    elsewhere, with the reason."""
    env = os.environ.get(variable, "").strip()
    if env:
        yield env
        return
    from harness.redis import RedisError, RedisServer

    what = f"Redis Cluster of {cluster}" if cluster else "redis-server"
    server = RedisServer(tmp_path_factory.mktemp("redis"), cluster=cluster)
    try:
        url = server.run()
    except RedisError as exc:
        server.stop()
        if _in_ci():
            pytest.fail(f"no {what} for the Redis store tests under CI: {exc}", pytrace=False)
        pytest.skip(f"no {what}: {exc}")
    yield url
    server.stop()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server for the session ($STREAMDEDUP_TEST_REDIS to use another)."""
    yield from _local_redis(tmp_path_factory, "STREAMDEDUP_TEST_REDIS", 0)


@pytest.fixture(scope="session")
def redis_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real 3-master Redis Cluster ($STREAMDEDUP_TEST_REDIS_CLUSTER to use another)."""
    yield from _local_redis(tmp_path_factory, "STREAMDEDUP_TEST_REDIS_CLUSTER", 3)


SHARED_STORES = ("redis", "redis-cluster")


@pytest.fixture
def make_shared(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``make(kind, namespace=None) -> SharedRedisStore`` on a real server ("redis") or a
    real 3-master cluster ("redis-cluster"); a new namespace per call unless given (give one
    to have several consumers share an index). Closed at teardown."""
    from streamdedup.store.redis import SharedRedisStore

    opened: list[Any] = []

    def make(kind: str, namespace: str | None = None) -> Any:
        url = request.getfixturevalue("redis_cluster_url" if kind == "redis-cluster"
                                      else "redis_url")
        store = SharedRedisStore(url, namespace or f"t{uuid.uuid4().hex}",
                                 cluster=kind == "redis-cluster")
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def make_store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Store]]:
    """``make(backend, location=None) -> Store``; every store made is closed at teardown.

    ``location`` defaults to ``tmp_path / "store-<backend>"`` (a directory for SQLite, a key
    namespace for Redis), so making the same backend twice reopens the same store (close the
    first one before). Redis namespaces are unique per test.
    """
    from streamdedup.store.memory import MemoryStore
    from streamdedup.store.sqlite import SqliteStore

    opened: list[Store] = []

    def make(backend: str, location: str | os.PathLike[str] | None = None) -> Store:
        store: Store
        if backend == "memory":
            store = MemoryStore()
        elif backend == "sqlite":
            store = SqliteStore(location or tmp_path / f"store-{backend}")
        elif backend == "redis":
            from streamdedup.store.redis import RedisStore

            place = str(location or tmp_path / "store-redis")
            namespace = "t" + uuid.uuid5(uuid.NAMESPACE_URL, place).hex
            store = RedisStore(request.getfixturevalue("redis_url"), namespace,
                               writer_lock=True)  # as the product opens it
        else:
            raise ValueError(f"no such store backend in the tests: {backend!r}")
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()  # closing twice is allowed by every backend


@pytest.fixture(params=SUPPORTED_STORES)
def store(request: pytest.FixtureRequest, make_store: Callable[..., Store]) -> Store:
    """A fresh, empty store of the backend named by the (indirect) parameter."""
    return make_store(request.param)


@pytest.fixture(scope="session")
def kijiji_path() -> Path:
    """The Kijiji TSV dump; skipped (with the path looked at) when missing, failed under CI."""
    env = os.environ.get("STREAMDEDUP_KIJIJI", "").strip()
    path = Path(env) if env else PROJECT_ROOT.parent / "shared" / "data" / "kijiji_jobs.tsv"
    if not path.is_file():
        where = "$STREAMDEDUP_KIJIJI" if env else "the default location"
        reason = f"Kijiji dump not found at {path} ({where}); set STREAMDEDUP_KIJIJI to its path"
        if _in_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Debian's chromium, for Playwright (its own browser download needs the internet)."""
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        reason = "no Debian chromium (scripts/setup installs it as root: apt-get install chromium)"
        if _in_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return path


@pytest.fixture
def local_broker_tools() -> None:
    """For a test that starts a LocalBroker of its own: java, and mvn unless the jars are
    cached."""
    cached = (default_cache_dir() / f"kafka-{KAFKA_VERSION}" / ".complete").is_file()
    missing = [t for t in ("java", *(() if cached else ("mvn",))) if shutil.which(t) is None]
    if missing:
        reason = f"LocalBroker needs {', '.join(missing)} on PATH"
        if _in_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


# --- logging ---


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """A command run in process (click's runner: `monitor`, `run`) sets the process's
    logging up (root handler and level, kafka-python's level): put back after each test, or
    the tests after it capture records they never asked for (the root at INFO)."""
    import logging

    root, kafka = logging.getLogger(), logging.getLogger("kafka")
    handlers, level, kafka_level = root.handlers[:], root.level, kafka.level
    yield
    root.handlers[:], kafka.level = handlers, kafka_level
    root.setLevel(level)
