"""The SQLite store's file: schema, the writer's lock, opening and creating, and the one-line
messages for what the file system refuses.

Apart from ``store.py`` (the ``Store`` on top of it) because these are the file's concerns (and
the encoding of its blobs: the bucket log's rows and their checksums, and reading the
in-memory maps back from them at open: ``rebuild_maps``), not
the index's: one writer per directory (a ``flock`` on the directory itself, which no file
deletion inside it releases; ``store.lock`` only holds the writer's pid, for the message), a
file that exists is always a complete store (built aside, renamed into place), a damaged or
foreign file is refused at open (``PRAGMA quick_check``, run beside reading the maps), and a
read-only directory or a full disk is said as such, never as damage.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import fcntl
import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import numpy as np
import xxhash

from streamdedup.errors import StoreCorruptError, StoreError, StoreLockedError
from streamdedup.store.sqlite.bucket_index import BucketIndex, LogRow, SortedEntries, sort_entries
from streamdedup.store.sqlite.set_numbers import SetNumbers

MAX_VARS = 900  # stay under SQLite's bound on host parameters per statement


def chunks(items: Sequence[Any], size: int = MAX_VARS) -> Iterator[Sequence[Any]]:
    """``items`` a statement's worth of parameters at a time."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


P = ParamSpec("P")
R = TypeVar("R")

DB_NAME = "index.sqlite"
LOCK_NAME = "store.lock"
SCHEMA_VERSION = 7  # 2: metadata apart from blobs; 3: sets numbered, bucket log per set;
# 4: versions (the first verdict of every (id, set) pair, kept when a document is replaced;
# written at the replacement since issue 15, a row for every document before: both read alike),
# positions (how far each input partition is stored) and crowded sets (edges capped);
# 5: retention (a time per document, the newest time, child count and tombstone per set);
# 6: a checksum per verdict (a flipped bit in a verdict's JSON was returned as it read);
# 7: a version's set id (with retention its set's number goes when the set leaves the
# window, while the version of a live id stays: its old text sent again was judged anew).
# Schemas an open brings up to this one in place, and how (older ones are refused).
UPGRADES = {
    5: ("ALTER TABLE verdicts ADD COLUMN checksum INTEGER",),  # 5's rows keep NULL
    6: ("ALTER TABLE versions ADD COLUMN set_id INTEGER",  # a version of a set gone: NULL
        "UPDATE versions SET set_id = (SELECT s.set_id FROM sets s "
        "WHERE s.set_no = versions.set_no)"),
}
# Verified candidates are read again while their bucket stays hot. Bounded by bytes: a set
# of a long ad is ~8 KB, and 65,536 of them (the former bound) were half a GiB of RSS.
_PAGE_CACHE_KIB = 128 * 1024

# Layout for a growing index: no growing table is keyed by a set id (a random fingerprint;
# only edges and crowded are, written for the sets that matched).
# Sets are numbered in arrival order (``set_no``; the map from id to number is held in memory,
# see set_numbers.py), and the sets table and the documents-by-set index are keyed by that
# number, so new sets and their documents append to the last pages. The bulky payloads (a
# verdict per document, a shingle blob per distinct set) go to tables keyed by a rowid SQLite
# assigns in increasing order, appended too. Bucket entries are appended one row per commit
# and indexed in memory (see bucket_index.py). A sets row without ``first_seq`` only numbers
# a set that documents name but that holds no shingles (the set of an empty text).
SCHEMA = """
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS docs (
    doc_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, set_no INTEGER NOT NULL,
    verdict_row INTEGER NOT NULL, time INTEGER);
CREATE INDEX IF NOT EXISTS docs_by_set ON docs (set_no, seq);
CREATE INDEX IF NOT EXISTS docs_by_time ON docs (time) WHERE time IS NOT NULL;
CREATE TABLE IF NOT EXISTS verdicts (
    row INTEGER PRIMARY KEY, verdict TEXT NOT NULL, checksum INTEGER);
CREATE TABLE IF NOT EXISTS positions (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, next_offset INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS versions (
    doc_id TEXT NOT NULL, set_no INTEGER NOT NULL, verdict_row INTEGER NOT NULL,
    set_id INTEGER, PRIMARY KEY (doc_id, set_no)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sets (
    set_no INTEGER PRIMARY KEY, set_id INTEGER NOT NULL, first_seq INTEGER, first_id TEXT,
    parent INTEGER, shingles_row INTEGER, last_time INTEGER,
    children INTEGER NOT NULL DEFAULT 0, evicted INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS sets_by_time ON sets (last_time) WHERE last_time IS NOT NULL;
CREATE TABLE IF NOT EXISTS shingles (
    row INTEGER PRIMARY KEY, data BLOB NOT NULL, checksum INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS edges (
    set_id INTEGER NOT NULL, other INTEGER NOT NULL, sim REAL NOT NULL,
    PRIMARY KEY (set_id, other)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS crowded (set_id INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS bucket_log (
    row INTEGER PRIMARY KEY, set_ids BLOB NOT NULL, sizes BLOB NOT NULL,
    counts BLOB NOT NULL, keys BLOB NOT NULL, checksum INTEGER NOT NULL);
"""


_FULL_BELOW_BYTES = 1 << 20


def disk_full(directory: Path) -> bool:
    """Whether the file system of ``directory`` has (almost) no space left for SQLite."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < _FULL_BELOW_BYTES


def os_problem(directory: Path, exc: OSError) -> str:
    """One line an operator can act on: what is wrong with the place, not a raw errno."""
    if exc.errno == errno.ENOSPC or (exc.errno == errno.EIO and disk_full(directory)):
        return (f"no space left on the device of store {directory}: the store itself is "
                f"intact; free some space and start again ({exc.strerror or exc})")
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return (f"store directory {directory} is not writable ({exc.strerror or exc}); a store "
                f"needs a directory its writer may write to")
    if exc.errno == errno.EEXIST and directory.exists() and not directory.is_dir():
        return (f"store {directory} is a file, not a directory: --store names the directory "
                f"a store lives in (a new one is made there)")  # was "[Errno 17] File exists"
    return f"store {directory} cannot be opened: {exc}"


def acquire_lock(directory: Path) -> int:
    """Lock the directory (its inode stays while files inside come and go), then note our
    pid in ``store.lock`` for the message another process gets."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        try:
            holder = (directory / LOCK_NAME).read_text("ascii").strip() or "unknown"
        except (OSError, UnicodeDecodeError):
            holder = "unknown"
        raise StoreLockedError(
            f"store {directory} is open for writing by another process "
            f"(pid {holder}); one writer per store"
        ) from None
    try:
        pid_fd = os.open(directory / LOCK_NAME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                         0o600)
        try:
            os.write(pid_fd, str(os.getpid()).encode())
        finally:
            os.close(pid_fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def refuse_a_broken_link(path: Path) -> None:
    """A store directory, or its file, that is a link to nothing (a volume not mounted):
    the directory was "File exists", and the file was replaced by a new empty store, the
    link gone."""
    if path.is_symlink() and not path.exists():
        raise StoreError(f"{path} is a link to {os.readlink(path)}, which is not there (a "
                         "volume not mounted?): mount it, or give another --store")


def refuse_an_empty_file(path: Path) -> None:
    """We never leave an empty file (see ``_create``), so this one was truncated. Said so
    by every command: `store stats` called it "not a streamdedup store of schema 7"."""
    if path.stat().st_size == 0:
        raise StoreCorruptError(f"{path} is empty: the store was truncated; restore it or "
                                "remove the directory to start a new index")


def open_db(directory: Path, read: Callable[[sqlite3.Connection], None] = lambda c: None
            ) -> sqlite3.Connection:
    """The store's connection, made ready (schema, WAL, FULL sync), or one clear error.

    ``read`` (the in-memory maps, reads only) runs while a second connection checks the
    file's structure (``PRAGMA quick_check``) in a thread: SQLite lets go of the GIL, so on
    two cores the check costs no time of its own (at a million ads it reads the 1.26 GB file
    in ~2 s, and rebuilding the maps takes ~4 s). Nothing is written before the check says
    the file is sound; a damaged file is refused with the check's finding whatever ``read``
    raised meanwhile."""
    path = directory / DB_NAME
    refuse_a_broken_link(path)
    if not path.exists():
        _create(directory)
    refuse_an_empty_file(path)
    conn: sqlite3.Connection | None = None
    try:
        # One thread at a time, not always the same one: the consumer lends the store to
        # kafka-python's IO thread for the pre-rebalance commit (service/consumer.py).
        conn = sqlite3.connect(path, timeout=30, check_same_thread=False)
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if tables:
            version = check_schema(conn, path)
            with _StructureCheck(path):
                read(conn)
            if version != SCHEMA_VERSION:  # only once the file is sound
                _upgrade(conn, version)
            _prepare(conn)
        else:  # a database without tables (ours are made with theirs) becomes a store
            _prepare(conn)
            read(conn)
    except BaseException as exc:
        if conn is not None:
            conn.close()  # an open handle would keep the file (and its mount) busy
        if not isinstance(exc, sqlite3.DatabaseError):
            raise
        if isinstance(exc, sqlite3.OperationalError) and disk_full(directory):
            raise StoreError(os_problem(directory, OSError(errno.ENOSPC, str(exc))))\
                from exc
        if isinstance(exc, sqlite3.OperationalError) and "readonly" in str(exc):
            raise StoreError(os_problem(directory, OSError(errno.EROFS, str(exc))))\
                from exc
        raise StoreCorruptError(f"{path} cannot be read as a store: {exc}") from exc
    return conn


def read_counters(conn: sqlite3.Connection) -> tuple[int, int | None]:
    """The last ``seq`` handed out and the retention clock (None: never set)."""
    rows = dict(conn.execute(
        "SELECT name, value FROM counters WHERE name IN ('seq', 'clock')").fetchall())
    clock = rows.get("clock")
    return int(rows.get("seq", 0)), None if clock is None else int(clock)


def write_counters(conn: sqlite3.Connection, seq: int, clock: int | None) -> None:
    """Within the commit's transaction; the stored ``seq`` never goes back."""
    conn.execute("INSERT INTO counters (name, value) VALUES ('seq', ?) "
                 "ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)", (seq,))
    if clock is not None:
        conn.execute("INSERT INTO counters (name, value) VALUES ('clock', ?) "
                     "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (clock,))


def next_set_number(conn: sqlite3.Connection) -> int:
    """The number the next new set gets. SQLite gives a rowid past those there are, so the
    newest set's number came again once retention deleted that set, and a version still
    naming it then named the new set (its first verdict given for another text)."""
    return 1 + int(conn.execute("SELECT max(coalesce((SELECT max(set_no) FROM sets), 0), "
                                "coalesce((SELECT max(set_no) FROM versions), 0))").fetchone()[0])


def check_schema(conn: sqlite3.Connection, path: Path) -> int:
    """The file's schema version if this release reads it (its own, or one an open upgrades
    in place); else a ``StoreCorruptError``. Opening and the read-only commands both ask."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version != SCHEMA_VERSION and version not in UPGRADES:
        hint = (" (an earlier streamdedup's layout: replay into a new store directory)"
                if 0 < version < SCHEMA_VERSION else
                " (written by a newer streamdedup: run that release, or go back to a backup "
                "made before the upgrade)" if version > SCHEMA_VERSION else
                " (another program's database? A store is the directory --store names)")
        raise StoreCorruptError(f"{path} is not a streamdedup store of schema "
                                f"{SCHEMA_VERSION} (user_version {version}){hint}")
    return version


def _upgrade(conn: sqlite3.Connection, version: int) -> None:
    """The steps from ``version`` up and the new version number in one transaction: a crash
    between them would leave a schema-5 number on a changed table, refused at every open
    (SQLite's DDL is transactional; Python's module opens no transaction for it itself)."""
    conn.execute("BEGIN IMMEDIATE")
    for step in range(version, SCHEMA_VERSION):
        for statement in UPGRADES[step]:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.commit()


def _prepare(conn: sqlite3.Connection) -> None:
    """The connection's settings and the schema: the first writes of an open."""
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    # SQLite's default page cache is 2 MiB; the bucket and docs B-trees outgrow it
    # early and every probe then pays page reads (cost per document grew with size).
    conn.execute(f"PRAGMA cache_size = -{_PAGE_CACHE_KIB}")
    conn.executescript(SCHEMA)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.commit()


class _StructureCheck:
    """``PRAGMA quick_check`` of ``path`` in a thread, on a connection of its own, while the
    block runs. Leaving the block waits for it: a damaged file raises ``StoreCorruptError``
    (before anything the block raised: damage explains that); a check that could not run
    raises its ``sqlite3`` error, for ``open_db`` to say what it was. An interrupt (Ctrl-C,
    ``SystemExit``) in the block goes on as it was, once the check has ended."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.finding: str | None = None
        self.error: BaseException | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="streamdedup-quick-check",
                                        daemon=True)

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, timeout=30)
            try:
                if not self._stopped.is_set():
                    self.finding = str(conn.execute("PRAGMA quick_check").fetchone()[0])
            finally:
                conn.close()
        except BaseException as exc:  # handed to the opening thread
            self.error = exc

    def __enter__(self) -> _StructureCheck:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        if kind is not None and not issubclass(kind, Exception):
            self._stopped.set()  # a check not begun is not begun; one running ends first
            self._thread.join()  # (seconds at most: interrupting it raced with its close)
            return
        self._thread.join()
        if self.error is not None:
            raise self.error
        if self.finding != "ok":
            raise StoreCorruptError(f"{self.path} is damaged: {self.finding}") from exc

def _create(directory: Path) -> None:
    path = directory / DB_NAME
    """Build the schema in a side file, then rename it into place: an ``index.sqlite``
    that exists is always a complete store, so an empty one means damage."""
    tmp = path.with_name(DB_NAME + ".new")
    tmp.unlink(missing_ok=True)
    os.close(os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    conn = sqlite3.connect(tmp)
    try:
        conn.executescript(SCHEMA)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.commit()
    finally:
        conn.close()
    os.replace(tmp, path)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def store_errors(method: Callable[P, R]) -> Callable[P, R]:
    """SQLite failures (disk full, I/O error, damaged pages) become StoreError, so callers
    can tell a store fault (retry later, lose nothing) from a bad document."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{method.__name__}: {exc}") from exc

    return wrapper


# --- the blobs the file holds (checksummed; explicit dtypes, never pickle)
def blob_checksum(blob: bytes) -> int:
    """xxh3-64 as a signed 64-bit integer (what SQLite stores)."""
    digest = xxhash.xxh3_64_intdigest(blob)
    return digest - (1 << 64) if digest >= 1 << 63 else digest


_LOG_DTYPES = ("<i8", "<u4", "<u4", "<i8")  # set_ids, sizes, counts, keys (LogRow order)


def encode_log_row(row: LogRow) -> tuple[bytes, ...]:
    return tuple(a.astype(t).tobytes() for a, t in zip(row, _LOG_DTYPES, strict=True))


def decode_log_row(*blobs: bytes) -> LogRow:
    row = LogRow(*(np.frombuffer(b, dtype=t) for b, t in zip(blobs, _LOG_DTYPES, strict=True)))
    if not row.set_ids.size == row.sizes.size == row.counts.size or int(
            row.counts.sum()) != row.keys.size:
        raise ValueError("set, size, count and key arrays do not match")
    return row


def concat_log_rows(rows: Sequence[LogRow]) -> LogRow:
    return LogRow(*(np.concatenate(parts) for parts in zip(*rows, strict=True)))




def verdict_checksum(verdict: str) -> int:
    return blob_checksum(verdict.encode())


VERDICT = "CAST(v.verdict AS BLOB)"  # read as bytes: a flipped high bit is found, not raised


def verdict_text(verdict: bytes, checksum: int | None) -> str | None:
    """The stored verdict JSON (read as ``VERDICT``, bytes) if it is intact, else None: it
    matches its checksum (rows written before schema 6 have none) and is UTF-8. Read as
    text, a verdict damaged into bad UTF-8 (about one bit flip in eight) raised in the
    driver, before any check: `store verify` stopped at it instead of listing it, `check`
    named no damage."""
    if checksum is not None and blob_checksum(verdict) != checksum:
        return None
    try:
        return verdict.decode()
    except UnicodeDecodeError:
        return None


def checked_verdict(path: Path, doc_id: str, verdict: bytes, checksum: int | None) -> str:
    """The stored verdict JSON, or a ``StoreCorruptError`` if it is not intact."""
    text = verdict_text(verdict, checksum)
    if text is None:
        raise StoreCorruptError(f"{path}: the verdict of document {doc_id!r} fails its "
                                f"checksum (damaged file); `streamdedup store verify` lists "
                                f"all such rows")
    return text


def checksum_column(conn: sqlite3.Connection) -> str:
    """The verdicts' checksum column for a reader, or NULL in a schema-5 store no writer has
    upgraded yet (one that an older release's consumer may still be writing)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    return "v.checksum" if version >= 6 else "NULL"


def file_bytes(directory: Path) -> int:
    """The store file and its write-ahead log, as they take disk space now."""
    return sum(p.stat().st_size for p in Path(directory).glob(DB_NAME + "*") if p.is_file())


# --- the in-memory maps, rebuilt from the file at open
_LOAD_CHUNK = 1 << 21  # bucket entries handed to the index at a time when a store opens
_SETS_AT_ONCE = 1 << 20  # set numbers read into one string when a store opens
_SORTERS = 2  # threads sorting bucket-log chunks when a store opens


def _read_sets(conn: sqlite3.Connection, path: Path
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(set ids, their numbers, 1 where the set holds shingles) of every sets row, int64.

    As strings that SQLite joins and numpy parses, both in C: 0.4 s for the 846,405 sets of
    a million generated ads, against 1.1 s to build as many row tuples and an array from
    them (measured). One string per ``_SETS_AT_ONCE`` numbers, far below SQLite's bound on
    a string (10^9 bytes: ~35M sets). The three values of a row are joined first, so they
    cannot come apart; a count that does not add up is damage."""
    parts = [np.zeros(0, dtype=np.int64)]
    try:
        total, top = conn.execute(
            "SELECT count(*), coalesce(max(set_no), 0) FROM sets").fetchone()
        for low in range(0, int(top), _SETS_AT_ONCE):
            count, text = conn.execute(
                "SELECT count(*), group_concat(set_id || ',' || set_no || ',' || "
                "(shingles_row IS NOT NULL)) FROM sets WHERE set_no > ? AND set_no <= ?",
                (low, low + _SETS_AT_ONCE)).fetchone()
            if count:  # numpy 2 raises at what it cannot parse (older ones warned, stopped)
                with contextlib.suppress(ValueError):
                    parts.append(np.fromstring(str(text), dtype=np.int64, sep=","))
    except sqlite3.DatabaseError as exc:
        raise StoreCorruptError(f"{path}: cannot read the sets table: {exc}") from exc
    values = np.concatenate(parts)
    if values.size != 3 * total:  # unparsed text, or numbers outside 1..max(set_no)
        raise StoreCorruptError(f"{path}: the sets table holds values that are not set "
                                f"numbers (damaged file)")
    ids, set_nos, held = values.reshape(-1, 3).T
    return ids, set_nos, held


def _log_chunks(conn: sqlite3.Connection, path: Path
                ) -> Iterator[tuple[LogRow, np.ndarray]]:
    """The bucket log in chunks of about ``_LOAD_CHUNK`` entries, each row checked against
    its checksum: (the rows joined, the log row of each set)."""
    logged: list[LogRow] = []
    row_ids: list[np.ndarray] = []
    count = 0
    row = None
    try:
        cursor = conn.execute(
            "SELECT row, set_ids, sizes, counts, keys, checksum FROM bucket_log ORDER BY row")
        for row, *blobs, checksum in cursor:
            if blob_checksum(b"".join(blobs)) != checksum:
                raise StoreCorruptError(
                    f"{path}: bucket log row {row} fails its checksum (damaged file)")
            logged.append(decode_log_row(*blobs))
            row_ids.append(np.full(logged[-1].set_ids.size, row, dtype=np.int64))
            count += logged[-1].keys.size
            if count >= _LOAD_CHUNK:
                yield concat_log_rows(logged), np.concatenate(row_ids)
                logged, row_ids, count = [], [], 0
    except sqlite3.DatabaseError as exc:
        raise StoreCorruptError(f"{path}: cannot read the bucket log: {exc}") from exc
    except ValueError as exc:  # blob lengths that do not fit together
        raise StoreCorruptError(f"{path}: bucket log row {row}: {exc}") from exc
    if logged:
        yield concat_log_rows(logged), np.concatenate(row_ids)


def rebuild_maps(conn: sqlite3.Connection, path: Path) -> tuple[SetNumbers, BucketIndex]:
    """The set id -> number map (from the sets table) and the bucket index (from the log,
    every row against its checksum; entries of sets that hold no shingles any more are
    dead: evicted since they were logged)."""
    ids, set_nos, held = _read_sets(conn, path)
    numbers, buckets = SetNumbers(), BucketIndex()
    live = ids[held == 1]
    if ids.size:
        ordered = np.sort(ids)  # a sort finds repeats 20x faster than np.unique's hash
        if (ordered[1:] == ordered[:-1]).any():
            raise StoreCorruptError(f"{path}: a set id is numbered twice (damaged file)")
        numbers.add_many(ids, set_nos)
    # Chunks are sorted in two threads while this one reads the next from SQLite and adds
    # the ones before, in log order (numpy and SQLite let go of the GIL): at a million ads
    # sorting was 2.3 of the 3.8 s spent on the log; with one thread this one still waited
    # 2.6 s for it (the quick check shares the cores).
    with ThreadPoolExecutor(_SORTERS, thread_name_prefix="streamdedup-load") as pool:
        ahead: collections.deque[tuple[LogRow, np.ndarray, Future[SortedEntries]]] = \
            collections.deque()
        for chunk, rows in _log_chunks(conn, path):
            ahead.append((chunk, rows, pool.submit(sort_entries, chunk)))
            if len(ahead) > _SORTERS:
                chunk, rows, sorting = ahead.popleft()
                buckets.add_many(chunk, rows, sorting.result())
        for chunk, rows, sorting in ahead:
            buckets.add_many(chunk, rows, sorting.result())
    buckets.loaded(live)
    return numbers, buckets
