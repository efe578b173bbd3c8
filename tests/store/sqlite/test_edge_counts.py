"""The SQLite store's edge counts (store/sqlite/edge_counts.py): read once, then added to, and
still exactly what counting the table would give when the cap is checked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from streamdedup.store.base import SetRecord
from streamdedup.store.sqlite import SqliteStore
from streamdedup.store.sqlite.edge_counts import EdgeCounts


def test_sqlite_edge_counts_kept_in_memory_crowd_a_set_as_counting_would(
        tmp_path: Path) -> None:
    """The SQLite store reads a set's edge count once and then adds to it: a rollback, and
    rows that were in the table already, must not make a set crowded a row too early."""
    store = SqliteStore(tmp_path / "store")
    store.add_edges(1, [(2, 0.9), (3, 0.9)], cap=4)  # set 1: 2 edges
    store.commit()
    store.add_edges(4, [(1, 0.9)], cap=4)  # 3, then taken back
    store.rollback()
    store.add_edges(5, [(1, 0.9)], cap=4)
    store.add_edges(6, [(1, 0.9)], cap=4)  # 4: at the cap, not over it
    assert store.neighbours(1) == [(2, 0.9), (3, 0.9), (5, 0.9), (6, 0.9)]
    store.add_edges(2, [(1, 0.95)], cap=4)  # both rows there: rewritten, nothing added
    assert store.neighbours(1) == [(2, 0.95), (3, 0.9), (5, 0.9), (6, 0.9)]
    assert store.neighbours(2) == [(1, 0.95)]
    store.add_edges(7, [(1, 0.9)], cap=4)  # the fifth
    assert store.neighbours(1) is None and store.neighbours(7) == [(1, 0.9)]
    store.commit()  # a crowded set's own rows go: the cap bounds the table, not only answers
    assert store._conn.execute("SELECT count(*) FROM edges WHERE set_id = 1").fetchone() == (0,)
    store.close()


def test_a_set_that_leaves_takes_its_edges_out_of_the_counts(tmp_path: Path) -> None:
    """Eviction deletes a set's edges in both directions: its neighbours are counted again."""
    store = SqliteStore(tmp_path / "store")
    store.add_set(SetRecord(6, 1, "six", 6), np.arange(5, dtype=np.uint64))
    store.add_edges(1, [(2, 0.9), (3, 0.9), (6, 0.9)], cap=4)
    store.add_edges(5, [(1, 0.9)], cap=4)  # set 1: 4 edges, at the cap
    store.commit()
    store.evict_set(6)  # set 1: 3
    store.add_edges(7, [(1, 0.9)], cap=4)  # 4 again: not crowded
    assert store.neighbours(1) == [(2, 0.9), (3, 0.9), (5, 0.9), (7, 0.9)]
    store.add_edges(8, [(1, 0.9)], cap=4)
    assert store.neighbours(1) is None
    store.close()


def test_a_write_that_fails_halfway_is_counted_again() -> None:
    """A statement that fails after the inserts (here: no crowded table) leaves counts that
    the caller's rollback takes back; they are read from the table again."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE edges (set_id INTEGER NOT NULL, other INTEGER NOT NULL, "
                 "sim REAL NOT NULL, PRIMARY KEY (set_id, other)) WITHOUT ROWID")
    counts = EdgeCounts()
    counts.write(conn, [(1, 2, 0.9)], cap=2)
    conn.commit()
    with pytest.raises(sqlite3.OperationalError, match="crowded"):
        counts.write(conn, [(1, 3, 0.9), (1, 4, 0.9)], cap=2)  # 3 edges: crowded, but fails
    conn.rollback()
    conn.execute("CREATE TABLE crowded (set_id INTEGER PRIMARY KEY)")
    counts.write(conn, [(1, 5, 0.9)], cap=2)  # 2: at the cap
    assert conn.execute("SELECT count(*) FROM crowded").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM edges").fetchone() == (2,)


def test_a_rollback_whose_reload_fails_leaves_no_count_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After an eviction a rollback reloads the maps from the tables; if that fails, the
    counts must already be gone (a review's sequence)."""
    store = SqliteStore(tmp_path / "store")
    store.add_set(SetRecord(9, 1, "nine", 9), np.arange(5, dtype=np.uint64))
    store.commit()
    store.add_edges(1, [(2, 0.9), (3, 0.9)], cap=2)
    store.evict_set(9)

    def fails(*_: object) -> None:
        raise OSError("disk gone")

    with monkeypatch.context() as m:
        m.setattr(store, "_load_maps", fails)
        with pytest.raises(OSError):
            store.rollback()
    store.add_edges(1, [(4, 0.9)], cap=2)  # the two edges before were taken back
    assert store.neighbours(1) == [(4, 0.9)]
    store.close()
