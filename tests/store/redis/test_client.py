"""The Redis client's calls as the store contract names their failures (a real server)."""

from __future__ import annotations

import uuid

import pytest

from streamdedup.errors import StoreError
from streamdedup.store.redis import RedisStore


def test_a_key_of_another_type_is_named(redis_url: str) -> None:
    """`{ns}:meta` as a plain string said "WRONGTYPE Operation against a key holding the
    wrong kind of value", naming no key."""
    import redis

    ns = f"t{uuid.uuid4().hex}"
    r = redis.Redis.from_url(redis_url)
    r.set(f"{{{ns}}}:meta", "not a hash")
    with pytest.raises(StoreError, match=rf"WRONGTYPE .* \(key \{{{ns}\}}:meta: another "
                                         r"program's\? Give another --redis-namespace\)"):
        RedisStore(redis_url, ns)
    r.delete(f"{{{ns}}}:meta")
    r.close()
