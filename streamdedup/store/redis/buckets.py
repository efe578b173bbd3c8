"""The band buckets' server side: Lua run once per bucket shard, all shards in one pipeline.

A batch of 500 new sets probes ~10,000 band keys; redis-py spends ~10 us of Python on each
command, so the keys of a shard (hash-tagged into 32, ``client.py``) go to one script call.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from streamdedup.store.redis.client import Keys, call


def _each_key(command: str) -> str:
    """A script running ``command`` on each of its KEYS with two ARGV of each key's own."""
    return ("local out = {}\nfor i = 1, #KEYS do\n"
            f"  out[i] = redis.call('{command}', KEYS[i], ARGV[2 * i - 1], ARGV[2 * i])\n"
            "end\nreturn out\n")


PROBE = _each_key("ZRANGEBYSCORE")  # (lo, hi) per key -> the set ids of each in that range
ADD = _each_key("ZADD")  # (size, set id) per key: a set into its buckets, scored by size
# (size or "-", set id) per key, in order: into the bucket, or out of it ("-")
WRITE = ("for i = 1, #KEYS do\n"
         "  if ARGV[2 * i - 1] == '-' then redis.call('ZREM', KEYS[i], ARGV[2 * i])\n"
         "  else redis.call('ZADD', KEYS[i], ARGV[2 * i - 1], ARGV[2 * i]) end\n"
         "end\nreturn #KEYS\n")

Write = tuple[int, int, int | None]  # band key, set id, size (None: out of the bucket)
Op = tuple[str, tuple[Any, ...], dict[str, Any]]  # a pipeline method, its args and kwargs


def write_ops(k: Keys, writes: Sequence[Write]) -> list[Op]:
    """A checkpoint's bucket writes as one script call per shard, for its MULTI/EXEC: a set
    enters ~25 buckets and leaves as many, and one ZADD or ZREM each cost the single writer
    ~60 commands a document to send and parse (a third of `check --retention`'s time)."""
    shards: dict[int, list[tuple[int, Any, Any]]] = defaultdict(list)
    for key, set_id, size in writes:
        shards[k.shard(key)].append((key, "-" if size is None else size, set_id))
    return [("execute_command", _eval(k, WRITE, items), {}) for items in shards.values()]


def _eval(k: Keys, script: str, items: Sequence[tuple[int, Any, Any]]) -> tuple[Any, ...]:
    """EVAL's arguments for one shard: its bucket keys, then two ARGV of each key's own."""
    return ("EVAL", script, len(items), *(k.bucket(key) for key, _, _ in items),
            *(v for _, a, b in items for v in (a, b)))


def run_per_shard(r: Any, k: Keys, script: str, shards: Mapping[int, list[tuple[int, Any, Any]]]
                  ) -> dict[tuple[int, Any, Any], Any]:
    """Run ``script`` once per shard (KEYS: its bucket keys; ARGV: two values per key), all
    in one pipeline; the reply for each (key, a, b). EVAL, not EVALSHA: the script text is
    ~150 bytes, and a restarted server (empty script cache) needs no reload."""
    if not shards:
        return {}
    pipe = r.pipeline(transaction=False)
    for items in shards.values():
        # execute_command, not pipe.eval: redis-py's cluster pipeline refuses eval()
        pipe.execute_command(*_eval(k, script, items))
    out: dict[tuple[int, Any, Any], Any] = {}
    for items, replies in zip(shards.values(), call(pipe.execute), strict=True):
        out.update(zip(items, replies, strict=True))
    return out
