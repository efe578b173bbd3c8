"""`streamdedup check`: a dump judged in file order into a store, one verdict per line.

The offline twin of `run`: the same detector and store, no Kafka. The next batch is read
and sketched in a second process (``replay/read_ahead.py``, ``--sketch-ahead``) while this
one judges the current one (the consumer's twin is ``service/sketch_worker.py``); verdicts
and bad rows go to their outputs as each batch ends (``cli/output.py``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import click

from streamdedup import garbage
from streamdedup.cli.options import failure, make_settings, settings_options
from streamdedup.errors import StoreUnavailableError, StreamdedupError
from streamdedup.replay.bad_rows import BadRows
from streamdedup.replay.dump import FORMATS
from streamdedup.settings import Settings
from streamdedup.terminal import counted


@click.command(name="check",
               short_help="Judge a dump in file order into a store; verdicts as JSONL.")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="input format [default: from the file name]")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="write verdicts (JSONL) here; - is standard output [default: standard "
                   "output]")
@click.option("--errors", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="write the bad rows (JSONL: row, error, detail) here; - is standard "
                   "output [default: among the verdicts]")
@settings_options(shown=("text", "sketch", "store", "retention", "only_duplicates",
                           "max_message_bytes", "sketch_ahead"))
def check_command(path: Path, fmt: str | None, out: Path | None, errors: Path | None,
                  preset: str | None, **options: Any) -> None:
    """Run a dump through the detector in file order; one verdict per line (JSONL), and one
    line per bad row saying why. The judged documents are added to --store (by default the
    same as run's: give check a store of its own), so a later dump
    is judged against this one; --store-backend memory keeps nothing."""
    from streamdedup.cli.outcome import (
        again_with_retention,
        judged_before,
        none_judged,
        not_kept,
        not_utf8_warning,
        store_named,
        untimed_said,
    )
    from streamdedup.cli.output import (
        STDOUT,
        checked_output,
        named_file,
        open_output,
        store_directory,
        store_made_here,
    )
    from streamdedup.cli.progress import progress_bar
    from streamdedup.core.sketch import Sketcher
    from streamdedup.detection.shared_detector import detector_for
    from streamdedup.replay.config import BATCH
    from streamdedup.replay.dump import batched, read_dump, row_number_warning
    from streamdedup.replay.read_ahead import ReadAhead
    from streamdedup.store import open_configured
    from streamdedup.store.base import Evicted

    settings = make_settings(preset, options, opens_store=True)
    directory = store_directory(settings)
    errors_to_stdout = errors == STDOUT
    out, errors = named_file(out), named_file(errors)
    if out is not None:
        checked_output(out, path, store=directory)
    if errors is not None:
        checked_output(errors, path, option="--errors", store=directory,
                       beside=("--out", out) if out else None)
    ahead: ReadAhead | None = None
    try:
        rows = read_dump(path, fmt, settings.text_fields, max_bytes=settings.max_message_bytes,
                         time_field=settings.read_time_field, id_field=settings.id_field)
        sketcher = Sketcher(settings)
        batches: Iterable[tuple[list[Any], Any]] = ((b, None) for b in batched(rows, BATCH))
        garbage.settle()  # start-up is over; the read-ahead child inherits it
        if settings.sketch_ahead:  # started before the store is opened: it holds none of it
            batches = ahead = ReadAhead(path, fmt, settings)
        made_here = store_made_here(directory)
        store = open_configured(settings, sketcher.params())
        try:
            warning = row_number_warning(path, fmt, lambda: store.stats()["documents"],
                                         settings.id_field,
                                         lambda doc_id: store.get_doc(doc_id) is not None)
        except BaseException:
            store.close()
            raise
    except StreamdedupError as exc:
        if ahead is not None:
            ahead.close()
        raise failure(exc) from None
    if warning:
        click.echo(warning, err=True)
    detector = detector_for(settings, store, sketcher)
    opened: list[TextIO] = []
    try:
        for target, option in ((out, "--out"), (errors, "--errors")):
            if target is not None:
                opened.append(open_output(target, option))
    except click.ClickException:
        if ahead is not None:
            ahead.close()
        store.close()
        for each in opened:
            each.close()
        raise
    sink: TextIO = opened[0] if out else sys.stdout
    bad: TextIO = opened[-1] if errors else sys.stdout if errors_to_stdout else sink
    tally = _Tally()
    start = time.perf_counter()
    bar = progress_bar(unit="doc")
    try:
        for batch, sketches in batches:
            _check_batch(detector, batch, sketches, sink, bad, tally, settings,
                         lambda line: bar.write(line, file=sys.stderr))
            bar.update(len(batch))
    except StreamdedupError as exc:  # e.g. a TSV field too long to read past
        if made_here and not tally.docs:
            store.close()  # before its directory goes (SQLite: closing again does nothing)
            raise failure(exc, not_kept(True, directory)) from None
        if isinstance(exc, StoreUnavailableError) and tally.docs:  # Redis gone or restarted
            raise failure(exc, judged_before(tally.docs, settings)) from None
        raise failure(exc) from None
    except KeyboardInterrupt:  # as produce says it: where it stopped, and that again is safe
        click.echo(f"interrupted: {counted(tally.docs, 'document')} judged, "
                   f"{counted(tally.bad.count, 'bad row')}; "
                   f"{_so_far(settings)}" + again_with_retention(settings), err=True)
        raise click.exceptions.Exit(130) from None
    finally:
        bar.close()
        if ahead is not None:
            ahead.close()
        store.close()
        unwritten = _close_all(opened, settings, sys.stdout in (sink, bad), tally.docs)
    if unwritten:
        raise click.ClickException(unwritten)
    elapsed = time.perf_counter() - start
    docs, untimed, first_error = tally.docs, tally.untimed, tally.bad.first
    click.echo(
        f"{counted(docs, 'document')}, {counted(tally.dups, 'duplicate')}, "
        f"{counted(tally.bad.count, 'bad row')}, {elapsed:.2f} s, "
        f"{docs / elapsed if elapsed else 0:.0f} documents/s; {sketcher.bands} bands x "
        f"{sketcher.rows} rows, P(candidate | s={settings.threshold}) = "
        f"{sketcher.recall_at_threshold():.6f}"
        + (f"; retention {settings.retention}: {getattr(detector, 'evicted', Evicted())}"
           if settings.retention else "")
        + untimed_said(settings, untimed)
        # a dump of a header and no row: the new store was empty but pinned to these settings
        + (not_kept(True, directory) if made_here and not docs and not tally.bad.count
           else f"; {store_named(settings)}"),
        err=True,
    )
    if encoding := not_utf8_warning(path, tally.bad.not_utf8, docs + tally.bad.count):
        click.echo(encoding, err=True)
    if tally.bad.count and not docs:  # e.g. --retention on a dump whose times do not parse
        raise click.ClickException(none_judged(path, first_error)
                                   + not_kept(made_here, directory))


@dataclass
class _Tally:
    """What `check` says at the end."""

    docs: int = 0
    dups: int = 0
    bad: BadRows = field(default_factory=BadRows)
    untimed: int = 0  # documents without a time (with retention: at the clock's)


def _check_batch(detector: Any, batch: list[Any], sketches: Any, sink: TextIO, bad: TextIO,
                 tally: _Tally, settings: Settings, say: Callable[[str], None]) -> None:
    """Judge and write one batch (judged again after a store outage: ``outage.py``); bad
    rows are written whatever ``only_duplicates`` says (a row left out of the output must
    say why)."""
    from streamdedup.detection.outage import judged
    from streamdedup.errors import MessageError

    docs = [item for _, item in batch if not isinstance(item, MessageError)]
    verdicts = iter(judged(detector, lambda: detector.process_many(docs, sketches), say))
    tally.docs += len(docs)
    target = sink
    try:
        for row, item in batch:
            if isinstance(item, MessageError):
                target = bad
                bad.write(tally.bad.add(row, item))
            else:
                verdict = next(verdicts)
                tally.dups += verdict.duplicate
                tally.untimed += item.time is None
                if verdict.duplicate or not settings.only_duplicates:
                    target = sink
                    sink.write(verdict.to_json() + "\n")
    except OSError as exc:  # a full disk, a closed pipe: only writing raises it here
        raise click.ClickException(_unwritten(target, exc, settings, tally.docs)) from None


def _so_far(settings: Settings, judged: int | None = None) -> str:
    if settings.store_backend == "memory":
        return "nothing was kept (--store-backend memory)"
    these = ("the documents judged so far are" if judged is None else
             f"the {counted(judged, 'document')} judged so far {'is' if judged == 1 else 'are'}")
    return f"{these} in the store, and checking the dump again gives the same verdicts"


def _unwritten(target: TextIO, exc: OSError, settings: Settings, judged: int) -> str:
    name = getattr(target, "name", "the output")
    name = "standard output" if name == "<stdout>" else name
    return f"cannot write {name}: {exc.strerror or exc}; {_so_far(settings, judged)}"


def _close_all(opened: list[TextIO], settings: Settings, stdout: bool, judged: int) -> str:
    """Close every output, and flush standard output if it took verdicts or bad rows; what
    a failed close or flush (a buffer's last write) says, or ''. Standard output is flushed
    here, not at exit: a closed pipe that its buffer alone met (a small dump, `| head -0`)
    said the usual summary and exited 141, as if every verdict had been read."""
    said = ""
    for each in ([sys.stdout] if stdout else []) + opened:
        try:
            each.flush() if each is sys.stdout else each.close()
        except OSError as exc:
            said = said or _unwritten(each, exc, settings, judged)
    return said
