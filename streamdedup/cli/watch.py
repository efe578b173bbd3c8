"""`streamdedup monitor`, `tail` and `produce`: watching the topics and feeding the input.

``monitor`` and ``tail`` read the verdict, dead-letter and input topics as observers (no
consumer group, no commits), so the detector's group never notices them. ``produce`` sends a
dump (TSV or JSONL) to the input topic, keyed by id, as the scraper would.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Any

import click

from streamdedup.cli.options import make_settings, settings_options, topic_flag
from streamdedup.errors import StreamdedupError, describe
from streamdedup.replay.dump import FORMATS

PRODUCE_FLUSH_S = 60.0  # produce's wait for the broker's acknowledgements at the end
_FROM_HELP = ("where to start reading: 'beginning', 'latest', or an ISO 8601 time "
              "(2026-11-30T08:00:00Z)")


@click.command(name="monitor")
@click.option("--from", "start", default="beginning", show_default=True, help=_FROM_HELP)
@click.option("--no-texts", is_flag=True,
              help="do not read the input topic (no titles, no side-by-side texts)")
@settings_options
def monitor_command(start: str, no_texts: bool, preset: str | None, **options: Any) -> None:
    """A live web page of the duplicates topic, and its JSON API (see the README).

    Binds --monitor-host:--monitor-port (127.0.0.1:8088 by default); bound beyond loopback it
    needs --monitor-token. Reads --output-topic, --dlq-topic and --input-topic from
    --bootstrap-servers without joining any consumer group.
    """
    from streamdedup.service.logs import setup_logging

    settings = make_settings(preset, options)
    setup_logging(settings.log_level, settings.log_json)
    # SIGTERM is a request to stop (exit 0, the reader closed), as SIGINT is: uvicorn stops
    # the server on it and then raises it again for the handler it found, this one.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    try:
        from streamdedup.monitor.server import Monitor

        monitor = Monitor(settings, start, texts=not no_texts)
    except StreamdedupError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"monitor on http://{settings.monitor_host}:{settings.monitor_port}/ "
               f"(topics {settings.output_topic}, {settings.dlq_topic}"
               f"{'' if no_texts else ', ' + settings.input_topic} on "
               f"{settings.bootstrap_servers})", err=True)
    monitor.serve()


def _exit_cleanly(_sig: int, _frame: Any) -> None:
    raise SystemExit(0)


@click.command(name="tail")
@click.option("--from", "start", default="latest", show_default=True, help=_FROM_HELP)
@click.option("--count", type=click.IntRange(min=0), default=0,
              help="stop after this many lines (0 = follow until interrupted)")
@settings_options
def tail_command(start: str, count: int, preset: str | None, **options: Any) -> None:
    """One readable line per verdict as it arrives: id, duplicate of, Jaccard, cluster size,
    title (titles come from the input topic); duplicates only with --only-duplicates."""
    from streamdedup.monitor.observer import Observer, decode
    from streamdedup.monitor.state import MonitorState
    from streamdedup.monitor.tail import line

    settings = make_settings(preset, options)
    try:
        observer = Observer(settings, [settings.input_topic, settings.output_topic], start,
                            client_id="streamdedup-tail")
    except StreamdedupError as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:  # kafka-python: the broker cannot be reached
        raise click.ClickException(f"cannot read from {settings.bootstrap_servers}: "
                                   f"{describe(exc)}") from None
    state = MonitorState(keep=50_000)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    printed = 0
    said: set[str] = set()
    try:
        while not stop and (not count or printed < count):
            for topic, rec in observer.poll(500):
                body = decode(rec)
                if body is None:
                    continue
                if topic == settings.input_topic:
                    state.add_announcement(body)
                    continue
                try:
                    if not state.add_verdict(body, rec.timestamp / 1000):
                        continue  # delivered again: said already
                except ValueError as exc:  # no verdict
                    click.echo(f"skipped a record at {topic}/{rec.partition}/{rec.offset}: "
                               f"{exc}", err=True)
                    continue
                if settings.only_duplicates and not body.get("duplicate"):
                    continue
                click.echo(line(body, state))
                printed += 1
                if count and printed >= count:
                    break
            for topic in sorted(set(observer.health()["waiting_for"]) - said):  # (looked in
                said.add(topic)                                   # the poll) it was silent
                click.echo(f"waiting for topic {topic}: not on {settings.bootstrap_servers} "
                           f"yet (is {topic_flag(settings, topic)} the detector's?)", err=True)
    except KeyboardInterrupt:
        pass
    finally:
        observer.close()


@click.command(name="produce")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="input format [default: from the file name]")
@click.option("--rate", type=float, default=0.0, show_default=True,
              help="at most this many messages per second (0 = as fast as possible)")
@settings_options
def produce_command(path: Path, fmt: str | None, rate: float, preset: str | None,
                    **options: Any) -> None:
    """Send a dump (TSV, JSONL or Parquet) to --input-topic, one announcement per message, key = id.
    Rows that cannot be read are reported with their row number (0-based, header not
    counted) and not sent."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    from streamdedup.errors import MessageError
    from streamdedup.replay.dump import read_dump, row_number_warning
    from streamdedup.service.kafka import kafka_security
    from streamdedup.service.message import encode_message

    settings = make_settings(preset, options)
    if not rate >= 0:  # NaN too: it was accepted as "no limit"
        raise click.UsageError(f"--rate must be >= 0, not {rate}")
    try:
        rows = read_dump(path, fmt, settings.text_fields, max_bytes=settings.max_message_bytes)
        warning = row_number_warning(path, fmt, None)
        producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all",
                                 linger_ms=20, max_request_size=settings.max_message_bytes + 65536,
                                 **kafka_security(settings))
    except StreamdedupError as exc:
        raise click.ClickException(str(exc)) from None
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
