"""The single writer's kept reads (``store/redis/reads.py``) on a real redis-server: an
answer is kept until ``reset()`` (the commit), reads asked ahead cost one round trip, and
a store that keeps nothing (a group's member) asks the server every time."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from streamdedup.store.redis.reads import Reads


@pytest.fixture()
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture()
def key() -> str:
    return f"t{uuid.uuid4().hex}:k"


def test_a_kept_answer_stands_until_the_reset(r: redis.Redis, key: str) -> None:
    reads = Reads(r, keep=True)
    assert reads.one("get", key) is None
    r.set(key, "1")  # nobody else writes a single writer's namespace: this one shows it kept
    assert reads.one("get", key) is None
    reads.reset()
    assert reads.one("get", key) == b"1"


def test_a_store_that_keeps_nothing_asks_every_time(r: redis.Redis, key: str) -> None:
    reads = Reads(r, keep=False)
    assert reads.one("get", key) is None
    r.set(key, "1")
    assert reads.one("get", key) == b"1"
    reads.ahead([("get", key)])  # asks nothing: what it would keep, it does not
    r.set(key, "2")
    assert reads.many([("get", key), ("hget", key + "h", "f"), ("get", key)]) == [
        b"2", None, b"2"]
    r.set(key, "3")
    assert reads.one("get", key) == b"3"  # what many() was told was not kept either


def test_reads_asked_ahead_are_one_round_trip_and_then_none(
        r: redis.Redis, key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r.set(key, "a")
    r.hset(key + "h", mapping={"f": "b"})
    reads = Reads(r, keep=True)
    trips: list[str] = []
    monkeypatch.setattr(redis.client.Redis, "execute_command",
                        lambda *a, **k: trips.append("one") or None)
    original = redis.client.Pipeline.execute

    def execute(pipe: redis.client.Pipeline, *a: object) -> list[object]:
        trips.append(f"pipeline of {len(pipe.command_stack)}")
        return original(pipe, *a)

    monkeypatch.setattr(redis.client.Pipeline, "execute", execute)
    reads.ahead([("get", key), ("hgetall", key + "h"), ("get", key)])
    assert trips == ["pipeline of 2"]
    assert (reads.one("get", key), reads.one("hgetall", key + "h")) == (b"a", {b"f": b"b"})
    assert reads.many([("hgetall", key + "h"), ("get", key)]) == [{b"f": b"b"}, b"a"]
    assert trips == ["pipeline of 2"]  # answered from what was kept

