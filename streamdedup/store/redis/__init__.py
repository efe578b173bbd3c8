"""The Redis store: ``client.py`` (connections, key layout, errors), ``store.py`` (the Store
contract, single writer), ``records.py`` (a document's and a set's hash fields, written and
read alike by both), ``edges.py`` (the verified edges and the crowded sets), ``shared_store.py``
(the protocol a consumer group shares), ``buckets.py`` (the band buckets' Lua, run per
shard), ``lock.py``
(one writer per namespace when retention is on) and ``maintenance.py`` (stats, verify,
export, one document's verdict)."""

from streamdedup.store.redis.shared_store import SharedRedisStore
from streamdedup.store.redis.store import RedisStore

__all__ = ["RedisStore", "SharedRedisStore"]
