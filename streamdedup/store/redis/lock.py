"""The Redis store's writer lock: one writer per namespace when retention is on.

Retention runs the single-writer store (``store.py``: tombstones, eviction in the
checkpoint's ``MULTI/EXEC``), which must never have two writers; the shared protocol a
consumer group uses does not evict. A lock key names its holder (host, pid, PID namespace)
for the message a second writer gets, and has a TTL, so the namespace is free again soon
after a holder died.
A writer started while the key is held waits to learn whether its holder is alive (it renews
the key every 10 s) instead of exiting at once: a consumer restarted by its supervisor right
after a kill -9 used to exit on its own dead predecessor's lock, up to 30 s of restarts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import redis

from streamdedup.errors import StoreError, StoreLockedError, StoreUnavailableError
from streamdedup.pids import PID_SPACE, gone
from streamdedup.store.redis.client import call, store_error

_log = logging.getLogger(__name__)

LOCK_TTL_MS = 30_000
POLL_S = 0.25
_TOKEN = re.compile(r"(?P<host>.*) pid (?P<pid>\d+) [0-9a-f]{8} in (?P<space>\S+)")
_TAKE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 0
"""
_HELD: set[str] = set()  # this process's live tokens: another of its stores is alive
_EXTEND = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class WriterLock:
    """One writer per namespace: a key holding the writer's name, with a TTL renewed by a
    daemon thread every third of it, so a writer that died frees the namespace within 30 s.
    Every commit is a MULTI/EXEC under WATCH of the key: a writer that lost the lock (it
    stalled past the TTL and another took over) has its commit refused, never mixed in.
    The renewal and the commit take turns (``_turn``): a PEXPIRE is a change to the watched
    key, so a renewal between WATCH and EXEC aborted the writer's own commit (seen in 1 of
    3 `check --retention` runs of 40,000 ads)."""

    def __init__(self, r: Any, key: str, namespace: str) -> None:
        self.r, self.key = r, key
        self.token = (f"{socket.gethostname()} pid {os.getpid()} {uuid.uuid4().hex[:8]} "
                      f"in {PID_SPACE}")
        _HELD.add(self.token)  # before the key is set: no other store here takes it as dead
        try:
            self._acquire(namespace)
        except BaseException:
            _HELD.discard(self.token)
            raise
        self.lost = False
        self._landing: str | None = None  # the tag of a commit sent, its reply not yet read
        self._retaken = False  # taken again after it expired: the checkpoint in hand is not
        self._turn = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, daemon=True, name="redis-lock")
        self._thread.start()

    def _acquire(self, namespace: str) -> None:
        """Take the key; while another token holds it, watch the key's TTL. A holder of this
        host and PID namespace whose pid is gone (or is this process's own) is dead, and its
        key is taken over at once; any other holder is alive when its TTL goes up (a renewal
        or a commit) or its token changes, and then this writer is refused; a key left to
        expire (at most 30 s) was a dead holder's."""
        seen: tuple[bytes, int] | None = None
        while not call(self.r.set, self.key, self.token, nx=True, px=LOCK_TTL_MS):
            holder, ttl = call(self.r.get, self.key), call(self.r.pttl, self.key)
            if holder is None or ttl == -2:
                continue  # freed or expired between the calls (-2: no such key)
            name = holder.decode(errors="replace")
            if _died_here(name):
                if call(self.r.eval, _TAKE, 1, self.key, holder, self.token, LOCK_TTL_MS):
                    _log.warning("took the Redis writer lock of %s, a process of this host "
                                 "that is gone", name)
                    return
                continue
            if name in _HELD or ttl < 0 or (
                    seen is not None and (holder != seen[0] or ttl > seen[1])):
                raise StoreLockedError(
                    f"Redis namespace {namespace!r} is open for writing by {name}, a process "
                    f"that is alive; with --retention one writer per namespace")
            if seen is None:
                _log.warning("Redis namespace %r is held by %s; waiting up to %.0f s to see "
                             "whether it is alive (it renews its lock every %.0f s)",
                             namespace, name, ttl / 1000, LOCK_TTL_MS / 3000)
            seen = (holder, ttl)
            time.sleep(min(POLL_S, ttl / 1000 + 0.002))  # Redis expires a key after its ms

    def _renew(self) -> None:
        while not self._stop.wait(LOCK_TTL_MS / 3000):
            with contextlib.suppress(StoreError):  # lost: the commit says so (a traceback
                self.check()  # here ended the renewals of a writer that took it again)

    def check(self) -> None:
        """Renew the lock; raise StoreError if another writer holds it now. A key that
        expired while Redis was away (more than 30 s) is taken again if nobody else took
        it: `run --retention` on Redis never got it back, and stayed unready for good."""
        try:
            with self._turn:
                held = call(self.r.eval, _EXTEND, 1, self.key, self.token, LOCK_TTL_MS)
                if not held and call(self.r.set, self.key, self.token, nx=True,
                                     px=LOCK_TTL_MS):
                    held = self._retaken = True
                    _log.warning("the Redis writer lock had expired (Redis away, or this "
                                 "process stalled, for more than %.0f s); taken again: the "
                                 "batch in hand is judged again", LOCK_TTL_MS / 1000)
        except StoreError:
            return  # Redis away: the commit will say so
        if not held:
            self.lost = True
            raise StoreError("this process lost the Redis writer lock (stalled past "
                             f"{LOCK_TTL_MS // 1000} s); another writer may hold it")

    def landed(self) -> bool:
        """Whether the commit whose reply was lost reached Redis: each writes its own tag
        beside the lock (``writer:commit``), read back once Redis answers again."""
        if self._landing is None:
            return False
        found = call(self.r.get, self.key + ":commit") == self._landing.encode()
        self._landing = None
        return found

    def commit(self, ops: Sequence[tuple[str, tuple[Any, ...], dict[str, Any]]]) -> None:
        self._landing = None
        with self._turn, self.r.pipeline(transaction=True) as pipe:
            if self._retaken:  # its reads may predate another writer's (asked in turn: the
                self._retaken = False  # renewal may be retaking it right now)
                raise StoreUnavailableError("the Redis writer lock expired and was taken "
                                            "again: the checkpoint is not written")
            try:
                pipe.watch(self.key)
                holder = pipe.get(self.key)
                if holder is None:  # expired: Redis was away, or this process stalled
                    raise StoreUnavailableError("the Redis writer lock expired: the "
                                                "checkpoint is not written")
                if holder != self.token.encode():
                    self.lost = True
                    raise StoreError("this process lost the Redis writer lock; its "
                                     "checkpoint is not written")
                pipe.multi()
                for method, args, kwargs in ops:
                    getattr(pipe, method)(*args, **kwargs)
                pipe.pexpire(self.key, LOCK_TTL_MS)
                self._landing = uuid.uuid4().hex
                pipe.set(self.key + ":commit", self._landing)
                pipe.execute()
                self._landing = None
            except redis.WatchError as exc:
                # redis-py raises a connection lost under WATCH as a WatchError: the EXEC
                # may have been applied, its reply lost (``landed`` tells)
                if isinstance(exc.__context__, redis.ConnectionError | redis.TimeoutError):
                    raise store_error(exc.__context__) from exc
                self._landing = None
                raise StoreError("the Redis writer lock changed during a commit; the "
                                 "checkpoint is not written") from exc
            except redis.RedisError as exc:
                raise store_error(exc) from exc

    def release(self) -> None:
        """Stop the renewal first: one still running after the DEL found the key gone and
        raised in its thread (a traceback at every clean stop, now and then)."""
        _HELD.discard(self.token)
        self._stop.set()
        self._thread.join(timeout=5)  # a renewal waiting on a Redis that is away: not longer
        with self._turn, contextlib.suppress(StoreError):
            call(self.r.eval, _RELEASE, 1, self.key, self.token)


def _died_here(token: str) -> bool:
    """Whether a lock token names a process of this host and PID namespace that no longer
    runs (a token of an earlier release, without its namespace, never does)."""
    match = _TOKEN.fullmatch(token)
    if match is None or match["host"] != socket.gethostname():
        return False
    pid = int(match["pid"])
    if pid == os.getpid() and match["space"] == PID_SPACE != "?":
        return token not in _HELD  # a former process given this pid again
    return gone(pid, match["space"])  # never another PID space's, nor this process's
