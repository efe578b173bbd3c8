"""The in-memory bucket index against a plain dict model, across seals, merges and rollbacks."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from streamdedup.errors import StoreCorruptError
from streamdedup.store.base import SetRecord
from streamdedup.store.sqlite import SqliteStore
from streamdedup.store.sqlite import file as sqlite_file
from streamdedup.store.sqlite.bucket_index import BucketIndex
from streamdedup.store.sqlite.file import DB_NAME


def model_probe(model: dict[int, set[int]], keys: list[int]) -> dict[int, int]:
    hits: dict[int, int] = {}
    for k in set(keys):
        for s in model.get(k, ()):
            hits[s] = hits.get(s, 0) + 1
    return hits


def size_of(set_id: int) -> int:
    """A size per set, as the detector would give (any function of the set will do)."""
    return set_id % 50


@pytest.mark.parametrize("probe_rate", [1.0, 0.2])
def test_probe_matches_a_dict_model_through_seals_merges_and_rollbacks(
        probe_rate: float) -> None:
    """Probing after every add, and seldom: adds made and committed with no search since
    (the backfill's planned batches probe nothing) must survive a later rollback."""
    rng = random.Random(7)
    index = BucketIndex(run_size=64)  # tiny runs: many seals and merges
    committed: dict[int, set[int]] = {}
    current: dict[int, set[int]] = {}
    key_space = [rng.randrange(-(2**63), 2**63) for _ in range(300)]
    for step in range(400):
        set_id = rng.randrange(-(2**63), 2**63) if rng.random() < 0.8 else rng.choice(
            [s for ss in current.values() for s in ss] or [1])
        keys = rng.sample(key_space, rng.randint(1, 8))
        index.add(keys, set_id, size_of(set_id))
        for k in keys:
            current.setdefault(k, set()).add(set_id)
        if step % 7 == 6:
            if rng.random() < 0.3:
                index.rollback()
                current = {k: set(v) for k, v in committed.items()}
            else:
                index.commit()
                committed = {k: set(v) for k, v in current.items()}
        if rng.random() >= probe_rate:
            continue
        probe = rng.sample(key_space, 20)
        assert index.probe(probe) == model_probe(current, probe)
        within = {s: n for s, n in model_probe(current, probe).items() if 10 <= size_of(s) <= 29}
        assert index.probe(probe, (10, 29)) == within
        assert index.probe_many([probe, probe[:5], []], [(10, 29), (0, 99), (0, 99)]) == [
            within, model_probe(current, probe[:5]), {}]
        # Queries of one length (as a batch's band keys are) take the sorted-grid path;
        # a key twice in a query counts once.
        doubled = probe[:10] * 2
        assert index.probe_many([probe, doubled], [(10, 29), (0, 99)]) == [
            within, model_probe(current, probe[:10])]
    assert len(index) == sum(len(v) for v in current.values())
    assert index.probe(key_space) == model_probe(current, key_space)
    assert len(index._keys) > 1  # the test did exercise sorted runs


def test_add_is_a_set_add_even_across_runs() -> None:
    index = BucketIndex(run_size=4)
    index.add([1, 2, 3, 4, 5], 9, 100)
    index.commit()  # sealed into a run
    index.add([5, 6, 5], 9, 100)
    index.commit()
    assert index.probe([1, 2, 3, 4, 5, 6]) == {9: 6}
    assert len(index) == 6


def test_pending_lists_what_the_store_must_log() -> None:
    index = BucketIndex()
    index.add([10, 11], 3, 40)
    index.add([12], -4, 7)
    row = index.pending()
    assert row.set_ids.tolist() == [3, -4] and row.sizes.tolist() == [40, 7]
    assert row.counts.tolist() == [2, 1] and row.keys.tolist() == [10, 11, 12]
    index.commit()
    assert index.pending().keys.size == 0


def test_bulk_load_equals_adding_one_by_one() -> None:
    rng = np.random.default_rng(3)
    keys = rng.integers(-(2**63), 2**63 - 1, size=5000, dtype=np.int64)
    sets = rng.integers(0, 50, size=5000, dtype=np.int64)
    one = BucketIndex(run_size=256)
    rows = []
    for half in (slice(0, 2500), slice(2500, 5000)):
        for k, s in zip(keys[half].tolist(), sets[half].tolist(), strict=True):
            one.add([k], s, size_of(s))
        rows.append(one.pending())
        one.commit()
    bulk = BucketIndex(run_size=256)
    for row in rows:
        bulk.add_many(row)
    probe = keys[::7].tolist()
    assert bulk.probe(probe) == one.probe(probe) == model_probe(
        {k: {s for kk, s in zip(keys.tolist(), sets.tolist(), strict=True) if kk == k}
         for k in probe}, probe)
    assert bulk.probe(probe, (10, 30)) == one.probe(probe, (10, 30))


@pytest.mark.parametrize(("chunk", "sets_at_once"), [(1 << 21, 1 << 20), (60, 7), (1, 1)])
def test_sqlite_store_rebuilds_the_index_from_its_log(
        tmp_path: Path, chunk: int, sets_at_once: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also in chunks of a few entries, each sorted in the loading thread while the one
    before is added, and with the set numbers read a few at a time: the same index."""
    monkeypatch.setattr(sqlite_file, "_LOAD_CHUNK", chunk)
    monkeypatch.setattr(sqlite_file, "_SETS_AT_ONCE", sets_at_once)
    store = SqliteStore(tmp_path / "s")
    for i in range(50):  # buckets hold the store's sets (only those are loaded as live)
        store.add_set(SetRecord(1000 + i, i + 1, f"d{i}", 1000 + i), np.arange(3, dtype=np.uint64))
        store.add_to_buckets([i, i + 1, 10**15 + i], 1000 + i, 1000 + i)
        if i % 10 == 9:
            store.commit()
    store.add_to_buckets([1], 99, 10)  # never committed
    store.close()
    store = SqliteStore(tmp_path / "s")
    try:
        assert store.probe([1, 10**15 + 3]) == {1000: 1, 1001: 1, 1003: 1}
        assert store.probe([1, 10**15 + 3], (1001, 1002)) == {1001: 1}  # sizes came back too
        assert store.stats()["bucket_entries"] == 150
    finally:
        store.close()


def test_sqlite_damaged_bucket_log_is_refused(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s")
    store.add_to_buckets([1, 2, 3], 5, 10)
    store.commit()
    store.close()
    conn = sqlite3.connect(tmp_path / "s" / DB_NAME)
    (blob,) = conn.execute("SELECT keys FROM bucket_log").fetchone()
    damaged = bytearray(blob)
    damaged[3] ^= 0x10
    conn.execute("UPDATE bucket_log SET keys = ?", (bytes(damaged),))
    conn.commit()
    conn.close()
    with pytest.raises(StoreCorruptError, match="bucket log row 1 fails its checksum"):
        SqliteStore(tmp_path / "s")
    with pytest.raises(StoreCorruptError):  # not StoreLockedError: the failed open let go
        SqliteStore(tmp_path / "s")


def test_runs_stop_merging_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamdedup.store.sqlite import bucket_index

    monkeypatch.setattr(bucket_index, "MAX_RUN", 256)
    index = BucketIndex(run_size=64)
    model: dict[int, set[int]] = {}
    for i in range(100):
        keys = [i * 50 + j for j in range(50)]
        index.add(keys, i, 5)
        index.commit()
        for k in keys:
            model.setdefault(k, set()).add(i)
    assert max(k.size for k in index._keys) <= 256 and len(index._keys) > 5
    probe = list(range(0, 5000, 37))
    assert index.probe(probe) == model_probe(model, probe)


def test_sqlite_log_row_whose_arrays_disagree_is_refused(tmp_path: Path) -> None:
    """A row can pass its checksum and still not fit together (written by a buggy build):
    counts that do not add up to the keys must stop the open, not misfile entries."""
    from streamdedup.store.sqlite.file import blob_checksum

    store = SqliteStore(tmp_path / "s")
    store.add_to_buckets([1, 2, 3], 5, 10)
    store.commit()
    store.close()
    conn = sqlite3.connect(tmp_path / "s" / DB_NAME)
    sets, sizes, keys = (conn.execute(f"SELECT {c} FROM bucket_log").fetchone()[0]
                         for c in ("set_ids", "sizes", "keys"))
    counts = np.array([2], dtype="<u4").tobytes()  # three keys were logged
    conn.execute("UPDATE bucket_log SET counts = ?, checksum = ?",
                 (counts, blob_checksum(sets + sizes + counts + keys)))
    conn.commit()
    conn.close()
    with pytest.raises(StoreCorruptError, match="bucket log row 1: set, size, count and key"):
        SqliteStore(tmp_path / "s")


def test_a_sliding_window_keeps_the_index_flat_and_its_probes_right() -> None:
    """Sets added and removed as through a window of 500 sets, over 40 windows: references,
    entries and the key filter stay bounded (compacted when dead refs or entries are the
    majority), and a probe finds exactly the live sets."""
    rng = np.random.default_rng(4)
    index = BucketIndex(run_size=2048)
    live: dict[int, list[int]] = {}
    for step in range(20_000):
        set_id = int(rng.integers(1, 2**62))
        keys = rng.integers(-2**62, 2**62, 5).tolist()
        index.add(keys, set_id, 10)
        live[set_id] = keys
        if len(live) > 500:
            gone = next(iter(live))
            del live[gone]
            index.remove([gone])
        if step % 50 == 49:
            index.commit()
            assert index._n_sets <= 2 * 500 + 50
            assert len(index) == 5 * len(live)
    sample = list(live.items())[::37]
    for set_id, keys in sample:
        assert index.probe(keys) == {set_id: 5}
    assert index.probe([k + 1 for _, ks in sample for k in ks]) == {}


def test_the_fast_sort_and_counts_equal_numpy_s() -> None:
    from streamdedup.store.sqlite.bucket_index import _argsort, _counts

    rng = np.random.default_rng(4)
    for n in (0, 1, 2, 3, 1000, 300_000):
        keys = rng.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64)
        if n > 8:
            keys[7] = keys[2]  # equal keys
            keys[8] = keys[2] ^ 1  # keys equal but for their lowest bit: out of order
        order = _argsort(keys)
        assert np.array_equal(keys[order], np.sort(keys))
        assert np.array_equal(np.sort(order), np.arange(n))
    for values in ([], [4], [1, 1, 2, 5, 5, 5], [3, 1, 3]):
        got, want = _counts(np.array(values, np.int64)), np.unique(values, return_counts=True)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()


def test_sorted_keys_set_the_same_filter_bits_as_any_keys() -> None:
    from streamdedup.store.sqlite.bucket_index import _set_bits, _set_sorted_bits

    rng = np.random.default_rng(9)
    keys = np.sort(rng.integers(-(2**63), 2**63 - 1, size=50_000, dtype=np.int64))
    width = 1 << 16  # a small filter: many keys share a word
    a, b = np.zeros(width // 64, np.uint64), np.zeros(width // 64, np.uint64)
    _set_bits(a, keys, width)
    _set_sorted_bits(b, keys, width)
    assert np.array_equal(a, b) and a.any()


def test_add_is_a_set_add_after_a_compaction() -> None:
    index = BucketIndex(run_size=4)
    index.add([1, 2, 3, 4, 5], 9, 100)
    index.commit()
    for s in range(100, 110):
        index.add([s], s, 1)
    index.commit()
    index.remove(list(range(100, 110)))
    index.commit()  # dead refs are the majority: compacted
    assert index._dead_refs == 0 and index._n_sets == 1
    index.add([5, 6], 9, 100)
    index.commit()
    assert index.probe([1, 2, 3, 4, 5, 6]) == {9: 6}
    assert len(index) == 6


def test_compaction_is_rare_under_a_sliding_window(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = BucketIndex._compact
    monkeypatch.setattr(BucketIndex, "_compact", lambda self: (calls.append(1), real(self)))
    rng = np.random.default_rng(4)
    index = BucketIndex(run_size=2048)
    live: list[int] = []
    for step in range(5000):
        set_id = int(rng.integers(1, 2**62))
        index.add(rng.integers(-2**62, 2**62, 5).tolist(), set_id, 10)
        live.append(set_id)
        if len(live) > 500:
            index.remove([live.pop(0)])
        if step % 50 == 49:
            index.commit()
    assert len(calls) <= 5000 // 500 + 1  # about one per window (was 100 commits)
