"""A Scrapy item pipeline: every scraped item becomes an announcement on the input topic.

In the Scrapy project's settings::

    ITEM_PIPELINES = {"streamdedup.integrations.scrapy.AnnouncementPipeline": 800}
    STREAMDEDUP_BOOTSTRAP_SERVERS = "kafka:9092"   # any STREAMDEDUP_* setting works here,
    STREAMDEDUP_INPUT_TOPIC = "jobs"               # as in the environment (which it overrides)
    STREAMDEDUP_ID_FIELD = "id"                    # else the item's "url", then "link"
                                                   # (the id_field setting of dumps too)

The announcement is the item's fields as JSON, with ``id`` set; the Kafka key is the id, so a
re-scraped ad goes to the same partition and, with the same text, gets its stored verdict
back. An item passes on (and counts as sent) once the broker has acknowledged it
(acks=all); an item the broker refused or did not acknowledge within ``SEND_TIMEOUT_S`` is
dropped with the reason (Scrapy's DropItem, counted in its stats), so "sent" counts
announcements on the topic. The acknowledgement is awaited, not blocked on: Scrapy goes on
downloading and parsing while items are in flight, up to its ``CONCURRENT_ITEMS`` a
response (the pipeline's share on a local broker: ~3,900 items/s against ~540 when each
item held the crawl for its round trip, BENCHMARKS.md §10; while the broker was away, the
crawl stood still 30 s an item). An item without an id field or URL, with an id that is no
string or integer, or that the detector would dead-letter (larger than
``max_message_bytes``, a text field that is no string, such as the list Scrapy's
``getall()`` gives, no text at all) is dropped too, with the reason: the crawl's log and
stats say it, not a dead-letter topic the crawl's operator may never read. Settings that
do not parse, or a broker that cannot be reached (within kafka-python's 30 s), stop the crawl
at its start, in one line naming kafka-python's last complaint. kafka-python's own lines
show from WARNING, unless the project gives the ``kafka`` logger a level: at Scrapy's
default DEBUG its protocol dumps were 273 of a small crawl's 431 lines.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import os
from collections.abc import Iterator
from typing import Any

from streamdedup.errors import ConfigError, MessageError, StreamdedupError, describe, shown
from streamdedup.extras import require
from streamdedup.service.kafka import announcement_producer, close_producer
from streamdedup.service.message import decode_message, has_value, json_bytes
from streamdedup.settings import ENV_PREFIX, Settings, build_settings

_scrapy = require("scrapy", "the Scrapy pipeline")
from itemadapter import ItemAdapter  # noqa: E402  (installed with Scrapy)
from scrapy.exceptions import DropItem  # noqa: E402

log = logging.getLogger(__name__)
_QUIETED = [logging.NOTSET]  # the level this module gave kafka-python's logger, if any
URL_FIELDS = ("url", "link")
_SELF_HOLDING = "not JSON: a value holds itself, or is nested too deeply"
# An item the broker has not acknowledged within this is dropped. Kafka's own default: a
# broker restart (tens of seconds) loses nothing; meanwhile the items wait and, once
# Scrapy's scraper slot holds 5 MB of their responses, the crawl holds back.
SEND_TIMEOUT_S = 120.0
# How long send() may hold the crawl while the topic's partitions are not known (its only
# wait in Scrapy's thread; they are fetched at the start, so a topic deleted mid-crawl).
METADATA_WAIT_S = 5.0


class AnnouncementPipeline:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.id_field = settings.id_field  # the item field that holds the ad's id
        self.producer: Any = None
        self.send_timeout_s = SEND_TIMEOUT_S
        self.sent = 0
        self.refused = 0

    @classmethod
    def from_crawler(cls, crawler: Any) -> AnnouncementPipeline:
        env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
        env.update({k: _setting_text(v) for k, v in crawler.settings.items()
                    if k.startswith(ENV_PREFIX)})
        try:
            settings = build_settings(env=env)
        except StreamdedupError as exc:  # NotConfigured only turned the pipeline off: the
            raise ConfigError(f"streamdedup settings: {exc}") from None  # crawl announced none
        return cls(settings)

    def open_spider(self, spider: Any = None) -> None:
        kafka_log = logging.getLogger("kafka")
        # Else the project chose what it shows (a level we set for an earlier crawl of the
        # process is still ours).
        ours = kafka_log.level == logging.NOTSET or kafka_log.level == _QUIETED[0]
        if ours:
            kafka_log.setLevel(logging.WARNING)
            _QUIETED[0] = logging.WARNING
        log.info("streamdedup: connecting to %s (topic %s)", self.settings.bootstrap_servers,
                 self.settings.input_topic)
        with _complaints(kafka_log, hold=ours) as complaints:
            try:  # linger 0: an item's acknowledgement is awaited, not a batch's
                self.producer = announcement_producer(
                    self.settings, "streamdedup-scrapy", linger_ms=0,
                    delivery_timeout_ms=int(self.send_timeout_s * 1000),
                    max_block_ms=int(METADATA_WAIT_S * 1000))
                # The topic's partitions, known before the first item: send() waits for them
                # in Scrapy's thread (up to 60 s by default, each item while a topic is
                # missing).
                self.producer.partitions_for(self.settings.input_topic)
            except Exception as exc:  # kafka-python's NoBrokersAvailable, an SSL file, ...
                said = describe(exc)
                why = max((r for r in reversed(complaints.seen) if said not in r.getMessage()),
                          default=None, key=lambda r: r.levelno)  # the last of the worst
                raise StreamdedupError(
                    f"cannot produce to {self.settings.bootstrap_servers}: {said}"
                    + (f" (kafka-python's last complaint: {why.getMessage()[:300]})"
                       if why else "") + "; nothing would be announced") from None

    def announcement(self, item: Any) -> tuple[str, bytes]:
        """The id and the JSON bytes of one item."""
        try:
            fields = ItemAdapter(item).asdict()
        except RecursionError:
            raise DropItem(_SELF_HOLDING) from None
        doc_id = fields.get(self.id_field)
        if not has_value(doc_id):  # (a blank id was sent on, and was a wrong_type letter)
            doc_id = next((fields[f] for f in URL_FIELDS if has_value(fields.get(f))), None)
        if doc_id is None:
            raise DropItem(f"no {self.id_field!r} field and no URL: cannot be announced "
                           "without an id")
        if isinstance(doc_id, bool) or not isinstance(doc_id, str | int):
            raise DropItem(f"its id must be a string or an integer, not "
                           f"{type(doc_id).__name__} ({shown(doc_id, 60)})")
        try:
            value = json_bytes({**_finite(fields), "id": str(doc_id)}, _as_json, (", ", ": "))
        except (TypeError, ValueError) as exc:
            raise DropItem(f"not JSON: {exc}") from None
        except RecursionError:
            raise DropItem(_SELF_HOLDING) from None
        s = self.settings
        if len(value) > s.max_message_bytes:
            raise DropItem(f"oversized: {len(value):,} bytes > max_message_bytes "
                           f"{s.max_message_bytes:,} (the detector would not judge it)")
        try:  # read as the consumer reads it (4 us for an item of 1 KB)
            decode_message(value, s.text_fields, s.max_message_bytes, s.read_time_field,
                           s.id_field)
        except MessageError as exc:
            listed = any(isinstance(fields.get(f), list | tuple) for f in s.text_fields)
            raise DropItem(f"the detector would dead-letter it: {exc.reason}: {exc.detail}"
                           + ("; join a list of text pieces into one string (Scrapy's "
                              "getall() gives a list)" if listed else "")) from None
        return str(doc_id), value

    async def process_item(self, item: Any, spider: Any = None) -> Any:
        from kafka.errors import KafkaError

        doc_id, value = self.announcement(item)
        try:
            await _settled(self.producer.send(self.settings.input_topic,
                                              key=doc_id.encode("utf-8"), value=value))
        except KafkaError as exc:  # refused, or not acknowledged within send_timeout_s
            self.refused += 1
            raise DropItem(f"not announced: {self.settings.input_topic} at "
                           f"{self.settings.bootstrap_servers} did not take it "
                           f"({describe(exc)})") from None
        self.sent += 1
        return item

    def close_spider(self, spider: Any = None) -> None:
        if self.producer is not None:
            close_producer(self.producer, 10)
        log.log(logging.ERROR if self.refused else logging.INFO,
                "streamdedup: %d announcements sent to %s%s", self.sent,
                self.settings.input_topic,
                f", {self.refused} not taken by the broker (dropped, with the reason)"
                if self.refused else "")


class _Held(logging.Handler):
    """kafka-python's records while the producer connects: ``seen`` (the last few, for the
    error) and ``held`` (the first thousand, to be shown once it connected)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: collections.deque[logging.LogRecord] = collections.deque(maxlen=8)
        self.held: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record)
        if len(self.held) < 1000:
            self.held.append(record)


@contextlib.contextmanager
def _complaints(logger: logging.Logger, hold: bool) -> Iterator[_Held]:
    """kafka-python's warnings while the producer connects. With ``hold`` (the project left
    the ``kafka`` logger's level to us) they are held instead of shown, since a broker away
    wrote some 20 reconnect lines in its 30 s before the error; those of a connection that
    then succeeded are shown after it (a first bootstrap server that failed)."""
    held = _Held()
    propagate = logger.propagate
    logger.propagate = propagate and not hold
    logger.addHandler(held)
    try:
        yield held
    finally:
        logger.removeHandler(held)
        logger.propagate = propagate
    if hold:
        for record in held.held:
            logging.getLogger(record.name).handle(record)


def _settled(future: Any) -> Any:
    """kafka-python's future, settled on its sender thread, as what the crawl can await: an
    asyncio future where an asyncio loop runs the crawl (Scrapy's default reactor since 2.13,
    or no reactor), else a Twisted Deferred (a reactor set by ``TWISTED_REACTOR``). The
    producer's ``delivery_timeout_ms`` settles every send, so neither waits forever."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        from twisted.internet import reactor
        from twisted.internet.defer import Deferred
        from twisted.python.failure import Failure

        deferred: Any = Deferred()
        future.add_callback(lambda value: reactor.callFromThread(deferred.callback, value))
        future.add_errback(lambda exc: reactor.callFromThread(deferred.errback, Failure(exc)))
        return deferred
    done = loop.create_future()

    def settle_in_loop(value: Any, exc: BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits it any more
            loop.call_soon_threadsafe(_settle, done, value, exc)

    future.add_callback(lambda value: settle_in_loop(value, None))
    future.add_errback(lambda exc: settle_in_loop(None, exc))
    return done


def _settle(done: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if not done.done():  # the awaiting task may have been cancelled (the crawl stopped)
        if exc is None:
            done.set_result(value)
        else:
            done.set_exception(exc)


def _finite(value: Any) -> Any:
    """NaN and infinities, at any depth, as null: they are no JSON (the detector would
    dead-letter the whole ad as ``malformed_json``). A dict key that JSON cannot hold failed
    the pipeline (a TypeError, the item neither sent nor dropped)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):  # a key JSON has no form for (a tuple) as its text
        return {k if k is None or isinstance(k, str | int | float) else str(k): _finite(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _setting_text(value: Any) -> str:
    """A Scrapy setting as the environment variable it stands for: a list comma-joined (str()
    made ['title', 'description'] two odd field names)."""
    return ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _as_json(value: Any) -> Any:
    """What JSON has no form for: bytes as their UTF-8 text, anything else as its text."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


