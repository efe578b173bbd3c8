"""Reading back what a test put on a real topic (one reader, from the start, no group)."""

from __future__ import annotations

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
