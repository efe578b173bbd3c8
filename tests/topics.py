"""Reading back what a test put on a real topic (one reader, from the start, no group).

Two ways to know the end: ``topic_records`` reads until the topic has been idle a while (all
of a finished run's output), ``records_until`` until a count is reached or a deadline passes
(while a consumer is still writing; a test then asserts on the count it got).
"""

from __future__ import annotations

import time
from typing import Any


def topic_records(bootstrap: str, topic: str, idle_ms: int = 5_000) -> list[Any]:
    """Every record of ``topic``, in offset order per partition, once nothing new arrived for
    ``idle_ms`` (kafka-python's ``consumer_timeout_ms``)."""
    from kafka import KafkaConsumer

    reader = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                           auto_offset_reset="earliest", consumer_timeout_ms=idle_ms)
    try:
        return list(reader)
    finally:
        reader.close()


def topic_keys(bootstrap: str, topic: str, idle_ms: int = 5_000) -> list[str]:
    """The keys of every record of ``topic``, as text."""
    return [r.key.decode("utf-8") for r in topic_records(bootstrap, topic, idle_ms)]


def records_until(bootstrap: str, topic: str, want: int, timeout_s: float = 90.0,
                  **config: Any) -> list[Any]:
    """Records of ``topic`` from its start until ``want`` arrived or ``timeout_s`` passed;
    ``config``: more reader options (bigger fetches for big records)."""
    from kafka import KafkaConsumer

    reader = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                           auto_offset_reset="earliest", enable_auto_commit=False, **config)
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < want and time.monotonic() < deadline:
            for records in reader.poll(timeout_ms=200).values():
                got.extend(records)
    finally:
        reader.close()
    return got
