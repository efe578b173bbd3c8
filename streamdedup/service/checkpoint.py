"""The checkpoint: the one place that decides when a batch of work is safely done.

Commit order (nothing is lost and nothing is contradicted at any crash point)::

    1. store.commit()        documents, sets, buckets and each document's verdict are durable
    2. producer.send(...)    verdicts and dead letters of the checkpoint, in input order
    3. producer.flush()      ... and acknowledged by the broker (acks=all)
    4. consumer.commit(...)  only now the input offsets move past those messages

A crash before 1 loses uncommitted store writes and offsets: the messages come again and are
processed as if new. A crash between 1 and 4 redelivers messages whose verdicts are already
stored: the detector returns those stored verdicts, so the output repeats identical verdicts
and no document becomes its own duplicate. If any step fails (disk full, broker gone, group
rebalanced), the checkpoint *rewinds*: it rolls back what the store has not committed, seeks
the consumer back to the first offset not yet committed, and drops what it had not produced,
so the same messages are simply processed again once the fault is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from kafka import TopicPartition
from kafka.structs import OffsetAndMetadata

from streamdedup.errors import StoreError
from streamdedup.service.metrics import Metrics
from streamdedup.service.records import Outgoing
from streamdedup.store.base import Store

log = logging.getLogger(__name__)


class CheckpointFailed(Exception):
    """A step of the commit order failed; the checkpoint was rewound."""


class Checkpoint:
    """Outputs and offsets of messages processed since the last successful commit."""

    def __init__(
        self,
        store: Store,
        producer: Any,
        consumer: Any,
        metrics: Metrics,
        *,
        commit_every: int,
        commit_interval_s: float,
        flush_timeout_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.producer = producer
        self.consumer = consumer
        self.metrics = metrics
        self.commit_every = commit_every
        self.commit_interval_s = commit_interval_s
        self.flush_timeout_s = flush_timeout_s
        self.clock = clock
        self._reset()

    def _reset(self) -> None:
        self.outgoing: list[Outgoing] = []
        self.first_offsets: dict[TopicPartition, int] = {}
        self.next_offsets: dict[TopicPartition, int] = {}
        self.messages = 0
        self.started = self.clock()

    @property
    def empty(self) -> bool:
        return self.messages == 0

    def add(self, tp: TopicPartition, offset: int, out: Outgoing | None) -> None:
        """One input message is processed; ``out`` is its verdict or dead letter (or None)."""
        if self.empty:
            self.started = self.clock()  # the interval counts from the oldest held verdict
        if out is not None:
            self.outgoing.append(out)
        self.first_offsets.setdefault(tp, offset)
        self.next_offsets[tp] = offset + 1
        self.messages += 1

    def seconds_until_due(self) -> float:
        """How long the loop may wait for more messages before it must commit."""
        if self.empty:
            return float("inf")
        return max(0.0, self.commit_interval_s - (self.clock() - self.started))

    def due(self) -> bool:
        if self.empty:
            return False
        return (self.messages >= self.commit_every
                or self.clock() - self.started >= self.commit_interval_s)

    def commit(self, wait: bool = True) -> int:
        """Run the commit order; returns messages committed. Rewinds and raises on failure.

        With ``wait=False`` the offset commit (step 4) is sent without waiting for its answer:
        it still leaves only after the flush, and a lost one merely redelivers messages whose
        verdicts are stored; the next commit, or the final synchronous one, supersedes it.
        """
        if self.empty:
            return 0
        stage = "store_commit"
        try:
            with self.metrics.stage_seconds.labels(stage).time():
                self.store.commit()
            stage = "produce_flush"
            with self.metrics.stage_seconds.labels(stage).time():
                futures = [
                    self.producer.send(o.topic, value=o.value, key=o.key, headers=o.headers)
                    for o in self.outgoing
                ]
                self.producer.flush(timeout=self.flush_timeout_s)
                for f in futures:
                    f.get(timeout=0)  # raises if the broker refused a record
            stage = "offset_commit"
            offsets = {tp: OffsetAndMetadata(off, "", -1) for tp, off in self.next_offsets.items()}
            with self.metrics.stage_seconds.labels(stage).time():
                if wait:
                    self.consumer.commit(offsets)
                else:
                    self.consumer.commit_async(offsets, callback=self._async_committed)
        except Exception as exc:
            self.metrics.commit_failures.labels(stage).inc()
            self.rewind(store_committed=stage != "store_commit")
            raise CheckpointFailed(f"{stage} failed: {type(exc).__name__}: {exc}") from exc
        done = self.messages
        self._reset()
        return done

    def _async_committed(self, offsets: Any, response: Any) -> None:
        if isinstance(response, Exception):
            self.metrics.commit_failures.labels("offset_commit").inc()
            log.warning("async offset commit failed (messages may be redelivered): %s", response)

    def rewind(self, store_committed: bool = False, unprocessed: Iterable[Any] = ()) -> None:
        """Forget uncommitted work so that its messages (and the ``unprocessed`` records of
        a batch that failed) are consumed and processed again."""
        for rec in unprocessed:
            self.first_offsets.setdefault(TopicPartition(rec.topic, rec.partition), rec.offset)
        if not store_committed:
            try:
                self.store.rollback()
            except StoreError:
                log.exception("store rollback failed")
                raise
        assigned = self.consumer.assignment()
        for tp, offset in self.first_offsets.items():
            if tp in assigned:
                self.consumer.seek(tp, offset)
        self._reset()
