"""What `check` and `backfill` say of how a run went, besides their counts: where the ads
went, what an interruption or an outage leaves, a dump in another encoding, every row bad.
One wording for both commands, so a script that reads one reads the other.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from streamdedup.settings import Settings
from streamdedup.terminal import counted


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


def again_with_retention(settings: Settings) -> str:
    """What an interrupted `check` or `backfill` adds to "running it again gives the same
    verdicts" under --retention: an ad judged before that has left the window since is judged
    anew against the window of now (20,000 generated ads, 2-day window, stopped after 6 s:
    17,120 verdicts differed on the second run)."""
    if not settings.retention:
        return ""
    return ("; with --retention, though, the ads that have left the window since are judged "
            "anew: for the same verdicts, start again with an empty store")


def untimed_said(settings: Settings, documents: int) -> str:
    """How many documents had no time field where retention reads one (empty if none): each
    took the clock's time, so its window is not its own."""
    if not settings.read_time_field or not documents:
        return ""
    return (f"; {counted(documents, 'document')} without a {settings.time_field!r} field took "
            "the clock's time (the newest seen; on a fresh store, their batch's first)")


def not_kept(remove: bool, directory: Path | None) -> str:
    """A SQLite store a command made and put nothing in is removed (empty, but pinned to the
    run's settings: the next try with another --preset was refused); says so."""
    if not remove or directory is None:
        return ""
    shutil.rmtree(directory, ignore_errors=True)
    return f"; the store it started at {directory} is not kept"


def judged_before(documents: int, settings: Settings) -> str:
    """What a store outage (Redis away, restarted) leaves of a `check` or `backfill` (with
    retention, as an interrupted one: the run again judges anew what left the window)."""
    return (f"; the {counted(documents, 'document')} judged before it "
            f"{'stands' if documents == 1 else 'stand'}, and the same command again goes on "
            "from what the store kept" + again_with_retention(settings))


def none_judged(path: Path, first_error: str, where: str = "") -> str:
    """What `check` and `backfill` say when every row was bad: the first reason, and for
    unreadable times (``--retention`` on a dump whose times do not parse) the way out."""
    hint = ("; --time-field '' judges them without their times instead"
            if first_error.startswith("bad_time") else "")
    return (f"every row of {path} was bad, none was judged (the first: {first_error}"
            f"{where}){hint}")


def store_named(settings: Settings) -> str:
    """Where the judged ads went: a second `check` or `backfill` into the same store (by default
    ./streamdedup-store) judges the dump against them, so the summary says which."""
    if settings.store_backend == "memory":
        return "nothing kept (--store-backend memory)"
    if settings.store_backend == "redis":
        return f"store: Redis namespace {settings.redis_namespace}"
    return f"store: {settings.store}"
