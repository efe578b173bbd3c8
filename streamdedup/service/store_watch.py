"""What the consumer knows of its store's server: whether it answers (said when it stops,
then once a minute), whether it restarted without any call seeing it fail, whether it
still holds what the group committed (a store that lost committed writes is rebuilt from
the topic), and whether the group's other members write to it too.
"""

from __future__ import annotations

import logging
import time

from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from streamdedup.errors import StoreError, StoreParamsError
from streamdedup.service.checkpoint import OFFSET_TAG, offset_tag
from streamdedup.service.logs import Throttle
from streamdedup.store.base import Store

log = logging.getLogger("streamdedup.service.consumer")  # the consumer's lines, as before
STORE_DOWN_SAID_EVERY_S = 60.0  # a store that does not answer is said at most this often
PING_EVERY_S = 1.0  # an idle consumer checks the store this often (readiness)
# How often a busy loop asks whether the store's server restarted (Redis: its run id, 0.6 ms a
# call here). A restart takes longer than this, so one unseen by a failed batch left a gap of
# at least this long between two batches, and the batch after it asks (every batch: ~6 % of
# a core at 100 batches/s).
RESTART_CHECK_S = 0.05
# How often a member reads the group's offsets of the partitions it does not hold (one
# OffsetFetch each, 1 s at most in all), and how often one other store is said.
SHARING_CHECK_S = 60.0
SHARING_SAID_EVERY_S = 600.0


class StoreWatch:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._down_at: float | None = None  # since when the store does not answer
        self._said_at = float("-inf")
        self._sharing_at = float("-inf")
        self._others: dict[TopicPartition, OffsetAndMetadata] = {}  # last seen, not held
        self._other_said = Throttle(SHARING_SAID_EVERY_S, kinds=100)  # by the other's tag

    def restarted(self) -> bool:
        """The store's server restarted since the last ask (said once); a store that does not
        answer is said by the batch or the ping instead. Another preset that claimed the
        store meanwhile stops the consumer, as at its start."""
        try:
            what = self.store.server_restarted()
        except StoreParamsError:
            raise
        except StoreError:
            return False
        if what is not None:
            log.warning("%s: checking the assigned partitions against what the store holds",
                        what)
        return what is not None

    def answers(self) -> bool:
        """Said when the store stops answering, then once a minute (it was every second,
        the ping's pace), and when it answers again."""
        now = time.monotonic()
        try:
            self.store.ping()
        except StoreError as exc:
            down_at = self._down_at = self._down_at or now
            if now - self._said_at >= STORE_DOWN_SAID_EVERY_S:
                self._said_at = now
                log.warning("the store does not answer%s: %s",
                            f" (for {now - down_at:.0f} s)" if now > down_at else "", exc)
            return False
        if self._down_at is not None:
            log.info("the store answers again, after %.0f s", now - self._down_at)
            self._down_at, self._said_at = None, float("-inf")
        return True

    def reconcile(self, consumer: KafkaConsumer, tps: set[TopicPartition]
                  ) -> set[TopicPartition]:
        """Partitions newly assigned whose group offset, committed after *this* store's
        writes (its metadata names the store), is past what the store holds: the store lost
        writes that were committed (its WAL deleted, an old copy restored). Offsets only move
        after the store commits, so this cannot happen otherwise; re-read them from the
        store's position, which rebuilds exactly what was lost, as far as the topic still
        holds it. An offset committed with another store is not moved, but a gap it leaves
        in this store's index is said. Returns the partitions rewound (the batch just polled
        for them is dropped: it starts past the gap)."""
        stored = self.store.get_positions()
        ours = offset_tag(self.store)
        rewound: set[TopicPartition] = set()
        for tp in sorted(tps):
            have = stored.get((tp.topic, tp.partition))
            meta = consumer.committed(tp, metadata=True)
            if meta is None or (have or 0) >= meta.offset:
                continue
            if meta.metadata != ours:
                _say_unseen(tp, have, meta.offset)
                continue
            start = int(consumer.beginning_offsets([tp])[tp])
            since = have or 0
            if since < start:
                log.error("the topic no longer holds %s/%d's offsets %d to %d (its retention): "
                          "this store lost them and cannot rebuild them", tp.topic,
                          tp.partition, since, min(start, meta.offset) - 1)
                since = start
            if since >= meta.offset:  # all of the gap is gone: nothing to re-read
                continue
            # A warning: what it lost is rebuilt here (a restored backup's normal course)
            log.warning("the store holds %s/%d up to offset %d but the group committed %d: it "
                        "lost committed writes (a deleted WAL, an old copy restored?); "
                        "re-reading %d messages to rebuild them", tp.topic, tp.partition,
                        have or 0, meta.offset, meta.offset - since)
            consumer.seek(tp, since)
            rewound.add(tp)
        return rewound

    def check_sharing(self, consumer: KafkaConsumer, topic: str,
                      held: set[TopicPartition]) -> None:
        """Members of one group that write to different stores (SQLite directories, Redis
        namespaces) each judge their partitions against their own index: a near-duplicate
        on another partition is never found, and nothing failed. Seen here when a partition
        this member does not hold moves on, committed with another store's tag (an old
        store's tag left on an idle partition does not move, so it is not said). At most
        every ``SHARING_CHECK_S``; each other store said every ``SHARING_SAID_EVERY_S``."""
        now = time.monotonic()
        if not held or now - self._sharing_at < SHARING_CHECK_S:
            return  # holding none, it splits nothing (and the topic's metadata may be unknown)
        self._sharing_at = now
        ours, deadline = offset_tag(self.store), now + 1.0
        for partition in sorted(consumer.partitions_for_topic(topic) or ()):
            tp = TopicPartition(topic, partition)
            if tp in held:
                self._others.pop(tp, None)  # its commits are this member's
                continue
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                break
            meta = consumer.committed(tp, metadata=True, timeout_ms=left_ms)
            before = self._others.pop(tp, None)
            if meta is None:
                continue
            self._others[tp] = meta
            tag = meta.metadata or ""
            if (before is None or meta.offset == before.offset or tag == ours
                    or not tag.startswith(OFFSET_TAG) or not self._other_said.due(tag, now)):
                continue
            log.warning("%s/%d is judged by a member of group %s that writes to another "
                        "store (%s, this one is %s): the members do not share one index, so "
                        "a near-duplicate on another partition is not found. Give every "
                        "member the same store: --store-backend redis, one --redis-url and "
                        "--redis-namespace", topic, partition, consumer.config["group_id"],
                        tag[len(OFFSET_TAG):], ours[len(OFFSET_TAG):])


def _say_unseen(tp: TopicPartition, have: int | None, committed: int) -> None:
    """The group's offset was committed with another store (or by another program) past what
    this store holds: the messages between were judged against another index, and this one
    lacks them. Said, not rebuilt: a group whose members each keep a store of their own
    meets it at every rebalance, and re-reading would judge those messages twice."""
    if have is None:
        log.warning("this store holds nothing of %s/%d, but the group committed offset %d "
                    "there with another store: the messages before it are not in this "
                    "store's index (a new store for an old group, or the wrong --store?)",
                    tp.topic, tp.partition, committed)
    else:
        log.warning("this store holds %s/%d up to offset %d, but the group committed %d there "
                    "with another store: the %d messages between are not in this store's "
                    "index (a copy restored after another store ran?). To rebuild them, reset "
                    "the group's offset to %d before the next start (kafka-consumer-groups.sh "
                    "--reset-offsets --to-offset %d)", tp.topic, tp.partition, have, committed,
                    committed - have, have, have)
