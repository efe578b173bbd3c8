"""The Kafka client helpers against a real broker: topics made, or found short."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from harness.broker import create_topics
from streamdedup.service.kafka import ensure_topics, heartbeat_age_s, missing_topics
from streamdedup.settings import build_settings


@pytest.mark.broker
def test_an_input_topic_with_fewer_partitions_than_asked_is_said(
        kafka_bootstrap: str, caplog: pytest.LogCaptureFixture) -> None:
    """--topic-partitions only makes topics: a group on an input topic made earlier with one
    partition had all its members but one idle, and nothing said so."""
    name = f"short-{uuid.uuid4().hex[:8]}"
    create_topics(kafka_bootstrap, {name: 1})
    settings = build_settings(env={}, overrides={
        "bootstrap_servers": kafka_bootstrap, "input_topic": name,
        "output_topic": name + ".out", "dlq_topic": name + ".dlq", "topic_partitions": 4})
    with caplog.at_level(logging.WARNING, logger="streamdedup.service.kafka"):
        ensure_topics(settings, 10_000)
    assert missing_topics(settings, 10_000) == []  # the other two were made
    assert [r.getMessage() for r in caplog.records] == [
        f"topic {name} has 1 partition, not the 4 of --topic-partitions (which only applies "
        "to topics it creates): at most 1 consumer of the group gets work; add partitions "
        "with kafka-topics.sh --alter"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="streamdedup.service.kafka"):
        ensure_topics(build_settings(env={}, overrides={
            "bootstrap_servers": kafka_bootstrap, "input_topic": name,
            "output_topic": name + ".out", "dlq_topic": name + ".dlq"}), 10_000)
    assert caplog.records == []  # one partition asked, one there


@pytest.mark.broker
def test_an_output_topic_that_takes_less_than_max_output_bytes_is_said(
        kafka_bootstrap: str, caplog: pytest.LogCaptureFixture) -> None:
    """Made beforehand with ``max.message.bytes=600``, the verdict topic turned 10 of 12
    verdicts into ``output_too_large`` dead letters, and nothing at start said why."""
    name = f"small-{uuid.uuid4().hex[:8]}"
    create_topics(kafka_bootstrap, {name + ".out": 1}, {"max.message.bytes": "600"})
    create_topics(kafka_bootstrap, {name + ".dlq": 1}, {"max.message.bytes": "2000000"})
    overrides = {"bootstrap_servers": kafka_bootstrap, "input_topic": name,
                 "output_topic": name + ".out", "dlq_topic": name + ".dlq"}
    with caplog.at_level(logging.WARNING, logger="streamdedup.service.kafka"):
        ensure_topics(build_settings(env={}, overrides=overrides), 10_000)
        # the input topic above, made with the broker's limit, none of its own
        again = {**overrides, "input_topic": name + ".in", "output_topic": name}
        ensure_topics(build_settings(env={}, overrides=again), 10_000)
    assert [r.getMessage() for r in caplog.records] == [
        f"topic {name}.out takes records of at most 600 bytes (its max.message.bytes), under "
        "--max-output-bytes 1000000: a record over it becomes an output_too_large dead "
        "letter; raise the topic's limit, or lower --max-output-bytes (at least 65536)"]


def test_closing_a_producer_that_cannot_finish_is_a_warning_not_a_crash(
        caplog: pytest.LogCaptureFixture) -> None:
    """After SIGTERM with the broker away, the consumer's close raised KafkaTimeoutError:
    a traceback and exit 1 after the final checkpoint, no "stopped" line. (A fake producer
    stands for one whose broker is away.)"""
    from kafka.errors import KafkaTimeoutError

    from streamdedup.service.kafka import close_producer

    class Away:
        def __init__(self) -> None:
            self.asked: list[float] = []

        def close(self, timeout: float) -> None:
            self.asked.append(timeout)
            raise KafkaTimeoutError("Timeout waiting for future")

    away = Away()
    with caplog.at_level(logging.WARNING, logger="streamdedup.service.kafka"):
        close_producer(away)
    assert away.asked == [2.0]  # its work is settled: not the 10 s it waited before
    assert [r.getMessage() for r in caplog.records] == [
        "closing the producer: KafkaTimeoutError: Timeout waiting for future"]


def test_the_heartbeat_age_is_read_from_kafka_pythons_metrics_and_never_raises() -> None:
    """Before the first heartbeat kafka-python says inf; a consumer without the metric (or
    one whose metrics fail: an interface it calls unstable) reads as just heard from, so
    readiness is what it was before this check."""

    class Consumer:
        def __init__(self, found: Any) -> None:
            self.found = found

        def metrics(self) -> Any:
            if isinstance(self.found, Exception):
                raise self.found
            return self.found

    def age(found: Any) -> float:
        return heartbeat_age_s(Consumer(found))

    assert age({"consumer-coordinator-metrics": {"last-heartbeat-seconds-ago": 12.5}}) == 12.5
    assert age({"consumer-coordinator-metrics": {"last-heartbeat-seconds-ago": float("inf")}}
               ) == 0.0
    assert age(None) == age({}) == age(RuntimeError("gone")) == 0.0



@pytest.mark.broker
def test_topics_the_broker_will_not_make_are_a_refusal_in_its_own_words(
        kafka_bootstrap: str) -> None:
    """`run --topic-partitions 100000` retried for ever, each retry logging kafka-python's
    whole request and response (1,600 characters): the broker's policy will not change. Now
    a refusal (``FATAL_KAFKA_ERRORS``: `run` exits 2), with the broker's reason."""
    from kafka.errors import PolicyViolationError

    from streamdedup.service.kafka import FATAL_KAFKA_ERRORS

    name = f"huge-{uuid.uuid4().hex[:8]}"
    settings = build_settings(env={}, overrides={
        "bootstrap_servers": kafka_bootstrap, "input_topic": name,
        "output_topic": name + ".out", "dlq_topic": name + ".dlq", "topic_partitions": 100000})
    with pytest.raises(PolicyViolationError) as caught:
        ensure_topics(settings, 10_000)
    assert isinstance(caught.value, FATAL_KAFKA_ERRORS)
    assert str(caught.value) == (f"[Error 44] PolicyViolationError: topic {name} with "
                                 "--topic-partitions 100000: Excessively large number of "
                                 "partitions per request.")


def test_a_topic_another_member_made_meanwhile_is_no_refusal() -> None:
    """Two members starting at once both find the topics missing and both create them: the
    second's TOPIC_ALREADY_EXISTS (36) is the race lost, not an error; another code is."""
    from kafka.errors import InvalidPartitionsError

    from streamdedup.service.kafka import _create

    class Admin:
        def __init__(self, code: int) -> None:
            self.code = code

        def create_topics(self, topics: dict[str, Any], raise_errors: bool) -> dict[str, Any]:
            assert raise_errors is False
            return {"topics": [{"name": t, "error_code": self.code, "error_message": None}
                               for t in topics]}

    settings = build_settings(env={})
    _create(Admin(36), settings, ["jobs"])
    _create(Admin(0), settings, ["jobs"])
    with pytest.raises(InvalidPartitionsError, match="topic jobs with --topic-partitions 1"):
        _create(Admin(37), settings, ["jobs"])
