"""The Redis store's single-writer operations beyond the contract suite: durability across
connections, rollback, the same verdicts as SQLite, and errors that never show a password.
Real redis-server only; the shared protocol is in test_shared_store.py."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from streamdedup.core.document import Document
from streamdedup.detection.detector import Detector
from streamdedup.errors import ConfigError, StoreParamsError, StoreUnavailableError
from streamdedup.replay.dump import read_dump
from streamdedup.settings import build_settings
from streamdedup.store.base import DocRecord, Evicted, SetRecord
from streamdedup.store.redis import RedisStore
from streamdedup.store.sqlite import SqliteStore


def test_a_commit_is_seen_by_the_next_connection_and_a_rollback_by_none(
        redis_url: str) -> None:
    ns = f"t{uuid.uuid4().hex}"
    a = RedisStore(redis_url, ns)
    a.add_set(SetRecord(5, 1, "d", 5), np.array([1, 2, 2**64 - 1], dtype=np.uint64))
    a.put_doc(DocRecord("d", a.next_seq(), 5, '{"v":1}'))
    a.add_to_buckets([11, 12], 5, 3)
    a.put_positions({("jobs", 0): 8})
    a.commit()
    a.put_doc(DocRecord("e", a.next_seq(), 5, '{"v":2}'))
    a.add_to_buckets([13], 6, 9)
    a.rollback()
    a.close()
    b = RedisStore(redis_url, ns)
    assert b.get_doc("d") == DocRecord("d", 1, 5, '{"v":1}') and b.get_doc("e") is None
    assert b.get_shingles([5])[5].tolist() == [1, 2, 2**64 - 1]
    assert b.probe([11, 12, 13], (0, 10)) == {5: 2}
    assert b.get_positions() == {("jobs", 0): 8} and b.members(5, 10) == [(1, "d")]
    assert b.next_seq() == 3  # the rolled-back number is skipped, never reused
    assert b.store_id() == RedisStore(redis_url, ns).store_id()
    assert b.stats()["documents"] == 1
    b.close()


def test_the_same_verdicts_as_sqlite(redis_url: str, kijiji_path: Path,
                                     tmp_path: Path) -> None:
    """The first 600 rows of the Kijiji dump, in batches: byte-identical verdicts."""
    settings = build_settings("reference", env={})
    docs = [d for _, d in read_dump(kijiji_path, None, settings.text_fields)
            if isinstance(d, Document)][:600]
    out = []
    for store in (SqliteStore(tmp_path / "s"), RedisStore(redis_url, f"t{uuid.uuid4().hex}")):
        det = Detector(settings, store)
        verdicts = []
        for start in range(0, len(docs), 97):
            verdicts += [v.to_json() for v in det.process_many(docs[start:start + 97])]
            store.commit()
        store.close()
        out.append(verdicts)
    assert out[0] == out[1]
    assert sum('"duplicate":true' in v for v in out[0]) > 100


def test_the_lock_renewal_never_aborts_its_own_writers_commit(redis_url: str) -> None:
    """A renewal is a PEXPIRE of the key each commit WATCHes: run between WATCH and EXEC it
    made the writer's own commit fail ("the Redis writer lock changed during a commit"),
    once every few `check --retention` runs. Here renewals run back to back beside 200
    commits."""
    import threading

    from streamdedup.store import open_store

    store = open_store("redis", redis_url, {"p": 1}, f"t{uuid.uuid4().hex}", single_writer=True)
    lock = store._lock  # type: ignore[attr-defined]
    done = threading.Event()

    def renew() -> None:
        while not done.is_set():
            lock.check()

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        for i in range(200):
            store.put_doc(DocRecord(f"d{i}", store.next_seq(), 5, '{"v":1}', 1000 + i))
            store.commit()
    finally:
        done.set()
        renewer.join()
    assert store.get_doc("d199") is not None
    store.close()


def test_rediss_to_a_server_without_tls_says_so(redis_url: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """It said "TimeoutError: Timeout connecting to server" after 30 s, no word of TLS."""
    from streamdedup.store.redis import client

    monkeypatch.setattr(client, "TIMEOUT_S", 1)  # the handshake's wait (30 s)
    with pytest.raises(StoreUnavailableError, match=r"rediss:// speaks TLS, .*is it "
                                                    r"redis://\?\)$"):
        RedisStore(redis_url.replace("redis://", "rediss://"), "t-tls")
    with pytest.raises(StoreUnavailableError) as info:  # nothing answered: no word of TLS
        RedisStore("rediss://127.0.0.1:9/0", "t-tls")
    assert "TLS" not in str(info.value)


def test_bad_urls_and_unreachable_servers_are_one_clear_line() -> None:
    with pytest.raises(ConfigError, match="redis_url must be"):
        RedisStore("http://127.0.0.1:1")
    with pytest.raises(StoreUnavailableError, match=r"redis://\*\*\*@127\.0\.0\.1:9/0") as info:
        RedisStore("redis://user:s3cret@127.0.0.1:9/0")
    assert "s3cret" not in str(info.value)
    with pytest.raises(StoreUnavailableError, match=r"9/0\?db=0&password=\*\*\*") as info:
        RedisStore("redis://127.0.0.1:9/0?db=0&password=Hunter2")  # redis-py reads it too
    assert "Hunter2" not in str(info.value)
    with pytest.raises(ConfigError, match="not a unix socket"):
        RedisStore("unix:///tmp/r.sock", cluster=True)
    # redis-py raised ValueError (a traceback) for these, and took /abc as database 0
    for url, words in [("redis://127.0.0.1:99999/0", "port is not a number in"),
                       ("redis://127.0.0.1:abc/0", "cannot be read"),
                       ("redis://[::1/0", "cannot be read"),
                       ("redis://127.0.0.1:9/abc", "database after the last '/' must be"),
                       ("redis://:pw9x/cret@h:6379/0", "must be %-encoded")]:
        with pytest.raises(ConfigError, match=words) as refused:
            RedisStore(url)
        assert "pw9x" not in str(refused.value)  # redis-py's words quoted the password
    # RedisClusterException is no RedisError: it was a traceback, and `run` did not wait
    with pytest.raises(StoreUnavailableError, match=r"Redis Cluster at redis://127\.0\.0\.1:9"):
        RedisStore("redis://127.0.0.1:9/0", cluster=True)


def test_a_url_option_redis_py_does_not_know_is_one_clear_line(redis_url: str,
                                                                 redis_cluster_url: str) -> None:
    """redis-py handed an unknown query option to its connection (a TypeError traceback), its
    cluster client dropped it silently."""
    for url, cluster in ((redis_url, False), (redis_cluster_url, True)):
        with pytest.raises(ConfigError, match=r"redis-py does not know( for a cluster)?: 'fooo'"):
            RedisStore(f"{url}?fooo=bar", "t-option", cluster=cluster)


def test_the_cluster_flag_on_a_single_server_is_one_clear_error(redis_url: str) -> None:
    with pytest.raises(ConfigError, match="not a Redis Cluster: drop --redis-cluster"):
        RedisStore(redis_url, "t-flag", cluster=True)


def test_settings_need_a_url_for_the_redis_backend() -> None:
    with pytest.raises(ConfigError, match="needs redis_url"):
        build_settings(env={}, overrides={"store_backend": "redis"})
    s = build_settings(env={}, overrides={"store_backend": "redis",
                                          "redis_url": "redis://u:pw@h:1/0"})
    assert s.public()["redis_url"] == "***"
    with pytest.raises(ConfigError, match="redis_namespace must be"):
        build_settings(env={}, overrides={"store_backend": "redis", "redis_url": "redis://h:1",
                                          "redis_namespace": "a{b}"})


def test_a_cluster_node_named_without_the_cluster_flag_is_one_clear_error(
        redis_cluster_url: str) -> None:
    with pytest.raises(ConfigError, match="add --redis-cluster"):
        RedisStore(redis_cluster_url, "t-flag")


def test_with_retention_one_writer_holds_a_namespace(redis_url: str) -> None:
    """The product opens Redis with a writer lock when --retention is on: a second writer is
    refused with the holder's name, a namespace written one way is refused the other way,
    and a writer that lost its lock has its commits refused, never mixed in."""
    from streamdedup.errors import StoreError, StoreLockedError
    from streamdedup.store import open_store
    from streamdedup.store.redis import SharedRedisStore
    from streamdedup.store.redis.lock import WriterLock

    ns = f"t{uuid.uuid4().hex}"
    a = open_store("redis", redis_url, {"p": 1}, ns, single_writer=True)
    assert isinstance(a, RedisStore) and not isinstance(a, SharedRedisStore)
    with pytest.raises(StoreLockedError, match=r"open for writing by .* pid \d+"):
        open_store("redis", redis_url, {"p": 1}, ns, single_writer=True)
    with pytest.raises(ConfigError, match="by one writer with --retention"):
        SharedRedisStore(redis_url, ns)
    a.put_doc(DocRecord("d", a.next_seq(), 5, '{"v":1}', 1000))
    a.commit()
    a.close()  # frees the lock
    b = open_store("redis", redis_url, {"p": 1}, ns, single_writer=True)
    assert b.get_doc("d") == DocRecord("d", 1, 5, '{"v":1}', 1000)
    lock = b._lock  # type: ignore[attr-defined]
    assert isinstance(lock, WriterLock)
    b.r.set(lock.key, "a writer that took over")  # as if this one had stalled past the TTL
    b.put_doc(DocRecord("e", b.next_seq(), 5, '{"v":2}', 2000))
    with pytest.raises(StoreError, match="lost the Redis writer lock"):
        b.commit()
    b.rollback()
    assert b.get_doc("e") is None
    with pytest.raises(StoreError, match="lost"):
        b.ping()
    b.r.delete(lock.key)
    b.close()
    shared_ns = f"t{uuid.uuid4().hex}"
    SharedRedisStore(redis_url, shared_ns).close()
    with pytest.raises(ConfigError, match="by a consumer group"):
        open_store("redis", redis_url, {"p": 1}, shared_ns, single_writer=True)


def test_redis_failures_are_named_once_for_calls_and_the_lock_s_commit() -> None:
    """The writer lock's commit had its own copy of the mapping, without LOADING, CLUSTERDOWN
    and TRYAGAIN: a server still loading its AOF stopped the consumer instead of being
    waited for."""
    import redis

    from streamdedup.errors import StoreError
    from streamdedup.store.redis.client import store_error

    for unavailable in (redis.ConnectionError("refused"), redis.TimeoutError("slow"),
                        redis.ResponseError("LOADING Redis is loading the dataset in memory"),
                        redis.ResponseError("CLUSTERDOWN The cluster is down"),
                        redis.ResponseError("TRYAGAIN Multiple keys request during rehashing"),
                        # a script meeting a key a reshard moved
                        redis.ResponseError("Script attempted to access a non local key in a "
                                            "cluster node script: 2ff3, on @user_script:17."),
                        # redis-py's 16 redirections of a script to a slot half moved (a
                        # review's reshard among the masters stopped `check` in 2 of 9 runs)
                        redis.exceptions.ClusterError("TTL exhausted.")):
        assert isinstance(store_error(unavailable), StoreUnavailableError), unavailable
    wrong = store_error(redis.ResponseError("WRONGTYPE Operation against a key"))
    assert type(wrong) is StoreError and "ResponseError: WRONGTYPE" in str(wrong)
    # A failed pipeline names its command: a set's shingles, ~5 KB of escaped bytes a line.
    blob = redis.exceptions.ClusterDownError(f"Command # 2 (SET sh:7 {bytes(range(256)) * 20!r})")
    said = str(store_error(blob))
    assert isinstance(store_error(blob), StoreUnavailableError) and len(said) < 400, said


def test_a_cluster_that_is_down_is_unavailable_not_broken() -> None:
    """redis-py's ClusterDownError carries "The cluster is down", without the CLUSTERDOWN
    word the message test looked for: a member started then exited instead of waiting."""
    import redis

    from streamdedup.store.redis.client import store_error

    for exc in (redis.exceptions.ClusterDownError("The cluster is down"),
                redis.exceptions.TryAgainError("Multiple keys request during rehashing"),
                redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory")):
        assert isinstance(store_error(exc), StoreUnavailableError), exc
    assert not isinstance(store_error(redis.exceptions.ResponseError("WRONGTYPE")),
                          StoreUnavailableError)


@pytest.mark.parametrize("durable", [True, False])
def test_a_restart_of_the_server_is_told_once_and_a_lost_identity_is_made_again(
        tmp_path: Path, durable: bool) -> None:
    """A restart between two of a member's asks went unseen (each later call answered as if
    nothing happened), so writes it had lost were never rebuilt. With no persistence it also
    lost the store's identity: members kept writing into a namespace without parameters,
    which a `check` with another preset then claimed."""
    from harness.redis import RedisServer
    from streamdedup.core.sketch import Sketcher
    from streamdedup.store import open_store

    server = RedisServer(tmp_path / "redis", durable=durable)
    server.run()
    try:
        params = Sketcher(build_settings("default", env={})).params()
        store = open_store("redis", server.url, params, "restarts")
        before = store.store_id()
        store.put_doc(DocRecord("a", store.next_seq(), 1, "{}"))
        store.commit()
        assert store.server_restarted() is None
        server.kill(0)
        server.restart(0)
        said = store.server_restarted()
        assert said is not None and store.server_restarted() is None  # told once
        if durable:
            assert said == "Redis restarted" and store.store_id() == before
            assert store.get_doc("a") is not None
        else:
            assert "without the store" in said and store.store_id() != before
            assert store.get_doc("a") is None
        again = RedisStore(server.url, "restarts")
        try:
            assert again.get_params() == params and again.store_id() == store.store_id()
        finally:
            again.close()
        with pytest.raises(StoreParamsError, match="built with other parameters"):
            open_store("redis", server.url, Sketcher(build_settings("reference", env={}))
                       .params(), "restarts")
        with pytest.raises(ConfigError, match="written by a consumer group"):
            open_store("redis", server.url, params, "restarts", single_writer=True)
        store.close()
    finally:
        server.stop()


def test_any_master_of_a_cluster_down_or_restarted_is_told(tmp_path: Path) -> None:
    """redis-py asks one node of a cluster for INFO or PING unless told: a restart of the
    others, two thirds of the slots, went unseen, and one of them down answered PONG (the
    consumer's wait for the store returned at once, a retry logged every second)."""
    from harness.redis import RedisServer

    server = RedisServer(tmp_path / "cluster", cluster=3)
    server.run()
    try:
        store = RedisStore(server.url, "restarts", cluster=True)
        try:
            for node in (1, 2, 0):
                assert store.server_restarted() is None
                server.kill(node)
                with pytest.raises(StoreUnavailableError):
                    store.ping()
                server.restart(node)
                store.ping()
                assert store.server_restarted() == (
                    "a master of the Redis Cluster restarted, failed over or left"), node
        finally:
            store.close()
    finally:
        server.stop()


def test_a_master_joining_is_no_restart_and_one_gone_is(redis_url: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A reshard onto a new master stopped `check` and `backfill` ("restarted, failed over
    or joined"), though a master joining lost nothing. The masters' run ids as a cluster
    would give them (a real join: by hand, BENCHMARKS/RELIABILITY thirty-sixth session)."""
    from streamdedup.store.redis import store as store_module

    store = RedisStore(redis_url, f"t{uuid.uuid4().hex}")
    masters = {"a", "b", "c"}
    monkeypatch.setattr(store_module, "run_ids", lambda r: frozenset(masters))
    store._runs = frozenset(masters)
    masters.add("d")  # joined
    assert store.server_restarted() is None and store.server_restarted() is None
    masters.discard("b")  # restarted (a new id for it) or removed
    masters.add("b2")
    assert store.server_restarted() == ("a master of the Redis Cluster restarted, failed "
                                        "over or left")
    assert store.server_restarted() is None
    store.r.delete(store.k("meta"))  # its keys deleted, no restart
    assert store.server_restarted() == ("the store's keys were deleted from Redis (it did "
                                        "not restart): it starts again empty, with these "
                                        "parameters")
    store.close()


def test_a_database_the_server_does_not_have_is_a_setting(redis_url: str,
                                                          redis_cluster_url: str) -> None:
    """``redis://.../99`` was "cannot be used: ResponseError: DB index is out of range",
    exit 1, as if the server were away, and /3 on a cluster the same; a bad port was
    already a setting (exit 2)."""
    def base(url: str) -> str:
        return url.rsplit("/", 1)[0] if url.count("/") > 2 else url

    with pytest.raises(ConfigError, match="names a database this server does not have"):
        RedisStore(f"{base(redis_url)}/99", "t-db")
    with pytest.raises(ConfigError, match="a Redis Cluster has one"):
        RedisStore(f"{base(redis_cluster_url)}/3", "t-db", cluster=True)


def test_credentials_the_server_refuses_are_a_setting(redis_url: str) -> None:
    """A wrong password was taken for a server away (redis-py's AuthenticationError is a
    ConnectionError): `run` retried forever, alive and never ready. A user of the session's
    server is made for it (its default user stays as it is)."""
    import redis

    host = redis_url.split("://", 1)[1]
    admin = redis.Redis.from_url(redis_url)
    admin.acl_setuser("t-alice", enabled=True, passwords=["+rightpw"], keys=["*"],
                      commands=["+@all"])
    try:
        for url in (f"redis://t-alice:wrongpw@{host}",  # a wrong password
                    f"redis://:somepw@{host}"):  # a password to a user that has none
            with pytest.raises(ConfigError, match="refused the user name or password") as got:
                RedisStore(url, "t-auth")
            assert "wrongpw" not in str(got.value) and "somepw" not in str(got.value)
        RedisStore(f"redis://t-alice:rightpw@{host}", "t-auth").close()  # and the right one
    finally:
        admin.acl_deluser("t-alice")
        admin.close()


def test_a_set_evicted_before_the_crowded_set_it_named_leaves_its_list(
        redis_url: str) -> None:
    """``into:<id>`` lists the sets whose edges name crowded set <id>; one that left first
    must leave the list too, or the list would only grow (one entry per evicted set)."""
    ns = f"t{uuid.uuid4().hex}"
    store = RedisStore(redis_url, ns)
    shingles = np.arange(1, 40, dtype=np.uint64)
    store.add_set(SetRecord(1, store.next_seq(), "a", 1, last_time=500), shingles)
    for other in range(2, 5):
        store.add_set(SetRecord(other, store.next_seq(), f"o{other}", other,
                                last_time=other), shingles)
    store.add_edges(1, [(i, 0.9) for i in range(2, 5)], cap=2)
    store.commit()
    assert store.neighbours(1) is None
    assert sorted(store.r.smembers(store.k("into", 1))) == [b"2", b"3", b"4"]
    assert store.evict(cutoff_ms=100, limit=1) == Evicted(0, 1)
    store.commit()
    assert sorted(store.r.smembers(store.k("into", 1))) == [b"3", b"4"]
    store.close()


def test_a_store_of_the_layout_before_store_ids_opens(redis_url: str) -> None:
    """A namespace whose ``meta`` holds its parameters but no ``store_id`` (older releases
    recorded the parameters first) is a streamdedup store, not another program's."""
    import redis

    ns = f"t{uuid.uuid4().hex}"
    store = RedisStore(redis_url, ns)
    store.put_params({"num_perm": 128})
    store.commit()
    store.close()
    r = redis.Redis.from_url(redis_url)
    r.hdel(f"{{{ns}}}:meta", "store_id")
    assert r.hkeys(f"{{{ns}}}:meta") == [b"params"]
    again = RedisStore(redis_url, ns)
    assert again.get_params() == {"num_perm": 128}
    again.close()
    r.close()


@pytest.mark.parametrize("keys", [{"meta": {"foo": "bar"}}, {"seq": "5"},
                                  {"meta": {"foo": "bar"}, "seq": "5"}])
def test_a_namespace_of_another_programs_keys_is_refused_and_left_as_it_was(
        redis_url: str, keys: dict[str, object]) -> None:
    """`check --redis-namespace app` wrote into another program's `{app}:meta` and
    `{app}:seq` without a word (SQLite refuses a file of another program)."""
    import redis

    from streamdedup.errors import StoreCorruptError

    ns = f"t{uuid.uuid4().hex}"
    r = redis.Redis.from_url(redis_url)
    for name, value in keys.items():
        key = f"{{{ns}}}:{name}"
        r.hset(key, mapping=value) if isinstance(value, dict) else r.set(key, str(value))
    before = {k: r.type(k) for k in r.scan_iter(match=f"{{{ns}}}:*")}
    with pytest.raises(StoreCorruptError, match=f"Redis namespace '{ns}' holds .* but is no "
                                                "streamdedup store"):
        RedisStore(redis_url, ns)
    assert {k: r.type(k) for k in r.scan_iter(match=f"{{{ns}}}:*")} == before
    assert r.hgetall(f"{{{ns}}}:meta") == ({b"foo": b"bar"} if "meta" in keys else {})
    r.close()


def test_the_single_writer_counts_its_seqs_and_writes_them_with_the_commit(
        redis_url: str) -> None:
    """One round trip a document went to INCR (a tenth of `check --retention` on Redis);
    the lock's holder is the only writer, so it counts, and a rolled-back number is used
    again, as SQLite's. Without the lock (a group's members) every number is an INCR."""
    import redis

    ns = f"t{uuid.uuid4().hex}"
    r = redis.Redis.from_url(redis_url)
    store = RedisStore(redis_url, ns, writer_lock=True)
    assert (store.next_seq(), store.next_seq()) == (1, 2)
    assert r.get(f"{{{ns}}}:seq") is None  # not before the commit
    store.put_clock(1_000)
    store.commit()
    assert r.get(f"{{{ns}}}:seq") == b"2"
    assert store.next_seq() == 3
    store.rollback()
    assert store.next_seq() == 3  # read again from the server: 2, then counted
    store.close()
    shared = RedisStore(redis_url, ns)
    assert shared.next_seq() == 3 and r.get(f"{{{ns}}}:seq") == b"3"
    shared.close()
    r.close()


def test_the_single_writer_sends_its_bucket_writes_as_one_script_call_a_shard(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A set enters ~25 buckets and leaves as many: one ZADD or ZREM each was ~60 commands a
    document for the commit to send and parse (a third of `check --retention` on Redis).
    A set that enters and leaves in one checkpoint is in no bucket after it."""
    import redis

    from streamdedup.store.redis.client import BUCKET_SHARDS

    store = RedisStore(redis_url, f"t{uuid.uuid4().hex}", writer_lock=True)
    assert store._lock is not None
    sent: list[tuple[str, tuple[object, ...]]] = []
    real = type(store._lock).commit
    monkeypatch.setattr(type(store._lock), "commit", lambda lock, ops: (
        sent.extend((m, a) for m, a, _ in ops), real(lock, ops))[1])
    keys = {s: list(range(s * 100, s * 100 + 40)) for s in (1, 2, 3)}  # 120 band keys
    for s, ks in keys.items():
        store.add_set(SetRecord(s, s, f"d{s}", s, last_time=1), np.arange(5, dtype=np.uint64))
        store.add_to_buckets(ks, s, 5)
    store.evict_set(3)  # in and out within the checkpoint
    store.commit()
    scripts = [a for m, a in sent if m == "execute_command"]
    buckets = {store.k.bucket(k) for ks in keys.values() for k in ks}
    assert not [m for m, a in sent if m in ("zadd", "zrem") and a[0] in buckets], sent
    assert 0 < len(scripts) <= BUCKET_SHARDS and sum(a[2] for a in scripts) == 160
    assert store.probe(keys[1] + keys[2] + keys[3]) == {1: 40, 2: 40}
    r = redis.Redis.from_url(redis_url)
    assert r.zscore(store.k.bucket(keys[2][0]), 2) == 5.0
    assert r.zscore(store.k.bucket(keys[3][0]), 3) is None
    assert store.stats()["bucket_entries"] == 80
    r.close()
    store.close()
