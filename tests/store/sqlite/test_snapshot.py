"""The SQLite store's maps saved at a clean close (store/sqlite/snapshot.py): read back only
while they describe the tables exactly, and then the store answers as one rebuilt from the
tables."""

from __future__ import annotations

import logging
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
from store_records import band_keys, timed_set

from streamdedup.store.base import SetRecord
from streamdedup.store.sqlite import SqliteStore, bucket_index, snapshot
from streamdedup.store.sqlite.snapshot import SNAPSHOT_NAME

BANDS = 25


@pytest.fixture(autouse=True)
def _snapshot_small_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "MIN_ENTRIES", 0)


def keys_of(set_id: int) -> list[int]:
    """25 band keys per set, some shared between neighbouring sets (so buckets hold several)."""
    rng = np.random.default_rng(set_id)
    own = rng.integers(-(2**63), 2**63 - 1, size=BANDS - 2, dtype=np.int64).tolist()
    return [*own, set_id // 7, -(set_id // 11) - 1]


def add_sets(store: SqliteStore, ids: range, time: int = 0) -> None:
    for set_id in ids:
        seq = store.next_seq()
        store.add_set(SetRecord(set_id, seq, f"d{set_id}", set_id, last_time=time + set_id),
                      np.arange(set_id % 50 + 1, dtype=np.uint64))
        store.add_to_buckets(keys_of(set_id), set_id, set_id % 50 + 1)


def answers(store: SqliteStore, ids: range) -> list[object]:
    """What the maps decide: probes over every set's keys (plus absent ones), set numbers."""
    probes = [store.probe(keys_of(i)) for i in ids]
    probes.append(store.probe([12345, -999_999_999]))
    numbers = store._numbers.get_many(list(ids))
    return [probes, numbers, len(store._buckets), sorted(store.get_sets(list(ids)))]


def crash(store: SqliteStore) -> None:
    """Stop without a clean close (no snapshot written), as a killed process does."""
    store._conn.close()
    store._release_lock()


def build(d: Path, n: int = 3000) -> range:
    """Several commits (the index gets sealed runs, a recent run and dead entries)."""
    s = SqliteStore(d)
    for start in range(0, n, 500):
        add_sets(s, range(start, min(n, start + 500)))
        s.commit()
    assert s.evict(cutoff_ms=40, limit=100).sets > 0  # sets 0..39 leave the buckets
    s.commit()
    s.close()
    return range(n + 20)


@pytest.mark.parametrize("filters", ["saved", "set again"])
def test_a_clean_close_saves_the_maps_and_the_next_open_answers_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, filters: str) -> None:
    if filters == "saved":  # as a big store's snapshot does
        monkeypatch.setattr(bucket_index, "SAVE_FILTERS_FROM", 0)
    d = tmp_path / "s"
    old = os.umask(0o022)
    try:
        ids = build(d)
    finally:
        os.umask(old)
    assert stat.S_IMODE((d / SNAPSHOT_NAME).stat().st_mode) == 0o600  # like index.sqlite
    assert ((d / SNAPSHOT_NAME).stat().st_size > 34e6) == (filters == "saved")
    s = SqliteStore(d)
    assert s.opened_from == "snapshot"
    saved = answers(s, ids)
    s.close()  # nothing changed: the snapshot still holds and is not written again
    (d / SNAPSHOT_NAME).unlink()
    s = SqliteStore(d)
    assert s.opened_from == "tables"
    assert answers(s, ids) == saved
    assert saved[0][0] == {} and saved[0][100]  # evicted sets are gone, others found
    s.close()


def test_a_store_opened_from_its_snapshot_goes_on_as_one_rebuilt(tmp_path: Path) -> None:
    """Adds, a run sealed and merged, evictions after a snapshot open; then a crash: the
    first commit retired the snapshot, so the next open rebuilds from the tables."""
    d = tmp_path / "s"
    build(d)
    s = SqliteStore(d)
    assert s.opened_from == "snapshot"
    add_sets(s, range(3000, 6000))
    s.commit()
    assert not (d / SNAPSHOT_NAME).exists()  # retired with the first commit
    s.evict(cutoff_ms=80, limit=1000)
    s.commit()
    ids = range(6020)
    live = answers(s, ids)
    crash(s)
    s = SqliteStore(d)
    assert s.opened_from == "tables"
    assert answers(s, ids) == live
    assert live[0][50] == {} and live[0][5000]
    s.close()


def test_a_damaged_snapshot_is_ignored_with_a_warning(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "s"
    ids = build(d)
    path = d / SNAPSHOT_NAME
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="streamdedup.store.sqlite.snapshot"):
        s = SqliteStore(d)
    assert s.opened_from == "tables"
    assert "fails its checksum" in caplog.text
    rebuilt = answers(s, ids)
    s.close()  # a new, whole snapshot (the token in the tables was the damaged file's)
    s = SqliteStore(d)
    assert s.opened_from == "snapshot" and answers(s, ids) == rebuilt
    s.close()


def test_a_store_restored_from_an_older_copy_does_not_take_a_newer_snapshot(tmp_path: Path
                                                                            ) -> None:
    d = tmp_path / "s"
    ids = build(d)
    old = tmp_path / "old"
    shutil.copytree(d, old)
    s = SqliteStore(old)
    then = answers(s, ids)
    s.close()
    s = SqliteStore(d)
    add_sets(s, range(3000, 3400))
    s.commit()
    s.close()  # a newer snapshot, under another token
    for f in old.glob("index.sqlite*"):
        shutil.copy(f, d / f.name)
    s = SqliteStore(d)
    assert s.opened_from == "tables"
    assert answers(s, ids) == then
    s.close()


def test_no_snapshot_after_an_uncommitted_eviction_or_for_a_small_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "s"
    build(d)
    s = SqliteStore(d)
    add_sets(s, range(3000, 3100))
    s.commit()
    s.evict(cutoff_ms=2000, limit=10)  # taken out of the maps, not committed
    s.close()
    assert not (d / SNAPSHOT_NAME).exists()
    s = SqliteStore(d)
    assert s.opened_from == "tables" and s.probe(keys_of(100))
    monkeypatch.setattr(snapshot, "MIN_ENTRIES", 1 << 20)
    s.commit()
    s.close()
    assert not (d / SNAPSHOT_NAME).exists()


def test_store_stats_say_whether_the_snapshot_is_current(tmp_path: Path) -> None:
    from streamdedup.store.sqlite.maintenance import stats

    d = tmp_path / "s"
    build(d)
    found = stats(d)
    assert found["snapshot"] == "current"
    assert found["bytes"]["snapshot"] == (d / SNAPSHOT_NAME).stat().st_size > 0
    old = tmp_path / "old"
    shutil.copytree(d, old)
    s = SqliteStore(d)
    add_sets(s, range(3000, 3010))
    s.commit()  # retires it
    assert stats(d)["snapshot"] is None and stats(d)["bytes"]["snapshot"] == 0
    s.close()  # a new one, under a new token
    shutil.copy(old / SNAPSHOT_NAME, d / SNAPSHOT_NAME)
    assert stats(d)["snapshot"] == "stale"


def test_sets_read_in_pieces_at_open_are_every_set(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A store of more than ``_SETS_AT_ONCE`` (2**20) sets is read from its tables in
    pieces: none may fall between two (a set at a piece's edge lost, and the store then
    refused as damaged). Pieces of 7 sets here."""
    from streamdedup.store.sqlite import file

    d = tmp_path / "s"
    ids = build(d, 100)
    (d / SNAPSHOT_NAME).unlink()
    s = SqliteStore(d)
    whole = answers(s, ids)
    crash(s)
    monkeypatch.setattr(file, "_SETS_AT_ONCE", 7)
    s = SqliteStore(d)
    assert s.opened_from == "tables"
    assert answers(s, ids) == whole
    assert len(whole[1]) == 60  # sets 40 to 99 (0 to 39 left the window)
    s.close()


# --- the snapshot's edges a mutation sweep found unpinned (twenty-sixth session)


def one_set_closed(directory: Path) -> Path:
    """A store holding set 1, closed cleanly (so with its snapshot)."""
    s = SqliteStore(directory)
    timed_set(s, 1, 5)
    s.commit()
    s.close()
    return directory


def test_close_with_pending_writes_saves_committed_maps_only(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "s")
    timed_set(s, 1, 5)
    s.commit()
    timed_set(s, 2, 5)
    s.close()  # not committed: set 2 must go, and close must not raise
    import sqlite3
    raw = sqlite3.connect(tmp_path / "s" / "index.sqlite")
    assert raw.execute("SELECT set_id FROM sets").fetchall() == [(1,)]
    raw.close()
    s = SqliteStore(tmp_path / "s")
    assert s.opened_from == "snapshot"
    assert s.get_sets([1, 2]).keys() == {1}
    assert s.probe(band_keys(1) + band_keys(2)) == {1: 25}
    timed_set(s, 2, 5)  # numbered once: the store still opens after
    s.commit()
    s.close()
    SqliteStore(tmp_path / "s").close()


def test_first_commit_retires_the_snapshot_token(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    s = SqliteStore(one_set_closed(tmp_path / "s"))
    assert s.opened_from == "snapshot"
    monkeypatch.setattr(snapshot, "remove_snapshot", lambda d: None)  # killed before unlink
    timed_set(s, 2, 5)
    s.commit()
    assert snapshot.stored_token(s._conn) is None
    s._conn.close()
    s._release_lock()  # crash
    s = SqliteStore(tmp_path / "s")
    assert s.opened_from == "tables"
    assert s.probe(band_keys(2)) == {2: 25}
    s.close()


def test_a_changed_store_opened_from_snapshot_saves_a_new_one(tmp_path: Path) -> None:
    s = SqliteStore(one_set_closed(tmp_path / "s"))
    assert s.opened_from == "snapshot"
    timed_set(s, 2, 5)
    s.commit()
    s.close()
    s = SqliteStore(tmp_path / "s")
    assert s.opened_from == "snapshot"
    assert s.probe(band_keys(2)) == {2: 25}
    s.close()


def test_a_leftover_side_file_does_not_stop_snapshots(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "s")
    timed_set(s, 1, 5)
    s.commit()
    (tmp_path / "s" / (SNAPSHOT_NAME + ".new")).write_bytes(b"torn")
    s.close()
    assert SqliteStore(tmp_path / "s").opened_from == "snapshot"


def test_a_deleted_snapshot_file_does_not_break_a_commit(tmp_path: Path) -> None:
    (one_set_closed(tmp_path / "s") / SNAPSHOT_NAME).unlink()
    s = SqliteStore(tmp_path / "s")
    timed_set(s, 2, 5)
    s.commit()
    s.close()


def test_a_snapshot_write_failure_is_logged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:

    def full(*a: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(snapshot, "write_snapshot", full)
    s = SqliteStore(tmp_path / "s")
    timed_set(s, 1, 5)
    s.commit()
    with caplog.at_level(logging.WARNING):
        s.close()
    assert "no snapshot saved" in caplog.text
    assert SqliteStore(tmp_path / "s").opened_from == "tables"


@pytest.mark.parametrize("damage", ["arrays not a list", "no token", "trailing", "magic"])
def test_odd_snapshot_files_are_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        damage: str) -> None:
    import json

    from streamdedup.store.sqlite.maintenance import stats
    s = SqliteStore(tmp_path / "s")
    timed_set(s, 1, 5)
    s.commit()
    s.close()
    path = tmp_path / "s" / SNAPSHOT_NAME
    data = path.read_bytes()
    m = len(snapshot.MAGIC)
    n = int.from_bytes(data[m:m + 8], "little")
    header = json.loads(data[m + 8:m + 8 + n])
    body = data[m + 8 + n:]
    if damage == "arrays not a list":
        header["arrays"] = 5
    elif damage == "no token":
        header["tok"] = header.pop("token")
    if damage == "magic":
        path.write_bytes(b"X" + data[1:])
    else:
        h = json.dumps(header).encode()
        path.write_bytes(snapshot.MAGIC + len(h).to_bytes(8, "little") + h + body
                         + (b"\0" if damage == "trailing" else b""))
    if damage in ("magic", "no token"):
        assert stats(tmp_path / "s")["snapshot"] == "stale"
    s = SqliteStore(tmp_path / "s")
    assert s.opened_from == "tables" and s.probe(band_keys(1)) == {1: 25}
    s.close()
