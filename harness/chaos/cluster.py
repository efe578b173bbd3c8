"""Kafka from the harness's side: ``Cluster``, its own producer, admin client and group-less
reader, made lazily so that they can be dropped and remade around a broker restart.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from typing import Any

from harness.broker import create_topics
from harness.chaos.errors import ChaosError
from harness.chaos.stream import Announcement


class Cluster:
    """The harness's own Kafka clients (producer, admin, a group-less reader), made lazily so
    that they can be dropped and remade around a broker restart."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._producer: Any = None
        self._admin: Any = None
        self._reader: Any = None
        self.next_offset: dict[tuple[str, int], int] = {}  # (topic, partition) -> end
        self.placed: dict[str, tuple[int, int]] = {}  # id -> (partition, offset), last send

    def close(self) -> None:
        for client in (self._producer, self._admin, self._reader):
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close(timeout=5) if client is self._producer else client.close()
        self._producer = self._admin = self._reader = None

    @property
    def producer(self) -> Any:
        if self._producer is None:
            from kafka import KafkaProducer

            self._producer = KafkaProducer(
                bootstrap_servers=self.bootstrap, client_id="chaos-producer", acks="all",
                linger_ms=5, max_request_size=4 << 20, request_timeout_ms=15000,
            )
        return self._producer

    @property
    def admin(self) -> Any:
        if self._admin is None:
            from kafka import KafkaAdminClient

            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap,
                                           client_id="chaos-admin", request_timeout_ms=15000)
        return self._admin

    @property
    def reader(self) -> Any:
        if self._reader is None:
            from kafka import KafkaConsumer

            self._reader = KafkaConsumer(
                bootstrap_servers=self.bootstrap, client_id="chaos-reader", group_id=None,
                enable_auto_commit=False, auto_offset_reset="earliest",
                max_partition_fetch_bytes=8 << 20,
            )
        return self._reader

    def create_topic(self, name: str, partitions: int) -> None:
        create_topics(self.admin, {name: partitions})

    def delete_topics(self, names: Iterable[str]) -> None:
        with contextlib.suppress(Exception):
            self.admin.delete_topics(list(names), timeout_ms=10000)

    def produce(self, topic: str, items: Sequence[Announcement], attempts: int = 10) -> None:
        """Send and wait for every ack; failed sends are retried (the producer is idempotent,
        so a retry does not duplicate, and one partition keeps its order)."""
        pending = list(items)
        for attempt in range(attempts):
            try:
                sent = [(a, self.producer.send(topic, key=a.key, value=a.value)) for a in pending]
                self.producer.flush(timeout=120)
            except Exception as exc:
                if attempt == attempts - 1:
                    raise ChaosError(f"cannot produce to {topic}: {exc}") from exc
                time.sleep(1.0)
                continue
            failed = []
            for a, future in sent:
                try:
                    md = future.get(timeout=0)
                except Exception:
                    failed.append(a)
                    continue
                self.placed[a.id] = (md.partition, md.offset)
                key = (topic, md.partition)
                self.next_offset[key] = max(self.next_offset.get(key, 0), md.offset + 1)
            if not failed:
                return
            pending = failed
            time.sleep(1.0)
        raise ChaosError(f"{len(pending)} messages could not be produced to {topic}")

    def targets(self, topic: str) -> dict[int, int]:
        """End offset of each partition of ``topic`` that this harness has produced to."""
        return {p: end for (t, p), end in self.next_offset.items() if t == topic}

    def committed(self, group: str, topic: str, attempts: int = 10) -> dict[int, int]:
        """The group's committed offsets; retried, since the coordinator moves during
        rebalances and broker restarts (NotCoordinator, CoordinatorLoadInProgress)."""
        from kafka.errors import KafkaError

        for attempt in range(attempts):
            try:
                admin = self.admin
                if hasattr(admin, "list_group_offsets"):
                    found = admin.list_group_offsets({group: None}).get(group, {})
                else:  # kafka-python 2.x
                    found = admin.list_consumer_group_offsets(group)
                return {tp.partition: oam.offset for tp, oam in found.items()
                        if tp.topic == topic and oam.offset >= 0}
            except KafkaError:
                if attempt == attempts - 1:
                    raise
                with contextlib.suppress(Exception):
                    self.admin.close()
                self._admin = None
                time.sleep(0.3)
        raise AssertionError("unreachable")

    def read(self, topic: str, timeout: float = 120.0) -> list[Any]:
        """Every record of ``topic`` from the beginning to its current end."""
        from kafka import TopicPartition

        reader = self.reader
        parts = reader.partitions_for_topic(topic)
        if not parts:
            reader.topics()  # refresh metadata once
            parts = reader.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        if not tps:
            return []
        reader.assign(tps)
        reader.seek_to_beginning(*tps)
        ends = reader.end_offsets(tps)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while any(reader.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise ChaosError(f"reading {topic} timed out")
            for records in reader.poll(timeout_ms=500, max_records=5000).values():
                out.extend(records)
        return out
