"""`streamdedup produce`: a dump to the input topic, one announcement per message, keyed by
id, as the scraper would send it; the rows that cannot be read are said and not sent."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from streamdedup.cli.options import KAFKA_CLIENT, failure, make_settings, settings_options
from streamdedup.errors import StreamdedupError, describe
from streamdedup.replay.dump import FORMATS

PRODUCE_FLUSH_S = 60.0  # the wait for the broker's acknowledgements at the end


@click.command(name="produce", short_help="Send a dump to the input topic, keyed by id.")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="input format [default: from the file name]")
@click.option("--rate", type=float, default=0.0, show_default=True,
              help="at most this many messages per second (0 = as fast as possible)")
@settings_options(shown=(*KAFKA_CLIENT, "input_topic", "max_message_bytes", "text_fields"))
def produce_command(path: Path, fmt: str | None, rate: float, preset: str | None,
                    **options: Any) -> None:
    """Send a dump (TSV, JSONL or Parquet) to --input-topic, one announcement per message, key = id.
    Rows that cannot be read are reported with their row number (0-based, header not
    counted) and not sent."""
    from kafka.errors import KafkaError

    from streamdedup.errors import MessageError
    from streamdedup.replay.dump import read_dump, row_number_warning
    from streamdedup.service.kafka import announcement_producer
    from streamdedup.service.message import encode_message

    settings = make_settings(preset, options)
    if not rate >= 0:  # NaN too: it was accepted as "no limit"
        raise click.UsageError(f"--rate must be >= 0, not {rate}")
    try:
        rows = read_dump(path, fmt, settings.text_fields, max_bytes=settings.max_message_bytes)
        warning = row_number_warning(path, fmt, None)
        producer = announcement_producer(settings, "streamdedup-produce")
    except StreamdedupError as exc:
        raise failure(exc) from None
    except Exception as exc:
        raise click.ClickException(f"cannot produce to {settings.bootstrap_servers}: "
                                   f"{describe(exc)}") from None
    if warning:
        click.echo(warning, err=True)
    sent = bad = 0
    refused: list[Exception] = []  # the broker's answers, counted by the sender thread
    start = time.monotonic()
    try:
        for row, item in rows:
            if isinstance(item, MessageError):
                bad += 1
                click.echo(f"row {row}: {item.reason}: {item.detail}", err=True)
                continue
            producer.send(settings.input_topic, key=item.id.encode("utf-8"),
                          value=encode_message(item)).add_errback(refused.append)
            sent += 1
            if rate:
                delay = start + sent / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        producer.flush(timeout=PRODUCE_FLUSH_S)
    except StreamdedupError as exc:  # found while reading (the dump is read as it is sent)
        raise click.ClickException(f"{exc} ({sent} announcements were handed to the producer "
                                   "before; closing it sends them)") from None
    except KeyboardInterrupt:  # say where it stopped: sending again resends from the start
        click.echo(f"interrupted: {sent} announcements handed to the producer (closing it "
                   f"sends them), {bad} rows not readable; sending the dump again is safe "
                   "(the detector judges an id and text it has seen once)", err=True)
        raise click.exceptions.Exit(130) from None
    except KafkaError as exc:  # the broker went away: send() or flush() timed out
        raise click.ClickException(
            f"{sent} announcements handed to the producer, not all acknowledged by "
            f"{settings.bootstrap_servers} ({describe(exc)}); send the dump "
            "again (the detector judges an id and text it has seen once)") from None
    finally:
        producer.close(timeout=5)
    if refused:  # e.g. a batch over the topic's max.message.bytes: the whole batch is lost
        raise click.ClickException(
            f"the broker refused {len(refused)} of {sent} announcements "
            f"({describe(refused[0])}); {sent - len(refused)} were "
            f"written to {settings.input_topic}, {bad} rows not sent")
    click.echo(f"{sent} announcements sent to {settings.input_topic}, {bad} rows not sent",
               err=True)
    sys.exit(1 if bad and not sent else 0)
