"""The store contract, run against every backend; then what only the SQLite store promises.

``TestStoreContract`` runs each test once per backend in ``SUPPORTED_STORES`` (the ``store``
fixture in conftest.py, parametrized indirectly, as quix-streams does). Tests further down
need a persistent store (reopen, lock, corruption, file modes) and are SQLite only.
"""

from __future__ import annotations

import re
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import SUPPORTED_STORES
from shingle_sets import u64
from store_records import HIGH, PARAMS, rec

from streamdedup.core.sketch import Sketcher
from streamdedup.errors import (
    ConfigError,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    StoreParamsError,
)
from streamdedup.settings import Settings
from streamdedup.store import open_store
from streamdedup.store.base import DocRecord, Evicted, SetRecord, Store, check_params
from streamdedup.store.shingle_cache import ShingleCache
from streamdedup.store.sqlite.file import DB_NAME


@pytest.mark.parametrize("store", SUPPORTED_STORES, indirect=True)
class TestStoreContract:
    # --- metadata
    def test_params_round_trip(self, store: Store) -> None:
        assert store.get_params() is None
        store.put_params(PARAMS)
        assert store.get_params() == PARAMS
        got = store.get_params()
        assert got is not None
        got["num_perm"] = -1  # a copy: the caller cannot change the stored params
        assert store.get_params() == PARAMS

    def test_params_can_be_read_while_other_writes_are_pending(self, store: Store) -> None:
        store.put_doc(DocRecord("a", store.next_seq(), 1, "{}"))
        assert store.get_params() is None
        store.put_params(PARAMS)
        store.put_doc(DocRecord("b", store.next_seq(), 1, "{}"))
        assert store.get_params() == PARAMS

    def test_next_seq_strictly_increases(self, store: Store) -> None:
        seqs = [store.next_seq() for _ in range(50)]
        assert seqs == sorted(set(seqs)) and seqs[0] >= 1

    # --- documents
    def test_put_get_delete_doc_idempotent(self, store: Store) -> None:
        assert store.get_doc("a") is None
        doc = DocRecord("a", store.next_seq(), 42, '{"id":"a"}')
        store.put_doc(doc)
        store.put_doc(doc)
        assert store.get_doc("a") == doc
        assert store.stats()["documents"] == 1
        store.delete_doc("a")
        store.delete_doc("a")
        store.delete_doc("never-there")
        assert store.get_doc("a") is None
        assert store.members(42, 10) == []
        assert store.stats()["documents"] == 0

    def test_get_docs_reads_as_get_doc_does(self, store: Store) -> None:
        for i in range(30):
            store.put_doc(DocRecord(f"d{i}", store.next_seq(), i % 4, f'{{"n":{i}}}', i or None))
            if i == 14:
                store.commit()  # some committed, some pending
        store.put_doc(DocRecord("d3", store.next_seq(), 9, "replaced"))
        store.delete_doc("d5")
        asked = [f"d{i}" for i in range(32)] + ["d3", "d0"]  # two never stored, two twice
        expected = {d: r for d in asked if (r := store.get_doc(d)) is not None}
        assert store.get_docs(asked) == expected
        assert store.get_docs(iter(asked)) == expected
        assert len(expected) == 29 and expected["d3"].verdict == "replaced"
        assert store.get_docs([]) == {}
        odd: Any = 7  # not a str: handed back under its own key, as get_doc finds it
        store.put_doc(DocRecord(odd, store.next_seq(), 1, "{}"))
        assert store.get_docs([odd]) == {odd: store.get_doc(odd)} != {}

    def test_put_doc_replaces_by_id_and_moves_set_membership(self, store: Store) -> None:
        store.put_doc(DocRecord("a", 1, 10, "v1"))
        store.put_doc(DocRecord("a", 2, 20, "v2"))
        assert store.get_doc("a") == DocRecord("a", 2, 20, "v2")
        assert store.members(10, 10) == []
        assert store.members(20, 10) == [(2, "a")]

    def test_members_are_earliest_first_and_limited(self, store: Store) -> None:
        for seq, doc_id in [(5, "e"), (2, "b"), (9, "z"), (1, "a"), (7, "x")]:
            store.put_doc(DocRecord(doc_id, seq, 3, "{}"))
        store.put_doc(DocRecord("other", 3, 4, "{}"))
        assert store.members(3, 10) == [(1, "a"), (2, "b"), (5, "e"), (7, "x"), (9, "z")]
        assert store.members(3, 2) == [(1, "a"), (2, "b")]
        assert store.members(99, 5) == []

    def test_members_read_before_a_change_are_not_served_after_it(self, store: Store
                                                                  ) -> None:
        """Members are read, then documents join, move, leave; each read is the truth."""
        store.put_doc(DocRecord("a", 1, 5, "{}"))
        store.put_doc(DocRecord("b", 2, 6, "{}"))
        assert store.members(5, 10) == [(1, "a")] and store.members(6, 10) == [(2, "b")]
        store.put_doc(DocRecord("c", 3, 5, "{}"))  # joins 5
        assert store.members(5, 10) == [(1, "a"), (3, "c")]
        assert store.members(5, 1) == [(1, "a")]  # another limit
        store.put_doc(DocRecord("b", 4, 5, "{}"))  # moves from 6 to 5
        assert store.members(6, 10) == [] and store.members(5, 10)[-1] == (4, "b")
        store.delete_doc("a")  # leaves
        assert store.members(5, 10) == [(3, "c"), (4, "b")]
        store.commit()
        assert store.members(5, 10) == [(3, "c"), (4, "b")]

    def test_doc_text_is_kept_verbatim(self, store: Store) -> None:
        verdict = '{"id":"è 😀","x":"\\u0000 \'quotes\' \\"", "n": 1}\x00tail'
        doc_id = "è 😀\x00 nul"
        store.put_doc(DocRecord(doc_id, 1, -(2**63), verdict))
        assert store.get_doc(doc_id) == DocRecord(doc_id, 1, -(2**63), verdict)
        assert store.members(-(2**63), 5) == [(1, doc_id)]

    # --- sets
    def test_a_set_named_by_a_document_first_can_be_stored_later(self, store: Store) -> None:
        store.put_doc(DocRecord("a", 1, 77, "{}"))  # e.g. an empty text's set: no shingles
        assert store.get_sets([77]) == {} and store.get_shingles([77]) == {}
        store.set_parent(77, 5)  # no set yet: nothing to update
        assert store.stats()["sets"] == 0
        store.add_set(rec(77, seq=2, first_id="b"), HIGH)
        store.put_doc(DocRecord("b", 2, 77, "{}"))
        store.set_parent(77, 77)
        assert store.get_sets([77]) == {77: rec(77, seq=2, first_id="b")}
        assert store.get_shingles([77])[77].tolist() == HIGH.tolist()
        assert store.members(77, 5) == [(1, "a"), (2, "b")]
        assert store.get_doc("a") == DocRecord("a", 1, 77, "{}")
        assert store.stats()["sets"] == 1

    def test_add_set_is_idempotent_first_write_wins(self, store: Store) -> None:
        store.add_set(rec(7, seq=3, first_id="x"), HIGH)
        store.add_set(rec(7, seq=9, first_id="y"), np.array([5], dtype=np.uint64))
        assert store.get_sets([7]) == {7: rec(7, seq=3, first_id="x")}
        assert store.get_shingles([7])[7].tolist() == HIGH.tolist()
        assert store.stats()["sets"] == 1

    def test_get_sets_returns_only_known_ids(self, store: Store) -> None:
        store.add_set(rec(1), HIGH)
        store.add_set(rec(-5), HIGH[:2])
        assert store.get_sets([1, 2, -5]) == {1: rec(1), -5: rec(-5)}
        assert store.get_sets([]) == {}

    def test_set_parent(self, store: Store) -> None:
        store.add_set(rec(1, seq=1, first_id="a"), HIGH)
        store.add_set(rec(2, seq=2, first_id="b"), HIGH)
        store.set_parent(2, 1)
        assert store.get_sets([2])[2] == SetRecord(2, 2, "b", 1)
        assert store.get_sets([1])[1].parent == 1

    def test_shingles_round_trip_exactly(self, store: Store) -> None:
        rng = np.random.default_rng(0)
        big = np.unique(rng.integers(0, 2**64, 5000, dtype=np.uint64))
        store.add_set(rec(1), HIGH)
        store.add_set(rec(2), big)
        store.add_set(rec(3), np.zeros(0, dtype=np.uint64))
        got = store.get_shingles([1, 2, 3, 4])
        assert set(got) == {1, 2, 3}
        for set_id, want in [(1, HIGH), (2, big)]:
            assert got[set_id].dtype == np.uint64
            assert got[set_id].tolist() == want.tolist()
        assert got[3].size == 0

    def test_many_sets_at_once(self, store: Store) -> None:
        ids = list(range(-1000, 1000, 1))
        for i in ids:
            store.add_set(rec(i), np.array([i & 0xFFFF, 2**64 - 1], dtype=np.uint64))
        assert set(store.get_sets(ids)) == set(ids)
        got = store.get_shingles(ids)
        assert all(got[i].tolist() == [i & 0xFFFF, 2**64 - 1] for i in ids)

    # --- edges
    def test_edges_both_directions_idempotent(self, store: Store) -> None:
        store.add_edges(1, [(2, 0.9), (3, 0.85)])
        store.add_edges(1, [(2, 0.9)])
        assert store.neighbours(1) == [(2, 0.9), (3, 0.85)]
        assert store.neighbours(2) == [(1, 0.9)]
        assert store.neighbours(3) == [(1, 0.85)]
        store.add_edges(4, [(2, 0.8)])
        assert store.neighbours(2) == [(1, 0.9), (4, 0.8)]
        store.add_edges(5, [])
        assert store.neighbours(5) == [] and store.neighbours(99) == []

    # --- buckets
    def test_probe_counts_hits_per_set(self, store: Store) -> None:
        store.add_to_buckets([10, 11, 12], 1, 10)
        store.add_to_buckets([11, 12, 13], 2, 10)
        store.add_to_buckets([-(2**63), 2**63 - 1], 3, 10)
        assert store.probe([10, 11, 12, 13]) == {1: 3, 2: 3}
        assert store.probe([10, 13, 99]) == {1: 1, 2: 1}
        assert store.probe([-(2**63), 2**63 - 1, 12]) == {3: 2, 1: 1, 2: 1}
        assert store.probe([]) == {} and store.probe([404]) == {}

    def test_probe_over_more_keys_than_one_sql_statement_takes(self, store: Store) -> None:
        keys = list(range(-1500, 1500))  # 3,000 keys: several chunks of 900
        store.add_to_buckets(keys, 1, 10)
        store.add_to_buckets(keys[::2], 2, 10)
        store.add_to_buckets(keys[899:902], 3, 10)  # straddles a chunk boundary
        assert store.probe(keys) == {1: 3000, 2: 1500, 3: 3}
        assert store.probe(np.array(keys, dtype=np.int64)) == {1: 3000, 2: 1500, 3: 3}
        assert store.stats()["bucket_entries"] == 3000 + 1500 + 3

    def test_probe_can_leave_out_sets_by_size(self, store: Store) -> None:
        store.add_to_buckets([1, 2], 1, 80)
        store.add_to_buckets([2, 3], 2, 100)
        store.add_to_buckets([3], 3, 125)
        assert store.probe([1, 2, 3], (80, 125)) == {1: 2, 2: 2, 3: 1}  # bounds included
        assert store.probe([1, 2, 3], (81, 124)) == {2: 2}
        assert store.probe([1, 2, 3], (200, 300)) == {}
        store.commit()
        assert store.probe([1, 2, 3], (90, 130)) == {2: 2, 3: 1}

    def test_probe_many_equals_one_probe_per_query(self, store: Store) -> None:
        rng = np.random.default_rng(5)
        for set_id in range(40):
            keys = rng.integers(0, 60, size=5).tolist()
            store.add_to_buckets(keys, set_id, 10 + set_id)
            if set_id == 25:
                store.commit()  # some committed, some not
        queries = [rng.integers(0, 60, size=6).tolist() for _ in range(12)] + [[], [999]]
        sizes = [(int(a), int(a) + 15) for a in rng.integers(0, 50, size=len(queries))]
        many = store.probe_many(queries, sizes)
        assert many == [store.probe(q, s) for q, s in zip(queries, sizes, strict=True)]
        assert sum(len(h) for h in many) > 10  # the queries did find sets
        assert store.probe_many([], []) == []

    def test_add_to_buckets_is_idempotent(self, store: Store) -> None:
        store.add_to_buckets([1, 2, 3], 7, 10)
        store.add_to_buckets([1, 2, 3], 7, 10)
        store.add_to_buckets(np.array([3], dtype=np.int64), 7, 10)
        assert store.probe([1, 2, 3]) == {7: 3}
        assert store.stats()["bucket_entries"] == 3

    # --- lifecycle
    def test_commit_keeps_everything_readable(self, store: Store) -> None:
        store.put_params(PARAMS)
        store.add_set(rec(1), HIGH)
        store.put_doc(DocRecord("a", store.next_seq(), 1, "{}"))
        store.add_to_buckets([5], 1, 10)
        store.commit()
        store.commit()
        assert store.get_doc("a") is not None and store.probe([5]) == {1: 1}
        assert store.get_params() == PARAMS

    def test_stats_counts(self, store: Store) -> None:
        assert {k: v for k, v in store.stats().items() if k != "bytes"} == {
            "documents": 0, "sets": 0, "bucket_entries": 0,
        }
        store.add_set(rec(1), HIGH)
        store.put_doc(DocRecord("a", 1, 1, "{}"))
        store.put_doc(DocRecord("b", 2, 1, "{}"))
        store.add_to_buckets([1, 2], 1, 10)
        stats = store.stats()
        assert (stats["documents"], stats["sets"], stats["bucket_entries"]) == (2, 1, 2)
        assert stats["bytes"] >= 0

    def test_close_twice_and_context_manager(self, store: Store) -> None:
        with store as s:
            assert s is store
        store.close()


# --- open_store and check_params, every backend


@pytest.mark.parametrize("backend", SUPPORTED_STORES)
def test_open_store_records_params_then_refuses_others_naming_each(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    location = (request.getfixturevalue("redis_url") if backend == "redis"
                else str(tmp_path / "st"))
    store = open_store(backend, location, PARAMS, namespace=f"t{uuid.uuid4().hex}")
    assert store.get_params() == PARAMS
    other = Sketcher(Settings(num_perm=64, seed=2)).params()
    with pytest.raises(StoreParamsError) as err:
        check_params(store.get_params() or {}, other)
    text = str(err.value)
    assert "num_perm: store has 128, settings give 64" in text
    assert "seed: store has 1, settings give 2" in text
    assert "threshold" not in text  # equal values are not listed
    store.close()


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_store_of_other_params_that_holds_nothing_says_removing_it_loses_nothing(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A run refused at once (its topics missing) had made its store, pinned to the default
    settings: the corrected command with another --preset was refused with no word that the
    store was empty."""
    location = (request.getfixturevalue("redis_url") if backend == "redis"
                else str(tmp_path / "st"))
    namespace = f"t{uuid.uuid4().hex}"
    open_store(backend, location, PARAMS, namespace=namespace).close()
    other = Sketcher(Settings(num_perm=64)).params()
    with pytest.raises(StoreParamsError, match=r"it holds no documents .*: removing it loses"):
        open_store(backend, location, other, namespace=namespace)
    from streamdedup.core.document import Document
    from streamdedup.detection.detector import Detector

    store = open_store(backend, location, PARAMS, namespace=namespace)
    Detector(Settings(), store).process(Document("a", {"title": "Cuoco", "description": "Roma"}))
    store.commit()
    store.close()
    with pytest.raises(StoreParamsError) as err:
        open_store(backend, location, other, namespace=namespace)
    assert "num_perm: store has 128" in str(err.value)
    assert "holds no documents" not in str(err.value)


def _params_record(backend: str, location: str, namespace: str, value: str | None,
                   delete: bool = False) -> None:
    """The store's record of its parameters set by hand (None: SQLite's NULL, which Redis
    cannot hold), or deleted, as damage does."""
    if backend == "sqlite":
        with sqlite3.connect(Path(location) / DB_NAME) as conn:
            if delete:
                conn.execute("DELETE FROM meta WHERE key = 'params'")
            else:
                conn.execute("UPDATE meta SET value = ? WHERE key = 'params'", (value,))
        return
    import redis

    r = redis.Redis.from_url(location)
    key = f"{{{namespace}}}:meta"
    if delete:
        r.hdel(key, "params")
    else:
        assert value is not None, "Redis holds no NULL"
        r.hset(key, "params", value)
    r.close()


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_damaged_or_deleted_record_of_the_params_is_refused_and_verify_says_it(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Damaged ('not json', '[1,2]', NULL): a Python traceback from every command that
    opened the store. Deleted from a store holding documents: any settings were taken and
    recorded, mixing band keys of two kinds, and ``store verify`` said "ok"."""
    from streamdedup.core.document import Document
    from streamdedup.detection.detector import Detector
    from streamdedup.store.redis import maintenance as redis_maintenance
    from streamdedup.store.sqlite import maintenance as sqlite_maintenance

    location = (request.getfixturevalue("redis_url") if backend == "redis"
                else str(tmp_path / "st"))
    namespace = f"t{uuid.uuid4().hex}"

    def verify() -> list[str]:
        if backend == "redis":
            return redis_maintenance.verify(location, namespace)
        return sqlite_maintenance.verify(Path(location))

    store = open_store(backend, location, PARAMS, namespace=namespace)
    Detector(Settings(), store).process(Document("a", {"title": "Cuoco", "description": "Roma"}))
    store.commit()
    store.close()
    assert verify() == []
    damaged = ["not json", "[1, 2]"] + ([] if backend == "redis" else [None])
    for value in damaged:
        _params_record(backend, location, namespace, value)
        with pytest.raises(StoreCorruptError, match="record of its parameters is damaged"):
            open_store(backend, location, PARAMS, namespace=namespace)
        assert any("record of its parameters is damaged" in p for p in verify()), value
    _params_record(backend, location, namespace, None, delete=True)
    other = Sketcher(Settings(num_perm=64)).params()
    with pytest.raises(StoreCorruptError, match="holds 1 document but no record of the "
                                                "parameters"):
        open_store(backend, location, other, namespace=namespace)
    assert verify() == [
        "the store holds 1 document but no record of the parameters it was made with "
        "(deleted?): restore a backup, or use a new store"]


def test_an_empty_store_directory_is_refused_where_a_store_is_opened(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--store '' put the store's files in the current directory; commands that open no
    store (tail, produce) still accept the setting."""
    from streamdedup.store import open_configured

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"must name a directory \(--store or STREAMDEDUP_STORE"):
        open_configured(Settings(store=" "), PARAMS)
    assert list(tmp_path.iterdir()) == []


def test_open_store_unknown_backend_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="redis"):
        open_store("redis", str(tmp_path), PARAMS)


def test_check_params_names_added_and_missing_keys() -> None:
    check_params({"a": 1}, {"a": 1})
    with pytest.raises(StoreParamsError) as err:
        check_params({"a": 1, "gone": 2}, {"a": 1, "new": [3]})
    assert "gone: store has 2, settings give None" in str(err.value)
    assert "new: store has None, settings give [3]" in str(err.value)


def test_a_store_of_the_old_signature_scheme_says_which_setting_reads_it(tmp_path: Path
                                                                        ) -> None:
    """Stores made before ``oph`` became the default name the flag that opens them."""
    old = Sketcher(Settings(minhash="multiply-shift")).params()
    d = str(tmp_path / "old")
    open_store("sqlite", d, old).close()
    with pytest.raises(StoreParamsError, match=r"minhash_scheme: .*--minhash.*multiply-shift"):
        open_store("sqlite", d, Sketcher(Settings()).params())
    open_store("sqlite", d, old).close()


# --- SQLite only: persistence, locking, corruption, file modes


























































def test_versions_keep_the_first_verdict_of_every_id_and_set(store: Store) -> None:
    """Contract (every backend): replacing a document keeps its old version's verdict."""
    store.add_set(SetRecord(7, 1, "a", 7), u64(1, 2, 3))
    store.add_set(SetRecord(8, 2, "a", 8), u64(4, 5, 6))
    store.put_doc(DocRecord("a", 1, 7, '{"v":1}'))
    store.put_doc(DocRecord("a", 2, 8, '{"v":2}'))
    store.put_doc(DocRecord("a", 2, 8, '{"v":2 again}'))  # a version keeps its first verdict
    assert store.get_version("a", 8) == '{"v":2}'  # also while the document holds the second
    store.delete_doc("a")
    store.commit()
    assert store.get_doc("a") is None
    assert store.get_version("a", 7) == '{"v":1}' and store.get_version("a", 8) == '{"v":2}'
    assert store.get_version("a", 9) is None and store.get_version("b", 7) is None
    assert store.members(7, 10) == [] and store.members(8, 10) == []


def test_store_errors_share_the_root() -> None:
    for cls in (StoreLockedError, StoreParamsError, StoreCorruptError):
        assert issubclass(cls, StoreError)


# --- rollback: SQLite discards pending writes (tests/store/sqlite/test_file.py); memory cannot


def test_memory_rollback_is_refused(make_store: Callable[..., Store]) -> None:
    with pytest.raises(StoreError, match="cannot roll back"):
        make_store("memory").rollback()




# --- sets kept as text (issue 15): the SQLite store keeps normalized text, not hashes


def test_a_store_built_by_the_detector_keeps_texts_and_is_several_times_smaller(
        tmp_path: Path, kijiji_path: Path) -> None:
    from streamdedup.detection.detector import Detector
    from streamdedup.replay.dump import read_dump

    docs = [d for _, d in read_dump(kijiji_path, None, ("title", "description"))][:1500]
    sizes, verdicts = {}, {}
    for name, texts in (("texts", True), ("hashes", False), ("texts, read back", True)):
        d = tmp_path / name
        store = open_store("sqlite", str(d), PARAMS)
        if not texts:
            store.keep_texts = lambda _shingler: None  # type: ignore[method-assign]
        if name == "texts, read back":  # no cache: every candidate's text shingled again
            store._shingle_cache = ShingleCache(max_bytes=0)  # type: ignore[attr-defined]
        detector = Detector(Settings(), store)
        verdicts[name] = [v.to_json() for v in detector.process_many(docs)]
        store.commit()
        store.close()
        conn = sqlite3.connect(d / DB_NAME)
        sizes[name] = conn.execute("SELECT sum(length(data)) FROM shingles").fetchone()[0]
        conn.close()
    assert verdicts["texts"] == verdicts["hashes"] == verdicts["texts, read back"]
    assert sizes["texts"] * 4 < sizes["hashes"], sizes


def test_a_set_over_the_edge_cap_is_crowded_and_keeps_no_edges(store: Store) -> None:
    """Contract (every backend), issue 17 item 9: edges grow with sets x cap, not with the
    square of a cluster of distinct variants."""
    store.add_edges(1, [(i, 0.9) for i in range(2, 6)], cap=4)
    assert store.neighbours(1) == [(i, 0.9) for i in range(2, 6)]
    store.add_edges(6, [(1, 0.85)], cap=4)  # the fifth edge of set 1
    assert store.neighbours(1) is None and store.neighbours(6) == [(1, 0.85)]
    store.add_edges(7, [(1, 0.8), (2, 0.8)], cap=4)  # a crowded set gains no edge
    store.commit()
    assert store.neighbours(1) is None and store.neighbours(2) == [(1, 0.9), (7, 0.8)]
    store.add_edges(8, [(i, 0.9) for i in range(100, 110)], cap=4)  # crowded at birth
    assert store.neighbours(8) is None and store.neighbours(100) == [(8, 0.9)]


def test_a_store_keeps_one_identity_for_its_life(make_store: Callable[..., Store],
                                                 tmp_path: Path) -> None:
    """Offsets committed after a store's writes name it (the consumer's rebuild check)."""
    a = make_store("sqlite", tmp_path / "a")
    ident = a.store_id()
    a.rollback()
    assert a.store_id() == ident
    a.close()
    again = make_store("sqlite", tmp_path / "a")
    assert again.store_id() == ident
    assert make_store("sqlite", tmp_path / "b").store_id() != ident
    assert make_store("memory").store_id() != make_store("memory").store_id()


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_stored_verdict_is_read_beside_the_writer(backend: str, tmp_path: Path,
                                                    request: pytest.FixtureRequest) -> None:
    """`explain --use-store` reads while the consumer holds the store (SQLite's file lock,
    Redis's writer lock under retention), writing nothing."""
    from streamdedup.store import read_verdict

    namespace = f"t{uuid.uuid4().hex}"
    url = request.getfixturevalue("redis_url") if backend == "redis" else ""
    settings = Settings(store_backend=backend, store=str(tmp_path / "s"), redis_url=url,
                        redis_namespace=namespace)
    writer = open_store(backend, url or settings.store, PARAMS, namespace, single_writer=True)
    try:
        writer.put_doc(DocRecord("a", writer.next_seq(), 1, '{"id":"a","duplicate":false}'))
        writer.put_doc(DocRecord("b", writer.next_seq(), 1, ""))  # being judged: no verdict
        writer.commit()
        assert read_verdict(settings, "a") == '{"id":"a","duplicate":false}'
        assert read_verdict(settings, "b") is None and read_verdict(settings, "c") is None
    finally:
        writer.close()
    elsewhere = Settings(store_backend=backend, store=str(tmp_path / "none"), redis_url=url,
                         redis_namespace=namespace + "x")
    with pytest.raises(StoreError, match="no store"):
        read_verdict(elsewhere, "a")
    assert not (tmp_path / "none").exists()  # nothing made where nothing was
    with pytest.raises(ConfigError, match="keeps nothing between processes"):
        read_verdict(Settings(store_backend="memory"), "a")


def test_eviction_sees_the_checkpoints_own_writes(store: Store) -> None:
    """Contract (every backend): ads that came and left the window within one batch leave
    at its eviction. Redis read only what it had committed: they stayed, and a dump gave
    another cluster id than on SQLite."""
    store.add_set(SetRecord(1, store.next_seq(), "a", 1, last_time=10), HIGH)
    store.put_doc(DocRecord("a", store.next_seq(), 1, "{}", time=10))
    store.add_set(SetRecord(2, store.next_seq(), "b", 2, last_time=500), HIGH[:2])
    store.put_doc(DocRecord("b", store.next_seq(), 2, "{}", time=500))
    assert store.evict(cutoff_ms=100, limit=10) == Evicted(1, 1)  # a and set 1, uncommitted
    assert store.get_doc("a") is None and store.get_doc("b") is not None
    assert 1 not in {i for i, r in store.get_sets([1, 2]).items() if not r.evicted}
    store.commit()
    assert store.get_doc("a") is None and store.stats()["documents"] == 1


# --- retention's edges (contract, every backend; found unpinned by a mutation sweep)


def _set_with_docs(store: Store, set_id: int, times: list[int | None]) -> list[str]:
    """A set whose documents have ``times`` in arrival order; their ids."""
    ids = [f"s{set_id}d{i}" for i in range(len(times))]
    store.add_set(SetRecord(set_id, store.next_seq(), ids[0], set_id,
                            last_time=max((t for t in times if t is not None), default=None)),
                  HIGH)
    for doc_id, time in zip(ids, times, strict=True):
        store.put_doc(DocRecord(doc_id, store.next_seq(), set_id, "{}", time=time))
    return ids


def test_the_window_keeps_a_document_at_the_cutoff_and_evicts_oldest_first(
        store: Store) -> None:
    """A document whose time is the cutoff is in the window (``members`` lists it, ``evict``
    keeps it); eviction takes the oldest time first, not the earliest arrival."""
    late, edge, untimed = _set_with_docs(store, 1, [99, 100, None])[0:3]
    assert [d for _, d in store.members(1, 10, since=100)] == [edge, untimed]
    assert [d for _, d in store.members(1, 10)] == [late, edge, untimed]
    assert store.evict(cutoff_ms=100, limit=10) == Evicted(1, 0)  # the set's newest is 100
    assert store.get_doc(late) is None and store.get_doc(edge) is not None
    three, one, two, kept = _set_with_docs(store, 2, [3, 1, 2, 500])
    assert store.evict(cutoff_ms=10, limit=1) == Evicted(1, 0)
    assert store.get_doc(one) is None
    assert all(store.get_doc(d) is not None for d in (three, two, kept))


def test_an_evicted_crowded_set_leaves_no_edge_of_another_set_naming_it(store: Store) -> None:
    """Crowding deletes a set's own edges; its eviction found the other ends from those, so
    it found none, and every other set's edge to it stayed (``neighbours(2)`` still named it)
    until that set left too. Edges named after the crowding count as well (set 8)."""
    store.add_set(SetRecord(1, store.next_seq(), "a", 1, last_time=1), HIGH)
    for other in range(2, 8):
        store.add_set(SetRecord(other, store.next_seq(), f"o{other}", other, last_time=500),
                      HIGH)
    store.add_edges(1, [(i, 0.9) for i in range(2, 8)], cap=4)
    assert store.neighbours(1) is None and store.neighbours(2) == [(1, 0.9)]
    store.commit()
    store.add_set(SetRecord(8, store.next_seq(), "o8", 8, last_time=500), HIGH)
    store.add_edges(8, [(1, 0.8), (2, 0.7)], cap=4)
    store.commit()
    assert store.neighbours(8) == [(1, 0.8), (2, 0.7)]
    store.evict(cutoff_ms=100, limit=10)
    store.commit()
    assert [store.neighbours(i) for i in range(3, 8)] == [[]] * 5
    assert store.neighbours(2) == [(8, 0.7)] and store.neighbours(8) == [(2, 0.7)]


@pytest.mark.parametrize("commit_first", [False, True])
def test_a_set_crowded_after_a_commit_leaves_no_edge_when_evicted(
        store: Store, commit_first: bool) -> None:
    """The edges stored before the crowding (2 to 4) are gone from the set's own list but
    not from theirs; the Redis store keeps a checkpoint's writes in the process until
    ``commit()``, so an eviction in the same checkpoint must find them there."""
    store.add_set(SetRecord(1, store.next_seq(), "a", 1, last_time=1), HIGH)
    for other in range(2, 8):
        store.add_set(SetRecord(other, store.next_seq(), f"o{other}", other, last_time=500),
                      HIGH)
    store.add_edges(1, [(i, 0.9) for i in range(2, 5)], cap=4)
    store.commit()
    store.add_edges(1, [(i, 0.9) for i in range(5, 8)], cap=4)
    if commit_first:
        store.commit()
    store.evict(cutoff_ms=100, limit=10)
    store.commit()
    assert [store.neighbours(i) for i in range(2, 8)] == [[]] * 6


def test_a_crowded_set_that_leaves_and_comes_back_in_one_checkpoint_keeps_its_new_edges(
        store: Store) -> None:
    """A crowded set's text expiring and coming back in one batch (a diff review's case):
    Redis answered from the server, which still said crowded until the commit, so the set
    came back with no edges at all (memory and SQLite: its new edge)."""
    for s in (10, 11, 12, 13):
        store.add_set(SetRecord(s, store.next_seq(), f"d{s}", s, last_time=1000), HIGH)
    store.add_edges(10, [(11, 0.9), (12, 0.9), (13, 0.9)], cap=2)
    store.commit()
    assert store.neighbours(10) is None
    store.evict_set(10)
    store.add_set(SetRecord(10, store.next_seq(), "d20", 10, last_time=2000), HIGH)
    store.add_edges(10, [(11, 0.9)], cap=2)
    assert store.neighbours(10) == [(11, 0.9)]
    store.commit()
    assert store.neighbours(10) == [(11, 0.9)] and store.neighbours(11) == [(10, 0.9)]


def test_members_since_is_not_answered_from_what_was_listed_without_it(store: Store) -> None:
    a, b = _set_with_docs(store, 5, [100, 200])
    assert [d for _, d in store.members(5, 10)] == [a, b]
    assert [d for _, d in store.members(5, 10, since=150)] == [b]


def test_an_untimed_set_takes_the_time_of_a_timed_document(store: Store) -> None:
    """Else retention would never evict it."""
    store.add_set(SetRecord(3, store.next_seq(), "c", 3, last_time=None), HIGH)
    store.put_doc(DocRecord("c", store.next_seq(), 3, "{}", time=100))
    assert store.get_sets([3])[3].last_time == 100
    store.commit()
    assert store.get_sets([3])[3].last_time == 100


def test_a_tombstone_that_comes_back_is_a_live_set_again(store: Store) -> None:
    """A set that left the window while another set hung under it stays as a tombstone; its
    text coming back makes it live: not evicted, its time moved by its documents."""
    store.add_set(SetRecord(1, store.next_seq(), "p", 1, last_time=10), HIGH)
    store.add_set(SetRecord(2, store.next_seq(), "q", 2, last_time=10), HIGH[:3])
    store.set_parent(2, 1)
    store.evict_set(1)
    assert store.get_sets([1])[1].evicted
    store.add_set(SetRecord(1, store.next_seq(), "p2", 1, last_time=50), HIGH)
    assert not store.get_sets([1])[1].evicted and store.get_sets([1])[1].last_time == 50
    store.put_doc(DocRecord("p2", store.next_seq(), 1, "{}", time=90))
    store.commit()
    revived = store.get_sets([1])[1]
    assert not revived.evicted and revived.last_time == 90 and revived.first_id == "p"
    assert [d for _, d in store.members(1, 10)] == ["p2"]


def test_a_damaged_record_of_the_params_says_how() -> None:
    from streamdedup.errors import StoreCorruptError
    from streamdedup.store.base import parsed_params

    for raw, how in ((None, "(empty)"), ("[1]", "(not a JSON object)"),
                     (b"{", "(not a JSON object)")):
        with pytest.raises(StoreCorruptError, match=re.escape(f"x: the store's record of its "
                                                              f"parameters is damaged {how}")):
            parsed_params(raw, "x")
    assert parsed_params('{"a": 1}', "x") == {"a": 1}
