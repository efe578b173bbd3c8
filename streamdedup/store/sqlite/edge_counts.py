"""Each set's number of rows in the SQLite store's ``edges`` table, counted once and then
kept: what the edge cap is checked against.

Why: a set past the cap (256) becomes crowded and keeps no edges, so every insert must know
the touched sets' counts. Counting the rows of every touched set after each insert was the
largest single store cost of a hot cluster (a variant matching ~30 sets of up to 256 edges
reads up to ~7,700 index entries: 9 % of the soak's last minute in py-spy; `add_edges` 7.9
-> 5.4 s over 59,423 of its messages). The counts are those of the transaction the store is
in: cleared at rollback, dropped for sets that leave, and recounted past a size bound.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable

from streamdedup.store.sqlite.file import chunks

MAX_SETS = 500_000  # counts kept (~40 MB); past it they are read again on demand


class EdgeCounts:
    def __init__(self) -> None:
        self._counts: dict[int, int] = {}

    def write(self, conn: sqlite3.Connection, rows: list[tuple[int, int, float]],
              cap: int) -> None:
        """Insert ``rows`` (set, other, similarity) and mark crowded every set they take
        past ``cap`` edges. The rows are new in a consistent store (a set's edges leave with
        it); if some were there all the same, they are written as before and their sets
        counted again."""
        try:
            self._write(conn, rows, cap)
        except BaseException:
            self._counts.clear()  # a statement may have failed halfway
            raise

    def _write(self, conn: sqlite3.Connection, rows: list[tuple[int, int, float]],
               cap: int) -> None:
        counts = self._counts
        if len(counts) > MAX_SETS:
            counts.clear()
        before = conn.total_changes
        conn.executemany("INSERT OR IGNORE INTO edges (set_id, other, sim) VALUES (?, ?, ?)",
                         rows)
        added = Counter(a for a, _, _ in rows)
        if conn.total_changes - before != len(rows):
            conn.executemany(
                "INSERT OR REPLACE INTO edges (set_id, other, sim) VALUES (?, ?, ?)", rows)
            self.forget(added)
        unknown = sorted(a for a in added if a not in counts)
        for a, n in added.items():
            if a in counts:
                counts[a] += n
        for chunk in chunks(unknown):  # counted after the insert: the new rows included
            marks = ",".join("?" * len(chunk))
            counts.update(conn.execute(f"SELECT set_id, count(*) FROM edges WHERE set_id IN "
                                       f"({marks}) GROUP BY set_id", chunk))
        for a in sorted(a for a in added if counts[a] > cap):
            conn.execute("INSERT OR IGNORE INTO crowded (set_id) VALUES (?)", (a,))
            conn.execute("DELETE FROM edges WHERE set_id = ?", (a,))
            counts[a] = 0

    def forget(self, set_ids: Iterable[int]) -> None:
        """These sets' rows changed outside ``write``: count them again when next met."""
        for s in set_ids:
            self._counts.pop(s, None)

    def clear(self) -> None:
        self._counts.clear()
