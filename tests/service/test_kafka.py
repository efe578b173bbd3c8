"""The Kafka client helpers against a real broker: topics made, or found short."""

from __future__ import annotations

import logging
import uuid

import pytest

from harness.broker import create_topics
from streamdedup.service.kafka import ensure_topics, missing_topics
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
