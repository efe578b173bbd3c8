"""The observer's choice of partitions, with a fake client (the real broker runs in
test_monitor.py): topics that appear after it started are picked up."""

from __future__ import annotations

from typing import Any

import pytest
from kafka import TopicPartition

from streamdedup.errors import ConfigError
from streamdedup.monitor.observer import LOOK_EVERY_S, Observer, parse_start


class FakeClient:
    def __init__(self, partitions: dict[str, int]) -> None:
        self.partitions = partitions
        self.assigned: list[TopicPartition] = []

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self.partitions.get(topic)
        return None if n is None else set(range(n))

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assigned = list(tps)

    def seek_to_beginning(self, *_tps: Any) -> None:
        pass

    def poll(self, timeout_ms: int) -> dict[Any, list[Any]]:
        return {}


def test_a_topic_that_appears_later_is_read_even_when_another_has_many_partitions() -> None:
    """An input topic of 6 partitions made the observer stop looking (6 partitions >= 3
    topics): the verdict topic the detector created later was never read."""
    observer = Observer.__new__(Observer)
    client = FakeClient({"in": 6})
    observer.topics, observer.start, observer.assigned = ["in", "out", "dlq"], "beginning", set()
    observer.consumer, observer._looked = client, float("-inf")
    client.partitions.clear()
    assert list(observer.poll(timeout_ms=1)) == [] and not client.assigned  # none there yet
    client.partitions["in"] = 6
    observer._looked -= LOOK_EVERY_S
    list(observer.poll())
    assert {tp.topic for tp in client.assigned} == {"in"}
    client.partitions.update(out=1, dlq=1)
    observer._looked -= LOOK_EVERY_S  # the next look is due
    list(observer.poll())
    assert {tp.topic for tp in client.assigned} == {"in", "out", "dlq"}
    assert len(client.assigned) == 8


def test_a_start_before_1970_is_refused() -> None:
    with pytest.raises(ConfigError, match="before 1970"):
        parse_start("1960-01-01T00:00:00Z")
    assert parse_start("1970-01-01T00:00:01Z") == 1000
