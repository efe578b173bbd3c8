"""The embedded default store: one SQLite file in a directory, one writer at a time.

The sketch parameters are a small key -> value map written once, so they live in a sqlitedict
table (JSON-encoded: a store file is data, never pickled code). Everything else uses the
sqlite3 module directly, because sqlitedict's model does not fit it: appending an id to a hot
bucket would rewrite an ever-growing value, and probes must read many keys in one query.

Durability: WAL journal with ``synchronous=FULL``: ``commit()`` returns once the batch is on
disk. Retention: ``evict`` deletes rows (documents by their time, sets by their newest time,
through partial indexes growing at the end) and marks the sets' bucket entries dead in memory,
deleting log rows left with no live set; a rolled-back eviction rebuilds the in-memory index
from the tables. The file's concerns (schema, one-writer lock, opening, damage) are in file.py.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sqlitedict import SqliteDict

import streamdedup.store.sqlite.snapshot as snapshot
from streamdedup.errors import StoreCorruptError, StoreError
from streamdedup.store.base import (
    DEFAULT_EDGE_CAP,
    DocRecord,
    Evicted,
    SetRecord,
    Store,
    split_held,
)
from streamdedup.store.payload import (
    decode_shingles,
    decode_text,
    encode_shingles,
    encode_text,
    is_text,
)
from streamdedup.store.shingle_cache import ShingleCache
from streamdedup.store.sqlite.bucket_index import BucketIndex
from streamdedup.store.sqlite.edge_counts import EdgeCounts
from streamdedup.store.sqlite.file import (
    DB_NAME,
    VERDICT,
    acquire_lock,
    blob_checksum,
    checked_verdict,
    chunks,
    decode_log_row,
    encode_log_row,
    file_bytes,
    next_set_number,
    open_db,
    os_problem,
    read_counters,
    rebuild_maps,
    refuse_a_broken_link,
    store_errors,
    verdict_checksum,
    write_counters,
)
from streamdedup.store.sqlite.reader import stored_params
from streamdedup.store.sqlite.set_numbers import SetNumbers

# A new set's row: bare (numbered by a document of an empty text), or with these values.
_SET_VALUES = "first_seq, first_id, parent, shingles_row, last_time"
_INSERT_BARE_SET = "INSERT INTO sets (set_no, set_id) VALUES (?, ?)"
_INSERT_SET = f"INSERT INTO sets (set_no, set_id, {_SET_VALUES}) VALUES (?, ?, ?, ?, ?, ?, ?)"
_SET_CACHE_SIZE = 200_000
_MEMBERS_CACHE_SIZE = 100_000
# A document's record as DocRecord's fields (get_doc and get_docs add their WHERE).
_DOC_SELECT = (f"SELECT d.doc_id, d.seq, s.set_id, {VERDICT}, d.time, v.checksum FROM docs d "
               "JOIN sets s ON s.set_no = d.set_no JOIN verdicts v ON v.row = d.verdict_row")


class SqliteStore(Store):
    """A store directory holding ``index.sqlite`` and a lock file."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.path = self.directory / DB_NAME
        self._shingle_cache = ShingleCache()
        self._shingler: Callable[[str], np.ndarray] | None = None  # see keep_texts
        self._set_cache: dict[int, SetRecord] = {}  # write-through: dropped on every write
        # A set's first members (no retention cutoff) and their limit: a document of a hot
        # cluster reads those of ~30 matched sets, one query each, 0.8 ms of its 5 ms.
        # Dropped for a set a document joins, whole when one leaves (rare), at rollback.
        self._members_cache: dict[int, tuple[int, list[tuple[int, str]]]] = {}
        self._edges = EdgeCounts()  # each set's edge count, read once (the cap)
        self._buckets = BucketIndex()
        self._numbers = SetNumbers()
        self._lock_fd = -1
        try:
            refuse_a_broken_link(self.directory)
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._lock_fd = acquire_lock(self.directory)
            # A failed open closes its connection; a good one is _load_maps' to keep.
            open_db(self.directory, self._load_maps)
        except OSError as exc:
            self._release_lock()
            raise StoreError(os_problem(self.directory, exc)) from exc
        except BaseException:
            self._release_lock()
            raise
        self._seq, self._clock = read_counters(self._conn)
        self._next_set = next_set_number(self._conn)  # never a number a version names
        self._evicting = False  # maps changed as a rollback cannot undo (evictions)
        self._unbucket: list[int] = []  # sets to take out of the buckets (``_flush``)
        self._store_id = self._load_store_id()

    # --- opening
    def _release_lock(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = -1

    def _number(self, set_id: int) -> int:
        """The set's number, numbering it now (a row without data) if it has none."""
        number = self._numbers.get(set_id)
        return self._number_new(set_id) if number is None else number

    def _number_new(self, set_id: int, values: tuple[Any, ...] = ()) -> int:
        """Number a set the map does not know and write its row (``values``: _SET_VALUES):
        the one place numbers are handed out, in arrival order (``set_numbers.py``: why)."""
        number = self._next_set
        self._conn.execute(_INSERT_SET if values else _INSERT_BARE_SET,
                           (number, set_id, *values))
        self._next_set += 1
        self._numbers.add(set_id, number)
        return number

    def _load_maps(self, conn: sqlite3.Connection | None = None) -> None:
        """The in-memory maps: as saved at the last clean close if nothing changed since
        (``store/sqlite/snapshot.py``), else rebuilt from the tables (seconds per million ads).
        ``conn``: the connection being opened (it becomes the store's)."""
        if conn is not None:
            self._conn = conn
        self._snapshot_token = snapshot.stored_token(self._conn)
        saved = snapshot.load_maps(self.directory, self._snapshot_token)
        self.opened_from = "tables" if saved is None else "snapshot"
        self._numbers, self._buckets = saved or rebuild_maps(self._conn, self.path)

    def _meta(self) -> SqliteDict:
        return SqliteDict(str(self.path), tablename="meta", encode=json.dumps,
                          decode=json.loads, flag="c", autocommit=False, journal_mode="WAL")

    # --- metadata
    def get_params(self) -> dict[str, Any] | None:
        # Read by SQL, not sqlitedict: opening it on a store without its table creates the
        # table, a write that waits for (and times out on) this connection's own writes.
        return stored_params(self._conn, self.path)

    def put_params(self, params: Mapping[str, Any]) -> None:
        # sqlitedict writes through its own connection, so what this one wrote is committed
        # first, as ``commit()`` does it: a bare commit left the in-memory set numbers to a
        # later rollback, which handed out a committed number again ("numbered twice").
        self.commit()
        with self._meta() as meta:
            meta["params"] = dict(params)
            meta.commit()

    def next_seq(self) -> int:
        self._seq += 1  # written to the counters table once per commit, not per document
        return self._seq

    def get_clock(self) -> int | None:
        return self._clock

    def put_clock(self, clock_ms: int) -> None:
        self._clock = clock_ms  # written with the commit, as seq

    # --- input positions
    @store_errors
    def put_positions(self, positions: Mapping[tuple[str, int], int]) -> None:
        self._conn.executemany(
            "INSERT INTO positions (topic, partition, next_offset) VALUES (?, ?, ?) "
            "ON CONFLICT (topic, partition) DO UPDATE SET next_offset = excluded.next_offset",
            [(t, p, off) for (t, p), off in positions.items()])

    @store_errors
    def get_positions(self) -> dict[tuple[str, int], int]:
        rows = self._conn.execute("SELECT topic, partition, next_offset FROM positions")
        return {(str(t), int(p)): int(off) for t, p, off in rows}

    def store_id(self) -> str:
        return self._store_id

    def _load_store_id(self) -> str:
        """Made with the store, committed at once (nothing else is pending): no rollback."""
        row = self._conn.execute("SELECT value FROM counters WHERE name = 'store_id'").fetchone()
        if row is None:
            row = (secrets.randbits(62),)
            self._conn.execute("INSERT INTO counters (name, value) VALUES ('store_id', ?)", row)
            self._conn.commit()
        return f"{int(row[0]):016x}"

    # --- documents
    @store_errors
    def get_doc(self, doc_id: str) -> DocRecord | None:
        row = self._conn.execute(f"{_DOC_SELECT} WHERE d.doc_id = ?", (doc_id,)).fetchone()
        return self._record(row) if row else None

    def _record(self, row: tuple[Any, ...]) -> DocRecord:
        doc_id, seq, set_id, verdict, time, checksum = row
        verdict = checked_verdict(self.path, doc_id, verdict, checksum)
        return DocRecord(doc_id, seq, set_id, verdict, time)

    @store_errors
    def get_docs(self, doc_ids: Iterable[str]) -> dict[str, DocRecord]:
        out: dict[str, DocRecord] = {}
        # Keyed by the ids as asked: the column holds text, so an id given as another type
        # (5) is found as get_doc finds it ('5') and must be handed back under its own key.
        asked = {str(d): d for d in doc_ids}
        for chunk in chunks(list(asked.values())):
            marks = ",".join("?" * len(chunk))
            for row in self._conn.execute(f"{_DOC_SELECT} WHERE d.doc_id IN ({marks})", chunk):
                out[asked.get(row[0], row[0])] = self._record(row)
        return out

    @store_errors
    def put_doc(self, doc: DocRecord) -> None:
        self._members_cache.pop(doc.set_id, None)
        row = self._conn.execute(
            "INSERT INTO verdicts (verdict, checksum) VALUES (?, ?)",
            (doc.verdict, verdict_checksum(doc.verdict))).lastrowid
        number = self._number(doc.set_id)
        insert = ("INSERT INTO docs (doc_id, seq, set_no, verdict_row, time) "
                  "VALUES (?, ?, ?, ?, ?)")
        values = (doc.doc_id, doc.seq, number, row, doc.time)
        try:  # a new id, nearly always: one index lookup instead of a delete and an insert
            self._conn.execute(insert, values)
        except sqlite3.IntegrityError:  # an upsert: the old row goes first (its verdict stays
            self.delete_doc(doc.doc_id)  # as the old version's)
            self._conn.execute(insert, values)
        if doc.time is not None:
            self._set_cache.pop(doc.set_id, None)
            self._conn.execute(
                "UPDATE sets SET last_time = ? WHERE set_no = ? AND evicted = 0 AND first_seq "
                "IS NOT NULL AND (last_time IS NULL OR last_time < ?)",
                (doc.time, number, doc.time))

    @store_errors
    def delete_doc(self, doc_id: str) -> None:
        self._members_cache.clear()
        # Into ``versions`` only when replaced (a row per document: ~15 us each, and a page)
        self._conn.execute("INSERT OR IGNORE INTO versions (doc_id, set_no, verdict_row, "
                           "set_id) SELECT d.doc_id, d.set_no, d.verdict_row, s.set_id FROM "
                           "docs d LEFT JOIN sets s ON s.set_no = d.set_no WHERE d.doc_id = ?",
                           (doc_id,))
        self._conn.execute("DELETE FROM docs WHERE doc_id = ?", (doc_id,))

    @store_errors
    def get_version(self, doc_id: str, set_id: int) -> str | None:
        # By set id: its set may have left the window (with retention, so with a clock)
        if (number := self._numbers.get(set_id)) is None and self._clock is None:
            return None  # a set never seen: no version names it (a query an edit saved)
        for table, column, key in (("versions", "set_id", set_id), ("docs", "set_no", number)):
            row = None if key is None else self._conn.execute(
                f"SELECT {VERDICT}, v.checksum FROM {table} x JOIN verdicts v ON v.row = "
                f"x.verdict_row WHERE x.doc_id = ? AND x.{column} = ?", (doc_id, key)).fetchone()
            if row:
                return checked_verdict(self.path, doc_id, row[0], row[1])
        return None

    @store_errors
    def members(self, set_id: int, limit: int, since: int | None = None
                ) -> list[tuple[int, str]]:
        cached = self._members_cache.get(set_id) if since is None else None
        if cached is not None and cached[0] == limit:
            return list(cached[1])
        number = self._numbers.get(set_id)
        if number is None:
            return []
        rows = self._conn.execute(
            "SELECT seq, doc_id FROM docs WHERE set_no = ? AND (? IS NULL OR time IS NULL OR "
            "time >= ?) ORDER BY seq LIMIT ?", (number, since, since, limit),
        ).fetchall()
        found = [(int(seq), str(doc_id)) for seq, doc_id in rows]
        if since is None:
            if len(self._members_cache) >= _MEMBERS_CACHE_SIZE:
                self._members_cache.clear()
            self._members_cache[set_id] = (limit, list(found))
        return found

    # --- sets
    @store_errors
    def get_sets(self, set_ids: Iterable[int]) -> dict[int, SetRecord]:
        cache = self._set_cache
        out, ids = split_held(set_ids, cache.get)
        if not ids:  # all held (the detector asks ~3 times per document): nothing to read
            return out
        for chunk in chunks(list(self._numbers.get_many(ids).values())):
            marks = ",".join("?" * len(chunk))
            for row in self._conn.execute(
                "SELECT set_id, first_seq, first_id, parent, last_time, children, evicted "
                f"FROM sets WHERE set_no IN ({marks}) AND first_seq IS NOT NULL", chunk,
            ):
                set_id, first_seq, first_id, parent, last_time, children, evicted = row
                out[set_id] = cache[set_id] = SetRecord(
                    set_id, first_seq, first_id, parent, last_time, children, bool(evicted))
        if len(cache) > _SET_CACHE_SIZE:
            cache.clear()  # simple bound; records are re-read on demand
        return out

    @store_errors
    def add_set(self, record: SetRecord, shingles: np.ndarray, text: str | None = None
                ) -> None:
        self._set_cache.pop(record.set_id, None)
        number = self._numbers.get(record.set_id)
        state = None if number is None else self._conn.execute(
            "SELECT first_seq IS NOT NULL, evicted FROM sets WHERE set_no = ?", (number,)
        ).fetchone()
        if state is not None and state[0] and not state[1]:
            return  # a set is written once; its first document stays its first
        blob = (encode_text(text) if text is not None and self._shingler is not None
                else encode_shingles(shingles))
        row = self._conn.execute(
            "INSERT INTO shingles (data, checksum) VALUES (?, ?)", (blob, blob_checksum(blob))
        ).lastrowid
        self._shingle_cache.put(record.set_id, shingles)  # verified against soon, as a rule
        if state is not None and state[1]:  # a tombstone comes back: its cluster as it was
            self._conn.execute(
                "UPDATE sets SET evicted = 0, shingles_row = ?, last_time = ? WHERE set_no = ?",
                (row, record.last_time, number))
            return
        values = (record.first_seq, record.first_id, record.parent, row, record.last_time)
        if number is None:
            self._number_new(record.set_id, values)
            # As read back (children 0, not evicted): the verdict reads it at once.
            self._set_cache[record.set_id] = SetRecord(
                record.set_id, record.first_seq, record.first_id, record.parent,
                record.last_time)
        else:  # numbered by a document of an empty text, or an upsert before: fill it in
            self._conn.execute(
                "UPDATE sets SET first_seq = ?, first_id = ?, parent = ?, shingles_row = ?, "
                "last_time = ? WHERE set_no = ?", (*values, number))

    @store_errors
    def _write_parent(self, set_id: int, parent: int) -> None:
        self._set_cache.pop(set_id, None)
        number = self._numbers.get(set_id)
        if number is not None:
            self._conn.execute("UPDATE sets SET parent = ? WHERE set_no = ? AND first_seq IS "
                               "NOT NULL", (parent, number))

    @store_errors
    def _add_children(self, set_id: int, delta: int) -> int:
        self._set_cache.pop(set_id, None)
        number = self._numbers.get(set_id)
        if number is None:
            return 0
        row = self._conn.execute("UPDATE sets SET children = children + ? WHERE set_no = ? "
                                 "RETURNING children", (delta, number)).fetchone()
        return 0 if row is None else int(row[0])

    # --- retention
    @store_errors
    def untimed_documents(self) -> int:
        """Documents judged without retention: no time, so no window ever lets them go."""
        return int(self._conn.execute("SELECT COUNT(*) FROM docs WHERE time IS NULL").fetchone()[0])

    @store_errors
    def evict(self, cutoff_ms: int, limit: int) -> Evicted:
        docs = [d for (d,) in self._conn.execute(
            "SELECT doc_id FROM docs WHERE time < ? ORDER BY time LIMIT ?", (cutoff_ms, limit))]
        for doc_id in docs:
            self.forget_doc(doc_id)
        sets = [s for (s,) in self._conn.execute(
            "SELECT set_id FROM sets WHERE last_time < ? ORDER BY last_time LIMIT ?",
            (cutoff_ms, limit))]
        for set_id in sets:
            self.evict_set(set_id)
        # Log rows kept by a few long-lived sets: those sets go to this commit's row.
        self._flush()
        for row in self._buckets.sparse_rows(4):
            self._evicting = True
            found = self._conn.execute(
                "SELECT set_ids, sizes, counts, keys FROM bucket_log WHERE row = ?", (row,)
            ).fetchone()
            if found is not None:
                self._buckets.relog(row, decode_log_row(*found))
            self._conn.execute("DELETE FROM bucket_log WHERE row = ?", (row,))
        return Evicted(len(docs), len(sets))

    @store_errors
    def forget_doc(self, doc_id: str) -> None:
        self._members_cache.clear()
        self._evicting = True
        self._conn.execute(
            "DELETE FROM verdicts WHERE row IN (SELECT verdict_row FROM versions WHERE doc_id "
            "= ? UNION SELECT verdict_row FROM docs WHERE doc_id = ?)", (doc_id, doc_id))
        self._conn.execute("DELETE FROM versions WHERE doc_id = ?", (doc_id,))
        self._conn.execute("DELETE FROM docs WHERE doc_id = ?", (doc_id,))

    def _drop_set(self, set_id: int) -> None:
        self._evicting = True
        self._set_cache.pop(set_id, None)
        self._shingle_cache.drop(set_id)
        number = self._numbers.get(set_id)
        if number is None:
            return
        for (doc_id,) in self._conn.execute(
                "SELECT doc_id FROM docs WHERE set_no = ?", (number,)).fetchall():
            self.forget_doc(doc_id)
        self._conn.execute("DELETE FROM shingles WHERE row = (SELECT shingles_row FROM sets "
                           "WHERE set_no = ?)", (number,))
        self._conn.execute("UPDATE sets SET shingles_row = NULL WHERE set_no = ?", (number,))
        self._unbucket.append(set_id)  # batched: one pass over the index for many sets
        others = [o for (o,) in self._conn.execute(
            "SELECT other FROM edges WHERE set_id = ?", (set_id,))]
        if self._crowded([set_id]):  # its own rows went when it was crowded, not the others'
            others += [o for (o,) in self._conn.execute(  # to it: they named it after it
                "SELECT set_id FROM edges WHERE other = ?", (set_id,))]  # left (a scan: rare)
        self._conn.execute("DELETE FROM edges WHERE set_id = ?", (set_id,))
        self._conn.executemany("DELETE FROM edges WHERE set_id = ? AND other = ?",
                               [(o, set_id) for o in others])
        self._edges.forget([set_id, *others])
        self._conn.execute("DELETE FROM crowded WHERE set_id = ?", (set_id,))

    def _mark_evicted(self, set_id: int) -> None:
        self._set_cache.pop(set_id, None)
        self._conn.execute("UPDATE sets SET evicted = 1, last_time = NULL WHERE set_no = ?",
                           (self._numbers.get(set_id),))

    def _delete_set(self, set_id: int) -> None:
        self._evicting = True  # the number leaves the map now; only a reload brings it back
        self._set_cache.pop(set_id, None)
        self._conn.execute("DELETE FROM sets WHERE set_no = ?", (self._numbers.get(set_id),))
        self._numbers.remove(set_id)

    @store_errors
    def get_shingles(self, set_ids: Iterable[int]) -> dict[int, np.ndarray]:
        cache = self._shingle_cache
        out, missing = cache.split(set_ids)
        for chunk in chunks(list(self._numbers.get_many(missing).values())):
            marks = ",".join("?" * len(chunk))
            for set_id, blob, checksum in self._conn.execute(
                "SELECT s.set_id, b.data, b.checksum FROM sets s JOIN shingles b "
                f"ON b.row = s.shingles_row WHERE s.set_no IN ({marks})", chunk
            ):
                if blob_checksum(blob) != checksum:  # SQLite has no page checksums of its own
                    raise StoreCorruptError(
                        f"{self.path}: shingle set {set_id} fails its checksum (damaged file)"
                    )
                out[set_id] = cache.put(set_id, self._decode(set_id, blob))
        return out

    def keep_texts(self, shingler: Callable[[str], np.ndarray]) -> None:
        self._shingler = shingler

    def _decode(self, set_id: int, blob: bytes) -> np.ndarray:
        """A set's hashes from its payload: stored hashes, or its text shingled again."""
        if not is_text(blob):
            return decode_shingles(blob)
        if self._shingler is None:
            raise StoreError(f"{self.path}: set {set_id} is kept as text; reading it takes "
                             "the detector's shingler (Store.keep_texts)")
        try:
            return self._shingler(decode_text(blob))
        except ValueError as exc:  # the checksum passed, so this is not damage: a bug
            raise StoreCorruptError(f"{self.path}: set {set_id}: {exc}") from exc

    @store_errors
    def add_edges(self, set_id: int, edges: Sequence[tuple[int, float]],
                  cap: int = DEFAULT_EDGE_CAP) -> None:
        if not edges:
            return
        ends = [set_id, *(o for o, _ in edges)]
        crowded = self._crowded(ends)
        rows = [(a, b, sim) for a, b, sim in
                [(set_id, o, s) for o, s in edges] + [(o, set_id, s) for o, s in edges]
                if a not in crowded]
        self._edges.write(self._conn, rows, cap)

    def _crowded(self, set_ids: Sequence[int]) -> set[int]:
        out: set[int] = set()
        for chunk in chunks(list(dict.fromkeys(set_ids))):
            marks = ",".join("?" * len(chunk))
            out.update(a for (a,) in self._conn.execute(
                f"SELECT set_id FROM crowded WHERE set_id IN ({marks})", chunk))
        return out

    @store_errors
    def neighbours(self, set_id: int) -> list[tuple[int, float]] | None:
        if self._crowded([set_id]):
            return None
        rows = self._conn.execute(
            "SELECT other, sim FROM edges WHERE set_id = ? ORDER BY other", (set_id,)
        ).fetchall()
        return [(int(o), float(s)) for o, s in rows]

    # --- buckets
    def probe(self, keys: Sequence[int], sizes: tuple[int, int] | None = None
              ) -> dict[int, int]:
        self._flush()
        return self._buckets.probe(keys, sizes)

    def probe_many(self, queries: Sequence[Sequence[int]],
                   sizes: Sequence[tuple[int, int]]) -> list[dict[int, int]]:
        self._flush()
        return self._buckets.probe_many(queries, sizes)

    def add_to_buckets(self, keys: Sequence[int], set_id: int, size: int) -> None:
        self._flush()
        self._buckets.add(keys, set_id, size)

    def _flush(self) -> None:
        """Take the evicted sets out of the buckets, deleting log rows left empty."""
        if self._unbucket:
            for row in self._buckets.remove(self._unbucket):
                self._conn.execute("DELETE FROM bucket_log WHERE row = ?", (row,))
            self._unbucket = []

    # --- lifecycle
    def commit(self) -> None:
        """One transaction: everything written since the last commit, the bucket entries
        added as one log row; the in-memory index takes them as committed only after."""
        try:
            self._flush()
            pending = self._buckets.pending()
            log_row = None
            if pending.keys.size:
                blobs = encode_log_row(pending)
                log_row = self._conn.execute(
                    "INSERT INTO bucket_log (set_ids, sizes, counts, keys, checksum) "
                    "VALUES (?, ?, ?, ?, ?)", (*blobs, blob_checksum(b"".join(blobs))),
                ).lastrowid
            write_counters(self._conn, self._seq, self._clock)
            if self._snapshot_token is not None:  # the tables change: it describes them no more
                snapshot.forget_token(self._conn)
            self._conn.commit()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot commit to {self.path}: {exc}") from exc
        if self._snapshot_token is not None:
            self._snapshot_token = None
            snapshot.remove_snapshot(self.directory)
        self._buckets.commit(log_row)
        self._numbers.commit()
        self._evicting = False

    def rollback(self) -> None:
        try:
            self._conn.rollback()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot roll back {self.path}: {exc}") from exc
        self._unbucket = []
        # The caches first: a reload of the maps that fails must not leave them describing
        # writes the rollback took back.
        self._set_cache.clear()
        self._members_cache.clear()
        self._edges.clear()
        self._shingle_cache.clear()
        if self._evicting:  # removals are not undone in memory: rebuild from the tables
            self._load_maps()
            self._evicting = False
        else:
            self._buckets.rollback()
            self._numbers.rollback()
        # The numbers handed out since the commit come again: nothing carrying them was
        # emitted (verdicts leave after the commit), so ``seq`` stays the arrival number, the
        # same after a fault as in a run without one.
        self._seq, self._clock = read_counters(self._conn)

    def close(self) -> None:
        if self._lock_fd < 0:
            return
        try:
            self._conn.rollback()
            self._save_snapshot()
            self._conn.close()
        finally:
            self._release_lock()

    def _save_snapshot(self) -> None:
        """Save the maps for the next open, unless the saved ones still hold, the store is
        small, or an eviction was rolled back (the maps then differ from the tables)."""
        if ((self._snapshot_token is not None and self.opened_from == "snapshot")
                or self._evicting or len(self._buckets) < snapshot.MIN_ENTRIES):
            return
        self._buckets.rollback()
        self._numbers.rollback()
        snapshot.save_maps(self._conn, self.directory, self._numbers, self._buckets)

    @store_errors
    def stats(self) -> dict[str, int]:
        def count(table: str) -> int:
            return int(self._conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

        self._flush()
        return {"documents": count("docs"), "sets": count("sets WHERE first_seq IS NOT NULL"),
                "bucket_entries": len(self._buckets), "bytes": file_bytes(self.directory)}
