"""A Scrapy item pipeline: every scraped item becomes an announcement on the input topic.

In the Scrapy project's settings::

    ITEM_PIPELINES = {"streamdedup.integrations.scrapy.AnnouncementPipeline": 800}
    STREAMDEDUP_BOOTSTRAP_SERVERS = "kafka:9092"   # any STREAMDEDUP_* setting works here,
    STREAMDEDUP_INPUT_TOPIC = "jobs"               # as in the environment (which it overrides)
    STREAMDEDUP_ID_FIELD = "id"                    # else the item's "url", then "link"

The announcement is the item's fields as JSON, with ``id`` set; the Kafka key is the id, so a
re-scraped ad goes to the same partition and, with the same text, gets its stored verdict
back. Each item is sent and waited for (acks=all) before the next: an item the broker did
not take is dropped with the reason (Scrapy's DropItem, counted in its stats), so "sent"
counts announcements on the topic. (Sent without waiting, a batch the broker refused was
lost silently, and the count said sent.) A job site yields a few items a second; a wait of a
few milliseconds each costs the crawl nothing. An item without an id field or URL, with an
id that is no string or integer, or larger than ``max_message_bytes`` is dropped too, with
a clear message. Settings that do not parse, or a broker that cannot be reached, stop the
crawl at its start.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

from streamdedup.errors import ConfigError, StreamdedupError, describe
from streamdedup.extras import require
from streamdedup.service.kafka import announcement_producer
from streamdedup.service.message import json_bytes
from streamdedup.settings import ENV_PREFIX, Settings, build_settings

_scrapy = require("scrapy", "the Scrapy pipeline")
from itemadapter import ItemAdapter  # noqa: E402  (installed with Scrapy)
from scrapy.exceptions import DropItem  # noqa: E402

log = logging.getLogger(__name__)
ID_SETTING = ENV_PREFIX + "ID_FIELD"
URL_FIELDS = ("url", "link")
SEND_TIMEOUT_S = 30.0  # a broker that does not acknowledge within this drops the item


class AnnouncementPipeline:
    def __init__(self, settings: Settings, id_field: str = "id") -> None:
        self.settings = settings
        self.id_field = id_field
        self.producer: Any = None
        self.sent = 0
        self.refused = 0

    @classmethod
    def from_crawler(cls, crawler: Any) -> AnnouncementPipeline:
        env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
        env.update({k: _setting_text(v) for k, v in crawler.settings.items()
                    if k.startswith(ENV_PREFIX) and k != ID_SETTING})
        try:
            settings = build_settings(env=env)
        except StreamdedupError as exc:  # NotConfigured only turned the pipeline off: the
            raise ConfigError(f"streamdedup settings: {exc}") from None  # crawl announced none
        return cls(settings, crawler.settings.get(ID_SETTING, "id"))

    def open_spider(self, spider: Any = None) -> None:
        try:  # linger 0: each item is waited for, so there is no batch to wait to fill
            self.producer = announcement_producer(self.settings, "streamdedup-scrapy",
                                                  linger_ms=0)
        except Exception as exc:  # kafka-python's NoBrokersAvailable, an SSL file, ...
            raise StreamdedupError(f"cannot produce to {self.settings.bootstrap_servers}: "
                                   f"{describe(exc)}; nothing would be announced") from None

    def announcement(self, item: Any) -> tuple[str, bytes]:
        """The id and the JSON bytes of one item."""
        fields = ItemAdapter(item).asdict()
        doc_id = fields.get(self.id_field)
        if doc_id in (None, ""):
            doc_id = next((fields[f] for f in URL_FIELDS if fields.get(f)), None)
        if doc_id in (None, ""):
            raise DropItem(f"no {self.id_field!r} field and no URL: cannot be announced "
                           "without an id")
        if isinstance(doc_id, bool) or not isinstance(doc_id, str | int):
            raise DropItem(f"its id must be a string or an integer, not "
                           f"{type(doc_id).__name__} ({_shown(doc_id)})")
        value = json_bytes({**_finite(fields), "id": str(doc_id)}, _as_json, (", ", ": "))
        if len(value) > self.settings.max_message_bytes:
            raise DropItem(f"oversized: {len(value):,} bytes > max_message_bytes "
                           f"{self.settings.max_message_bytes:,} (the detector would not "
                           "judge it)")
        return str(doc_id), value

    def process_item(self, item: Any, spider: Any = None) -> Any:
        from kafka.errors import KafkaError

        doc_id, value = self.announcement(item)
        if self.producer is None:  # the last one failed
            try:
                self.open_spider()
            except StreamdedupError as exc:
                self.refused += 1
                raise DropItem(f"not announced: {exc}") from None
        try:
            self.producer.send(self.settings.input_topic, key=doc_id.encode("utf-8"),
                               value=value).get(timeout=SEND_TIMEOUT_S)
        except KafkaError as exc:  # the producer is left failing every later send: a new one
            self.refused += 1
            self.producer.close(timeout=0)
            self.producer = None
            raise DropItem(f"not announced: {self.settings.input_topic} at "
                           f"{self.settings.bootstrap_servers} did not take it "
                           f"({describe(exc)})") from None
        self.sent += 1
        return item

    def close_spider(self, spider: Any = None) -> None:
        if self.producer is not None:
            self.producer.close(timeout=10)
        log.log(logging.ERROR if self.refused else logging.INFO,
                "streamdedup: %d announcements sent to %s%s", self.sent,
                self.settings.input_topic,
                f", {self.refused} not taken by the broker (dropped, with the reason)"
                if self.refused else "")


def _finite(value: Any) -> Any:
    """NaN and infinities, at any depth, as null: they are no JSON (the detector reads them,
    the monitor and any strict reader would not)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
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


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
