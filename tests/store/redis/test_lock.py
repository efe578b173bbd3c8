"""The Redis writer lock's start: a dead holder's key is taken, a live holder's is refused.
Real redis-server; holders of other hosts are keys written as such a holder writes them."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator

import pytest
import redis

from streamdedup.errors import StoreLockedError
from streamdedup.store.redis import lock as lock_module
from streamdedup.store.redis.lock import WriterLock


@pytest.fixture()
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_killed_writers_lock_on_this_host_is_taken_at_once(r: redis.Redis) -> None:
    """A consumer restarted right after a kill -9 exited on its predecessor's lock for up to
    30 s; a holder of this boot and PID namespace whose pid is gone, or is this process's
    own, is dead."""
    host = socket.gethostname()
    assert lock_module.PID_SPACE != "?"  # Linux tells it
    for pid in (_dead_pid(), os.getpid()):
        key = f"t{uuid.uuid4().hex}:writer"
        r.set(key, f"{host} pid {pid} 0badc0de in {lock_module.PID_SPACE}", px=30_000)
        lock = WriterLock(r, key, "ns")
        try:
            assert r.get(key) == lock.token.encode()
            assert r.pttl(key) > 25_000  # its own TTL, not the dead holder's remainder
        finally:
            lock.release()
        assert r.get(key) is None


@pytest.mark.parametrize("holder", [
    "elsewhere pid 7 0badc0de in 1234abcd.4026531836",
    # this hostname, another PID namespace (a container on the host's network): its pid
    # says nothing here, and a live writer's lock was taken over that way
    f"{socket.gethostname()} pid {_dead_pid()} 0badc0de in ffffffff.4026531836",
    f"{socket.gethostname()} pid {_dead_pid()} 0badc0de",  # an earlier release's token
])
def test_another_hosts_holder_is_waited_for_then_refused_if_it_renews(
        r: redis.Redis, monkeypatch: pytest.MonkeyPatch, holder: str) -> None:
    monkeypatch.setattr(lock_module, "LOCK_TTL_MS", 1_500)
    key = f"t{uuid.uuid4().hex}:writer"
    r.set(key, holder, px=1_500)
    stop = threading.Event()

    def renew() -> None:  # what a live holder's thread does, every third of the TTL
        while not stop.wait(0.5):
            r.pexpire(key, 1_500)

    thread = threading.Thread(target=renew)
    thread.start()
    try:
        with pytest.raises(StoreLockedError, match=f"by {re.escape(holder)}, a process that "
                                                   "is alive"):
            WriterLock(r, key, "ns")
    finally:
        stop.set()
        thread.join()
    assert r.get(key) == holder.encode()


def test_another_hosts_holder_that_stopped_renewing_loses_the_key_when_it_expires(
        r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """Also when the key expires between the lock's GET and its PTTL (-2): that was taken
    for a live holder's (4 runs in 60 of this test's first version). The client below lets
    the key expire right there, every time, on the real server."""
    monkeypatch.setattr(lock_module, "LOCK_TTL_MS", 1_500)

    class ExpiresBetween:
        def __init__(self) -> None:
            self.expired = False

        def __getattr__(self, name: str) -> object:
            return getattr(r, name)

        def pttl(self, key: str) -> int:
            if not self.expired:
                self.expired = True
                r.delete(key)
            return int(r.pttl(key))

    for client, ttl_ms in ((r, 1_000), (ExpiresBetween(), 30_000)):
        key = f"t{uuid.uuid4().hex}:writer"
        r.set(key, "elsewhere pid 7 0badc0de in 1234abcd.4026531836", px=ttl_ms)
        lock = WriterLock(client, key, "ns")
        try:
            assert r.get(key) == lock.token.encode()
        finally:
            lock.release()


def test_a_live_lock_of_this_process_is_refused_at_once(r: redis.Redis) -> None:
    key = f"t{uuid.uuid4().hex}:writer"
    first = WriterLock(r, key, "ns")
    try:
        with pytest.raises(StoreLockedError, match=f"pid {os.getpid()}"):
            WriterLock(r, key, "ns")
        assert r.get(key) == first.token.encode()
    finally:
        first.release()


def test_a_lock_that_expired_is_taken_again_and_the_checkpoint_in_hand_judged_again(
        redis_url: str, r: redis.Redis) -> None:
    """An outage (or a stall) longer than the TTL let the key expire: the commit said "lost
    the Redis writer lock", and a consumer never held it again. Now the commit is an outage,
    the next ping takes the key again (nobody else did), the first commit after that is
    refused (its reads may predate another writer's), and the one after goes through; a
    key another writer holds is still lost."""
    from streamdedup.errors import StoreError, StoreUnavailableError
    from streamdedup.store.redis import RedisStore

    store = RedisStore(redis_url, f"t{uuid.uuid4().hex}", writer_lock=True)
    key = store.k("writer")
    store.put_clock(1)
    store.commit()
    r.delete(key)  # expired
    store.put_clock(2)
    with pytest.raises(StoreUnavailableError, match="expired"):
        store.commit()
    store.rollback()
    store.ping()
    assert r.get(key) is not None and r.pttl(key) > 0
    store.put_clock(3)
    with pytest.raises(StoreUnavailableError, match="taken again"):
        store.commit()
    store.rollback()
    assert store.get_clock() == 1
    store.put_clock(4)
    store.commit()
    assert store.get_clock() == 4
    r.set(key, "another writer")
    with pytest.raises(StoreError, match="lost the Redis writer lock"):
        store.ping()
    r.delete(key)
    store.close()
