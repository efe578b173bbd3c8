"""The store watch's check of newly assigned partitions against the group's offsets, with a
stand-in for kafka-python's consumer (the rebuild itself runs against the real broker in
``test_consumer.py::test_a_store_that_lost_committed_writes_is_rebuilt_from_the_topic``)."""

from __future__ import annotations

import logging

import pytest
from kafka import TopicPartition
from kafka.structs import OffsetAndMetadata

from streamdedup.service.checkpoint import offset_tag
from streamdedup.service.store_watch import StoreWatch
from streamdedup.store.memory import MemoryStore

TP = TopicPartition("jobs", 0)


class Group:
    """What reconcile asks of a consumer: the committed offset, the topic's first offset,
    and where it was told to read from."""

    def __init__(self, committed: OffsetAndMetadata | None, start: int = 0) -> None:
        self._committed, self._start = committed, start
        self.seeks: dict[TopicPartition, int] = {}

    def committed(self, tp: TopicPartition, metadata: bool = False) -> OffsetAndMetadata | None:
        assert metadata
        return self._committed

    def beginning_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._start for tp in tps}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks[tp] = offset


def reconcile(store: MemoryStore, group: Group) -> set[TopicPartition]:
    return StoreWatch(store).reconcile(group, {TP})  # type: ignore[arg-type]


def store_at(position: int | None) -> MemoryStore:
    store = MemoryStore()
    if position is not None:
        store.put_positions({("jobs", 0): position})
    return store


def test_a_store_behind_its_own_commits_re_reads_the_gap(caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    store = store_at(40)
    group = Group(OffsetAndMetadata(100, offset_tag(store), -1))
    assert reconcile(store, group) == {TP} and group.seeks == {TP: 40}
    assert "re-reading 60 messages" in caplog.text
    # a warning, not an error: what was lost is rebuilt (a restored backup logged ERROR)
    assert [r.levelname for r in caplog.records] == ["WARNING"]


def test_a_store_that_lost_every_position_re_reads_from_the_start(
        caplog: pytest.LogCaptureFixture) -> None:
    """Our offsets name this store, so a checkpoint of it held the positions: a copy from
    before its first checkpoint lost them all."""
    store = store_at(None)
    group = Group(OffsetAndMetadata(100, offset_tag(store), -1))
    assert reconcile(store, group) == {TP} and group.seeks == {TP: 0}
    assert "up to offset 0 but the group committed 100" in caplog.text


def test_a_gap_the_topic_no_longer_holds_is_said_and_skipped(
        caplog: pytest.LogCaptureFixture) -> None:
    """The consumer's reset would have jumped to the log start without a word, and the line
    said it re-read what the topic had deleted."""
    store = store_at(40)
    group = Group(OffsetAndMetadata(100, offset_tag(store), -1), start=70)
    assert reconcile(store, group) == {TP} and group.seeks == {TP: 70}
    assert "no longer holds jobs/0's offsets 40 to 69" in caplog.text
    assert "re-reading 30 messages" in caplog.text


def test_a_gap_the_topic_holds_none_of_is_said_as_lost_without_a_re_read(
        caplog: pytest.LogCaptureFixture) -> None:
    """The topic's start past the group's offset: it said "offsets 40 to 499" (100 to 499
    were never committed) and "re-reading -400 messages"."""
    store = store_at(40)
    group = Group(OffsetAndMetadata(100, offset_tag(store), -1), start=500)
    assert reconcile(store, group) == set() and group.seeks == {}
    assert "no longer holds jobs/0's offsets 40 to 99" in caplog.text
    assert "re-reading" not in caplog.text


@pytest.mark.parametrize("position", [None, 40])
def test_offsets_of_another_store_are_not_moved_but_the_gap_is_said(
        position: int | None, caplog: pytest.LogCaptureFixture) -> None:
    """A copy restored after a stop-gap store ran (the operators' drill: 16,730 ads missing
    from the index, nothing logged), or a new store for an old group."""
    caplog.set_level(logging.WARNING)
    store = store_at(position)
    group = Group(OffsetAndMetadata(100, "streamdedup-store:another", -1))
    assert reconcile(store, group) == set() and group.seeks == {}
    said = caplog.text
    if position is None:
        assert "holds nothing of jobs/0, but the group committed offset 100" in said
    else:
        assert "the 60 messages between are not in this store's index" in said
        assert "--reset-offsets --to-offset 40" in said


@pytest.mark.parametrize("position,committed", [(100, 100), (120, 100), (None, None),
                                                (None, 0), (40, None)])
def test_nothing_to_say_when_the_store_holds_what_the_group_committed(
        position: int | None, committed: int | None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store = store_at(position)
    group = Group(None if committed is None else
                  OffsetAndMetadata(committed, "streamdedup-store:another", -1))
    assert reconcile(store, group) == set() and group.seeks == {}
    assert caplog.text == ""


class Members:
    """The group's committed offsets of three partitions, set by the test as other members
    would commit them."""

    def __init__(self) -> None:
        self.config = {"group_id": "g"}
        self.offsets: dict[int, OffsetAndMetadata] = {}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0, 1, 2}

    def committed(self, tp: TopicPartition, metadata: bool = False,
                  timeout_ms: int | None = None) -> OffsetAndMetadata | None:
        assert metadata and timeout_ms is not None and tp.topic == "jobs"
        assert tp.partition != 0, "the partition held is not asked"
        return self.offsets.get(tp.partition)


def test_a_member_writing_to_another_store_is_said_when_its_partition_moves_on(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Members on different stores split the index without any error. A tag of another
    store that does not move (an old store's, on an idle partition) is not said; one that
    moves is, once every ten minutes; this store's own tag and a program's own are not."""
    import streamdedup.service.store_watch as store_watch

    monkeypatch.setattr(store_watch, "SHARING_CHECK_S", 0.0)
    store = MemoryStore()
    watch, group, ours = StoreWatch(store), Members(), offset_tag(store)
    other = "streamdedup-store:0123abcd"

    def look(**commits: tuple[int, str]) -> str:
        for partition, (offset, tag) in commits.items():
            group.offsets[int(partition[1:])] = OffsetAndMetadata(offset, tag, -1)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="streamdedup.service.consumer"):
            watch.check_sharing(group, "jobs", {TP})  # type: ignore[arg-type]
        return caplog.text

    assert look(p1=(10, other), p2=(5, ours)) == ""  # first seen: not known to move
    assert look() == ""  # an old store's tag, idle
    assert look(p2=(9, ours), p1=(15, "someone else's")) == ""
    said = look(p1=(20, other))
    assert "jobs/1 is judged by a member of group g that writes to another store " \
           "(0123abcd" in said and "--redis-namespace" in said
    assert look(p1=(30, other)) == ""  # said once, not at each look
    assert "(ffff, this one is" in look(p2=(12, "streamdedup-store:ffff"))  # said too
