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


def test_wrongtype_names_our_key_wherever_it_is_given_and_only_wrongtype_does() -> None:
    """The key may follow other arguments (a script's keys come after its sha and their
    count); another error of a call naming our key is said as it is."""
    import redis

    from streamdedup.store.redis.client import call

    def failing(message: str) -> object:
        def fn(*_args: object) -> None:
            raise redis.ResponseError(message)
        return fn

    with pytest.raises(StoreError, match=r"\(key \{ns\}:meta: another program's\?"):
        call(failing("WRONGTYPE Operation against a key"), "sha", 1, "{ns}:meta")
    with pytest.raises(StoreError) as err:
        call(failing("ERR unknown command"), "{ns}:meta")
    assert "another program's" not in str(err.value) and "unknown command" in str(err.value)
