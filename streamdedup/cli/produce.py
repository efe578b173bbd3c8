"""`streamdedup produce`: a dump to the input topic, one announcement per message, keyed by
id, as the scraper would send it; the rows that cannot be read are said and not sent."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import click

from streamdedup.cli.options import (
    KAFKA_CLIENT,
    RATE,
    failure,
    make_settings,
    settings_options,
)
from streamdedup.errors import StreamdedupError, describe
from streamdedup.replay.dump import FORMATS
from streamdedup.terminal import counted

PRODUCE_FLUSH_S = 60.0  # the wait for the broker's acknowledgements at the end
CLOSE_S = 5.0  # what closing the producer may add after an interruption or a failure


class _Acks:
    """The broker's answers to the announcements sent, counted as they come (in the
    producer's thread): what was written is told from these, not from ``flush()``, which
    kafka-python fails ("Future not done") when it split a batch over a topic's
    ``max.message.bytes`` while every announcement of it was written."""

    def __init__(self) -> None:
        self.acked = 0
        self.refused: list[Exception] = []

    def ack(self, _metadata: object) -> None:
        self.acked += 1

    def refuse(self, exc: Exception) -> None:
        self.refused.append(exc)

    def said(self, sent: int) -> str:
        return (f"{counted(sent, 'announcement')} handed to the producer, {self.acked} "
                f"acknowledged by "
                f"the broker" + (f", {len(self.refused)} refused" if self.refused else ""))


def _settle(producer: Any, tally: _Acks, sent: int, timeout_s: float) -> None:
    """Waits until every announcement sent is acknowledged or refused, at most ``timeout_s``."""
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout_s
    # "Future not done" after a split batch, or the timeout: the count below decides
    with contextlib.suppress(KafkaError):
        producer.flush(timeout=timeout_s)  # sends what lingers, and waits
    while tally.acked + len(tally.refused) < sent and time.monotonic() < deadline:
        time.sleep(0.01)


@click.command(name="produce", short_help="Send a dump to the input topic, keyed by id.")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False, exists=True,
                                        allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="input format [default: from the file name]")
@click.option("--rate", type=RATE, default=0.0, show_default=True,
              help="at most this many messages per second (0 = as fast as possible; at least "
                   "one an hour)")
@settings_options(shown=(*KAFKA_CLIENT, "input_topic", "max_message_bytes", "text_fields",
                         "id_field"))
def produce_command(path: Path, fmt: str | None, rate: float, preset: str | None,
                    **options: Any) -> None:
    """Send a dump (TSV, JSONL or Parquet) to --input-topic, one announcement per message, key = id.
    Rows that cannot be read are reported with their row number (0-based, header not
    counted) and not sent."""
    from kafka.errors import KafkaError

    from streamdedup.errors import MessageError
    from streamdedup.replay.dump import read_dump, row_number_warning
    from streamdedup.service.kafka import announcement_producer, close_producer, ensure_broker
    from streamdedup.service.message import encode_message

    settings = make_settings(preset, options)
    if str(path) == "-":  # click said "File '-' does not exist"
        raise click.UsageError("produce reads a dump from a file, not from standard input "
                               "(it reads a file's header first); write the stream to a file")
    try:
        rows = read_dump(path, fmt, settings.text_fields, max_bytes=settings.max_message_bytes,
                         id_field=settings.id_field)
        warning = row_number_warning(path, fmt, None, settings.id_field)
        ensure_broker(settings)
        producer = announcement_producer(settings, "streamdedup-produce")
    except StreamdedupError as exc:
        raise failure(exc) from None
    except KeyboardInterrupt:  # it printed "Aborted!", exit 1
        click.echo(f"interrupted while reaching {settings.bootstrap_servers}: nothing sent",
                   err=True)
        raise click.exceptions.Exit(130) from None
    except Exception as exc:
        raise click.ClickException(f"cannot produce to {settings.bootstrap_servers}: "
                                   f"{describe(exc)}") from None
    if warning:
        click.echo(warning, err=True)
    sent = bad = 0
    tally = _Acks()  # the broker's answers, counted by the sender thread
    start = time.monotonic()
    try:
        try:
            for row, item in rows:
                if isinstance(item, MessageError):
                    bad += 1
                    click.echo(f"row {row}: {item.reason}: {item.detail}", err=True)
                    continue
                value = encode_message(item)
                if len(value) > settings.max_message_bytes:  # (a JSON line re-encoded)
                    bad += 1
                    click.echo(f"row {row}: oversized: {len(value)} bytes as a message > "
                               f"limit {settings.max_message_bytes}", err=True)
                    continue
                producer.send(settings.input_topic, key=item.id.encode("utf-8"),
                              value=value).add_callback(tally.ack).add_errback(tally.refuse)
                sent += 1
                while rate and (delay := start + sent / rate - time.monotonic()) > 0:
                    time.sleep(delay)  # at most an hour
            _settle(producer, tally, sent, PRODUCE_FLUSH_S)
        finally:  # before anything is said: what closing delivers is counted too
            close_producer(producer, CLOSE_S)
    except StreamdedupError as exc:  # found while reading (the dump is read as it is sent)
        raise click.ClickException(f"{exc} ({tally.said(sent)} before it)") from None
    except KeyboardInterrupt:  # say where it stopped: sending again resends from the start
        click.echo(f"interrupted: {tally.said(sent)}, {counted(bad, 'row')} not readable; "
                   "sending the dump again is safe (the detector judges an id and text it "
                   "has seen once)",
                   err=True)
        raise click.exceptions.Exit(130) from None
    except KafkaError as exc:  # the broker went away: send() blocked past its limit
        raise click.ClickException(
            f"{tally.said(sent)} ({describe(exc)}); send the dump again (the detector judges "
            "an id and text it has seen once)") from None
    if tally.acked + len(tally.refused) < sent:
        raise click.ClickException(
            f"{tally.said(sent)}: {settings.bootstrap_servers} did not answer for the rest "
            f"within {PRODUCE_FLUSH_S:.0f} s; send the dump again (the detector judges an id "
            "and text it has seen once)")
    if tally.refused:  # e.g. an announcement over the topic's max.message.bytes
        raise click.ClickException(
            f"the broker refused {len(tally.refused)} of {counted(sent, 'announcement')} "
            f"({describe(tally.refused[0])}); {tally.acked} were written to "
            f"{settings.input_topic}, {counted(bad, 'row')} not sent")
    click.echo(f"{counted(sent, 'announcement')} sent to {settings.input_topic}, "
               f"{counted(bad, 'row')} not sent",
               err=True)
    sys.exit(1 if bad and not sent else 0)
