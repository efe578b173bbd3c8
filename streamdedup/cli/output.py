"""Output files named on the command line (``--out``, ``--errors``): checked before any work.

Why: ``check dump.jsonl --out dump.jsonl`` truncated the dump it was reading and exited 0
with 32 of 600 documents judged, and an ``--out`` in a directory that does not exist ended a
run in a traceback after the store was opened. Both are now one line, before anything is
read or written. Devices (``/dev/null``, ``/dev/stdout``) are outputs like any other.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
from pathlib import Path
from typing import TextIO

import click

from streamdedup.replay.config import STDOUT
from streamdedup.settings import Settings
from streamdedup.terminal import counted

__all__ = ["STDOUT", "again_with_retention", "checked_output", "named_file", "none_judged",
           "not_kept", "not_utf8_warning", "open_output", "store_directory",
           "writable_directory"]


def not_utf8_warning(path: Path, not_utf8: int, rows: int) -> str:
    """What to say when many of a dump's rows are ``not_utf8`` (5 % or more): a file saved
    as Latin-1 or Windows-1252 made every row with an accented letter a bad row, one by
    one, and the run ended with exit 0 and "N bad rows" only."""
    if not not_utf8 or not_utf8 * 20 < rows:
        return ""
    return (f"warning: {not_utf8:,} of {rows:,} rows of {path} are not UTF-8: is the file in "
            f"another encoding (Latin-1, Windows-1252)? Convert it, e.g. `iconv -f "
            f"windows-1252 -t utf-8 {shlex.quote(str(path))} > converted{path.suffix}`, and "
            "read the copy")


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


def again_with_retention(settings: Settings) -> str:
    """What an interrupted `check` or `backfill` adds to "running it again gives the same
    verdicts" under --retention: an ad judged before that has left the window since is judged
    anew against the window of now (20,000 generated ads, 2-day window, stopped after 6 s:
    17,120 verdicts differed on the second run)."""
    if not settings.retention:
        return ""
    return ("; with --retention, though, the ads that have left the window since are judged "
            "anew: for the same verdicts, start again with an empty store")


def not_kept(remove: bool, directory: Path | None) -> str:
    """A SQLite store a command made and put nothing in is removed (empty, but pinned to the
    run's settings: the next try with another --preset was refused); says so."""
    if not remove or directory is None:
        return ""
    shutil.rmtree(directory, ignore_errors=True)
    return f"; the store it started at {directory} is not kept"


def judged_before(documents: int) -> str:
    """What a store outage (Redis away, restarted) leaves of a `check` or `backfill`."""
    return (f"; the {counted(documents, 'document')} judged before it "
            f"{'stands' if documents == 1 else 'stand'}, and the same command again goes on "
            "from what the store kept")


def none_judged(path: Path, first_error: str, where: str = "") -> str:
    """What `check` and `backfill` say when every row was bad: the first reason, and for
    unreadable times (``--retention`` on a dump whose times do not parse) the way out."""
    hint = ("; --time-field '' judges them without their times instead"
            if first_error.startswith("bad_time") else "")
    return (f"every row of {path} was bad, none was judged (the first: {first_error}"
            f"{where}){hint}")


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


def store_named(settings: Settings) -> str:
    """Where the judged ads went: a second `check` or `backfill` into the same store (by default
    ./streamdedup-store) judges the dump against them, so the summary says which."""
    if settings.store_backend == "memory":
        return "nothing kept (--store-backend memory)"
    if settings.store_backend == "redis":
        return f"store: Redis namespace {settings.redis_namespace}"
    return f"store: {settings.store}"
