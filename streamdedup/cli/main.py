"""The `streamdedup` command line (click): run, scurve; check (check.py); replay
(replay.py); monitor, tail (watch.py); produce (produce.py); explain (explain.py); backfill
(backfill.py); store (store.py).

The top layer: it imports the layers below and nothing imports it. Every ``Settings`` field is
a flag and an environment variable (``options.py``). Heavy modules are imported inside the
command that needs them, so `streamdedup check` does not pay for Kafka, and no command pays
for matplotlib or scipy unless it plots or computes ground truth.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import click

from streamdedup import __version__
from streamdedup.cli.backfill import backfill_command
from streamdedup.cli.check import check_command
from streamdedup.cli.explain import explain_command
from streamdedup.cli.options import failure, logged_settings, make_settings, settings_options
from streamdedup.cli.produce import produce_command
from streamdedup.cli.replay import replay_command
from streamdedup.cli.signals import sigterm_as_interrupt
from streamdedup.cli.store import store_command
from streamdedup.cli.watch import monitor_command, tail_command
from streamdedup.errors import StreamdedupError
from streamdedup.settings import MAX_NUM_PERM


class _Commands(click.Group):
    """Every command ends alike for a script. Ctrl-C, or SIGTERM, that a command does not
    take itself is one line and exit 130: click said "Aborted!" with exit 1 (`store verify`,
    `tail`, `explain`), the status of a failure, and SIGTERM ended `produce` without a word.
    A reader that closed the pipe (`store stats | head -1`) ends the command quietly, 141 as
    a shell says it (click said nothing and exited 1). `run` and `monitor` install their own
    handlers: a stop is their normal end, exit 0. A command that failed with output still
    held for a closed pipe ends with its own line and status: Python's flush at exit added
    "Exception ignored ... BrokenPipeError" and made it 120 (`backfill --out - | head -0`
    where standard output is buffered, as in a shell, unlike under CI's PYTHONUNBUFFERED)."""

    def invoke(self, ctx: click.Context) -> Any:
        restore = sigterm_as_interrupt()
        try:
            result = super().invoke(ctx)
            sys.stdout.flush()  # a closed pipe is found here, not at the interpreter's exit
            return result
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(130) from None
        except BrokenPipeError:
            _drop_stdout()
            raise click.exceptions.Exit(141) from None
        finally:
            try:
                sys.stdout.flush()  # what a failed command still holds
            except OSError:
                _drop_stdout()
            restore()


def _drop_stdout() -> None:
    """Standard output to /dev/null: what it holds for a closed pipe is never written."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


@click.group(cls=_Commands,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="streamdedup",
                      message="%(prog)s %(version)s")
def main() -> None:
    """Streaming near-duplicate detection for job announcements."""


@main.command(short_help="Consume announcements from Kafka; a verdict or dead letter each.")
@settings_options
def run(preset: str | None, **options: Any) -> None:
    """Consume announcements from Kafka and emit a verdict (or dead letter) for each."""
    from streamdedup.service.consumer import Service
    from streamdedup.service.stop import StoppedWhileConnecting

    settings = logged_settings(preset, options, opens_store=True)
    try:
        code = Service(settings, handle_signals=True).run()
    except StoppedWhileConnecting:
        code = 0  # stopped while the store was still unreachable: nothing was consumed
    except StreamdedupError as exc:
        raise failure(exc, logged=settings.log_json) from None
    except Exception:
        if not settings.log_json:
            raise  # the traceback, as Python prints it
        logging.getLogger("streamdedup").critical("stopped by an unexpected error",
                                                  exc_info=True, extra={"exit_code": 1})
        code = 1
    sys.exit(code)


@main.command(short_help="Plot the LSH S-curve P(candidate | similarity).")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False),
              default=Path("scurve.png"), show_default=True,
              help="the plot (PNG unless the name says another format matplotlib writes)")
@settings_options(shown=("threshold", "num_perm", "bands", "rows"))
def scurve(out: Path, preset: str | None, **options: Any) -> None:
    """Plot P(candidate | s) = 1 - (1 - s^r)^b, with the threshold marked, for the settings
    every command reads (flags, STREAMDEDUP_* variables, --preset). --bands and --rows alone
    take the rows they need; for a store's curve, give its --bands and --rows (`streamdedup
    store stats` shows them)."""
    # (it read its four flags alone: the default's curve under STREAMDEDUP_PRESET=reference)
    from streamdedup.cli.output import checked_output
    from streamdedup.core.lsh import layout, p_candidate
    from streamdedup.errors import ConfigError
    from streamdedup.replay.plots import image_formats, plot_scurve

    bands, rows = options["bands"], options["rows"]
    if bands and rows and options["num_perm"] is None:  # a curve of its own
        if bands * rows > MAX_NUM_PERM:  # said as "num_perm must be <= 1024", not given
            raise click.UsageError(f"--bands x --rows must be <= {MAX_NUM_PERM} (a signature's "
                                   f"rows at most), not {bands} x {rows} = {bands * rows}")
        unless = make_settings(preset, {**options, "bands": None, "rows": None}).num_perm
        options["num_perm"] = max(unless, bands * rows)
    settings = make_settings(preset, options)
    try:  # the layout's own checks
        bands, rows = layout(settings.threshold, settings.num_perm, settings.bands,
                             settings.rows)
        at = p_candidate(settings.threshold, bands, rows)
    except (ConfigError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    if out.name in ("", "-", ".", ".."):  # '' (read as '.') wrote "PosixPath('.') has an
        raise click.BadParameter("give an image file's name (a plot is not written to "  # empty
                                 "standard output; '' and '.' are this directory)",  # name"
                                 param_hint="'--out'")
    out = out if out.suffix else out.with_suffix(".png")
    try:
        formats = image_formats()
    except StreamdedupError as exc:  # matplotlib is the report extra
        raise failure(exc) from None
    if out.suffix[1:].lower() not in formats:
        raise click.BadParameter(f"{out.name}: matplotlib writes {', '.join(formats)}, not "
                                 f"{out.suffix}", param_hint="'--out'")
    out = checked_output(out)
    try:
        plot_scurve([(bands, rows)], settings.threshold, out)
    except OSError as exc:  # a place the file system refuses (root on /proc): a traceback
        raise click.ClickException(f"cannot write {out}: {exc.strerror or exc}") from None
    click.echo(f"{bands} bands x {rows} rows: P(candidate | s={settings.threshold}) = {at:.6f}; "
               f"plot written to {out}")


main.add_command(check_command)
main.add_command(replay_command)
main.add_command(monitor_command)
main.add_command(tail_command)
main.add_command(produce_command)
main.add_command(explain_command)
main.add_command(backfill_command)
main.add_command(store_command)


if __name__ == "__main__":
    main()
