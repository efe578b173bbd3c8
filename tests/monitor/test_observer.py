"""The observer's choice of partitions and its word on the broker, with a fake client
(topics that appear after it started are picked up; an ask the broker does not answer), and
with a real broker of its own that is killed and started again."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError

from harness.broker import LocalBroker, create_topics
from streamdedup.errors import ConfigError
from streamdedup.monitor.observer import CATCHING_UP_ABOVE, LOOK_EVERY_S, Observer, parse_start
from streamdedup.settings import build_settings


class FakeClient:
    def __init__(self, partitions: dict[str, int]) -> None:
        self.partitions = partitions
        self.assigned: list[TopicPartition] = []
        self.away = False  # end_offsets times out, as with a broker that does not answer
        self.poll_fails = False  # poll raises (kafka-python mostly returns nothing instead)
        self.ends: dict[TopicPartition, int] = {}
        self.positions: dict[TopicPartition, int | None] = {}
        self.seeks: list[tuple[str, str]] = []

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self.partitions.get(topic)
        return None if n is None else set(range(n))

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assigned = list(tps)

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        self.seeks.extend(("beginning", tp.topic) for tp in tps)

    def seek_to_end(self, *tps: TopicPartition) -> None:
        self.seeks.extend(("end", tp.topic) for tp in tps)

    def poll(self, timeout_ms: int) -> dict[Any, list[Any]]:
        if self.poll_fails:
            raise KafkaTimeoutError("the fetch timed out")
        return {}

    def end_offsets(self, tps: list[TopicPartition], timeout_ms: int) -> dict[Any, int]:
        if self.away:
            raise KafkaTimeoutError("Failed to get offsets by timestamps in 1000 ms")
        return {tp: self.ends.get(tp, 0) for tp in tps}

    def position(self, tp: TopicPartition, timeout_ms: int) -> int | None:
        return self.positions.get(tp, 0)


def observer_on(client: FakeClient, topics: list[str]) -> Observer:
    observer = Observer.__new__(Observer)
    observer.topics, observer.start, observer.assigned = topics, "beginning", set()
    observer._consumer, observer._looked, observer._seen_once = client, float("-inf"), False
    observer._asked, observer.answered, observer.away_since, observer.behind = (
        float("-inf"), None, None, None)
    return observer


def due(observer: Observer) -> None:
    observer._looked -= LOOK_EVERY_S
    observer._asked -= LOOK_EVERY_S


def test_a_topic_that_appears_later_is_read_even_when_another_has_many_partitions() -> None:
    """An input topic of 6 partitions made the observer stop looking (6 partitions >= 3
    topics): the verdict topic the detector created later was never read."""
    client = FakeClient({"in": 6})
    observer = observer_on(client, ["in", "out", "dlq"])
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


def test_from_latest_a_topic_that_appears_later_is_read_from_its_beginning() -> None:
    """All such a topic holds came after the start; seeking to its end at the next look (up
    to 2 s later) skipped what the detector wrote meanwhile: `tail` started before the
    detector printed 0 of 2,000 verdicts. Topics there at the start begin at their end."""
    client = FakeClient({"in": 1})
    observer = observer_on(client, ["in", "out"])
    observer.start = "latest"
    list(observer.poll(timeout_ms=1))
    assert client.seeks == [("end", "in")]
    client.partitions["out"] = 2
    due(observer)
    list(observer.poll(timeout_ms=1))
    assert client.seeks[1:] == [("beginning", "out"), ("beginning", "out")]


def test_a_start_before_1970_or_days_to_come_is_refused() -> None:
    with pytest.raises(ConfigError, match="before 1970"):
        parse_start("1960-01-01T00:00:00Z")
    assert parse_start("1970-01-01T00:00:01Z") == 1000
    with pytest.raises(ConfigError, match="more than a day to come: nothing would be shown"):
        parse_start("9999-12-31T23:59:59Z")  # the page showed nothing, silently
    soon = datetime.fromtimestamp(time.time() + 3600, UTC).isoformat()
    assert isinstance(parse_start(soon), int)  # an hour ahead: a time zone mistyped, or not
    with pytest.raises(ConfigError, match="more than a day to come"):
        parse_start(datetime.fromtimestamp(time.time() + 2 * 86_400, UTC).isoformat())


def test_the_observer_tells_a_quiet_topic_from_a_broker_that_does_not_answer() -> None:
    """A poll returns nothing both ways: the page said "live" through a stopped broker."""
    client = FakeClient({"out": 2})
    observer = observer_on(client, ["out", "dlq"])
    assert observer.health()["reachable"] is None  # not asked yet
    list(observer.poll())
    out0, out1 = TopicPartition("out", 0), TopicPartition("out", 1)
    assert observer.health() == {"waiting_for": ["dlq"], "reachable": True,
                                 "answered": observer.answered, "away_since": None,
                                 "behind": 0, "catching_up": False}
    client.ends, client.positions = {out0: 10, out1: 5}, {out0: 4, out1: None}
    due(observer)
    list(observer.poll())
    assert observer.health()["behind"] == 6  # a partition without a position counts none
    assert not observer.health()["catching_up"]  # a live stream's few
    client.ends = {out0: 4 + CATCHING_UP_ABOVE + 1, out1: 5}
    due(observer)
    list(observer.poll())
    assert observer.health()["catching_up"]
    client.away = True
    due(observer)
    list(observer.poll())
    away = observer.health()
    assert away["reachable"] is False and away["away_since"] >= away["answered"]
    due(observer)
    list(observer.poll())  # still away: since the first ask it did not answer
    assert observer.health()["away_since"] == away["away_since"]
    client.away = False
    due(observer)
    list(observer.poll())
    back = observer.health()
    assert back["reachable"] is True and back["away_since"] is None
    assert back["answered"] >= away["away_since"]
    client.poll_fails = True  # a poll that raises says away too, before the next ask
    with pytest.raises(KafkaTimeoutError):
        list(observer.poll())
    assert observer.health()["reachable"] is False


@pytest.mark.broker
def test_a_killed_broker_shows_as_away_and_its_return_as_reachable(
        tmp_path: Path, local_broker_tools: None) -> None:
    """A broker of the test's own (the session's must stay up), killed and started again
    on the same port, while the observer reads."""
    broker = LocalBroker(tmp_path / "broker", die_with_parent=True)
    observer = None
    try:
        bootstrap = broker.start()
        create_topics(bootstrap, {"out": 1})
        send(bootstrap, [b"1", b"2", b"3"])
        settings = build_settings("reference", env={}, overrides={"bootstrap_servers": bootstrap})
        observer = Observer(settings, ["out"], "beginning")
        got = read_until(observer, lambda h, n: h["reachable"] is True and n == 3
                         and h["behind"] == 0)
        assert got == 3
        broker.kill()
        read_until(observer, lambda h, _n: h["reachable"] is False)
        # Away 25 s: kafka-python's reconnect backoff grows to its cap meanwhile. With its
        # default cap (30 s) the page said "not answering" ~27 s after the broker was back.
        read_until(observer, lambda _h, _n: False, timeout_s=25, give_up=True)
        assert broker.start() == bootstrap
        send(bootstrap, [b"4"])
        assert read_until(observer, lambda h, n: h["reachable"] is True and n == 1,
                          timeout_s=15) == 1
    finally:
        if observer is not None:
            observer.close()
        broker.stop()


def send(bootstrap: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for v in values:
        producer.send("out", v)
    producer.flush(timeout=30)
    producer.close()


def read_until(observer: Observer, done: Any, timeout_s: float = 60,
               give_up: bool = False) -> int:
    """Poll until ``done(health, records read)``; the records read. At ``timeout_s`` a
    failure, or with ``give_up`` the end of the wait."""
    n = 0
    deadline = time.monotonic() + timeout_s
    while not done(observer.health(), n):
        if give_up and time.monotonic() >= deadline:
            break
        assert time.monotonic() < deadline, observer.health()
        n += len(list(observer.poll(200)))
    return n


def test_a_broker_reached_after_failed_attempts_counts_as_answering_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Only an ask cleared "not answering", and no ask runs while no topic is there: a
    monitor started before the broker and the detector said the broker was away for good."""
    from streamdedup.monitor import observer as module

    attempts: list[int] = []

    def consumer(**_options: Any) -> FakeClient:
        attempts.append(1)
        if len(attempts) == 1:
            raise KafkaTimeoutError("Unable to bootstrap from 127.0.0.1:9")
        return FakeClient({})  # reached; its topics are not there yet

    monkeypatch.setattr(module, "KafkaConsumer", consumer)
    watched = Observer(build_settings(env={}), ["out"], connect=False)
    with pytest.raises(KafkaTimeoutError):
        list(watched.poll(0))
    assert watched.health()["reachable"] is False
    due(watched)  # the next look for the topics: the attempt again
    assert list(watched.poll(0)) == []
    health = watched.health()
    assert health["reachable"] is True and health["waiting_for"] == ["out"]


def test_nan_and_nesting_too_deep_are_not_json_to_the_monitor_1e999_is() -> None:
    from types import SimpleNamespace

    from streamdedup.monitor.observer import decode

    def rec(value: bytes) -> object:
        return SimpleNamespace(value=value, topic="t", partition=0, offset=1)

    assert decode(rec(b'{"id": "a", "j": 0.5}')) == {"id": "a", "j": 0.5}
    assert decode(rec(b'{"id": "a", "j": NaN}')) is None
    assert decode(rec(b'{"id": "a", "j": -Infinity}')) is None
    # JSON, but infinity to Python, which the API cannot write: kept as its text (an ad
    # holding one was skipped, untitled, while the detector judged it)
    assert decode(rec(b'{"id": "a", "j": 1e999}')) == {"id": "a", "j": "1e999"}
    assert decode(rec(b'{"id": "a", "j": -1e999, "k": 2.5}')) == {"id": "a", "j": "-1e999",
                                                                  "k": 2.5}
    from streamdedup.monitor.state import verdict_problem
    verdict = decode(rec(b'{"id": "b", "duplicate": true, "matches": [{"id": "a", '
                         b'"jaccard": 1e999}]}'))
    assert verdict is not None and "matches is not" in str(verdict_problem(verdict))
    # An ad is read as the consumer reads it: its automatic id is the consumer's (it was
    # another, so the ad had no title), and NaN is no JSON there either.
    from streamdedup.service.message import announcement_id, decode_message
    for ad in (b'{"title": "Saldatore", "salary": 1e999}', b'{"title": "t", "x": [-1E400]}',
               b'\xef\xbb\xbf{"title": "t", "n": 1e999}'):
        body = decode(rec(ad), announcement=True)
        assert body is not None, ad
        assert announcement_id(body) == decode_message(ad, ("title",), 1 << 20).id, ad
    assert decode(rec(b'{"title": "t", "x": NaN}'), announcement=True) is None
    assert decode(rec(None), announcement=True) is None  # no value: it ended the reader
    # A lone surrogate outside the texts is judged: the id is the consumer's (it was made
    # of '?'), the text kept is one UTF-8 writes.
    from streamdedup.monitor.state import MonitorState
    ad = b'{"title": "Ingegnere", "company": "\\ud800x", "n": 1e999}'
    body = decode(rec(ad), announcement=True)
    assert body is not None
    doc_id = decode_message(ad, ("title",), 1 << 20).id
    assert announcement_id(body) == doc_id
    state = MonitorState()
    state.add_announcement(body)
    assert state.title(doc_id) == "Ingegnere"
    assert state.text(doc_id)[1]["company"] == "?x"  # type: ignore[index]
    deep = b"[" * 100_000 + b"]" * 100_000  # one such input froze the page and ended tail
    assert decode(rec(deep)) is None
    # a lone surrogate is JSON but not UTF-8: /api/clusters answered 400, tail a traceback
    lone = decode(rec(b'{"id": "a", "title": "Cameriere \\ud800 Milano", "n": [1]}'))
    assert lone == {"id": "a", "title": "Cameriere ? Milano", "n": [1]}
    assert decode(rec(b'{"id": "a", "t": "\\ud83d\\ude00 \\u00e8"}')) == {"id": "a",
                                                                     "t": "\U0001f600 \u00e8"}


def test_records_skipped_are_said_once_then_counted_once_a_minute(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """2,000 bad ads on the input topic (the detector's dead letters) were 2,000 warnings at
    each start of `tail` and the monitor, and in an `explain` that answered in 7 lines."""
    from types import SimpleNamespace

    from streamdedup.monitor import observer
    from streamdedup.service.logs import Throttle

    now = [1000.0]
    monkeypatch.setattr(observer.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(observer, "_skipped", {})
    monkeypatch.setattr(observer, "_said", Throttle(observer.SKIPPED_SAID_EVERY_S, kinds=1000))

    def rec(topic: str, value: bytes, offset: int) -> object:
        return SimpleNamespace(value=value, topic=topic, partition=0, offset=offset)

    with caplog.at_level("WARNING", logger="streamdedup.monitor.observer"):
        for offset in range(2000):
            assert observer.decode(rec("jobs", b"\xff not json", offset)) is None
        assert observer.decode(rec("jobs", b"[1, 2]", 2000)) is None  # another kind, said
        assert observer.decode(rec("jobs.duplicates", b"{", 0)) is None  # another topic
        now[0] += 59.0
        observer.decode(rec("jobs", b"nope", 2001))
        now[0] += 1.0
        observer.decode(rec("jobs", b"nope", 2002))
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "skipping a record that is not JSON at jobs/0/0 (more on jobs are counted, said once "
        "a minute)",
        "skipping a record that is JSON but no object at jobs/0/2000 (more on jobs are "
        "counted, said once a minute)",
        "skipping a record that is not JSON at jobs.duplicates/0/0 (more on jobs.duplicates "
        "are counted, said once a minute)",
        "skipped 2001 more records that are not JSON on jobs, the latest at jobs/0/2002"]
