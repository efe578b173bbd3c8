"""An example spider for a classified-ads site: a listing page links to one page per ad.

    scrapy runspider examples/scrapy/jobs_spider.py -a start=http://127.0.0.1:8000/ \
        -s ITEM_PIPELINES='{"streamdedup.integrations.scrapy.AnnouncementPipeline": 800}' \
        -s STREAMDEDUP_BOOTSTRAP_SERVERS=127.0.0.1:9092 -s STREAMDEDUP_INPUT_TOPIC=jobs

Each ad page has ``h1`` (title), ``.description``, ``.location`` and ``time[datetime]``; the
item's id is the ad's URL (the pipeline's fallback when there is no ``id`` field).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import scrapy


class JobsSpider(scrapy.Spider):
    name = "jobs"

    def __init__(self, start: str = "http://127.0.0.1:8000/", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [start]

    def parse(self, response: Any) -> Iterator[Any]:
        for href in response.css("a.ad::attr(href)").getall():
            yield response.follow(href, self.parse_ad)
        next_page = response.css("a.next::attr(href)").get()
        if next_page:
            yield response.follow(next_page, self.parse)

    def parse_ad(self, response: Any) -> Iterator[dict[str, str]]:
        yield {
            "url": response.url,
            "title": response.css("h1::text").get(default="").strip(),
            "description": " ".join(response.css(".description ::text").getall()).strip(),
            "location": response.css(".location::text").get(default="").strip(),
            "timestamp": response.css("time::attr(datetime)").get(default=""),
        }
