"""The Scrapy pipeline: items to announcements (unit), then a real Scrapy crawl of a local
static job site, served by the test, into a real Kafka topic; the announcements it sent are
judged by the detector, which finds the site's repost."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from scrapy.exceptions import DropItem
from topics import topic_keys, topic_records

from streamdedup.detection.detector import Detector
from streamdedup.integrations.scrapy import AnnouncementPipeline
from streamdedup.service.message import decode_message
from streamdedup.settings import Settings, build_settings, unknown_variables
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
    pipe = AnnouncementPipeline(Settings(id_field="ref"))
    assert pipe.announcement({"ref": 7, "title": "t"}) == ("7", b'{"ref": 7, "title": "t", '
                                                                  b'"id": "7"}')
    for item in ({"url": "http://x/ad/1", "title": "t"},
                 {"ref": " ", "url": "http://x/ad/1", "title": "t"}):  # (blank: a dead letter)
        doc_id, value = pipe.announcement(item)
        assert doc_id == "http://x/ad/1" and json.loads(value)["id"] == doc_id
        # the consumer, given the same id_field, reads the id the pipeline keyed it by
        assert decode_message(value, ("title",), 1 << 20, id_field="ref").id == doc_id
    assert decode_message(pipe.announcement({"ref": 7, "title": "t"})[1], ("title",), 1 << 20,
                          id_field="ref").id == "7"
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
    # A key JSON cannot hold failed the pipeline with a TypeError (neither sent nor dropped)
    _, value = pipe.announcement({"id": 5, "title": "t", "meta": {(1, 2): "x", 3: "y"}})
    assert json.loads(value)["meta"] == {"(1, 2)": "x", "3": "y"}
    looped: dict[str, object] = {"id": 6, "title": "t"}
    looped["self"] = looped
    with pytest.raises(DropItem, match="not JSON: a value holds itself"):
        pipe.announcement(looped)


def test_items_the_consumer_would_dead_letter_are_dropped_with_its_reason() -> None:
    """A description as Scrapy's ``getall()`` gives it (a list) was sent and counted as sent;
    the consumer dead-lettered it (``wrong_type``), in a topic the crawl's operator may never
    read. The pipeline now reads each item as the consumer would."""
    pipe = AnnouncementPipeline(build_settings(env={}, overrides={"retention": "30d"}))
    cases = [({"id": 1, "title": "Cuoco", "description": ["Cercasi", "cuoco"]},
              r"wrong_type: description must be a string, got JSON array; join a list"),
             ({"id": 2, "title": {"it": "Cuoco"}}, r"wrong_type: title must be a string, got "
                                                   r"JSON object$"),
             ({"id": 3, "title": " ", "location": "Roma"}, r"empty_text: none of title, "
                                                           r"description has text"),
             ({"id": 4, "title": "Cuoco", "timestamp": "ieri"}, r"bad_time: timestamp: ")]
    for item, reason in cases:
        with pytest.raises(DropItem, match=f"the detector would dead-letter it: {reason}"):
            pipe.announcement(item)
    assert pipe.announcement({"id": 5, "title": "Cuoco", "timestamp": "2024-03-05"})[0] == "5"
    # Without retention the time is not read, as by the consumer: no dead letter, sent.
    assert AnnouncementPipeline(Settings()).announcement(
        {"id": 4, "title": "Cuoco", "timestamp": "ieri"})[0] == "4"


def test_a_broker_away_is_one_error_naming_kafka_pythons_worst_complaint(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A broker away wrote some 20 of kafka-python's reconnect lines in the 30 s before the
    crawl stopped, and the error named only the timeout. (kafka-python's bootstrap is faked
    here: with a real one this test would wait its 30 s; the crawl tests use a real broker.)"""
    import logging

    from kafka.errors import KafkaTimeoutError

    import streamdedup.integrations.scrapy as pipeline_module
    from streamdedup.errors import StreamdedupError

    def away(*args: Any, **kwargs: Any) -> Any:
        net = logging.getLogger("kafka.net.manager")
        net.debug("Send: bytearray(b'...')")
        net.error("Connection failed: KafkaConnectionError: 111 ECONNREFUSED")
        net.warning("Bootstrap bootstrap-0 not ready; waiting 20.18 secs")
        net.error("Bootstrap failed: KafkaTimeoutError: Unable to bootstrap from h:1")
        raise KafkaTimeoutError("Unable to bootstrap from h:1")

    kafka_log = logging.getLogger("kafka")
    monkeypatch.setattr(kafka_log, "level", logging.NOTSET)  # as a Scrapy project leaves it
    monkeypatch.setattr(pipeline_module, "_QUIETED", [logging.NOTSET])
    monkeypatch.setattr(pipeline_module, "announcement_producer", away)
    pipe = AnnouncementPipeline(Settings(bootstrap_servers="h:1"))
    with caplog.at_level(logging.DEBUG), pytest.raises(StreamdedupError) as got:
        pipe.open_spider()
    assert str(got.value) == (
        "cannot produce to h:1: KafkaTimeoutError: Unable to bootstrap from h:1 (kafka-python's "
        "last complaint: Connection failed: KafkaConnectionError: 111 ECONNREFUSED); nothing "
        "would be announced")
    assert [r.name for r in caplog.records] == ["streamdedup.integrations.scrapy"]  # connecting
    assert kafka_log.propagate and kafka_log.level == logging.WARNING  # no protocol dumps

    class Connected:
        def partitions_for(self, topic: str) -> set[int]:
            return {0}

    def first_server_away(*args: Any, **kwargs: Any) -> Any:
        logging.getLogger("kafka.net.manager").debug("Send: bytearray(b'...')")
        logging.getLogger("kafka.net.manager").warning("Bootstrap h:1 failed; trying h:2")
        return Connected()

    # A connection that succeeds after a complaint: the complaint is shown (it was lost).
    # The level set for the first crawl is still the pipeline's own for a second one.
    monkeypatch.setattr(pipeline_module, "announcement_producer", first_server_away)
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        pipe.open_spider()
    assert [r.getMessage() for r in caplog.records if r.name.startswith("kafka")] == [
        "Bootstrap h:1 failed; trying h:2"]
    # A project that set the kafka logger's level sees what it asked for, as it comes.
    kafka_log.setLevel(logging.DEBUG)
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        pipe.open_spider()
    assert [r.levelname for r in caplog.records if r.name.startswith("kafka")] == [
        "DEBUG", "WARNING"]


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
    assert pipe.id_field == "id"
    # the id field from the environment too (it was read from Scrapy's settings only, and
    # every command warned "STREAMDEDUP_ID_FIELD is not a setting"); Scrapy's wins
    monkeypatch.setenv("STREAMDEDUP_ID_FIELD", "ref")
    assert AnnouncementPipeline.from_crawler(crawler()).id_field == "ref"
    assert AnnouncementPipeline.from_crawler(crawler(STREAMDEDUP_ID_FIELD="sku")).id_field == "sku"
    assert unknown_variables(dict(os.environ)) == []


@pytest.mark.broker
def test_an_item_the_broker_refuses_is_dropped_and_those_beside_it_are_sent(
        kafka_bootstrap: str) -> None:
    """Sent without waiting, a batch the broker refused (over the topic's max.message.bytes)
    was lost with every item after it, and the crawl said all were sent. The items are in
    flight together here, as Scrapy sends a response's items: with kafka-python's idempotent
    producer the refusal failed the item sent beside it too."""
    import uuid

    from harness.broker import create_topics

    topic = f"scrapy-{uuid.uuid4().hex[:8]}"
    create_topics(kafka_bootstrap, {topic: 1}, {"max.message.bytes": "20000"})
    pipe = AnnouncementPipeline(build_settings(env={}, overrides={
        "bootstrap_servers": kafka_bootstrap, "input_topic": topic}))
    pipe.open_spider()
    items = [{"id": "a", "title": "primo"}, {"id": "b", "description": "parola " * 10_000},
             {"id": "c", "title": "terzo"}]

    async def crawl() -> list[Any]:
        return await asyncio.gather(*map(pipe.process_item, items), return_exceptions=True)

    try:
        passed = asyncio.run(crawl())
    finally:
        pipe.close_spider()
    assert passed[0]["id"] == "a" and passed[2]["id"] == "c", passed
    assert isinstance(passed[1], DropItem)
    assert re.match(f"not announced: {topic} at .* did not take it", str(passed[1]))
    assert (pipe.sent, pipe.refused) == (2, 1)
    assert topic_keys(kafka_bootstrap, topic) == ["a", "c"]


@pytest.mark.broker
@pytest.mark.slow
def test_while_the_broker_is_away_items_wait_without_holding_the_crawl(
        local_broker: Any, kafka_topic_factory: Any) -> None:
    """Each item used to be waited for in Scrapy's one thread: while the broker was away, the
    whole crawl (downloads, parsing, other items) stood still, and an item was dropped every
    30 s. Now the event loop runs on while items wait; an item the broker takes back within
    ``send_timeout_s`` is sent, one it does not is dropped with the reason."""
    topic = kafka_topic_factory(1, "scrapy-away")
    settings = build_settings(env={}, overrides={
        "bootstrap_servers": local_broker.bootstrap, "input_topic": topic})
    patient, hasty = AnnouncementPipeline(settings), AnnouncementPipeline(settings)
    hasty.send_timeout_s = 4.0
    for pipe in (patient, hasty):
        pipe.open_spider()
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    async def outage() -> tuple[Any, Any, float, int]:
        for pipe, name in ((patient, "a"), (hasty, "b")):  # the topic's metadata, known
            await pipe.process_item({"id": name, "title": "prima"})
        ticker = asyncio.ensure_future(tick())
        local_broker.stop(keep_data=True)
        started = time.monotonic()
        waiting = asyncio.ensure_future(patient.process_item({"id": "c", "title": "attesa"}))
        try:
            await hasty.process_item({"id": "d", "title": "fretta"})
        except DropItem as exc:
            dropped: Any = exc
        waited, ticked = time.monotonic() - started, ticks
        local_broker.start()  # in this thread: the broker dies with the thread that started it
        try:
            return dropped, await waiting, waited, ticked
        finally:
            ticker.cancel()

    try:
        dropped, sent, waited, ticked = asyncio.run(outage())
    finally:
        local_broker.start()  # running already, unless the test failed before
        for pipe in (patient, hasty):
            pipe.close_spider()
    assert isinstance(dropped, DropItem) and "did not take it" in str(dropped), dropped
    assert 3.0 < waited < 30.0, waited
    assert ticked > waited * 100 / 4, (ticked, waited)  # the loop ran while "d" waited
    assert sent["id"] == "c"
    assert sorted(topic_keys(local_broker.bootstrap, topic)) == ["a", "b", "c"]


def test_an_acknowledgement_after_the_crawl_ended_is_dropped_quietly(
        caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python settles a send on its sender thread; once the crawl's loop was closed,
    handing it over raised there, and kafka-python logged a traceback."""
    from kafka.future import Future

    from streamdedup.integrations.scrapy import _settled

    sent, refused = Future(), Future()

    async def in_flight() -> None:
        _settled(sent)
        _settled(refused)

    loop = asyncio.new_event_loop()
    loop.run_until_complete(in_flight())
    loop.close()
    with caplog.at_level("ERROR"):
        threading.Thread(target=lambda: (sent.success("acknowledged"),
                                         refused.failure(RuntimeError("refused")))).start()
        time.sleep(0.5)
    assert sent.is_done and refused.is_done
    assert not [r for r in caplog.records if "Error processing callback" in r.getMessage()]


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
@pytest.mark.parametrize("reactor", [
    None, "twisted.internet.epollreactor.EPollReactor"], ids=["asyncio", "epoll"])
def test_a_crawl_sends_every_ad_and_the_repost_is_found(
        site: str, kafka_bootstrap: str, kafka_topic_factory: Any, reactor: str | None) -> None:
    """Scrapy's default reactor runs the crawl on an asyncio loop; a reactor set by the
    project (TWISTED_REACTOR) does not, and the pipeline awaits a Twisted Deferred there."""
    topic = kafka_topic_factory(1, "scraped")
    chosen = ["-s", f"TWISTED_REACTOR={reactor}"] if reactor else []
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMDEDUP_")}
    run = subprocess.run(
        [sys.executable, "-m", "scrapy", "runspider", "examples/scrapy/jobs_spider.py",
         "-a", f"start={site}", "-s", "LOG_LEVEL=INFO",
         "-s", 'ITEM_PIPELINES={"streamdedup.integrations.scrapy.AnnouncementPipeline": 800}',
         "-s", f"STREAMDEDUP_BOOTSTRAP_SERVERS={kafka_bootstrap}",
         "-s", f"STREAMDEDUP_INPUT_TOPIC={topic}", *chosen],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"streamdedup: {len(ADS)} announcements sent to {topic}" in run.stderr
    records = topic_records(kafka_bootstrap, topic, 10_000)
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
