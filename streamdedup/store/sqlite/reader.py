"""Reading a SQLite store beside its writer, or on media nothing can write: what
``store stats``, ``verify``, ``export`` and ``explain --use-store`` open. Read-only, no lock
taken; a failure is said as busy, this user's rights, a read-only file system, or damage.

Apart from ``file.py`` (the writer's file: schema, lock, opening, blobs) because a reader
shares none of the writer's state, and ``file.py`` had grown to the module size limit.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streamdedup.errors import StoreCorruptError, StoreError
from streamdedup.store.base import parsed_params
from streamdedup.store.sqlite.file import (
    DB_NAME,
    VERDICT,
    checked_verdict,
    checksum_column,
    refuse_a_broken_link,
    refuse_an_empty_file,
)


def no_store(directory: Path) -> StoreError:
    """What is at ``directory`` instead of a store, said as it is ("no index.sqlite" was said
    of a regular file given as the store, and of an index.sqlite that is a directory)."""
    path = directory / DB_NAME
    if directory.is_file():
        return StoreError(f"{directory} is a file, not a store's directory")
    if path.exists() and not path.is_file():
        return StoreError(f"{path} is not a file: not a store")
    return StoreError(f"no store at {directory} (no {DB_NAME})")


def _tidy_after_reading(path: Path) -> None:
    """A read-only connection makes the WAL's -shm and an empty -wal beside a store no one
    has open, and cannot remove them at its close. An empty WAL has nothing to fold back,
    so a read-write connection's close removes both, if it is the last one (a consumer
    still running keeps them, as it must)."""
    wal = path.with_name(path.name + "-wal")
    with contextlib.suppress(OSError, sqlite3.Error):
        if wal.stat().st_size == 0:
            conn = sqlite3.connect(path, timeout=0)
            try:
                conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            finally:
                conn.close()


def _unreadable(path: Path, exc: sqlite3.DatabaseError) -> StoreError:
    """Why a read-only reader failed: busy, this user's rights, or damage."""
    if isinstance(exc, sqlite3.OperationalError):
        if "locked" in str(exc) or "busy" in str(exc):
            return StoreError(f"{path} is busy ({exc}); try again")
        if "readonly" in str(exc) or ("unable to open" in str(exc)
                                      and not os.access(path.parent, os.W_OK)):
            # not damage: the WAL's index (-shm) must be writable, or makable beside it
            return StoreError(f"{path} cannot be read by this user: SQLite reads a store "
                              f"through its -shm file beside it, which must be writable; run "
                              f"as the store's owner ({exc})")
    return StoreCorruptError(f"{path} cannot be read: {exc}")


def _connect(path: Path) -> sqlite3.Connection:
    """A read-only connection (``mode=ro``, through the WAL index beside the file, so a
    running writer's last commit is seen). Where that cannot be had because the file system
    is read-only and no writer made the index (a backup kept on read-only media could not
    be verified or exported): ``immutable=1``, which reads the file as it is. Only then,
    since it takes no locks: a writer on another mount of the same store would tear the
    read (a review counted 10,267 of 25,000 documents). A write-ahead log left unfolded
    there would be passed over, so it is refused."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30, isolation_level=None)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the WAL index
        return conn
    except sqlite3.DatabaseError as exc:
        conn.close()
        try:
            frozen = bool(os.statvfs(path.resolve().parent).f_flag & os.ST_RDONLY)
        except OSError:
            frozen = False
        if not frozen or not isinstance(exc, sqlite3.OperationalError):
            raise _unreadable(path, exc) from exc
    wal = path.with_name(path.name + "-wal")
    if wal.is_file() and wal.stat().st_size:
        raise StoreError(f"{path} is on a read-only file system beside a write-ahead log of "
                         f"{wal.stat().st_size:,} bytes its writer did not fold back, and no "
                         "index of it SQLite could read there: copy the store's directory "
                         "to a writable place and read the copy")
    return sqlite3.connect(f"file:{path}?immutable=1", uri=True, timeout=30,
                           isolation_level=None)


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the store in ``directory``, beside a running consumer (WAL
    lets readers in while the writer works; no writer lock is taken). A failure of SQLite's
    is said as ``unreadable`` says it; the WAL's files are tidied at the end."""
    path = Path(directory) / DB_NAME
    if not path.is_file():
        for link in (Path(directory), path):  # "no store at lnk", of a volume not mounted
            refuse_a_broken_link(link)
        raise no_store(directory)
    refuse_an_empty_file(path)
    conn = _connect(path)
    try:
        yield conn
    except sqlite3.DatabaseError as exc:
        raise _unreadable(path, exc) from exc
    finally:
        conn.close()
        _tidy_after_reading(path)


def read_verdict(directory: Path, doc_id: str) -> str | None:
    """A document's stored verdict JSON, read beside a running consumer."""
    with read_only(directory) as conn:
        row = conn.execute(
            f"SELECT {VERDICT}, {checksum_column(conn)} FROM docs d JOIN verdicts v "
            "ON v.row = d.verdict_row WHERE d.doc_id = ?", (doc_id,)).fetchone()
    path = directory / DB_NAME
    return None if row is None else checked_verdict(path, doc_id, row[0], row[1])


def read_params(directory: Path) -> dict[str, Any] | None:
    """The parameters the store was built with (None before its first run), read beside a
    running consumer."""
    with read_only(directory) as conn:
        return stored_params(conn, Path(directory) / DB_NAME)


def stored_params(conn: sqlite3.Connection, path: Path) -> dict[str, Any] | None:
    """The parameters in the file ``conn`` reads (None before the store's first run):
    ``read_params``'s and ``store stats``'."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
                    ).fetchone() is None:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'params'").fetchone()
    return None if row is None else parsed_params(row[0], str(path))
