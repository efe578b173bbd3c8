"""The SQLite store's in-memory maps saved at a clean close, so the next open reads them back
instead of rebuilding them from the tables.

Why: rebuilding a million-ad store's maps (21M bucket entries sorted and merged into runs,
their key filter, the set numbers) took ~5.3 of the 7.8 s an open took; reading the same
arrays back takes a fraction of a second (BENCHMARKS.md §9). The tables stay the truth: the
snapshot is a cache that is used only when it is known to describe them exactly.

How that is known: at a clean close the store writes ``index.snapshot`` (to a side file,
renamed into place), then commits a fresh random token to its ``counters`` table;
the file carries the same token. The first commit after an open deletes the token in the same
transaction as its writes, so a store changed since its snapshot (or that crashed after a
change) has no token, and one restored from an older copy has another one: both are rebuilt
from the tables. Every array carries an xxh3 checksum; a damaged file is ignored (with a
warning), never trusted. Small stores are not snapshotted (``MIN_ENTRIES``): rebuilding them
takes a moment anyway. The file is ~320 bytes per ad at a million (12 per bucket entry,
the key filter) and ~290 at 50,000.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import sqlite3
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import xxhash

from streamdedup.store.sqlite.bucket_index import BucketIndex
from streamdedup.store.sqlite.set_numbers import SetNumbers

log = logging.getLogger(__name__)

SNAPSHOT_NAME = "index.snapshot"
MAGIC = b"streamdedup snapshot 1\n"
# Bucket entries below which no snapshot is written: ~10,000 generated ads, whose maps are
# rebuilt in well under a second.
MIN_ENTRIES = 1 << 18

Arrays = dict[str, np.ndarray]


def stored_token(conn: sqlite3.Connection) -> int | None:
    """The token of the snapshot that describes the tables now, if there is one."""
    row = conn.execute("SELECT value FROM counters WHERE name = 'snapshot'").fetchone()
    return None if row is None else int(row[0])


def forget_token(conn: sqlite3.Connection) -> None:
    """In the transaction of a commit that changes the tables: no snapshot describes them."""
    conn.execute("DELETE FROM counters WHERE name = 'snapshot'")


def save_maps(conn: sqlite3.Connection, directory: Path, numbers: SetNumbers,
              buckets: BucketIndex) -> None:
    """Write both maps (committed state) under a new token, then commit the token. A
    failure is logged, not raised: the next open rebuilds from the tables instead."""
    token = secrets.randbits(62) + 1
    arrays = {f"numbers.{k}": v for k, v in numbers.state().items()}
    arrays.update({f"buckets.{k}": v for k, v in buckets.state().items()})
    try:
        write_snapshot(directory, token, arrays)
        conn.execute("INSERT INTO counters (name, value) VALUES ('snapshot', ?) "
                     "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (token,))
        conn.commit()
    except (OSError, sqlite3.Error) as exc:
        log.warning("no snapshot saved in %s: %s", directory, exc)


def load_maps(directory: Path, token: int | None) -> tuple[SetNumbers, BucketIndex] | None:
    """Both maps as saved under ``token``, or None (see ``read_snapshot``)."""
    arrays = read_snapshot(directory, token)
    if arrays is None:
        return None
    try:
        return (SetNumbers.from_state(_part(arrays, "numbers.")),
                BucketIndex.from_state(_part(arrays, "buckets.")))
    except (KeyError, ValueError) as exc:
        log.warning("ignoring %s (rebuilding from the tables): %s",
                    directory / SNAPSHOT_NAME, exc)
        return None


def _part(arrays: Arrays, prefix: str) -> Arrays:
    return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}


def write_snapshot(directory: Path, token: int, arrays: Arrays) -> None:
    """Write ``arrays`` under ``token`` (a side file renamed into place). No fsync: a file
    lost or torn by a power cut fails its token or its checksums and is not used."""
    path = directory / SNAPSHOT_NAME
    tmp = path.with_name(SNAPSHOT_NAME + ".new")
    parts = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
    header = json.dumps({"token": token, "arrays": [
        [name, a.dtype.str, a.size, xxhash.xxh3_64_intdigest(_bytes(a))]
        for name, a in parts.items()]}).encode()
    tmp.unlink(missing_ok=True)
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(MAGIC + len(header).to_bytes(8, "little") + header)
        for a in parts.values():
            f.write(_bytes(a))
    os.replace(tmp, path)


def read_snapshot(directory: Path, token: int | None) -> Arrays | None:
    """The arrays saved under ``token``, or None: no token, no file, another token (stale),
    or a file that does not read back whole and checksummed (damaged: logged)."""
    path = directory / SNAPSHOT_NAME
    if token is None or not path.exists():
        return None
    try:
        with open(path, "rb") as f:
            return _read(f, token)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring %s (rebuilding from the tables): %s", path, exc)
        return None


def describe(directory: Path, token: int | None) -> tuple[str | None, int]:
    """For ``store stats``: whether the snapshot is "current" (its token is the tables')
    or "stale" (an open rebuilds instead), or None without one; and its size in bytes."""
    path = directory / SNAPSHOT_NAME
    try:
        with open(path, "rb") as f:
            header = _header(f)
            size = os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        return None, 0
    except (OSError, ValueError):
        return "stale", path.stat().st_size if path.exists() else 0
    return ("current" if header.get("token") == token else "stale"), size


def _header(f: BinaryIO) -> dict[str, Any]:
    if f.read(len(MAGIC)) != MAGIC:
        raise ValueError("not a snapshot of this version")
    header: dict[str, Any] = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    return header


def _read(f: BinaryIO, token: int) -> Arrays | None:
    header = _header(f)
    if header["token"] != token:
        return None  # written before the store last changed: stale, not damaged
    out: Arrays = {}
    for name, dtype, size, checksum in header["arrays"]:
        a = np.fromfile(f, dtype=np.dtype(dtype), count=size)
        if a.size != size:
            raise ValueError(f"{name}: the file ends early")
        if xxhash.xxh3_64_intdigest(_bytes(a)) != checksum:
            raise ValueError(f"{name}: fails its checksum")
        out[name] = a
    if f.read(1):
        raise ValueError("bytes after the last array")
    return out


def _bytes(a: np.ndarray) -> memoryview:
    return a.reshape(-1).view(np.uint8).data


def remove_snapshot(directory: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (directory / SNAPSHOT_NAME).unlink()
