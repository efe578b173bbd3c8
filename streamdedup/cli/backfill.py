"""`streamdedup backfill`: a historical dump into a store, sketched in parallel (Spark) and
judged in arrival order by the stream's detector (``replay/backfill.py``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from streamdedup.cli.options import make_settings, settings_options
from streamdedup.errors import StreamdedupError


@click.command(name="backfill")
@click.argument("dump", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--format", "fmt", type=click.Choice(["tsv", "jsonl"]), default=None,
              help="dump format [default: from the file name]")
@click.option("--engine", type=click.Choice(["spark", "local"]), default="spark",
              show_default=True, help="where the sketches are computed")
@click.option("--master", default="local[*]", show_default=True,
              help="Spark master (local[N], spark://host:7077, yarn, ...)")
@click.option("--partitions", type=click.IntRange(min=0), default=0,
              help="Spark partitions of the dump [default: 4 per core]")
@click.option("--order-by", type=click.Choice(["file", "timestamp"]), default="file",
              show_default=True, help="arrival order of the rows")
@click.option("--timestamp-field", default="timestamp", show_default=True,
              help="the field --order-by timestamp sorts on (ISO 8601 or epoch seconds)")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="the verdicts, one JSON object per line, in arrival order")
@click.option("--verify-in-spark/--verify-in-driver", default=True, show_default=True,
              help="candidate pairs and exact Jaccard in the executors (into an empty store; "
              "a store that holds documents is always probed by the driver)")
@click.option("--errors", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="unusable rows with line number and reason [default: OUT.errors.jsonl]")
@settings_options
def backfill_command(dump: Path, fmt: str | None, engine: str, master: str, partitions: int,
                     order_by: str, timestamp_field: str, out: Path, verify_in_spark: bool,
                     errors: Path | None, preset: str | None, **options: Any) -> None:
    """Backfill DUMP into the store (--store DIR, or --store-backend redis --redis-url URL):
    the verdicts `streamdedup check` would give, with the sketching done by Spark executors.
    `run` and `check` continue from the store afterwards; running it again changes nothing."""
    from tqdm import tqdm

    from streamdedup.core.sketch import Sketcher
    from streamdedup.replay.backfill import BackfillConfig, backfill
    from streamdedup.store import open_configured

    settings = make_settings(preset, options)
    config = BackfillConfig(dump=dump, out=out, errors=errors, fmt=fmt, engine=engine,
                            master=master, order_by=order_by, timestamp_field=timestamp_field,
                            partitions=partitions, verify_in_spark=verify_in_spark)
    bar = tqdm(unit="doc", disable=not sys.stderr.isatty(), file=sys.stderr)
    try:
        store = open_configured(settings, Sketcher(settings).params())
        try:
            result = backfill(settings, store, config, progress=bar.update)
        finally:
            store.close()
    except StreamdedupError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        bar.close()
    rate = result.documents / result.seconds if result.seconds else 0.0
    click.echo(f"{result.documents} documents, {result.duplicates} duplicates, "
               f"{result.bad_rows} bad rows (in {result.errors_path}), {result.seconds:.1f} s, "
               f"{rate:.0f} documents/s ({engine}"
               f"{' ' + master if engine == 'spark' else ''})"
               + (f"; sketching in Spark took {result.sketch_seconds:.1f} s"
                  if result.sketch_seconds else "")
               + (f"; candidate pairs {int(result.extra['candidate_pairs'])} of "
                  f"{int(result.extra['distinct_sets'])} distinct sets, verified in Spark "
                  f"{int(result.extra['verified_pairs'])} in {result.extra['verify_seconds']:.1f} s"
                  if "verify_seconds" in result.extra else "")
               + (f"; {result.unordered} rows without a timestamp came last"
                  if result.unordered else ""), err=True)
