"""Output files named on the command line (``--out``, ``--errors``): checked before any work.

Why: ``check dump.jsonl --out dump.jsonl`` truncated the dump it was reading and exited 0
with 32 of 600 documents judged, and an ``--out`` in a directory that does not exist ended a
run in a traceback after the store was opened. Both are now one line, before anything is
read or written. Devices (``/dev/null``, ``/dev/stdout``) are outputs like any other.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TextIO

import click

from streamdedup.replay.config import STDOUT
from streamdedup.settings import Settings

__all__ = ["STDOUT", "checked_output", "named_file", "open_output", "store_directory",
           "store_made_here", "writable_directory"]


def named_file(out: Path | None) -> Path | None:
    """The file an output option names; None for standard output ("-" wrote a file named
    "-" in the working directory)."""
    return None if out == STDOUT else out


def checked_output(out: Path, *inputs: Path | None, option: str = "--out",
                   store: Path | None = None, beside: tuple[str, Path] | None = None) -> Path:
    """``out`` if it can be created and overwrites nothing being read: none of ``inputs``,
    nothing in the SQLite ``store`` directory, not the other output ``beside`` (its option
    and path); else a UsageError (exit 2)."""
    for source in inputs:
        if source is not None and _same_regular_file(out, source):
            raise click.UsageError(f"{option} {out} is the input {source}: writing it would "
                                   f"destroy what is being read; give another file")
    if beside is not None and (_same_regular_file(out, beside[1])
                               or _one_new_file(out, beside[1])):
        raise click.UsageError(f"{option} {out} is also {beside[0]}; give another file")
    try:
        if store is not None and out.parent.resolve() == store.resolve():
            raise click.UsageError(f"{option} {out} is in the store's directory {store}; "
                                   f"give a file elsewhere")
        if out.is_dir():
            raise click.UsageError(f"{option} {out} is a directory; give a file")
        if not out.parent.is_dir():
            raise click.UsageError(f"{option} {out}: no directory {out.parent} to write it in")
    except (OSError, RuntimeError) as exc:  # a name too long; a loop of links (3.11)
        raise click.UsageError(f"{option} {out}: {getattr(exc, 'strerror', None) or exc}"
                               ) from None
    return out


def open_output(out: Path, option: str = "--out") -> TextIO:
    """``out``, checked before any work (``checked_output``), opened for writing: a refusal
    by the file system now (permissions, a full disk, a loop of links) is one line too."""
    try:
        return out.open("w", encoding="utf-8")
    except OSError as exc:
        raise click.ClickException(f"cannot write {option} {out}: "
                                   f"{exc.strerror or exc}") from None


def writable_directory(path: Path, option: str) -> None:
    """Refuses a report directory that cannot be made or written, before the run: a backfill
    wrote its whole store, then ended in a 50-line traceback; a replay ran to its end."""
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise click.UsageError(f"{option} {path}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):  # a read-only mount says so to root too
        raise click.UsageError(f"{option} {path}: {probe} cannot be written")


def store_directory(settings: Settings) -> Path | None:
    """The SQLite store's directory, where no output may go (its files are being written).
    None for an empty ``--store`` too, which opening the store refuses in its own words
    (it was "--out x.jsonl is in the store's directory .")."""
    if settings.store_backend != "sqlite" or not settings.store.strip():
        return None
    return Path(settings.store)


def store_made_here(directory: Path | None) -> bool:
    """Whether a command opening the SQLite store at ``directory`` makes it (so it removes
    it again if it judged nothing). A link to nothing is refused, not made: it was said as a
    store "started and not kept"."""
    return directory is not None and not (directory.exists() or directory.is_symlink())


def _same_regular_file(a: Path, b: Path) -> bool:
    """``a`` exists and is the regular file ``b`` is, also through another spelling of its
    path or a link (two outputs may both be ``/dev/null``)."""
    try:
        return os.path.samefile(a, b) and stat.S_ISREG(os.stat(a).st_mode)
    except OSError:  # one of them does not exist (an output not written yet), or a loop
        return False


def _one_new_file(a: Path, b: Path) -> bool:
    """``a`` and ``b`` spell one file that does not exist yet (``--out y --errors y``: both
    opened for writing, the verdicts overwrote the error rows)."""
    try:
        return not a.exists() and a.resolve() == b.resolve()
    except (OSError, RuntimeError):
        return False
