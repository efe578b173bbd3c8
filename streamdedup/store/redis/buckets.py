"""The band buckets' server side: Lua run once per bucket shard, all shards in one pipeline.

A batch of 500 new sets probes ~10,000 band keys; redis-py spends ~10 us of Python on each
command, so the keys of a shard (hash-tagged into 32, ``client.py``) go to one script call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamdedup.store.redis.client import Keys, call


def _each_key(command: str) -> str:
    """A script running ``command`` on each of its KEYS with two ARGV of each key's own."""
    return ("local out = {}\nfor i = 1, #KEYS do\n"
            f"  out[i] = redis.call('{command}', KEYS[i], ARGV[2 * i - 1], ARGV[2 * i])\n"
            "end\nreturn out\n")


PROBE = _each_key("ZRANGEBYSCORE")  # (lo, hi) per key -> the set ids of each in that range
ADD = _each_key("ZADD")  # (size, set id) per key: a set into its buckets, scored by size


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
        pipe.execute_command("EVAL", script, len(items),
                             *(k.bucket(key) for key, _, _ in items),
                             *(v for _, a, b in items for v in (a, b)))
    out: dict[tuple[int, Any, Any], Any] = {}
    for items, replies in zip(shards.values(), call(pipe.execute), strict=True):
        out.update(zip(items, replies, strict=True))
    return out
