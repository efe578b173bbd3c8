"""The Scrapy pipeline: items to announcements (unit), then a real Scrapy crawl of a local
static job site, served by the test, into a real Kafka topic; the announcements it sent are
judged by the detector, which finds the site's repost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from scrapy.exceptions import DropItem

from streamdedup.core.detector import Detector
from streamdedup.integrations.scrapy import AnnouncementPipeline
from streamdedup.service.message import decode_message
from streamdedup.settings import Settings, build_settings
from streamdedup.store.memory import MemoryStore

ROOT = Path(__file__).resolve().parents[2]
ADS = [
    ("Cameriere", "Cercasi cameriere con esperienza per ristorante in centro, turni serali "
                  "e fine settimana, contratto a tempo determinato.", "Milano"),
    ("Magazziniere", "Azienda di logistica cerca magazziniere con patentino del muletto per "
                     "il turno di notte, zona industriale.", "Torino"),
    ("Cameriere", "Cercasi cameriere con esperienza per ristorante in centro, turni serali "
                  "e fine settimana, contratto a tempo determinato!", "Milano"),  # a repost
    ("Sviluppatore Python", "Software house assume sviluppatore Python per progetti di "
                            "analisi dati, anche da remoto.", "Bologna"),
]


def test_items_become_announcements_keyed_by_id_or_url() -> None:
    pipe = AnnouncementPipeline(Settings(), "ref")
    assert pipe.announcement({"ref": 7, "title": "t"}) == ("7", b'{"ref": 7, "title": "t", '
                                                                  b'"id": "7"}')
    doc_id, value = pipe.announcement({"url": "http://x/ad/1", "title": "t"})
    assert doc_id == "http://x/ad/1" and json.loads(value)["id"] == doc_id
    with pytest.raises(DropItem, match="no 'ref' field and no URL"):
        pipe.announcement({"title": "no id"})


def test_items_the_detector_could_not_take_are_dropped_with_the_reason() -> None:
    """Non-string ids went out as Python reprs ("b'x'", "{'a': 1}", "False"), bytes fields as
    "b'...'", NaN as bare NaN (no JSON), and an oversized item raised inside the producer."""
    pipe = AnnouncementPipeline(build_settings(env={}, overrides={"max_message_bytes": 500}))
    for bad_id in (b"x", {"a": 1}, ["a"], False, 1.5):
        with pytest.raises(DropItem, match="its id must be a string or an integer"):
            pipe.announcement({"id": bad_id, "title": "t"})
    _, value = pipe.announcement({"id": 3, "title": b"Cameriere", "price": float("nan"),
                                  "pay": {"min": float("inf"), "tags": [float("-inf"), 1.5]}})
    assert json.loads(value, parse_constant=lambda c: pytest.fail(f"{c} is no JSON")) == {
        "id": "3", "title": "Cameriere", "price": None, "pay": {"min": None,
                                                               "tags": [None, 1.5]}}
    _, value = pipe.announcement({"id": 4, "title": "Cameriere", "link": "https://x/\udc80"})
    doc = decode_message(value, ("title",), 1 << 20)  # escaped: valid UTF-8, no dead letter
    assert doc.fields["link"] == "https://x/\udc80"
    with pytest.raises(DropItem, match=r"oversized: 5,0.. bytes > max_message_bytes 500"):
        pipe.announcement({"id": "big", "description": "x" * 5000})


def test_settings_that_do_not_parse_stop_the_crawl_and_lists_are_comma_joined(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """NotConfigured turned the pipeline off and the crawl ran on, announcing nothing."""
    from types import SimpleNamespace

    from scrapy.settings import Settings as ScrapySettings

    from streamdedup.errors import ConfigError

    def crawler(**values: Any) -> Any:
        return SimpleNamespace(settings=ScrapySettings(values))

    for name in [k for k in os.environ if k.startswith("STREAMDEDUP_")]:
        monkeypatch.delenv(name)
    with pytest.raises(ConfigError, match=r"streamdedup settings: .*THRESHOLD"):
        AnnouncementPipeline.from_crawler(crawler(STREAMDEDUP_THRESHOLD="abc"))
    pipe = AnnouncementPipeline.from_crawler(
        crawler(STREAMDEDUP_TEXT_FIELDS=["title", "description"]))
    assert pipe.settings.text_fields == ("title", "description")


@pytest.mark.broker
def test_an_item_the_broker_refuses_is_dropped_and_the_next_is_sent(
        kafka_bootstrap: str) -> None:
    """Sent without waiting, a batch the broker refused (over the topic's max.message.bytes)
    was lost with every item after it, and the crawl said all were sent."""
    import uuid

    from kafka import KafkaConsumer

    from harness.broker import create_topics

    topic = f"scrapy-{uuid.uuid4().hex[:8]}"
    create_topics(kafka_bootstrap, {topic: 1}, {"max.message.bytes": "20000"})
    pipe = AnnouncementPipeline(build_settings(env={}, overrides={
        "bootstrap_servers": kafka_bootstrap, "input_topic": topic}))
    pipe.open_spider()
    try:
        assert pipe.process_item({"id": "a", "title": "primo"})["id"] == "a"
        with pytest.raises(DropItem, match=f"not announced: {topic} at .* did not take it"):
            pipe.process_item({"id": "b", "description": "parola " * 10_000})
        assert pipe.process_item({"id": "c", "title": "terzo"})["id"] == "c"
    finally:
        pipe.close_spider()
    assert (pipe.sent, pipe.refused) == (2, 1)
    reader = KafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, group_id=None,
                           auto_offset_reset="earliest", consumer_timeout_ms=5_000)
    assert [r.key for r in reader] == [b"a", b"c"]
    reader.close()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[str]:
    """A two-page listing of ads, served from tmp_path on a free loopback port."""
    pages = {"index.html": ADS[:2], "page2.html": ADS[2:]}
    for n, (title, text, where) in enumerate(ADS):
        (tmp_path / f"ad{n}.html").write_text(
            f"<html><body><h1>{title}</h1><div class='description'><p>{text}</p></div>"
            f"<span class='location'>{where}</span><time datetime='2026-11-0{n + 1}'></time>"
            "</body></html>", encoding="utf-8")
    for name, ads in pages.items():
        start = 0 if name == "index.html" else 2
        links = "".join(f"<a class='ad' href='ad{start + i}.html'>{t}</a>"
                        for i, (t, _, _) in enumerate(ads))
        more = "<a class='next' href='page2.html'>next</a>" if name == "index.html" else ""
        (tmp_path / name).write_text(f"<html><body>{links}{more}</body></html>",
                                     encoding="utf-8")
    handler = partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.mark.broker
def test_a_crawl_sends_every_ad_and_the_repost_is_found(site: str, kafka_bootstrap: str,
                                                        kafka_topic_factory: Any) -> None:
    from kafka import KafkaConsumer

    topic = kafka_topic_factory(1, "scraped")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMDEDUP_")}
    run = subprocess.run(
        [sys.executable, "-m", "scrapy", "runspider", "examples/scrapy/jobs_spider.py",
         "-a", f"start={site}", "-s", "LOG_LEVEL=INFO",
         "-s", 'ITEM_PIPELINES={"streamdedup.integrations.scrapy.AnnouncementPipeline": 800}',
         "-s", f"STREAMDEDUP_BOOTSTRAP_SERVERS={kafka_bootstrap}",
         "-s", f"STREAMDEDUP_INPUT_TOPIC={topic}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"streamdedup: {len(ADS)} announcements sent to {topic}" in run.stderr
    reader = KafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, group_id=None,
                           auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    records = list(reader)
    reader.close()
    assert len(records) == len(ADS)
    settings = Settings()
    docs = {r.key.decode(): decode_message(r.value, settings.text_fields, 1 << 20)
            for r in records}
    assert set(docs) == {f"{site}ad{n}.html" for n in range(len(ADS))}
    assert docs[f"{site}ad1.html"].fields["location"] == "Torino"
    det = Detector(settings, MemoryStore())
    verdicts = {v.id: v for v in det.process_many(
        [docs[f"{site}ad{n}.html"] for n in range(len(ADS))])}
    repost = verdicts[f"{site}ad2.html"]
    assert repost.duplicate and repost.duplicate_of == f"{site}ad0.html"
    assert sum(v.duplicate for v in verdicts.values()) == 1
