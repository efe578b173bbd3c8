"""A Scrapy item pipeline: every scraped item becomes an announcement on the input topic.

In the Scrapy project's settings::

    ITEM_PIPELINES = {"streamdedup.integrations.scrapy.AnnouncementPipeline": 800}
    STREAMDEDUP_BOOTSTRAP_SERVERS = "kafka:9092"   # any STREAMDEDUP_* setting works here,
    STREAMDEDUP_INPUT_TOPIC = "jobs"               # as in the environment (which it overrides)
    STREAMDEDUP_ID_FIELD = "id"                    # else the item's "url", then "link"

The announcement is the item's fields as JSON, with ``id`` set; the Kafka key is the id, so a
re-scraped ad goes to the same partition and, with the same text, gets its stored verdict
back. An item without an id field or URL is dropped with a clear message (Scrapy's
DropItem), never sent without an id; the producer waits for the broker (acks=all) and is
flushed when the spider closes.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from streamdedup.errors import StreamdedupError
from streamdedup.extras import require
from streamdedup.service.kafka import announcement_producer
from streamdedup.settings import ENV_PREFIX, Settings, build_settings

_scrapy = require("scrapy", "the Scrapy pipeline")
from itemadapter import ItemAdapter  # noqa: E402  (installed with Scrapy)
from scrapy.exceptions import DropItem, NotConfigured  # noqa: E402

log = logging.getLogger(__name__)
ID_SETTING = ENV_PREFIX + "ID_FIELD"
URL_FIELDS = ("url", "link")


class AnnouncementPipeline:
    def __init__(self, settings: Settings, id_field: str = "id") -> None:
        self.settings = settings
        self.id_field = id_field
        self.producer: Any = None
        self.sent = 0

    @classmethod
    def from_crawler(cls, crawler: Any) -> AnnouncementPipeline:
        env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
        env.update({k: str(v) for k, v in crawler.settings.items()
                    if k.startswith(ENV_PREFIX) and k != ID_SETTING})
        try:
            settings = build_settings(env=env)
        except StreamdedupError as exc:
            raise NotConfigured(f"streamdedup settings: {exc}") from exc
        return cls(settings, crawler.settings.get(ID_SETTING, "id"))

    def open_spider(self, spider: Any) -> None:
        self.producer = announcement_producer(self.settings, "streamdedup-scrapy")

    def announcement(self, item: Any) -> tuple[str, bytes]:
        """The id and the JSON bytes of one item."""
        fields = ItemAdapter(item).asdict()
        doc_id = fields.get(self.id_field)
        if doc_id in (None, ""):
            doc_id = next((fields[f] for f in URL_FIELDS if fields.get(f)), None)
        if doc_id in (None, ""):
            raise DropItem(f"no {self.id_field!r} field and no URL: cannot be announced "
                           "without an id")
        body = {**fields, "id": str(doc_id)}
        return str(doc_id), json.dumps(body, ensure_ascii=False, default=str).encode("utf-8")

    def process_item(self, item: Any, spider: Any) -> Any:
        doc_id, value = self.announcement(item)
        self.producer.send(self.settings.input_topic, key=doc_id.encode("utf-8"), value=value)
        self.sent += 1
        return item

    def close_spider(self, spider: Any) -> None:
        if self.producer is not None:
            self.producer.flush()
            self.producer.close()
        log.info("streamdedup: %d announcements sent to %s", self.sent,
                 self.settings.input_topic)
