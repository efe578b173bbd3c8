"""`streamdedup store` on a real Redis (one server, and a 3-master cluster): stats, the check
of the records and the export of a store a detector wrote, and damage made on purpose."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis
from store_records import SETTINGS, ads, replacements

from streamdedup.core.sketch import Sketcher
from streamdedup.detection.shared_detector import detector_for
from streamdedup.store import open_store
from streamdedup.store.redis import maintenance
from streamdedup.store.redis.client import Keys


def built(url: str, cluster: bool = False, n: int = 200) -> tuple[str, list[str]]:
    namespace = f"adm{uuid.uuid4().hex[:8]}"
    store = open_store("redis", url, Sketcher(SETTINGS).params(), namespace, cluster)
    try:
        detector = detector_for(SETTINGS, store, Sketcher(SETTINGS))  # a group's, on Redis
        verdicts = [v.to_json() for v in detector.process_many(ads(n))]
        store.commit()
    finally:
        store.close()
    return namespace, verdicts


@pytest.mark.parametrize("kind", ["server", "cluster"])
def test_stats_verify_and_export_of_a_sound_store(
        kind: str, request: pytest.FixtureRequest) -> None:
    cluster = kind == "cluster"
    url = request.getfixturevalue("redis_cluster_url" if cluster else "redis_url")
    namespace, verdicts = built(url, cluster)
    found = maintenance.stats(url, namespace, cluster)
    assert (found["documents"], found["last_seq"]) == (200, 200)
    assert found["distinct_sets"] > 0 and found["bytes"]["server_used_memory"] > 0
    assert found["params"] == Sketcher(SETTINGS).params()
    assert maintenance.read_params(url, namespace, cluster) == found["params"]  # explain's
    # what the bucket sorted sets hold (a group's stores counted none: always 0)
    r = redis.RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
    held = sum(r.zcard(key) for key in r.scan_iter(match=f"{{{namespace}:b*", count=1000))
    # the server's memory: every master's, not the one node a cluster client asks first
    nodes = r.info("memory", target_nodes=r.PRIMARIES).values() if cluster else [r.info("memory")]
    used = [int(n["used_memory"]) for n in nodes]
    r.close()
    assert found["bucket_entries"] == held > 0
    assert len(used) == (3 if cluster else 1)
    assert 0.8 * sum(used) < found["bytes"]["server_used_memory"] < 1.2 * sum(used)
    assert maintenance.verify(url, namespace, cluster) == []

    out = io.StringIO()
    assert maintenance.export(url, namespace, out, cluster) == 200
    assert out.getvalue().splitlines() == verdicts  # seq order is arrival order


def test_damage_is_found_and_named(redis_url: str) -> None:
    namespace, _ = built(redis_url)
    r = redis.Redis.from_url(redis_url)
    k = Keys(namespace)
    docs = {key.decode(): value for key, value in r.hgetall(k("docs")).items()}
    first = sorted(docs, key=lambda d: int(docs[d].split()[0]))[0]
    head, _, verdict = docs[first].decode().partition("\n")
    set_id = int(head.split()[1])
    r.hset(k("docs"), first, f"999 {set_id}\n{verdict}")  # a seq past the counter
    r.delete(k.shingles(set_id))                            # a set without its shingles
    problems = maintenance.verify(redis_url, namespace)
    assert any("seq 999 is past the counter 200" in p for p in problems), problems
    assert any("but its verdict says" in p for p in problems)
    assert any(f"set {set_id}: its shingles are missing" in p for p in problems)


def test_shingles_damaged_out_of_order_are_named(redis_url: str) -> None:
    """Redis keeps no checksum: a set's hashes must be sorted and distinct, which is what
    ``verify`` can see of damage to them (an unsigned difference once made every order look
    sorted, so only a hash written twice was caught)."""
    namespace, _ = built(redis_url)
    r = redis.Redis.from_url(redis_url)
    k = Keys(namespace)
    set_id = int(next(iter(r.hgetall(k("docs")).values())).split()[1])
    blob = r.get(k.shingles(set_id))
    assert blob is not None and len(blob) >= 16 and maintenance.verify(redis_url, namespace) == []
    r.set(k.shingles(set_id), blob[8:16] + blob[:8] + blob[16:])  # the first two swapped
    assert maintenance.verify(redis_url, namespace) == [
        f"set {set_id}: its shingles are not sorted 64-bit hashes"]


@pytest.mark.parametrize(("key", "field", "value", "said"), [
    ("meta", "params", b"not json{", "meta params: the store's record of its parameters is "
     "damaged (not a JSON object)"),
    ("meta", "params", b"[[1, 2]]", "meta params: the store's record of its parameters is "
     "damaged (not a JSON object)"),
    ("meta", "params", b"", "meta params: the store's record of its parameters is "
     "damaged (not a JSON object)"),  # empty is damage, not "never written"
    ("meta", "clock", b"banana", "the retention clock (meta clock) is not a number"),
    ("seq", None, b"abc", "the seq counter is not a number: b'abc'"),
    ("counts", "sets", b"banana", "the count of 'sets' is not a number: b'banana'"),
    ("docs", "ad3", b"garbage", "document 'ad3': its record is damaged"),
    ("docs", "ad4", b"-5 x\n{}", "document 'ad4': its record is damaged"),
    ("docs", "ad5", b"6 1\xff\n{}", "document 'ad5': its record is damaged"),
])
def test_damaged_records_are_named_not_tracebacks(redis_url: str, key: str, field: str | None,
                                                   value: bytes, said: str) -> None:
    """Each was a ValueError, JSONDecodeError or UnicodeDecodeError traceback from stats,
    verify or export; verify said "ok" of the first and third."""
    from streamdedup.errors import StoreCorruptError

    namespace, _ = built(redis_url)
    r = redis.Redis.from_url(redis_url)
    k = Keys(namespace)
    if field is None:
        r.set(k(key), value)
    else:
        r.hset(k(key), field, value)
    r.close()
    assert any(p.startswith(said) for p in maintenance.verify(redis_url, namespace)), said
    if key != "docs":
        with pytest.raises(StoreCorruptError, match=re.escape(said.split(":")[0])):
            maintenance.stats(redis_url, namespace)
    else:
        with pytest.raises(StoreCorruptError, match=re.escape(said.split(":")[0])):
            maintenance.export(redis_url, namespace, io.StringIO())


def test_export_refuses_a_verdict_that_is_not_json(redis_url: str) -> None:
    """It wrote "{not json" into the export and said 200 documents exported, exit 0 (SQLite's
    export refuses a verdict that fails its checksum)."""
    from streamdedup.errors import StoreCorruptError

    namespace, _ = built(redis_url)
    r = redis.Redis.from_url(redis_url)
    k = Keys(namespace)
    head = (r.hget(k("docs"), "ad7") or b"").split(b"\n", 1)[0]
    r.hset(k("docs"), "ad7", head + b"\n{not json")
    r.close()
    with pytest.raises(StoreCorruptError, match="the verdict of document 'ad7' is not JSON"):
        maintenance.export(redis_url, namespace, io.StringIO())


def test_replaced_ids_and_ids_back_at_an_earlier_text_verify_clean(redis_url: str) -> None:
    """A set's first document may have moved on to another text, or come back to the set's
    text: neither is damage (a group keeps such a member as having left)."""
    namespace = f"adm{uuid.uuid4().hex[:8]}"
    store = open_store("redis", redis_url, Sketcher(SETTINGS).params(), namespace)
    try:
        detector = detector_for(SETTINGS, store, Sketcher(SETTINGS))
        for batch in replacements():
            detector.process_many(batch)
            store.commit()
    finally:
        store.close()
    assert maintenance.verify(redis_url, namespace) == []


def _set_of(r: redis.Redis, k: Keys, doc_id: str) -> int:
    head = r.hget(k("docs"), doc_id)
    assert head is not None
    return int(head.split(b"\n", 1)[0].split()[1])


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("first_id", "ad%5", "its first document 'ad%5' is not one of its documents"),
    ("first_seq", "SEQ-1", "its first document 'ad5' has seq 6, the set says 5"),
    ("first_seq", "SEQ+1000", "its first document's seq 1006 is after its document with "
                              "seq 6"),
])
def test_a_sets_first_document_is_checked_against_its_members(
        redis_url: str, field: str, value: str, expected: str) -> None:
    """The three damages to a set's first document SQLite's ``verify`` names (its id or seq
    changed), found here too. ``ad5`` (seq 6) is the first document of its set."""
    namespace, _ = built(redis_url)
    r = redis.Redis.from_url(redis_url)
    k = Keys(namespace)
    set_id = _set_of(r, k, "ad5")
    record = r.hgetall(k("set", set_id))
    assert (record[b"first_id"], record[b"first_seq"]) == (b"ad5", b"6")
    assert maintenance.verify(redis_url, namespace) == []
    shift = {"SEQ-1": -1, "SEQ+1000": 1000}
    r.hset(k("set", set_id), field, 6 + shift[value] if value in shift else value)
    problems = maintenance.verify(redis_url, namespace)
    assert f"set {set_id}: {expected}" in problems
    assert all(p.startswith(f"set {set_id}: its first document") for p in problems), problems


def test_a_set_record_or_verdict_of_the_wrong_kind_is_a_problem_not_a_traceback(
        redis_url: str) -> None:
    """A cluster parent or first seq that is no number was a ValueError traceback from
    verify, and a verdict that is JSON but no object an AttributeError: the damage verify
    is there to name."""
    namespace, _ = built(redis_url)
    r = redis.Redis.from_url(redis_url)
    k = Keys(namespace)
    set_id = _set_of(r, k, "ad5")
    r.hset(k("set", set_id), mapping={"parent": "xyz", "first_seq": "1x"})
    head = (r.hget(k("docs"), "ad7") or b"").split(b"\n", 1)[0]
    r.hset(k("docs"), "ad7", head + b"\n[1]")
    r.close()
    problems = maintenance.verify(redis_url, namespace)
    for said in (f"set {set_id}: its cluster parent is not a number: b'xyz'",
                 f"set {set_id}: its first document's seq is not a number: b'1x'",
                 "document 'ad7': its verdict is not a JSON object"):
        assert said in problems, problems


def test_a_first_document_claimed_by_a_member_that_crashed_is_not_damage(
        redis_url: str) -> None:
    """A group member that claimed a set's first document and died before its verdict was
    written leaves the pair claimed, not judged (another member redoes it): not damage. The
    same pair neither judged nor claimed is."""
    namespace, _ = built(redis_url)
    r = redis.Redis.from_url(redis_url)
    k = Keys(namespace)
    set_id = _set_of(r, k, "ad5")
    r.hdel(k("ver"), f"ad5\0{set_id}")
    r.hset(k("claimed"), f"ad5\0{set_id}", 6)
    assert maintenance.verify(redis_url, namespace) == []
    r.hdel(k("claimed"), f"ad5\0{set_id}")
    assert maintenance.verify(redis_url, namespace) == [
        f"set {set_id}: its first document 'ad5' is not one of its documents"]


def test_the_command_line_on_redis(redis_url: str) -> None:
    namespace, _ = built(redis_url, n=50)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "streamdedup", "store", *args, "--store-backend", "redis",
             "--redis-url", redis_url, "--redis-namespace", namespace],
            capture_output=True, text=True, timeout=120)

    assert "ok" in run("verify").stdout
    assert json.loads(run("stats", "--json").stdout)["documents"] == 50
    assert len(run("export").stdout.splitlines()) == 50
    compact = run("compact")
    assert compact.returncode == 2 and "nothing to compact" in compact.stderr


def test_a_namespace_no_store_was_opened_in_is_refused(redis_url: str) -> None:
    """A mistyped --redis-namespace verified "ok" and exported 0 documents, exit 0; SQLite
    says "no store at" for a mistyped --store."""
    from streamdedup.errors import StoreError

    built(redis_url, n=5)
    for read in (lambda: maintenance.stats(redis_url, "typo"),
                 lambda: maintenance.verify(redis_url, "typo"),
                 lambda: maintenance.export(redis_url, "typo", io.StringIO())):
        with pytest.raises(StoreError, match="no store in Redis namespace 'typo'"):
            read()
    out = subprocess.run(
        [sys.executable, "-m", "streamdedup", "store", "verify", "--store-backend", "redis",
         "--redis-url", redis_url, "--redis-namespace", "typo"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "no store in Redis namespace 'typo'" in out.stderr
    assert "Traceback" not in out.stderr


def test_only_writers_are_warned_of_a_redis_that_does_not_fsync(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`store stats`, `verify` and `export` commit nothing, yet printed the writer's warning
    (export twice)."""
    from harness.redis import RedisServer

    server = RedisServer(tmp_path / "redis", durable=False)
    server.run()
    try:
        with caplog.at_level(logging.WARNING, logger="streamdedup.store.redis.client"):
            open_store("redis", server.url, Sketcher(SETTINGS).params(), "w").close()
            assert "appendfsync" in caplog.text
            caplog.clear()
            maintenance.stats(server.url, "w")
            maintenance.verify(server.url, "w")
            maintenance.export(server.url, "w", io.StringIO())
            assert "appendfsync" not in caplog.text
    finally:
        server.stop()


def test_stats_show_the_retention_clock_and_the_oldest_document(redis_url: str) -> None:
    """As SQLite's do (RETENTION.md, "What to watch"); Redis's said nothing of them."""
    from streamdedup.store.base import DocRecord

    namespace, _ = built(redis_url, n=3)
    assert {k: maintenance.stats(redis_url, namespace)[k]
            for k in ("clock", "oldest_document")} == {"clock": None, "oldest_document": None}
    store = open_store("redis", redis_url, Sketcher(SETTINGS).params(), f"{namespace}r",
                       single_writer=True)
    try:
        store.put_doc(DocRecord("a", store.next_seq(), 1, "{}", time=1_700_000_000_000))
        store.put_doc(DocRecord("b", store.next_seq(), 1, "{}", time=1_700_086_400_000))
        store.put_clock(1_700_086_400_000)
        store.commit()
    finally:
        store.close()
    found = maintenance.stats(redis_url, f"{namespace}r")
    assert (found["clock"], found["oldest_document"]) == ("2023-11-15T22:13:20+00:00",
                                                         "2023-11-14T22:13:20+00:00")


@pytest.mark.parametrize("kind", ["server", "cluster"])
def test_remove_deletes_every_key_of_one_namespace_and_none_of_another(
        kind: str, request: pytest.FixtureRequest) -> None:
    """A replay on Redis removes the namespace it gave its consumer, as it removes its
    temporary SQLite store; a namespace whose name starts with the same letters stays."""
    cluster = kind == "cluster"
    url = request.getfixturevalue("redis_cluster_url" if cluster else "redis_url")
    namespace, _ = built(url, cluster, n=60)
    neighbour, verdicts = built(url, cluster, n=60)
    twin = namespace + "b"  # "{ns:b*" must not reach "{nsb:b..."
    store = open_store("redis", url, Sketcher(SETTINGS).params(), twin, cluster)
    store.close()
    r = redis.RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)

    def keys(ns: str) -> int:  # read apart from Keys: the name, then ':' or '}'
        return sum(1 for _ in r.scan_iter(match=f"*{ns}[:}}]*", count=1000))

    try:
        held, kept, twin_held = keys(namespace), keys(neighbour), keys(twin)
        assert held > 60 and kept > 60 and twin_held > 0
        assert maintenance.remove(url, namespace, cluster) == held
        assert keys(namespace) == 0 and (keys(neighbour), keys(twin)) == (kept, twin_held)
        with pytest.raises(Exception, match="no store in Redis namespace"):
            maintenance.stats(url, namespace, cluster)
        buf = io.StringIO()
        maintenance.export(url, neighbour, buf, cluster)
        assert sorted(buf.getvalue().splitlines()) == sorted(verdicts)
    finally:
        r.close()
