"""The `streamdedup` command line (click): run, check, scurve, replay, broker.

Every ``Settings`` field is a flag (``--input-topic``) and an environment variable
(``STREAMDEDUP_INPUT_TOPIC``); flags are generated from the dataclass so defaults live in one
place. Precedence: defaults < ``--preset`` < environment < flags.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any, TextIO

import click

from streamdedup.errors import StreamdedupError
from streamdedup.settings import ENV_PREFIX, PRESETS, Settings, build_settings


def settings_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add one option per Settings field (default None: 'not given')."""
    for f in reversed(fields(Settings)):
        flag = "--" + f.name.replace("_", "-")
        env = ENV_PREFIX + f.name.upper()
        default = ",".join(f.default) if isinstance(f.default, tuple) else f.default
        help_text = f"{f.metadata['help']} [default: {default!r}; env {env}]"
        if isinstance(f.default, bool):
            opt = click.option(f"{flag}/--no-{flag[2:]}", f.name, default=None, help=help_text)
        elif isinstance(f.default, tuple):
            opt = click.option(flag, f.name, default=None, help=help_text + " (comma-separated)",
                               callback=_split_commas)
        else:
            opt = click.option(flag, f.name, type=type(f.default), default=None, help=help_text)
        func = opt(func)
    return click.option(
        "--preset", type=click.Choice(sorted(PRESETS)), default=None,
        help=f"named settings bundle [default: 'default'; env {ENV_PREFIX}PRESET]",
    )(func)


def _split_commas(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    return tuple(v.strip() for v in value.split(",") if v.strip())


def make_settings(preset: str | None, options: dict[str, Any]) -> Settings:
    try:
        return build_settings(preset, overrides=options)
    except StreamdedupError as exc:
        raise click.UsageError(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def main() -> None:
    """Streaming near-duplicate detection for job announcements."""


@main.command()
@settings_options
def run(preset: str | None, **options: Any) -> None:
    """Consume announcements from Kafka and emit a verdict (or dead letter) for each."""
    from streamdedup.consumer import Service
    from streamdedup.logs import setup_logging

    settings = make_settings(preset, options)
    setup_logging(settings.log_level, settings.log_json)
    try:
        service = Service(settings)
    except StreamdedupError as exc:
        raise click.ClickException(str(exc)) from None
    service.install_signal_handlers()
    sys.exit(service.run())


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["tsv", "jsonl"]), default=None,
              help="input format [default: from the file name]")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="write verdicts (JSONL) here [default: standard output]")
@settings_options
def check(path: Path, fmt: str | None, out: Path | None, preset: str | None,
          **options: Any) -> None:
    """Run a dump through the detector in file order; one verdict per line (JSONL)."""
    from tqdm import tqdm

    from streamdedup.detector import Detector
    from streamdedup.dump import read_dump
    from streamdedup.sketch import Sketcher
    from streamdedup.store import open_store

    settings = make_settings(preset, options)
    try:
        rows = read_dump(path, fmt, settings.text_fields)
        sketcher = Sketcher(settings)
        store = open_store(settings.store_backend, settings.store, sketcher.params())
    except StreamdedupError as exc:
        raise click.ClickException(str(exc)) from None
    detector = Detector(settings, store, sketcher)
    sink: TextIO = out.open("w", encoding="utf-8") if out else sys.stdout
    docs = dups = errors = 0
    start = time.perf_counter()
    bar = tqdm(unit="doc", disable=not sys.stderr.isatty(), file=sys.stderr)
    try:
        batch: list[Any] = []
        for item in rows:
            batch.append(item)
            if len(batch) >= 500:
                d, u, e = _check_batch(detector, batch, sink)
                docs, dups, errors = docs + d, dups + u, errors + e
                bar.update(len(batch))
                batch.clear()
        d, u, e = _check_batch(detector, batch, sink)
        docs, dups, errors = docs + d, dups + u, errors + e
        bar.update(len(batch))
    except StreamdedupError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        bar.close()
        store.close()
        if out:
            sink.close()
    elapsed = time.perf_counter() - start
    click.echo(
        f"{docs} documents, {dups} duplicates, {errors} bad rows, {elapsed:.2f} s, "
        f"{docs / elapsed if elapsed else 0:.0f} documents/s; {sketcher.bands} bands x "
        f"{sketcher.rows} rows, P(candidate | s={settings.threshold}) = "
        f"{sketcher.recall_at_threshold():.6f}",
        err=True,
    )


def _check_batch(detector: Any, batch: list[Any], sink: TextIO) -> tuple[int, int, int]:
    from streamdedup.errors import MessageError

    docs = [item for _, item in batch if not isinstance(item, MessageError)]
    verdicts = iter(detector.process_many(docs))
    detector.store.commit()
    dups = errors = 0
    for row, item in batch:
        if isinstance(item, MessageError):
            errors += 1
            sink.write(json.dumps({"row": row, "error": item.reason, "detail": item.detail}) + "\n")
        else:
            verdict = next(verdicts)
            dups += verdict.duplicate
            sink.write(verdict.to_json() + "\n")
    return len(docs), dups, errors


@main.command()
@click.option("--threshold", type=float, default=None, help="mark this similarity")
@click.option("--num-perm", type=int, default=None, help="permutations (bands chosen for it)")
@click.option("--bands", type=int, default=None)
@click.option("--rows", type=int, default=None)
@click.option("--out", type=click.Path(path_type=Path), default=Path("scurve.png"),
              show_default=True)
def scurve(threshold: float | None, num_perm: int | None, bands: int | None,
           rows: int | None, out: Path) -> None:
    """Plot P(candidate | s) = 1 - (1 - s^r)^b, with the threshold marked."""
    from streamdedup.lsh import choose_bands, p_candidate
    from streamdedup.plots import plot_scurve

    defaults = Settings()
    threshold = defaults.threshold if threshold is None else threshold
    if (bands is None) != (rows is None):
        raise click.UsageError("give both --bands and --rows, or neither")
    if bands is None or rows is None:
        bands, rows = choose_bands(threshold, num_perm or defaults.num_perm)
    try:
        at = p_candidate(threshold, bands, rows)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    plot_scurve([(bands, rows)], threshold, out)
    click.echo(f"{bands} bands x {rows} rows: P(candidate | s={threshold}) = {at:.6f}; "
               f"plot written to {out}")


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
              add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def replay(args: tuple[str, ...]) -> None:
    """Replay a dump through Kafka and the consumer; write a quality report (see --help)."""
    from streamdedup.replay import main as replay_main

    sys.exit(replay_main(list(args), prog_name="streamdedup replay"))


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def broker(args: tuple[str, ...]) -> None:
    """Manage the local single-node Kafka broker (fetch, start, stop, status)."""
    from streamdedup.broker import main as broker_main

    sys.exit(broker_main(list(args)))


if __name__ == "__main__":
    main()
