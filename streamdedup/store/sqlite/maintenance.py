"""Administering a SQLite store from outside the detector: stats, a full integrity check,
compaction, an export and a backup, for ``streamdedup store``.

Stats, verify and export read through a read-only connection that takes no writer lock, so
they run beside a working consumer (WAL lets a reader see the last commit while the writer
goes on). Compact rewrites the file (``VACUUM``), so it takes the writer's lock and says who
holds it when it cannot.

Opening a store checks little on purpose (``PRAGMA quick_check`` and the bucket log's
checksums: a million-ad store must open in seconds); ``verify`` is the full check an
operator runs on demand: SQLite's ``integrity_check``, every shingle blob against its
checksum, every bucket-log row, and the references between documents, their sets and
verdicts, versions and verdicts, and cluster parents (edges and crowded marks are not
checked against the sets).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import streamdedup.store.sqlite.snapshot as snapshot
from streamdedup.errors import ConfigError, StoreCorruptError, StoreError
from streamdedup.store.base import missing_params
from streamdedup.store.maintenance import format_time, verdict_problems
from streamdedup.store.payload import valid_payload
from streamdedup.store.sqlite.file import (
    DB_NAME,
    VERDICT,
    acquire_lock,
    blob_checksum,
    check_schema,
    checked_verdict,
    checksum_column,
    decode_log_row,
    disk_full,
    file_bytes,
    os_problem,
    verdict_text,
)
from streamdedup.store.sqlite.reader import no_store, read_only, stored_params

_CHECKPOINT_TRIES = 10  # seconds compact waits for readers to let go of the old pages


@contextmanager
def reading(directory: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the store in ``directory``, held on one snapshot (one read
    transaction) until the block ends, so a consumer committing meanwhile cannot make its
    tables disagree with each other. While it is held the writer's WAL cannot be folded back
    into the file, so the WAL grows by what the consumer writes meanwhile."""
    with read_only(directory) as conn:
        conn.execute("BEGIN")
        check_schema(conn, Path(directory) / DB_NAME)  # an upgradable one is read as it is
        yield conn


def stats(directory: Path) -> dict[str, Any]:
    """Counts and sizes; bytes per document is what the retention and compaction work on."""
    with reading(directory) as conn:
        def maybe(sql: str) -> int | None:
            row = conn.execute(sql).fetchone()
            return None if row is None or row[0] is None else int(row[0])

        def one(sql: str) -> int:
            return int(conn.execute(sql).fetchone()[0] or 0)

        documents = one("SELECT count(*) FROM docs")
        size = file_bytes(directory)
        params = stored_params(conn, Path(directory) / DB_NAME)
        store_id = one("SELECT value FROM counters WHERE name = 'store_id'")
        state, snapshot_bytes = snapshot.describe(Path(directory), snapshot.stored_token(conn))
        return {
            "store": str(directory),
            "store_id": f"{store_id:016x}" if store_id else None,
            "documents": documents,
            # Every (id, text) pair judged, as Redis counts them: the ``versions`` rows of
            # replaced texts and each document's current one (a store written before the
            # eighth session has a row for that too).
            "versions": one("SELECT count(*) FROM versions") + one(
                "SELECT count(*) FROM docs d WHERE NOT EXISTS (SELECT 1 FROM versions v "
                "WHERE v.doc_id = d.doc_id AND v.set_no = d.set_no)"),
            "distinct_sets": one("SELECT count(*) FROM sets WHERE first_seq IS NOT NULL "
                                 "AND evicted = 0"),
            "tombstones": one("SELECT count(*) FROM sets WHERE evicted = 1"),
            "clock": format_time(maybe("SELECT value FROM counters WHERE name = 'clock'")),
            "oldest_document": format_time(maybe("SELECT min(time) FROM docs")),
            "edges": one("SELECT count(*) FROM edges"),
            "crowded_sets": one("SELECT count(*) FROM crowded"),
            "bucket_log_rows": one("SELECT count(*) FROM bucket_log"),
            "bucket_entries": one("SELECT sum(length(keys)) FROM bucket_log") // 8,
            "last_seq": one("SELECT value FROM counters WHERE name = 'seq'"),
            "input_partitions": one("SELECT count(*) FROM positions"),
            "snapshot": state,
            "bytes": {
                "file": size,
                "per_document": round(size / documents) if documents else 0,
                "verdicts": one("SELECT sum(length(verdict)) FROM verdicts"),
                "shingles": one("SELECT sum(length(data)) FROM shingles"),
                "bucket_log": one("SELECT sum(length(set_ids) + length(sizes) + length(counts)"
                                  " + length(keys)) FROM bucket_log"),
                "snapshot": snapshot_bytes,
            },
            "params": params,
        }


def verify(directory: Path, progress: Callable[[str], None] = lambda _m: None) -> list[str]:
    """Every problem found (empty: the store is sound)."""
    problems: list[str] = []
    with reading(directory) as conn:
        progress("SQLite integrity_check (every page and index)")
        problems += [f"sqlite: {row[0]}" for row in conn.execute("PRAGMA integrity_check")
                     if row[0] != "ok"]
        try:  # what stats and every opening read first (Redis's verify checks them too)
            if stored_params(conn, Path(directory) / DB_NAME) is None and (
                    held := int(conn.execute("SELECT count(*) FROM docs").fetchone()[0])):
                problems.append(missing_params(held))
        except StoreCorruptError as exc:
            problems.append(str(exc))
        progress("shingle blobs against their checksums")
        for row, data, checksum in conn.execute("SELECT row, data, checksum FROM shingles"):
            if blob_checksum(data) != checksum:
                problems.append(f"shingles row {row}: fails its checksum")
            elif not valid_payload(data):
                problems.append(f"shingles row {row}: neither sorted 64-bit hashes nor text")
        sets = {int(set_id): (first_seq, parent, shingles_row) for set_id, first_seq, parent,
                shingles_row in conn.execute(
                    "SELECT set_id, first_seq, parent, shingles_row FROM sets")}
        # Retention: evicted sets' entries stay in the log until their row goes.
        evicting = conn.execute("SELECT 1 FROM counters WHERE name = 'clock'").fetchone()
        blobs = {int(r) for (r,) in conn.execute("SELECT row FROM shingles")}
        tombstones = {int(r) for (r,) in conn.execute(
            "SELECT set_id FROM sets WHERE evicted = 1")}
        progress("bucket log rows")
        for row, *parts, checksum in conn.execute(
                "SELECT row, set_ids, sizes, counts, keys, checksum FROM bucket_log"):
            if blob_checksum(b"".join(parts)) != checksum:
                problems.append(f"bucket log row {row}: fails its checksum")
                continue
            try:
                log = decode_log_row(*parts)
            except ValueError as exc:
                problems.append(f"bucket log row {row}: {exc}")
                continue
            unknown = [int(s) for s in log.set_ids.tolist()
                       if sets.get(int(s), (None,))[0] is None]
            if unknown and not evicting:
                problems.append(f"bucket log row {row}: names {len(unknown)} set(s) without "
                                f"shingles, e.g. {unknown[0]}")
        progress("sets and clusters")
        for set_id, (first_seq, parent, shingles_row) in sets.items():
            if first_seq is None:
                continue  # numbers a set of an empty text: nothing else to hold
            if shingles_row is None and set_id in tombstones:
                pass  # evicted; its children keep it
            elif shingles_row not in blobs:
                problems.append(f"set {set_id}: its shingles row {shingles_row} is missing")
            if parent is not None and sets.get(int(parent), (None,))[0] is None:
                problems.append(f"set {set_id}: its cluster parent {parent} is not a set")
        problems += _cycles(sets)
        problems += _retention_problems(conn)
        problems += _first_document_problems(conn, bool(evicting))
        progress("documents and verdicts")
        numbers = {int(n) for (n,) in conn.execute("SELECT set_no FROM sets")}
        last_seq = int((conn.execute("SELECT value FROM counters WHERE name = 'seq'")
                        .fetchone() or (0,))[0])
        for doc_id, seq, set_no, verdict, checksum in conn.execute(
                f"SELECT d.doc_id, d.seq, d.set_no, {VERDICT}, {checksum_column(conn)} "
                "FROM docs d LEFT JOIN verdicts v ON v.row = d.verdict_row"):
            if verdict is None:
                problems.append(f"document {doc_id!r}: its verdict row is missing")
                continue
            verdict = verdict_text(verdict, checksum)
            if verdict is None:
                problems.append(f"document {doc_id!r}: its verdict fails its checksum")
                continue
            if set_no not in numbers:
                problems.append(f"document {doc_id!r}: its set number {set_no} is missing")
            found, parsed = verdict_problems(doc_id, seq, verdict)
            problems += found
            if parsed is None:
                continue
            if seq > last_seq:
                problems.append(f"document {doc_id!r}: seq {seq} is past the counter "
                                f"{last_seq} (a later document would reuse it)")
        missing = int(conn.execute(
            "SELECT count(*) FROM versions x LEFT JOIN verdicts v ON v.row = x.verdict_row "
            "WHERE v.row IS NULL").fetchone()[0])
        if missing:
            problems.append(f"{missing} version(s) point to a missing verdict row")
    return problems


def _first_document_problems(conn: sqlite3.Connection, evicting: bool) -> list[str]:
    """A set's first document (its seq picks the cluster root that survives a merge, its id
    names the cluster in verdicts) against the documents: none of the set's is older, and
    in a store without retention, where no document ever leaves, it is one of the set's
    (current, or a replaced version) with that seq. A flipped bit there was the one damage
    the survey still found no way to see (RELIABILITY.md)."""
    problems = [
        f"set {set_id}: its first document's seq {first_seq} is after its document with "
        f"seq {oldest}"
        for set_id, first_seq, oldest in conn.execute(
            "SELECT s.set_id, s.first_seq, min(d.seq) FROM sets s JOIN docs d "
            "ON d.set_no = s.set_no WHERE s.first_seq IS NOT NULL GROUP BY s.set_no "
            "HAVING min(d.seq) < s.first_seq")]
    if evicting:
        return problems
    with_versions = {int(n) for (n,) in conn.execute("SELECT DISTINCT set_no FROM versions")}
    for set_no, set_id, first_id, first_seq, seq, replaced, current in conn.execute(
            "SELECT s.set_no, s.set_id, s.first_id, s.first_seq, d.seq, x.doc_id, "
            "EXISTS (SELECT 1 FROM docs o WHERE o.set_no = s.set_no) FROM sets s "
            "LEFT JOIN docs d ON d.doc_id = s.first_id AND d.set_no = s.set_no "
            "LEFT JOIN versions x ON x.doc_id = s.first_id AND x.set_no = s.set_no "
            "WHERE s.first_seq IS NOT NULL"):
        if not current and set_no not in with_versions:
            continue  # no document names the set (written by hand): nothing to compare
        if seq is None and replaced is None:
            problems.append(f"set {set_id}: its first document {first_id!r} is not one of "
                            f"its documents")
        elif replaced is None and seq != first_seq:
            problems.append(f"set {set_id}: its first document {first_id!r} has seq {seq}, "
                            f"the set says {first_seq}")
    return problems


def _retention_problems(conn: sqlite3.Connection) -> list[str]:
    """Child counts equal to the sets that name each as parent, no tombstone without a
    child or with documents, and no document newer than its set's newest time."""
    problems = []
    named = dict(conn.execute(
        "SELECT parent, count(*) FROM sets WHERE parent != set_id AND first_seq IS NOT NULL "
        "GROUP BY parent").fetchall())
    for set_id, children in conn.execute(
            "SELECT set_id, children FROM sets WHERE first_seq IS NOT NULL"):
        if children != named.get(set_id, 0):
            problems.append(f"set {set_id}: counts {children} children, "
                            f"{named.get(set_id, 0)} name it")
    for (set_id,) in conn.execute("SELECT set_id FROM sets WHERE evicted = 1 AND children = 0"):
        problems.append(f"set {set_id}: a tombstone without children (should have gone)")
    for doc_id, set_id in conn.execute(
            "SELECT d.doc_id, s.set_id FROM docs d JOIN sets s ON s.set_no = d.set_no WHERE "
            "s.evicted = 1 OR (d.time IS NOT NULL AND s.first_seq IS NOT NULL AND "
            "(s.last_time IS NULL OR d.time > s.last_time))"):
        problems.append(f"document {doc_id!r}: newer than its set {set_id}'s newest time, or "
                        f"in an evicted set")
    return problems


def _cycles(sets: dict[int, tuple[Any, Any, Any]]) -> list[str]:
    """Cluster parent chains that loop (union-find must always reach a root)."""
    problems: list[str] = []
    done: set[int] = set()
    for start in sets:
        path: list[int] = []
        on_path: set[int] = set()
        node: int | None = start
        while node is not None and node not in done:
            if node in on_path:
                problems.append(f"set {node}: its cluster parents loop")
                break
            path.append(node)
            on_path.add(node)
            record = sets.get(node)
            parent = None if record is None or record[1] is None else int(record[1])
            node = None if parent == node else parent
        done.update(path)
    return problems


def export(directory: Path, out: TextIO) -> int:
    """Every document's stored verdict, one JSON object per line, in seq order (the order
    the store judged them); older versions of replaced ids are not documents any more."""
    count = 0
    path = Path(directory) / DB_NAME
    with reading(directory) as conn:
        for doc_id, verdict, checksum in conn.execute(
                f"SELECT d.doc_id, {VERDICT}, {checksum_column(conn)} FROM docs d JOIN verdicts v "
                "ON v.row = d.verdict_row ORDER BY d.seq"):
            out.write(checked_verdict(path, doc_id, verdict, checksum) + "\n")
            count += 1
    return count


def backup(directory: Path, to: Path) -> int:
    """A copy of the store in ``directory`` as a new directory ``to``, beside a running
    consumer: SQLite's online backup copies one snapshot (the last commit). A copy made with
    cp or tar while the consumer commits can mix two commits: in the operators' drill one
    copy in 30 had sets counting children it did not hold, and it opened without a word.
    The copy is made beside ``to`` and renamed into place (onto ``to`` if that is an empty
    directory: made first, as one does), so ``to`` is whole or absent (or empty).
    The maps' snapshot is not copied: the copy rebuilds them at its first open (~4 s at a
    million ads). Returns the documents copied."""
    directory, to = Path(directory), Path(to)
    empty_dir = to.is_dir() and not to.is_symlink() and not any(to.iterdir())
    if os.path.lexists(to) and not empty_dir:  # a dangling link too: no rename onto it
        raise ConfigError(f"{to} exists: a backup is written to a new directory (or an "
                          "empty one)")
    if empty_dir and to.stat().st_dev != to.parent.stat().st_dev:  # the copy is made beside
        raise ConfigError(f"{to} is a mount point (the copy, made beside it, could not be "  # it
                          f"renamed onto it): give a new directory inside it, e.g. {to / 'b'}")
    if to.resolve().is_relative_to(directory.resolve()):
        raise ConfigError(f"{to} is inside the store {directory}: write the backup elsewhere")
    with reading(directory) as conn:  # a missing or foreign store is said before anything
        documents = int(conn.execute("SELECT count(*) FROM docs").fetchone()[0])
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{to.name}.", dir=to.parent))
        except OSError as exc:
            raise StoreError(f"cannot write the backup at {to}: {exc.strerror or exc}") from None
        try:
            _copy(conn, directory, tmp, to)
            tmp.rename(to)
        except OSError as exc:  # a link or directory put at ``to`` meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
            raise StoreError(f"cannot write the backup at {to}: {exc.strerror or exc}") from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return documents


# SQLite's errors of the store being read; any other error in a backup is the copy's (a
# full disk, a file-size limit, a quota: SQLITE_FULL, SQLITE_IOERR_WRITE, ...)
_READING_ERRORS = ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_IOERR_READ",
                   "SQLITE_IOERR_SHORT_READ", "SQLITE_BUSY", "SQLITE_LOCKED")


def _copy(conn: sqlite3.Connection, directory: Path, tmp: Path, to: Path) -> None:
    """The snapshot ``conn`` reads, copied into ``tmp`` with the store's permissions."""
    try:
        copy = sqlite3.connect(tmp / DB_NAME)
        try:
            conn.backup(copy)  # in the reading's transaction: the count's snapshot
        finally:
            copy.close()
    except sqlite3.DatabaseError as exc:
        if str(getattr(exc, "sqlite_errorname", "")).startswith(_READING_ERRORS):
            raise  # said as the store's (read_only)
        if disk_full(to.parent):
            raise StoreError(f"no space left for the backup at {to} (the store needs "
                             f"{file_bytes(directory):,} bytes): {exc}") from None
        raise StoreError(f"cannot write the backup at {to}: {exc}") from None
    (tmp / DB_NAME).chmod((directory / DB_NAME).stat().st_mode & 0o7777)  # the
    tmp.chmod(directory.stat().st_mode & 0o7777)  # store's, not the umask's 0644


def _structure_damaged(conn: sqlite3.Connection) -> bool:
    try:
        return conn.execute("PRAGMA quick_check").fetchone()[0] != "ok"
    except sqlite3.DatabaseError:
        return True


def compact(directory: Path) -> tuple[int, int]:
    """Rewrite the file without its free pages (VACUUM), then truncate the write-ahead
    log. Needs the writer's lock: a running consumer must be stopped first. Returns the
    bytes before and after."""
    directory = Path(directory)
    if not (directory / DB_NAME).is_file():
        raise no_store(directory)
    try:
        fd = acquire_lock(directory)  # StoreLockedError names the writer's pid
    except OSError as exc:  # a read-only mount: it was a traceback
        raise StoreError(os_problem(directory, exc)) from None
    try:
        before = file_bytes(directory)
        conn = sqlite3.connect(directory / DB_NAME, timeout=30)
        try:
            try:  # a file that is no store of ours is left as it is: it may be evidence
                check_schema(conn, directory / DB_NAME)
            except sqlite3.DatabaseError as exc:
                raise StoreCorruptError(f"{directory / DB_NAME} cannot be read: {exc}; "
                                        f"compact leaves it as it is") from exc
            except StoreCorruptError as exc:
                raise StoreCorruptError(f"{exc}; compact leaves it as it is") from None
            conn.execute("VACUUM")  # in WAL mode: the new file goes through the WAL first
            for _ in range(_CHECKPOINT_TRIES):
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                if not busy:
                    break
                time.sleep(1.0)
            else:
                raise StoreError(
                    f"compacted {directory}, but a reader (stats, verify, export, the monitor) "
                    f"kept the old pages for {_CHECKPOINT_TRIES} s: the space comes back at "
                    "the next checkpoint, or run compact again")
        except sqlite3.DatabaseError as exc:
            # SQLite says "database or disk is full" of some damaged files too (the disk was
            # blamed with 57 GB free), and of a full temporary directory (VACUUM's copy goes
            # there, not beside the store): damage is named only when the file's structure
            # check finds it.
            if _structure_damaged(conn):
                raise StoreCorruptError(f"compacting {directory} failed: {exc}; the file is "
                                        "damaged (store verify says where)") from exc
            raise StoreError(f"compacting {directory} failed: {exc} (VACUUM needs free disk "
                             "space up to twice the size of the store, beside it and in "
                             "SQLite's temporary directory, SQLITE_TMPDIR or /tmp)") from exc
        finally:
            conn.close()
        return before, file_bytes(directory)
    finally:
        os.close(fd)
