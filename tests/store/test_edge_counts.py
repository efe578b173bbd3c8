"""The SQLite store's edge counts (store/edge_counts.py): read once, then added to, and
still exactly what counting the table would give when the cap is checked."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from streamdedup.store.base import SetRecord
from streamdedup.store.sqlite import SqliteStore


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
