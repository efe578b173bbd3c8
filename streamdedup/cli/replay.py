"""`streamdedup replay`: a historical dump through Kafka and the consumer, then a report.

The work is ``replay/runner.py``'s; this module only turns flags into a ``ReplayConfig`` and
the result into lines and an exit status. The replay's own flags come first; every
``Settings`` flag is accepted too and handed to the consumer it starts, except what the
replay fixes for it (``runner.py``'s ``replay_settings``): its topics and group (under the
replay's prefix), its store, one partition, and metrics on a free loopback port.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from streamdedup.cli.options import RATE, failure, make_settings, settings_options
from streamdedup.errors import StreamdedupError
from streamdedup.replay.config import ReplayConfig, replay_environment
from streamdedup.replay.dump import FORMATS

_REPLAY_FIXED = ("bootstrap_servers",)  # a ReplayConfig field, not a consumer override
# What the replay's consumer reads, less what the replay refuses (--retention, its
# --time-field, --only-duplicates) or sets itself (one partition, topics created) and the
# monitor's flags. Its topics and group are --topic-prefix + the names given.
_REPLAY_SHOWN = ("text", "sketch", "store", "ops", "bootstrap_servers", "commit_every",
                 "commit_interval_s", "dlq_topic", "group_id", "group_instance_id",
                 "input_topic", "max_message_bytes", "max_output_bytes", "output_topic",
                 "poll_max_records", "sasl_*", "security_protocol", "session_timeout_ms",
                 "ssl_*")


@click.command(name="replay", short_help="A dump through Kafka and the consumer, then a report.",
               context_settings={"help_option_names": ["-h", "--help"],
                                 "max_content_width": 100})
@click.option("--dump", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              required=True, help="the dump to replay (TSV, JSONL or Parquet)")
@click.option("--report-dir", "--report", "report_dir",  # --report: backfill's spelling
              type=click.Path(path_type=Path, file_okay=False), required=True,
              help="where report.json, report.md, verdicts.jsonl and the plots go")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="dump format [default: from the file name]")
@click.option("--no-consumer", is_flag=True,
              help="a consumer is already running on the settings' topics; do not start one")
@click.option("--rate", type=RATE, default=ReplayConfig.rate, show_default=True,
              help="produce at most this many messages per second (0 = no limit; at least one "
                   "an hour)")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True),
              default=ReplayConfig.timeout_s, show_default=True,
              help="give up when no verdict arrived for this many seconds")
@click.option("--topic-prefix", default=None,
              help="prefix of the replay's topics and group [default: unique per replay; "
                   "none with --no-consumer]")
@click.option("--no-band-table", is_flag=True, help="skip the study's LSH table and its plots")
@click.option("--progress/--no-progress", default=ReplayConfig.progress, show_default=True,
              help="progress bars (on a terminal)")
@click.option("--store", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="the consumer's SQLite store directory [default: a fresh temporary one; "
                   "STREAMDEDUP_STORE is not read, so a replay never writes into run's store; "
                   "on --store-backend redis, a namespace of its own, removed afterwards]; "
                   "ads it already holds are not in the dump's truth: a document flagged for "
                   "them counts as a false positive (the report says how many matches)")
@settings_options(shown=_REPLAY_SHOWN, own=("store",))
def replay_command(dump: Path, report_dir: Path, fmt: str | None, no_consumer: bool, rate: float,
            timeout_s: float, topic_prefix: str | None, no_band_table: bool, progress: bool,
            store: Path | None, preset: str | None, **options: Any) -> None:
    """Replay a dump through Kafka and the consumer; report quality against exact Jaccard.

    It needs a running broker (--bootstrap-servers or its variable; `scripts/kafka-local
    start` starts one from a checkout, and `python scripts/replay.py` starts and stops one
    itself). Without --store the consumer gets a fresh store. Exit status 1 when some ids got
    no verdict in time.
    """
    from streamdedup.cli.output import writable_directory
    from streamdedup.replay.report import summary
    from streamdedup.replay.runner import replay

    overrides = {k: v for k, v in options.items() if v is not None and k not in _REPLAY_FIXED}
    try:
        config = ReplayConfig(
            dump=dump, report_dir=report_dir, preset=preset, overrides=overrides, fmt=fmt,
            bootstrap_servers=make_settings(
                preset, options, opens_store=not no_consumer,
                env=replay_environment(os.environ)).bootstrap_servers,
            store=store,
            run_consumer=not no_consumer, rate=rate, timeout_s=timeout_s,
            topic_prefix=topic_prefix, progress=progress, band_table=not no_band_table,
        )
    except StreamdedupError as exc:
        raise failure(exc) from None

    writable_directory(report_dir, "--report-dir")

    def say(message: str) -> None:
        click.echo(f"replay: {message}", err=True)

    try:
        result = replay(config, say)
    except KeyboardInterrupt:  # as check and produce say it; the consumer it started is ended
        click.echo("replay: interrupted before its report; run it again to measure (a replay "
                   "sends the whole dump to topics of its own)", err=True)
        raise click.exceptions.Exit(130) from None
    except StreamdedupError as exc:
        raise failure(exc) from None
    except OSError as exc:  # the report directory: cannot be made, or the disk is full
        if exc.filename is None:
            raise
        raise click.ClickException(f"cannot use {exc.filename}: {exc.strerror}") from None
    click.echo(summary(result.report))
    click.echo(f"report: {result.paths['md']}")
    if result.missing:
        shown = ", ".join(result.missing[:10])
        click.echo(f"replay: {len(result.missing)} ids got no verdict or dead letter within "
                   f"{timeout_s:g} s, e.g. {shown}", err=True)
    if result.consumer_exit not in (0, None):
        click.echo(f"replay: the consumer exited with status {result.consumer_exit} "
                   f"(see {report_dir / 'consumer.log'})", err=True)
    sys.exit(0 if result.ok else 1)
