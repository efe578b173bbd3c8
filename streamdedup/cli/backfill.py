"""`streamdedup backfill`: a historical dump into a store, sketched in parallel (Spark) and
judged in arrival order by the stream's detector (``replay/backfill.py``)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from streamdedup import garbage
from streamdedup.cli.options import failure, make_settings, settings_options
from streamdedup.errors import StoreError, StoreUnavailableError, StreamdedupError
from streamdedup.replay.config import ENGINES, ORDERS, BackfillConfig
from streamdedup.replay.dump import FORMATS, detect_format
from streamdedup.settings import flag_name
from streamdedup.terminal import counted

DEFAULT = BackfillConfig  # its fields' defaults are the flags'


@click.command(name="backfill",
               short_help="Judge a historical dump into the store (Spark or local).")
@click.argument("dump", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="dump format [default: from the file name]")
@click.option("--engine", type=click.Choice(ENGINES), default=DEFAULT.engine,
              show_default=True, help="where the sketches are computed")
@click.option("--master", default=DEFAULT.master, show_default=True,
              help="Spark master (local[N], spark://host:7077, yarn, ...)")
@click.option("--driver-memory", default=DEFAULT.driver_memory, show_default=True,
              help="the Spark driver's JVM heap (in local mode the executors run in it too)")
@click.option("--partitions", type=click.IntRange(min=0), default=DEFAULT.partitions,
              help="Spark partitions of the dump; 0 = 4 per core, or one per ~2,000 ads when "
                   "that is more [default: 0]")
@click.option("--order-by", type=click.Choice(ORDERS), default=DEFAULT.order_by,
              show_default=True, help="arrival order of the rows (timestamp: by --time-field)")
@click.option("--timestamp-field", default=None, hidden=True)  # before --time-field was one
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="the verdicts, one JSON object per line, in arrival order; - is standard "
                   "output")
@click.option("--pairs/--probe", "pairs", default=DEFAULT.pairs, show_default=True,
              help="--pairs: the engine finds every new set's candidate pairs and verifies "
              "them for the whole dump at once (into an empty store; a store that holds "
              "documents is always probed); --probe: the driver probes per document, as "
              "check does")
@click.option("--report", "--report-dir", "report_dir",  # --report-dir: replay's spelling
              type=click.Path(path_type=Path, file_okay=False),
              default=None, help="also write replay's quality report here (report.json, "
              "report.md, plots): precision and recall against exact Jaccard of every pair, "
              "the study's band table with this run's candidate pairs")
@click.option("--errors", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="unusable rows with their row number (0-based, header not counted) and "
              "reason; - is standard output [default: --out with the suffix .errors.jsonl; "
              "with --out -, among the verdicts, before them]")
@settings_options(shown=("text", "sketch", "store", "retention", "only_duplicates",
                           "max_message_bytes"))
def backfill_command(dump: Path, fmt: str | None, engine: str, master: str, driver_memory: str,
                     partitions: int,
                     order_by: str, timestamp_field: str | None, out: Path, pairs: bool,
                     report_dir: Path | None, errors: Path | None, preset: str | None,
                     **options: Any) -> None:
    """Backfill DUMP into the store (--store DIR, or --store-backend redis --redis-url URL):
    the verdicts `streamdedup check` would give, with the sketching done by Spark executors.
    `run` and `check` continue from the store afterwards; running it again changes nothing
    (with --retention, an ad that has left the window since is judged anew)."""
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
        store_directory,
        store_made_here,
        writable_directory,
    )
    from streamdedup.cli.progress import progress_bar
    from streamdedup.core.sketch import Sketcher
    from streamdedup.replay.backfill import backfill
    from streamdedup.store import open_configured

    if timestamp_field is not None:  # one field for the order and for retention's times
        if options.get("time_field") not in (None, timestamp_field):
            raise click.UsageError("--timestamp-field is an old name of --time-field; give one")
        click.echo("--timestamp-field is now --time-field (the field retention reads too)",
                   err=True)
        options["time_field"] = timestamp_field
    settings = make_settings(preset, options, opens_store=True)
    if order_by == "timestamp" and not settings.time_field:
        raise click.UsageError("--order-by timestamp needs a --time-field to read the times "
                               "from (it was given '')")
    if engine != "spark":  # a Spark flag given to the local engine: most likely a mistake
        context = click.get_current_context()
        given = [flag_name(name) for name in ("master", "driver_memory", "partitions")
                 if context.get_parameter_source(name) is not ParameterSource.DEFAULT]
        if given:
            raise click.UsageError(f"{', '.join(given)} "
                                   f"{'applies' if len(given) == 1 else 'apply'} only to "
                                   f"--engine spark; this backfill runs --engine {engine}")
    try:  # the Spark flags are checked here, before the store is made and the dump read
        if fmt is None and dump.is_file():  # else an --errors file was left behind
            fmt = detect_format(dump)
        config = BackfillConfig(dump=dump, out=out, errors=errors, fmt=fmt, engine=engine,
                                master=master, driver_memory=driver_memory,
                                order_by=order_by,
                                partitions=partitions, pairs=pairs, report_dir=report_dir)
        from streamdedup.extras import require

        if report_dir is not None:  # it judged the whole dump, then said scipy was missing
            require("scipy", "--report (its ground truth)")
            require("matplotlib", "--report (its plots)")
        if engine == "spark":  # before the store is made, the dump read and --out emptied
            from streamdedup.replay.spark import check_master_answers

            require("pyspark", "the Spark backfill")
            check_master_answers(master)
    except StreamdedupError as exc:
        raise failure(exc) from None
    directory = store_directory(settings)
    if out != STDOUT:
        checked_output(out, dump, store=directory)
    if report_dir is not None:
        writable_directory(report_dir, "--report")
        if directory is not None and report_dir.resolve() == directory.resolve():
            raise click.UsageError(f"--report {report_dir} is the store's directory; give "
                                   "another (the report's files would sit among the store's)")
    if errors is None and ((out.exists() and not out.is_file())  # a pipe, a device
                           or out.absolute().parts[1:2] in (("dev",), ("proc",))):
        # /dev/stdout is a regular file when the shell redirects it to one
        raise click.UsageError(f"--out {out} is no regular file: give --errors FILE too (the "
                               f"default, {config.errors_path}, would be made beside it)")
    if config.errors_path != STDOUT:
        checked_output(config.errors_path, dump, option="--errors", store=directory,
                       beside=("--out", out))
    bar = progress_bar(unit="doc", delay=0.5)

    def say(message: str) -> None:
        bar.write(message, file=sys.stderr)

    garbage.settle()  # start-up is over (50,000 ads, local engine: 7.1 -> 2.2 s of GC)
    made_here = store_made_here(directory)
    judged = 0
    counted_by_store = False  # judged is the store's count (else this run's)
    committed = 0  # documents this run judged and committed

    def advance(n: int) -> None:
        nonlocal committed
        committed += n
        bar.update(n)

    def dropped() -> str:
        """Removes a store this command made and put nothing in; says so (else "")."""
        return not_kept(made_here and not judged, directory)

    def held() -> str:
        """What the store holds now (it is kept), or that it was removed (nothing judged)."""
        if settings.store_backend == "memory":
            return "; nothing was kept (--store-backend memory)"
        held = (f"the store holds {counted(judged, 'document')}" if counted_by_store else
                f"the {counted(judged, 'document')} this run committed "
                f"{'is' if judged == 1 else 'are'} in the store")
        return dropped() or (f"; {held}, and "
                             "backfilling the dump again goes on from there"
                             + again_with_retention(settings))

    try:
        store = open_configured(settings, Sketcher(settings).params())
        try:
            result = backfill(settings, store, config, progress=advance, say=say)
        except BaseException:
            # What was not committed is not held (it was counted: up to 499). The memory
            # store cannot roll back, and keeps nothing anyway.
            with contextlib.suppress(StoreError):
                store.rollback()
            raise
        finally:
            judged = committed  # what this run committed, if the store cannot say more
            try:
                with contextlib.suppress(StoreError):  # away: the error above is the one
                    judged = store.stats()["documents"]  # to say (Ctrl-C became it)
                    counted_by_store = True
            finally:
                store.close()
    except StreamdedupError as exc:
        gone = dropped()
        if isinstance(exc, StoreUnavailableError) and committed and not gone:  # Redis
            gone = judged_before(committed, settings)
        raise failure(exc, gone) from None
    except OSError as exc:  # the outputs: checked above, refused by the file system now
        name = str(exc.filename)
        if report_dir is not None and Path(name).is_relative_to(report_dir):
            raise click.ClickException(f"cannot write the report in {report_dir}: "
                                       f"{exc.strerror or exc}; the verdicts are written"
                                       + held()) from None
        if name not in (str(out), str(config.errors_path), "standard output"):
            raise
        raise click.ClickException(f"cannot write {name}: {exc.strerror}" + held()) from None
    except KeyboardInterrupt:  # as check says it; the driver commits every 500 documents
        click.echo("interrupted" + held(), err=True)
        raise click.exceptions.Exit(130) from None
    finally:
        bar.close()
    rate = result.documents / result.seconds if result.seconds else 0.0
    where = f"spark {master}" if engine == "spark" and result.documents else "local"
    parts = [f"{counted(result.documents, 'document')}, "
             f"{counted(result.duplicates, 'duplicate')}, "
             f"{counted(result.bad.count, 'bad row')} ({config.errors_place}), "
             f"{result.seconds:.1f} s, "
             f"{rate:.0f} documents/s ({where})"]
    if result.sketch_seconds:
        parts.append(f"sketching took {result.sketch_seconds:.1f} s")
    if result.plan is not None:
        p = result.plan
        parts.append(f"pair plan: {p['candidate_pairs']} candidate pairs of "
                     f"{p['distinct_sets']} distinct sets, {p['verified_pairs']} verified, "
                     f"{p['over_cap']} sets over max_candidates, {result.plan_seconds:.1f} s")
    if settings.retention:
        parts.append(f"retention {settings.retention}: {result.evicted}")
    if said := untimed_said(settings, result.untimed):
        parts.append(said.removeprefix("; "))
    if result.unordered and result.unordered == result.documents:
        parts.append(f"no row has a readable {settings.time_field!r} (ISO 8601 or epoch "
                     "seconds): --order-by timestamp kept the file's order")
    elif result.unordered:
        parts.append(f"{result.unordered} rows without a readable "
                     f"{settings.time_field!r} came last")
    # a dump of a header and no row: the new store was empty but pinned to these settings
    empty = not result.documents and not result.bad.count
    parts.append(dropped().removeprefix("; ") if empty and made_here
                 else store_named(settings))
    click.echo("; ".join(parts), err=True)
    if encoding := not_utf8_warning(dump, result.bad.not_utf8, result.documents + result.bad.count):
        click.echo(encoding, err=True)
    if result.bad.count and not result.documents:
        raise click.ClickException(none_judged(dump, result.bad.first,
                                               f"; all in {result.errors_path}") + dropped())
    if result.report is not None:
        from streamdedup.replay.report import summary

        aside = out == STDOUT  # standard output holds the verdicts: the summary goes aside
        click.echo(summary(result.report), err=aside)
        click.echo(f"report: {result.report_paths['md']}", err=aside)
