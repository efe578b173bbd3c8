"""The checkpoint: the one place that decides when a batch of work is safely done.

Commit order (nothing is lost and nothing is contradicted at any crash point)::

    1. store.commit()        documents, sets, buckets, each document's verdict and the input
                             positions reached are durable
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

One fault is not transient: a record the broker refuses as too large would be refused on every
retry, and the partition would never move again. Records are built to fit (``records.py``);
one that is refused all the same is sent again alone (a refused batch may hold records that
fit), and if it is refused alone, it is replaced by a small ``output_too_large`` dead letter
(``shrink``), so the message still ends as a dead letter with a reason.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from kafka import TopicPartition
from kafka.errors import MessageSizeTooLargeError, RecordListTooLargeError, UnknownError
from kafka.structs import OffsetAndMetadata

from streamdedup.errors import StoreError, describe
from streamdedup.service.metrics import Metrics
from streamdedup.service.records import Outgoing
from streamdedup.store.base import Store

log = logging.getLogger(__name__)

_SIZE_ERRORS = (MessageSizeTooLargeError, RecordListTooLargeError)
# How long a checkpoint waits for the broker's acknowledgements (and the producer's
# ``send`` for a topic's metadata: ``max_block_ms``, whose 60-s default doubled a stop
# during an outage when no verdict had been sent yet) before it rewinds.
FLUSH_TIMEOUT_S = 30.0
Shrink = Callable[[Outgoing, str], Outgoing]


OFFSET_TAG = "streamdedup-store:"


def offset_tag(store: Store) -> str:
    """The metadata of the offsets this store's commits allow: which store holds them."""
    return f"{OFFSET_TAG}{store.store_id()}"


# How long the stop waits for an unanswered commit to be settled: a broker that answers does
# so in milliseconds, and one that is away held the stop for the consumer's request timeout
# (30 s), where without ``settle`` it had closed at once.
SETTLE_TIMEOUT_S = 5.0


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
        flush_timeout_s: float = FLUSH_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
        shrink: Shrink | None = None,
        renew_producer: Callable[[Any], Any] | None = None,
    ) -> None:
        self.store = store
        self.producer = producer
        self.consumer = consumer
        self.metrics = metrics
        self.commit_every = commit_every
        self.commit_interval_s = commit_interval_s
        self.flush_timeout_s = flush_timeout_s
        self.clock = clock
        self.shrink = shrink
        self.renew_producer = renew_producer
        # Offsets whose async commit failed and that no later commit has superseded: an idle
        # consumer commits them again (``recommit``), or the group's offsets would stay
        # behind outputs that are done until the next message came.
        self.unconfirmed: dict[TopicPartition, OffsetAndMetadata] = {}
        self._last_sent: dict[TopicPartition, int] = {}
        # Offsets sent by commit_async and not answered yet (kafka-python runs the answer's
        # callback at a later commit or poll): ``settle`` waits for them before the consumer
        # closes, unless a later commit superseded them.
        self._in_flight: dict[TopicPartition, OffsetAndMetadata] = {}
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
                self.store.put_positions({(tp.topic, tp.partition): off
                                          for tp, off in self.next_offsets.items()})
                self.store.commit()
            stage = "produce_flush"
            with self.metrics.stage_seconds.labels(stage).time():
                refused = self._produce(self.outgoing)
                if refused:
                    self._produce_alone(refused)
            stage = "offset_commit"
            # the store's id as it is now: a Redis that lost its store gets a new one
            offsets = {tp: OffsetAndMetadata(off, offset_tag(self.store), -1)
                       for tp, off in self.next_offsets.items()}
            with self.metrics.stage_seconds.labels(stage).time():
                for tp, meta in offsets.items():  # it supersedes an earlier one that failed
                    self.unconfirmed.pop(tp, None)
                    self._last_sent[tp] = meta.offset
                if wait:
                    self.consumer.commit(offsets)
                    for tp in offsets:  # superseded, answered or not
                        self._in_flight.pop(tp, None)
                else:
                    self._in_flight.update(offsets)
                    self.consumer.commit_async(offsets, callback=self._async_committed)
        except Exception as exc:
            self.metrics.commit_failures.labels(stage).inc()
            self.rewind(store_committed=stage != "store_commit")
            raise CheckpointFailed(f"{stage} failed: {describe(exc)}") from exc
        done = self.messages
        self._reset()
        return done

    def _produce(self, records: list[Outgoing]) -> list[tuple[Outgoing, str]]:
        """Send and flush; the records refused for their size. Any other failure raises."""
        sent: list[tuple[Outgoing, Any]] = []
        refused: list[tuple[Outgoing, str]] = []
        for o in records:
            try:
                sent.append((o, self.producer.send(o.topic, value=o.value, key=o.key,
                                                   headers=o.headers)))
            except _SIZE_ERRORS as exc:  # over the producer's own max_request_size
                refused.append((o, describe(exc)))
        deadline = time.monotonic() + self.flush_timeout_s
        # kafka-python's flush() fails ("Future not done", UnknownError) when it split a batch
        # over the topic's max.message.bytes and sent it again: each record is waited for
        # below instead (every checkpoint failed on it, rewound and retried, forever, with an
        # output topic under the producer's 256-KB batch).
        with contextlib.suppress(UnknownError):
            self.producer.flush(timeout=self.flush_timeout_s)
        for o, future in sent:
            try:  # raises if the broker refused the record, or did not answer in time
                future.get(timeout=max(0.0, deadline - time.monotonic()))
            except _SIZE_ERRORS as exc:
                refused.append((o, describe(exc)))
        return refused

    def _produce_alone(self, refused: list[tuple[Outgoing, str]]) -> None:
        for record, why in refused:
            self._renew()
            if not self._produce([record]):
                continue
            if self.shrink is None:
                raise MessageSizeTooLargeError(why)
            log.error("a record of %d bytes for %s was refused as too large; sending an "
                      "output_too_large dead letter instead: %s", len(record.value),
                      record.topic, why)
            self.metrics.dead_letters.labels("output_too_large").inc()
            self._renew()
            if self._produce([self.shrink(record, why)]):
                raise MessageSizeTooLargeError(f"even the small dead letter was refused: {why}")

    def _renew(self) -> None:
        """kafka-python's idempotent producer treats a refused record as fatal and fails
        every later send: after a refusal, go on with a new producer."""
        if self.renew_producer is not None:
            self.producer = self.renew_producer(self.producer)

    def _async_committed(self, offsets: Any, response: Any) -> None:
        for tp, meta in offsets.items():
            if (waiting := self._in_flight.get(tp)) is not None and \
                    waiting.offset <= meta.offset:
                self._in_flight.pop(tp, None)
        if not isinstance(response, Exception):
            return
        self.metrics.commit_failures.labels("offset_commit").inc()
        log.warning("async offset commit failed (messages may be redelivered): %s", response)
        for tp, meta in offsets.items():
            if meta.offset >= self._last_sent.get(tp, -1):  # else a later one is on its way
                self.unconfirmed[tp] = meta

    def recommit(self) -> bool:
        """Commit again, and wait for, the offsets of a failed async commit, if nothing else
        is held (the loop calls this when idle). Partitions no longer assigned are dropped:
        their new owner's commits count. True if something was committed."""
        if not self.unconfirmed or not self.empty:
            return False
        assigned = self.consumer.assignment()
        offsets = {tp: m for tp, m in self.unconfirmed.items() if tp in assigned}
        self.unconfirmed.clear()
        if not offsets:
            return False
        try:
            self.consumer.commit(offsets)
        except Exception:
            self.metrics.commit_failures.labels("offset_commit").inc()
            for tp, meta in offsets.items():
                self.unconfirmed.setdefault(tp, meta)
            raise
        log.info("offsets of an earlier failed commit committed again: %s",
                 {f"{tp.topic}/{tp.partition}": m.offset for tp, m in offsets.items()})
        return True

    def settle(self, timeout_s: float = SETTLE_TIMEOUT_S) -> bool:
        """Before the consumer closes with nothing held: commit again, and wait for, offsets
        sent without waiting and not answered yet (or refused). Closing cancelled such a
        commit: kafka-python logged "Error sending OffsetCommitRequest [Cancelled]" at ERROR
        (one SIGTERM in 6 under a steady stream) and its messages could come again at the
        next start. The broker answers a connection's requests in order, so the earlier
        commit is settled when this one is. True if something was committed."""
        assigned = self.consumer.assignment()
        # Not one a later commit superseded: the final synchronous commit of 150 was followed
        # by the still unanswered async one of 100, and the group's offset went back.
        offsets = {tp: m for tp, m in {**self.unconfirmed, **dict(self._in_flight)}.items()
                   if tp in assigned and m.offset >= self._last_sent.get(tp, -1)}
        if not offsets:
            return False
        self.consumer.commit(offsets, timeout_ms=int(timeout_s * 1000))
        self.unconfirmed.clear()
        self._in_flight.clear()
        return True

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions leave this consumer: whatever failed for them is their new owner's."""
        for tp in partitions:
            self.unconfirmed.pop(tp, None)
            self._last_sent.pop(tp, None)
            self._in_flight.pop(tp, None)

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
