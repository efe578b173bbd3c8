"""Real-broker tests: the session broker works end to end, and LocalBroker survives restarts."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from harness.broker import LocalBroker

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[2]


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        for i, value in enumerate(values):
            producer.send(topic, key=str(i).encode(), value=value)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)


def _consume_all(
    bootstrap: str, topic: str, expected: int, group_id: str | None = None, timeout: float = 30.0
) -> list[bytes]:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group_id,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        if group_id is not None:
            consumer.commit()
    finally:
        consumer.close()
    return got


def test_produce_and_consume_through_fixture_broker(kafka_bootstrap, kafka_topic_factory):
    topic = kafka_topic_factory(partitions=3)
    values = [f"job-{i}".encode() for i in range(12)]
    _produce(kafka_bootstrap, topic, values)

    group = f"{topic}-group"
    got = _consume_all(kafka_bootstrap, topic, len(values), group_id=group)
    assert sorted(got) == sorted(values)

    # Committed offsets need the group coordinator's __consumer_offsets topic (RF=1 here).
    probe = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group)
    try:
        committed = sum(probe.committed(TopicPartition(topic, p)) or 0 for p in range(3))
    finally:
        probe.close()
    assert committed == len(values)


def test_local_broker_keeps_data_across_stop_and_kill(tmp_path, local_broker_tools):
    broker = LocalBroker(tmp_path / "broker", die_with_parent=True)
    try:
        bootstrap = broker.start()
        assert bootstrap == f"127.0.0.1:{broker.port}"
        _produce(bootstrap, "restart-check", [b"a", b"b", b"c"])  # auto-created topic

        broker.stop(keep_data=True)
        assert not broker.is_running()
        assert broker.status().data_kept
        assert broker.start() == bootstrap  # same port, same data
        assert _consume_all(bootstrap, "restart-check", 3) == [b"a", b"b", b"c"]

        _produce(bootstrap, "restart-check", [b"d"])
        broker.kill()  # a crash: no clean shutdown
        assert broker.restart() == bootstrap
        assert _consume_all(bootstrap, "restart-check", 4) == [b"a", b"b", b"c", b"d"]
        assert "Kafka Server started" in broker.log_path.read_text()
    finally:
        broker.stop()
    assert not (tmp_path / "broker").exists()  # data is never left behind


def test_kafka_local_script_start_is_idempotent(tmp_path, local_broker_tools):
    state = tmp_path / "cli-broker"
    script = [str(ROOT / "scripts" / "kafka-local"), "--state-dir", str(state)]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*script, *args], capture_output=True, text=True, timeout=180, check=False
        )

    try:
        first = run("start")
        assert first.returncode == 0, first.stderr
        last = first.stdout.strip().splitlines()[-1]
        assert last.startswith("BOOTSTRAP=127.0.0.1:"), first.stdout
        again = run("start")
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip().splitlines()[-1] == last
        status = run("status")
        assert status.returncode == 0 and "running" in status.stdout
    finally:
        stop = run("stop")
    assert stop.returncode == 0, stop.stderr
    assert run("status").returncode == 3
    assert not state.exists()


def test_module_cli_reports_not_running(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "harness.broker", "--state-dir", str(tmp_path), "status"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 3
    assert proc.stdout.startswith("not running")


def _kafka_local(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.broker", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, check=False)


def test_kafka_local_runs_the_topic_and_group_tools_the_readme_names(
        kafka_bootstrap, kafka_topic_factory, tmp_path):
    """The README's steps use kafka-topics.sh (--alter, --delete) and kafka-consumer-groups.sh
    (--reset-offsets), which the broker's jars lacked: a user of the local broker was stuck."""
    topic = kafka_topic_factory(partitions=1)
    _produce(kafka_bootstrap, topic, [b"a", b"b", b"c"])
    group = f"{topic}-group"
    assert len(_consume_all(kafka_bootstrap, topic, 3, group_id=group)) == 3
    server = ["--bootstrap-server", kafka_bootstrap]
    done = _kafka_local("consumer-groups", *server, "--group", group, "--topic", topic,
                        "--reset-offsets", "--to-offset", "1", "--execute")
    assert done.returncode == 0, done.stderr
    probe = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group)
    try:
        assert probe.committed(TopicPartition(topic, 0)) == 1
    finally:
        probe.close()
    done = _kafka_local("topics", *server, "--alter", "--topic", topic, "--partitions", "2")
    assert done.returncode == 0, done.stderr
    done = _kafka_local("topics", *server, "--describe", "--topic", topic)
    assert "PartitionCount: 2" in done.stdout, done.stdout + done.stderr
    done = _kafka_local("topics", f"--bootstrap-server={kafka_bootstrap}", "--list")
    assert done.returncode == 0 and topic in done.stdout.split(), done.stderr
    # without --bootstrap-server: the local broker of --state-dir, which is not running here
    done = _kafka_local("--state-dir", str(tmp_path), "topics", "--list")
    assert done.returncode == 1 and "the local broker is not running" in done.stderr
    done = _kafka_local("--state-dir", str(tmp_path), "topics", "--help")  # needs none
    assert "--bootstrap-server" in done.stdout + done.stderr and "not running" not in done.stderr
    done = _kafka_local("topics", "--state-dir", str(tmp_path), "--list")
    assert done.returncode == 2 and "--state-dir goes before the command" in done.stderr


def test_kafka_local_tools_default_to_the_running_local_broker(local_broker, kafka_topic_factory):
    """Without --bootstrap-server, the broker of --state-dir (here the session's)."""
    topic = kafka_topic_factory(partitions=1)
    done = _kafka_local("--state-dir", str(local_broker.state_dir), "topics", "--list")
    assert done.returncode == 0 and topic in done.stdout.split(), done.stderr
