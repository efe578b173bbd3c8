"""The store's file system: ``StoreDir`` (a consumer's store directory, on a small tmpfs of its
own when this process may mount one, so that the disk_full fault is a real ENOSPC; backup and
restore around a corruption), ``corrupt_store`` (the ``CORRUPTIONS`` the corrupt fault
applies before a start; ``byte_flip`` too, in the survey's ``SURVEY_KINDS``) and
``survey_corruption`` (many damaged copies of a closed store, each opened as the consumer
would).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import sqlite3
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from harness.mounts import mount_tmpfs, unmount

CORRUPTIONS = ("truncate", "garbage_header", "page_scribble", "zero_length")
SURVEY_KINDS = (*CORRUPTIONS, "byte_flip")


class StoreDir:
    """A consumer's store directory; on a small tmpfs of its own when this process may mount
    one, so that 'disk full' is a real ENOSPC that goes away when the filler is removed."""

    def __init__(self, path: Path, tmpfs_mb: int = 0) -> None:
        self.path = path
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.mounted = False
        self.mount_error = ""
        if tmpfs_mb > 0:
            self.mount_error = mount_tmpfs(self.path, f"{tmpfs_mb}m", "mode=0700")
            self.mounted = not self.mount_error

    @property
    def filler(self) -> Path:
        return self.path / "chaos-filler"

    def fill(self) -> int:
        """Take every free byte; returns how many were taken."""
        written = 0
        chunk = b"\0" * (1 << 20)
        with open(self.filler, "wb") as fh:
            try:
                while True:
                    written += fh.write(chunk)
                    fh.flush()
            except OSError:
                pass
        with contextlib.suppress(OSError), open(self.filler, "ab") as fh:
            try:
                while True:
                    written += fh.write(b"\0" * 4096)
                    fh.flush()
            except OSError:
                pass
        return written

    def unfill(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.filler.unlink()

    def files(self) -> list[Path]:
        return sorted(p for p in self.path.iterdir() if p.is_file() and p != self.filler)

    def backup(self, dest: Path) -> None:
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for p in self.files():
            shutil.copy2(p, dest / p.name)

    def restore(self, src: Path) -> None:
        """Put a backup back in place (inside the directory: it may be a mount point)."""
        for p in self.files():
            p.unlink()
        for p in src.iterdir():
            shutil.copy2(p, self.path / p.name)

    def close(self) -> None:
        if self.mounted:
            unmount(self.path)
            self.mounted = False


def corrupt_store(db: Path, how: str, rng: random.Random) -> str:
    """Damage ``index.sqlite`` the way real accidents do; returns what was done."""
    size = db.stat().st_size
    if how == "truncate":
        keep = max(4096, size // 2 // 4096 * 4096 + 1000)
        os.truncate(db, keep)
        return f"truncated {size} -> {keep} bytes"
    if how == "zero_length":
        os.truncate(db, 0)
        return f"truncated {size} -> 0 bytes"
    with open(db, "r+b") as fh:
        if how == "garbage_header":
            fh.write(rng.randbytes(100))
            return "first 100 bytes overwritten"
        if how == "page_scribble":
            pages = max(2, size // 4096)
            page = rng.randrange(1, pages)
            fh.seek(page * 4096)
            fh.write(rng.randbytes(4096))
            return f"page {page + 1} of {pages} overwritten with random bytes"
        if how == "byte_flip":
            where = rng.randrange(4096, max(4097, size))
            fh.seek(where)
            old = fh.read(1)
            fh.seek(where)
            fh.write(bytes([old[0] ^ (1 << rng.randrange(8))]) if old else b"\xff")
            return f"one bit flipped at byte {where} of {size}"
    raise ValueError(f"unknown corruption {how!r}")


_TABLES = ("counters", "docs", "verdicts", "versions", "positions", "sets", "shingles", "edges",
           "crowded", "bucket_log", "meta")


def _content(db: Path) -> str:
    """A digest of every row of the store's tables (what verdicts are computed from)."""
    import hashlib

    digest = hashlib.sha256()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        for table in _TABLES:
            for row in sorted(repr(r) for r in conn.execute(f"SELECT * FROM {table}")):
                digest.update(row.encode())
    finally:
        conn.close()
    return digest.hexdigest()


def survey_corruption(store: Path, preset: str, kinds: Sequence[str], trials: int,
                      work: Path, seed: int = 0) -> dict[str, dict[str, int]]:
    """Damage copies of a (closed) store many times and open each as the consumer would.

    Outcomes per kind: ``refused`` (a StoreError at open: the clear error we want),
    ``other_error`` (some other exception: unclear), ``intact`` (opened, every row the same:
    the damage hit unused space), ``damage_on_read`` (opened, but reading the rows fails
    later: loud, at run time), ``silent`` (opened and rows differ: verdicts computed from
    them can be wrong without any error); of those, ``silent_found_by_verify`` are the ones
    `streamdedup store verify` (the full check on demand) reports."""
    from streamdedup.core.sketch import Sketcher
    from streamdedup.errors import StoreError
    from streamdedup.settings import build_settings
    from streamdedup.store import open_store
    from streamdedup.store.sqlite.maintenance import verify

    params = Sketcher(build_settings(preset, env={})).params()
    rng = random.Random(seed)
    conn = sqlite3.connect(store / "index.sqlite")  # fold any WAL into the file we copy
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    original = _content(store / "index.sqlite")
    out: dict[str, dict[str, int]] = {}
    for how in kinds:
        counts: Counter[str] = Counter()
        for _ in range(trials):
            copy = work / "survey"
            shutil.rmtree(copy, ignore_errors=True)
            copy.mkdir(parents=True)
            shutil.copy2(store / "index.sqlite", copy / "index.sqlite")
            corrupt_store(copy / "index.sqlite", how, rng)
            try:
                opened = open_store("sqlite", str(copy), params)
            except StoreError:
                counts["refused"] += 1
                continue
            except Exception:
                counts["other_error"] += 1
                continue
            opened.close()
            try:
                same = _content(copy / "index.sqlite") == original
            except Exception:
                counts["damage_on_read"] += 1
                continue
            counts["intact" if same else "silent"] += 1
            if not same:
                try:
                    counts["silent_found_by_verify"] += bool(verify(copy))
                except StoreError:
                    counts["silent_found_by_verify"] += 1
        out[how] = dict(counts)
        shutil.rmtree(work / "survey", ignore_errors=True)
    return out
