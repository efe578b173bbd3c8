"""`streamdedup store stats | verify | compact | export`: administering a SQLite store
(``store/maintenance.py``). Stats, verify and export read beside a running consumer; compact
needs the writer's lock."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from streamdedup.cli.options import make_settings, settings_options
from streamdedup.errors import StreamdedupError


def _directory(preset: str | None, options: dict[str, Any]) -> Path:
    settings = make_settings(preset, options)
    if settings.store_backend != "sqlite":
        raise click.UsageError(
            f"`streamdedup store` works on the SQLite store; {settings.store_backend!r} is not "
            "supported yet (for Redis: redis-cli INFO keyspace and the server's own tools)")
    return Path(settings.store)


@click.group(name="store")
def store_command() -> None:
    """Administer a SQLite store (--store DIR or STREAMDEDUP_STORE)."""


@store_command.command(name="stats")
@click.option("--json", "as_json", is_flag=True, help="one JSON object instead of lines")
@settings_options
def stats_command(as_json: bool, preset: str | None, **options: Any) -> None:
    """Counts and sizes (read-only, beside a running consumer)."""
    from streamdedup.store.maintenance import stats

    try:
        found = stats(_directory(preset, options))
    except StreamdedupError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    b = found.pop("bytes")
    params = found.pop("params")
    for key, value in found.items():
        click.echo(f"{key:18} {value:,}" if isinstance(value, int) else f"{key:18} {value}")
    click.echo(f"{'file bytes':18} {b['file']:,} ({b['per_document']:,} per document; "
               f"verdicts {b['verdicts']:,}, shingles {b['shingles']:,}, bucket log "
               f"{b['bucket_log']:,})")
    if params:
        click.echo(f"{'params':18} " + ", ".join(f"{k}={v}" for k, v in params.items()))


@store_command.command(name="verify")
@settings_options
def verify_command(preset: str | None, **options: Any) -> None:
    """The full integrity check (read-only): exit 1 and the problems if any."""
    from streamdedup.store.maintenance import MAX_LISTED, verify

    directory = _directory(preset, options)
    try:
        problems = verify(directory, progress=lambda m: click.echo(f"checking {m}", err=True))
    except StreamdedupError as exc:
        raise click.ClickException(str(exc)) from None
    if not problems:
        click.echo(f"store {directory}: ok")
        return
    for problem in problems[:MAX_LISTED]:
        click.echo(problem)
    more = len(problems) - MAX_LISTED
    click.echo(f"store {directory}: {len(problems)} problem(s)"
               + (f" ({more} more not listed)" if more > 0 else ""), err=True)
    sys.exit(1)


@store_command.command(name="compact")
@settings_options
def compact_command(preset: str | None, **options: Any) -> None:
    """Reclaim free space (VACUUM); needs the writer's lock: stop the consumer first."""
    from streamdedup.store.maintenance import compact

    directory = _directory(preset, options)
    try:
        before, after = compact(directory)
    except StreamdedupError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"store {directory}: {before:,} -> {after:,} bytes")


@store_command.command(name="export")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="the JSONL file [default: standard output]")
@settings_options
def export_command(out: Path | None, preset: str | None, **options: Any) -> None:
    """Every document's verdict as JSONL, in seq order (read-only)."""
    from streamdedup.store.maintenance import export, stats

    directory = _directory(preset, options)
    try:
        stats(directory)  # a missing or foreign store says so before --out is created
        if out is None:
            count = export(directory, sys.stdout)
        else:
            with out.open("w", encoding="utf-8") as fh:
                count = export(directory, fh)
    except StreamdedupError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{count:,} documents exported", err=True)
