"""`streamdedup monitor` and `tail`: watching the topics.

Both read as observers (no consumer group, no commits), so the detector's group never
notices them: ``monitor`` the verdict, dead-letter and input topics, ``tail`` the verdict and
input topics.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Any

import click

from streamdedup.cli.options import (
    KAFKA_CLIENT,
    failure,
    logged_settings,
    make_settings,
    settings_options,
)
from streamdedup.errors import StreamdedupError, describe
from streamdedup.replay.dump import FORMATS

_FROM_HELP = ("where to start reading: 'beginning', 'latest', or an ISO 8601 time "
              "(2026-11-30T08:00:00Z)")


@click.command(name="monitor", short_help="A live web page of the duplicates topic.")
# observer.BEGINNING, spelled here: importing the observer would load kafka-python for every command
@click.option("--from", "start", default="beginning", show_default=True, help=_FROM_HELP)
@click.option("--no-texts", is_flag=True,
              help="do not read the input topic (no titles, no side-by-side texts)")
@click.option("--dump", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              default=None, help="the dump the store was backfilled from: an ad the input "
              "topic lacks is explained with its text from there")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="the dump's format [default: from its name]")
@settings_options(shown=(*KAFKA_CLIENT, "input_topic", "output_topic", "dlq_topic",
                         "max_output_bytes", "monitor", "text", "sketch", "log_json",
                         "log_level", "id_field", "max_message_bytes"))
def monitor_command(start: str, no_texts: bool, dump: Path | None, fmt: str | None,
                    preset: str | None, **options: Any) -> None:
    """A live web page of the duplicates topic, and its JSON API (see the README).

    Binds --monitor-host:--monitor-port (loopback by default); bound beyond loopback it
    needs --monitor-token. Reads --output-topic, --dlq-topic and --input-topic from
    --bootstrap-servers without joining any consumer group.
    """
    settings = logged_settings(preset, options)
    if dump is not None:  # its format and header now, not at the first explanation
        from streamdedup.replay.dump import read_dump

        try:
            next(iter(read_dump(dump, fmt, settings.text_fields, id_field=settings.id_field,
                                max_bytes=settings.max_message_bytes)), None)
        except StreamdedupError as exc:
            raise failure(exc, logged=settings.log_json) from None
    # SIGTERM and Ctrl-C are requests to stop (exit 0, the reader closed; Ctrl-C said
    # "Aborted!" and exit 1): uvicorn stops the server on each and then raises it again for
    # the handler it found, this one.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    signal.signal(signal.SIGINT, _exit_cleanly)
    try:
        from streamdedup.monitor.server import Monitor

        monitor = Monitor(settings, start, texts=not no_texts, dump=dump, fmt=fmt)
        sock = monitor.bind()
    except StreamdedupError as exc:
        raise failure(exc, logged=settings.log_json) from None
    host = settings.monitor_host
    host = f"[{host}]" if ":" in host else host  # an IPv6 address, as a URL writes it
    where = (f"monitor on http://{host}:{sock.getsockname()[1]}/ "
             f"(topics {settings.output_topic}, {settings.dlq_topic}"
             f"{'' if no_texts else ', ' + settings.input_topic} on "
             f"{settings.bootstrap_servers})")
    if settings.log_json:  # a log collector's JSON lines, this one too
        logging.getLogger("streamdedup.monitor").info(where)
    else:
        click.echo(where, err=True)
    monitor.serve(sock)


def _exit_cleanly(_sig: int, _frame: Any) -> None:
    raise SystemExit(0)


@click.command(name="tail", short_help="One readable line per verdict as it arrives.")
@click.option("--from", "start", default="latest", show_default=True, help=_FROM_HELP)
@click.option("--count", type=click.IntRange(min=0), default=0,
              help="stop after this many lines (0 = follow until interrupted)")
@settings_options(shown=(*KAFKA_CLIENT, "input_topic", "output_topic", "only_duplicates",
                         "max_output_bytes"))
def tail_command(start: str, count: int, preset: str | None, **options: Any) -> None:
    """One readable line per verdict as it arrives: id, duplicate of, Jaccard, cluster size,
    title (titles come from the input topic); duplicates only with --only-duplicates."""
    from streamdedup.monitor.observer import Observer, parse_start
    from streamdedup.monitor.tail import follow
    from streamdedup.service.kafka import ensure_broker

    settings = make_settings(preset, options)
    try:
        parse_start(start)  # a bad --from is a usage error with or without a broker
        ensure_broker(settings)
        observer = Observer(settings, [settings.input_topic, settings.output_topic], start,
                            client_id="streamdedup-tail")
    except StreamdedupError as exc:
        raise failure(exc) from None
    except Exception as exc:  # kafka-python: the broker cannot be reached
        raise click.ClickException(f"cannot read from {settings.bootstrap_servers}: "
                                   f"{describe(exc)}") from None
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        follow(settings, observer, count, stop, click.echo,
               lambda text: click.echo(text, err=True))
    except KeyboardInterrupt:
        pass
    finally:
        observer.close()
