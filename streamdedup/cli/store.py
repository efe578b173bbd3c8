"""`streamdedup store stats | verify | compact | export | backup`: administering a store,
SQLite (``store/sqlite/maintenance.py``) or Redis (``store/redis/maintenance.py``). Stats,
verify, export and backup (SQLite) only read, beside running consumers; compact (SQLite)
needs the writer's lock."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import click

from streamdedup.cli.options import failure, make_settings, settings_options
from streamdedup.errors import StreamdedupError
from streamdedup.settings import Settings
from streamdedup.store.maintenance import MAX_LISTED


def _settings(preset: str | None, options: dict[str, Any]) -> Settings:
    settings = make_settings(preset, options, opens_store=True)
    if settings.store_backend not in ("sqlite", "redis"):
        raise click.UsageError(f"`streamdedup store` works on the sqlite and redis stores, not "
                               f"{settings.store_backend!r} (which lives in one process)")
    return settings


def _redis(settings: Settings) -> tuple[str, str, bool]:
    return settings.redis_url, settings.redis_namespace, settings.redis_cluster


def _redis_maintenance() -> Any:
    """Imported only for a Redis store: it needs the `redis` extra (MissingExtraError)."""
    from streamdedup.store.redis import maintenance

    return maintenance


@click.group(name="store", short_help="Stats, verify, export, back up or compact a store.")
def store_command() -> None:
    """Administer a store: stats, verify, export, backup, compact. Give the store after the
    subcommand: `store stats --store DIR` (SQLite), or `--store-backend redis --redis-url
    URL`."""


@store_command.command(name="stats")
@click.option("--json", "as_json", is_flag=True, help="one JSON object instead of lines")
@settings_options(shown=("store",))
def stats_command(as_json: bool, preset: str | None, **options: Any) -> None:
    """Counts and sizes (read-only, beside a running consumer)."""
    from streamdedup.store.sqlite import maintenance

    settings = _settings(preset, options)
    try:
        found = (_redis_maintenance().stats(*_redis(settings))
                 if settings.store_backend == "redis" else
                 maintenance.stats(Path(settings.store)))
    except StreamdedupError as exc:
        raise failure(exc) from None
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    b = found.pop("bytes")
    params = found.pop("params")
    for key, value in found.items():  # None: "none" (Python's "None" was printed)
        click.echo(f"{key:18} {value:,}" if isinstance(value, int) else
                   f"{key:18} {'none' if value is None else value}")
    if "file" in b:
        click.echo(f"{'file bytes':18} {b['file']:,} ({b['per_document']:,} per document; "
                   f"verdicts {b['verdicts']:,}, shingles {b['shingles']:,}, bucket log "
                   f"{b['bucket_log']:,})")
        click.echo(f"{'snapshot bytes':18} {b['snapshot']:,} (the maps saved at the last clean "
                   "close, beside the file)")
    else:
        click.echo(f"{'server memory':18} {b['server_used_memory']:,} bytes (the whole "
                   f"server's; {b['per_document']:,} per document of this namespace)")
    if params:
        click.echo(f"{'params':18} " + ", ".join(f"{k}={v}" for k, v in params.items()))


@store_command.command(name="verify")
@settings_options(shown=("store",))
def verify_command(preset: str | None, **options: Any) -> None:
    """The full integrity check (read-only): exit 1 and the problems if any."""
    from streamdedup.store.sqlite import maintenance

    settings = _settings(preset, options)
    where = (f"redis namespace {settings.redis_namespace!r}"
             if settings.store_backend == "redis" else settings.store)

    def say(message: str) -> None:
        click.echo(f"checking {message}", err=True)

    try:
        problems = (_redis_maintenance().verify(*_redis(settings), progress=say)
                    if settings.store_backend == "redis" else
                    maintenance.verify(Path(settings.store), progress=say))
    except StreamdedupError as exc:
        raise failure(exc) from None
    if not problems:
        click.echo(f"store {where}: ok")
        return
    for problem in problems[:MAX_LISTED]:
        click.echo(problem)
    more = len(problems) - MAX_LISTED
    click.echo(f"store {where}: {len(problems)} problem(s)"
               + (f" ({more} more not listed)" if more > 0 else ""), err=True)
    sys.exit(1)


@store_command.command(name="compact")
@settings_options(shown=("store",))
def compact_command(preset: str | None, **options: Any) -> None:
    """Reclaim free space (VACUUM); needs the writer's lock: stop the consumer first."""
    from streamdedup.store.sqlite.maintenance import compact

    settings = _settings(preset, options)
    if settings.store_backend == "redis":
        raise click.UsageError("a Redis store has nothing to compact: the server frees memory "
                               "as keys go (its append-only file is rewritten by "
                               "BGREWRITEAOF, the server operator's call)")
    directory = Path(settings.store)
    try:
        before, after = compact(directory)
    except StreamdedupError as exc:
        raise failure(exc) from None
    click.echo(f"store {directory}: {before:,} -> {after:,} bytes")


@store_command.command(name="backup",
                       short_help="A checked copy of the store (SQLite), beside a consumer.")
@click.option("--to", "to", type=click.Path(path_type=Path), required=True,
              help="the new directory the copy is written to")
@settings_options(shown=("store",))
def backup_command(to: Path, preset: str | None, **options: Any) -> None:
    """A consistent copy of a SQLite store, beside a running consumer, then checked."""
    from streamdedup.store.sqlite import maintenance

    settings = _settings(preset, options)
    if not str(to).strip() or to == Path():  # '' is '.' to click: "Error: . exists"
        raise click.UsageError("--to is empty, or the current directory: name a new "
                               "directory for the copy")
    if settings.store_backend == "redis":
        raise click.UsageError("a Redis store is backed up with its server: copy the "
                               "append-only file's directory (appendonlydir) after "
                               "BGREWRITEAOF; with appendonly yes the server ignores an "
                               "RDB file (README: Backups)")

    def say(message: str) -> None:
        click.echo(f"checking {message}", err=True)

    began = time.monotonic()
    try:
        documents = maintenance.backup(Path(settings.store), to)
        copied = time.monotonic()
        click.echo(f"copied {documents:,} documents to {to} in {copied - began:.1f} s; "
                   "checking the copy", err=True)
        try:
            problems = maintenance.verify(to, progress=say)
        except KeyboardInterrupt:  # it said "interrupted" alone, and `to` looked done
            click.echo(f"the copy at {to} is whole but not checked: `streamdedup store "
                       f"verify --store {to}` checks it", err=True)
            raise
    except StreamdedupError as exc:
        raise failure(exc) from None
    click.echo(f"checked in {time.monotonic() - copied:.1f} s", err=True)
    for problem in problems[:MAX_LISTED]:
        click.echo(problem)
    if problems:  # the copy is of one commit: the problems are the store's own
        click.echo(f"backup {to}: {len(problems)} problem(s), copied from the store (store "
                   f"verify --store {settings.store} lists its own)", err=True)
        sys.exit(1)
    click.echo(f"backup {to}: {documents:,} documents, ok")


@store_command.command(name="export")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="the JSONL file; - is standard output [default: standard output]")
@settings_options(shown=("store",))
def export_command(out: Path | None, preset: str | None, **options: Any) -> None:
    """Every document's verdict as JSONL, in seq order (read-only)."""
    from streamdedup.cli.output import (
        checked_output,
        named_file,
        open_output,
        store_directory,
    )
    from streamdedup.store.sqlite import maintenance

    settings = _settings(preset, options)
    out = named_file(out)
    if out is not None:
        checked_output(out, store=store_directory(settings))

    def write(fh: TextIO) -> int:
        if settings.store_backend == "redis":
            return _redis_maintenance().export(*_redis(settings)[:2], fh,
                                            cluster=settings.redis_cluster)
        return maintenance.export(Path(settings.store), fh)

    try:
        if settings.store_backend == "redis":
            _redis_maintenance().stats(*_redis(settings))  # unreachable: said before --out
        else:
            maintenance.stats(Path(settings.store))  # missing or foreign: said first
        if out is None:
            count = write(sys.stdout)
        else:
            with open_output(out) as fh:
                count = write(fh)
    except StreamdedupError as exc:
        raise failure(exc) from None
    except BrokenPipeError:  # `export | head`: the reader has what it wanted; quiet, as a
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # filter would be
        raise click.exceptions.Exit(141) from None  # (128 + SIGPIPE; nothing was changed)
    except OSError as exc:  # writing: a full disk (the store is only read)
        raise click.ClickException(f"cannot write the export: {exc.strerror or exc}") from None
    click.echo(f"{count:,} documents exported", err=True)
