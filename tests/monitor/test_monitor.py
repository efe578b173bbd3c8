"""Watching a real stream: `streamdedup produce` sends Kijiji ads to a real broker, a real
`streamdedup run` judges them, and then `tail`, `explain` and the monitor (its API, and its
page in a real Chromium driven by Playwright) show what happened."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from topics import records_until

from harness.broker import create_topics
from streamdedup.core.document import Document
from streamdedup.process import free_port
from streamdedup.replay.dump import read_dump
from streamdedup.settings import build_settings

pytestmark = [pytest.mark.broker, pytest.mark.dump]
ADS = 300


@dataclass
class Stream:
    bootstrap: str
    flags: list[str]
    dump: Path
    store: Path
    verdicts: dict[str, dict[str, Any]]
    dead: int
    more: list[Document]  # ads not produced yet: the page test sends them while it watches

    def env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not k.startswith("STREAMDEDUP_")}

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "streamdedup", *args, *self.flags],
                              capture_output=True, text=True, timeout=timeout, env=self.env())


@pytest.fixture(scope="module")
def stream(kafka_bootstrap: str, kijiji_path: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Stream]:
    """300 Kijiji ads and 2 bad messages through `produce` and `run`, once for the module."""
    from kafka import KafkaProducer

    tmp = tmp_path_factory.mktemp("watch")
    settings = build_settings("reference", env={})
    rows = [d for _, d in read_dump(kijiji_path, None, settings.text_fields)
            if isinstance(d, Document)][:ADS + 20]
    rows, more = rows[:ADS], rows[ADS:]
    dump = tmp / "ads.jsonl"
    dump.write_text("".join(json.dumps({"id": d.id, **d.fields}, ensure_ascii=False) + "\n"
                            for d in rows), encoding="utf-8")
    prefix = f"watch-{os.getpid()}-{int(time.time())}"
    topics = [f"{prefix}-in", f"{prefix}-out", f"{prefix}-dlq"]
    create_topics(kafka_bootstrap, dict.fromkeys(topics, 1))
    flags = ["--bootstrap-servers", kafka_bootstrap, "--input-topic", topics[0],
             "--output-topic", topics[1], "--dlq-topic", topics[2], "--preset", "reference"]
    s = Stream(kafka_bootstrap, flags, dump, tmp / "store", {}, 0, more)
    produced = s.cli("produce", str(dump))
    assert produced.returncode == 0, produced.stderr
    assert f"{ADS} announcements sent" in produced.stderr
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for bad in (b"{not json", b"\xff\xfe"):
        producer.send(topics[0], bad)
    producer.flush()
    producer.close()
    consumer = subprocess.Popen([sys.executable, "-m", "streamdedup", "run", *flags,
                                 "--store", str(s.store), "--group-id", f"{prefix}-g",
                                 "--metrics-port", "0", "--commit-interval-s", "0.2"],
                                env=s.env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    try:  # the consumer keeps running for the module: the page test produces more
        for rec in records_until(kafka_bootstrap, topics[1], ADS):
            body = json.loads(rec.value)
            s.verdicts[body["id"]] = body
        s.dead = len(records_until(kafka_bootstrap, topics[2], 2))
        assert len(s.verdicts) == ADS and s.dead == 2
        yield s
    finally:
        consumer.terminate()
        assert consumer.wait(60) == 0


def first_duplicate(s: Stream) -> dict[str, Any]:
    return next(v for v in s.verdicts.values() if v["duplicate"] and not v["exact"])


def test_tail_prints_one_line_per_verdict(stream: Stream) -> None:
    out = stream.cli("tail", "--from", "beginning", "--only-duplicates", "--count", "5")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 5 and all("DUPLICATE of" in x and "cluster" in x for x in lines)
    first = next(v for v in stream.verdicts.values() if v["duplicate"])
    assert lines[0].startswith(f"{first['id']}  DUPLICATE of {first['duplicate_of']}")


def test_tail_says_when_a_topic_it_reads_is_not_there(stream: Stream) -> None:
    """A misspelt --output-topic waited forever without a word."""
    proc = subprocess.Popen([sys.executable, "-m", "streamdedup", "tail", *stream.flags,
                             "--output-topic", "no-such-verdicts"], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, env=stream.env())
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()
    deadline = time.monotonic() + 60  # a bound on waiting, not a speed to reach
    try:
        while not any("waiting for topic" in x for x in lines) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    said = [x for x in lines if "waiting for topic" in x]
    assert said and said[0].startswith("waiting for topic no-such-verdicts: not on") \
        and "--output-topic" in said[0], lines


def test_explain_from_the_topics_and_from_the_dump(stream: Stream) -> None:
    dup = first_duplicate(stream)
    out = stream.cli("explain", dup["id"], "--no-color")
    assert out.returncode == 0, out.stderr
    assert "exact Jaccard" in out.stdout and "a duplicate" in out.stdout
    assert "[" in out.stdout  # shared passages bracketed without colour
    as_json = stream.cli("explain", dup["id"], dup["duplicate_of"], "--dump", str(stream.dump),
                         "--json")
    e = json.loads(as_json.stdout)
    assert e["duplicate"]
    listed = [m["jaccard"] for m in dup["matches"] if m["id"] == dup["duplicate_of"]]
    assert listed and abs(e["jaccard"] - listed[0]) < 1e-6  # the verdict's own figure
    from_store = stream.cli("explain", dup["id"], "--use-store", "--store", str(stream.store),
                            "--dump", str(stream.dump), "--json")
    assert json.loads(from_store.stdout)["b"]["id"] == dup["duplicate_of"], from_store.stderr
    # After a backfill: the original in the dump alone, its repost in the topic alone. Each
    # was "no announcement with id" (the dump, or the topic, had one of the two).
    originals = stream.dump.parent / "originals.jsonl"
    originals.write_text("".join(line + "\n" for line in stream.dump.read_text().splitlines()
                                 if json.loads(line)["id"] == dup["duplicate_of"]))
    mixed = stream.cli("explain", dup["id"], "--dump", str(originals), "--json")
    assert mixed.returncode == 0, mixed.stderr
    assert json.loads(mixed.stdout)["jaccard"] == e["jaccard"]
    missing = stream.cli("explain", "no-such-id", "x", "--dump", str(stream.dump))
    assert missing.returncode == 1 and "no announcement with id 'no-such-id', 'x' neither in " \
        f"{stream.dump} nor in topic " in missing.stderr, missing.stderr
    wrong = subprocess.run([sys.executable, "-m", "streamdedup", "explain", dup["id"],
                            *stream.flags, "--output-topic", "no-such-verdicts"],
                           capture_output=True, text=True, timeout=120, env=stream.env())
    assert wrong.returncode == 1, wrong.stderr  # it said "no verdict for X in" that topic
    assert "topic no-such-verdicts is not on" in wrong.stderr, wrong.stderr


def monitor_command(stream: Stream, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    """`streamdedup monitor` started with ``args``, once it has read every verdict."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "streamdedup", "monitor", *stream.flags,
                             "--monitor-port", str(port), *args], env=stream.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60  # a bound on waiting, not a speed to reach
    while True:
        try:
            if api(f"http://127.0.0.1:{port}", "/api/summary")["verdicts"] == ADS:
                return proc, port
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"no monitor: {proc.communicate()[0]!r}")
        time.sleep(0.2)


def test_the_monitor_explains_backfilled_ads_from_its_dump(stream: Stream) -> None:
    """A backfilled ad is in the dump, not the topic: with ``--dump`` the page explains it.
    (``--no-texts``: neither text comes from the topic.)"""
    dup = first_duplicate(stream)
    proc, port = monitor_command(stream, "--no-texts", "--dump", str(stream.dump))
    try:
        out = api(f"http://127.0.0.1:{port}", f"/api/explain/{dup['id']}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    listed = [m["jaccard"] for m in dup["matches"] if m["id"] == dup["duplicate_of"]]
    assert out["b"]["id"] == dup["duplicate_of"] and out["duplicate"]
    assert listed and abs(out["jaccard"] - listed[0]) < 1e-6  # duplicate_of is always listed
    assert f"the text of {dup['duplicate_of']!r} is from {stream.dump.name}, row " in \
        out["note"], out["note"]


@pytest.mark.parametrize(("sig", "page_open"), [(signal.SIGTERM, False),
                                                 (signal.SIGTERM, True), (signal.SIGINT, True)])
def test_the_monitor_command_stops_cleanly_on_sigterm(stream: Stream, sig: int,
                                                      page_open: bool) -> None:
    """As `run` does: exit 0 (it was 143, uvicorn raising the signal again after its stop;
    on Ctrl-C, click's "Aborted!" and 1). With a page open (its event stream) the monitor
    did not stop at all until the page was closed: the web server waited for the stream,
    which never ended."""
    proc, port = monitor_command(stream)
    try:
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/api/events",
                                      timeout=30) if page_open else None
        if page is not None:
            assert page.readline().startswith(b"event: tick")  # the stream is open
        proc.send_signal(sig)
        out = proc.communicate(timeout=30)[0].decode(errors="replace")
        assert proc.returncode == 0, out
        assert "Traceback" not in out and "graceful shutdown exceeded" not in out, out
        assert "Aborted" not in out, out
        if page is not None:
            page.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def monitor(stream: Stream) -> Iterator[str]:
    from streamdedup.monitor.server import Monitor

    port = free_port()
    settings = build_settings("reference", env={}, overrides={
        "bootstrap_servers": stream.bootstrap, "input_topic": stream.flags[3],
        "output_topic": stream.flags[5], "dlq_topic": stream.flags[7], "monitor_port": port})
    mon = Monitor(settings, "beginning")
    server = mon.server()
    mon.follow()
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(base + "/api/summary", timeout=5) as r:
                if json.loads(r.read())["verdicts"] >= ADS:
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, "the monitor did not read the verdicts"
        time.sleep(0.2)
    yield base
    server.should_exit = True
    thread.join(timeout=10)
    mon.stop()


def api(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.loads(r.read())


def test_the_monitor_counts_what_the_topics_hold(stream: Stream, monitor: str) -> None:
    summary = api(monitor, "/api/summary")
    dups = sum(v["duplicate"] for v in stream.verdicts.values())
    assert (summary["verdicts"], summary["duplicates"], summary["dead_letters"]) == (
        ADS, dups, 2)
    assert sum(summary["dead_letters_by_reason"].values()) == 2
    sizes: dict[str, int] = {}
    for v in stream.verdicts.values():
        sizes[v["cluster_id"]] = sizes.get(v["cluster_id"], 0) + 1
    biggest = api(monitor, "/api/clusters?limit=1")["biggest"][0]
    assert biggest["size"] == max(sizes.values()) and biggest["title"]
    dup = first_duplicate(stream)
    e = api(monitor, f"/api/explain/{dup['id']}")
    assert e["b"]["id"] == dup["duplicate_of"] and e["duplicate"] and e["a"]["shared"]


def test_the_page_updates_live_and_shows_a_duplicate_beside_its_match(
        stream: Stream, monitor: str, tmp_path: Path, chromium_path: str) -> None:
    """Runs last in this module: it produces 20 more ads (judged by the running consumer),
    a record that is not JSON, two that are no verdicts, a verdict delivered again and one with
    fields nobody knows, while the page is open.
    The screenshot is kept in out/test-artifacts/monitor.png."""
    from kafka import KafkaProducer
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(monitor + "/")
            page.wait_for_function(f"document.getElementById('verdicts').textContent == '{ADS}'",
                                   timeout=20_000)
            assert page.text_content("#dead") == "2"
            # The latest duplicates on open, not only those among the first tick's newest 200
            # verdicts (a quiet stream's table stayed empty).
            dups = sum(v["duplicate"] for v in stream.verdicts.values())
            page.wait_for_function("document.querySelectorAll('#latest tbody tr').length == "
                                   f"{min(50, dups)}", timeout=10_000)
            # The broker answered and nothing is left to read (asked every 2 s).
            page.wait_for_function("document.getElementById('status').textContent == 'live'",
                                   timeout=10_000)
            producer = KafkaProducer(bootstrap_servers=stream.bootstrap)
            for d in stream.more:
                producer.send(stream.flags[3], json.dumps({"id": d.id, **d.fields}).encode())
            producer.send(stream.flags[5], b"not json at all")
            # Not verdicts the monitor can count: each once stopped its reader for good.
            producer.send(stream.flags[5], b'{"id": "m1", "merged": 5}')
            producer.send(stream.flags[5],
                          b'{"id": "n1", "duplicate": true, "matches": [{"id": "x", '
                          b'"jaccard": NaN}]}')
            # A verdict delivered again (at least once): counted as repeated, not again.
            producer.send(stream.flags[5], json.dumps(first_duplicate(stream)).encode())
            producer.send(stream.flags[5], json.dumps({
                "id": "from-elsewhere", "duplicate": False, "cluster_id": "from-elsewhere",
                "surprise": {"nested": [1, 2]}}).encode())
            # The earliest match (duplicate_of) is not the best: the table showed the best's J.
            producer.send(stream.flags[5], json.dumps({
                "id": "two-matches", "duplicate": True, "duplicate_of": "x-earliest",
                "cluster_id": "x-earliest", "matches": [{"id": "x-best", "jaccard": 1.0},
                                                        {"id": "x-earliest", "jaccard": 0.85}],
                "merged": []}).encode())
            # An id a browser reads as a folder in a path (the page searched /api/ for it).
            producer.send(stream.flags[5], json.dumps({
                "id": "..", "duplicate": False, "cluster_id": ".."}).encode())
            producer.flush()
            producer.close()
            want = ADS + len(stream.more) + 3
            page.wait_for_function(
                f"document.getElementById('verdicts').textContent == '{want}'", timeout=60_000)
            page.wait_for_function("document.getElementById('bad').textContent == '3'",
                                   timeout=10_000)
            assert api(monitor, "/api/summary")["repeated"] == 1
            pair = page.locator("#latest tbody tr", has_text="two-matches").locator("td")
            assert pair.nth(3).text_content() == "0.850", pair.all_text_contents()
            page.wait_for_selector("#biggest tbody tr", timeout=10_000)
            row = page.locator("#latest tbody tr.dup", has_not_text="two-matches").first
            shown = row.locator("td").nth(3).text_content()  # the best match's J was shown
            row.click()
            page.wait_for_function("document.getElementById('why').textContent.includes("
                                   "'Jaccard')", timeout=10_000)
            assert shown and f"Jaccard {shown} " in (page.text_content("#why") or "")
            page.wait_for_timeout(1500)  # one more tick: the chart has its new seconds
            artifacts = Path(__file__).resolve().parents[2] / "out" / "test-artifacts"
            artifacts.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(artifacts / "monitor.png"), full_page=True)
            page.fill("#query", "no-such-id")
            page.click("#search button")
            page.wait_for_function("document.getElementById('found').textContent.includes("
                                   "'no verdict')", timeout=10_000)
            page.fill("#query", "..")
            page.click("#search button")
            page.wait_for_function("document.getElementById('found').textContent == "
                                   "'..: not a duplicate, cluster ..'", timeout=10_000)
        finally:
            browser.close()


def test_explain_takes_an_ids_text_as_of_the_documents_time_across_partitions(
        kafka_bootstrap: str, kafka_topic_factory: Any) -> None:
    """o's first text on partition 0 at t=1 s, d (its copy) on partition 1 at t=2 s, o's
    unrelated second text on partition 0 at t=3 s: d was a duplicate of o as it was then.
    explain ordered texts by when it read them, partition 0 first, took o's second text and
    said "Jaccard 0.000" with a warning to fix the settings."""
    from kafka import KafkaProducer

    first = {"id": "o", "title": "Cameriere", "description": (
        "Ristorante in centro a Milano cerca cameriere di sala con esperienza, turni serali "
        "e nel fine settimana, contratto a tempo determinato con possibilita di rinnovo.")}
    later = {"id": "o", "title": "Magazziniere", "description": (
        "Azienda di logistica a Torino assume magazziniere con patente del muletto per "
        "carico e scarico merci, turno diurno, inserimento immediato.")}
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    # and the three in one millisecond on one partition (a fast producer; LogAppendTime):
    # by time alone o's later text was taken again; the partition's order decides
    for partitions, sent in ((2, ((0, 1000, first), (1, 2000, {**first, "id": "d"}),
                                  (0, 3000, later))),
                             (1, ((0, 5000, first), (0, 5000, {**first, "id": "d"}),
                                  (0, 5000, later)))):
        topic = kafka_topic_factory(partitions=partitions)
        for partition, at, body in sent:
            producer.send(topic, json.dumps(body).encode(), partition=partition,
                          timestamp_ms=at)
        producer.flush()
        done = subprocess.run([sys.executable, "-m", "streamdedup", "explain", "d", "o",
                               "--json", "--bootstrap-servers", kafka_bootstrap,
                               "--input-topic", topic],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["jaccard"] == 1.0, (partitions, done.stdout)
        assert "'o' has 2 different texts" in done.stderr, done.stderr
    producer.close()


def test_explain_reads_the_topics_ids_as_run_does_with_the_id_field(
        kafka_bootstrap: str, kafka_topic_factory: Any) -> None:
    """With ``--id-field link`` run filed the ads under their links while ``explain`` read
    ``id``: "no announcement with id 'https://x/2', 'https://x/3'"."""
    from kafka import KafkaProducer

    body = {"title": "Cameriere", "description": (
        "Ristorante in centro a Milano cerca cameriere di sala con esperienza, turni serali "
        "e nel fine settimana, contratto a tempo determinato con possibilita di rinnovo.")}
    topic = kafka_topic_factory(partitions=1)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for sent in ({**body, "link": "https://x/2", "id": "a"}, {**body, "link": "https://x/3"}):
        producer.send(topic, json.dumps(sent).encode())
    producer.flush()
    producer.close()
    done = subprocess.run([sys.executable, "-m", "streamdedup", "explain", "https://x/3",
                           "https://x/2", "--json", "--bootstrap-servers", kafka_bootstrap,
                           "--input-topic", topic, "--id-field", "link"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and json.loads(done.stdout)["jaccard"] == 1.0, done.stderr


def test_tail_from_a_time_has_the_titles_of_ads_sent_just_before_it(
        kafka_bootstrap: str, kafka_topic_factory: Any) -> None:
    """An ad sent at 04:30:57 and judged at 04:31:01: ``tail --from 04:31:00`` read both
    topics from then, and printed the duplicate without its title."""
    from kafka import KafkaProducer

    ads, verdicts = kafka_topic_factory(partitions=1), kafka_topic_factory(partitions=1)
    at = 1_790_000_000_000
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for doc_id, title, sent in (("o", "Cuoco a Milano", at - 120_000),
                                ("d", "Cuoco a Milano, subito", at - 3_000)):
        producer.send(ads, json.dumps({"id": doc_id, "title": title}).encode(),
                      timestamp_ms=sent)
    producer.send(verdicts, json.dumps({
        "id": "d", "seq": 2, "duplicate": True, "duplicate_of": "o", "cluster_id": "o",
        "matches": [{"id": "o", "jaccard": 0.9}], "merged": []}).encode(), timestamp_ms=at + 1000)
    producer.flush()
    producer.close()
    from_time = datetime.fromtimestamp(at / 1000, UTC).isoformat().replace("+00:00", "Z")
    done = subprocess.run([sys.executable, "-m", "streamdedup", "tail", "--from", from_time,
                           "--count", "1", "--bootstrap-servers", kafka_bootstrap,
                           "--input-topic", ads, "--output-topic", verdicts],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Cuoco a Milano, subito" in done.stdout, done.stdout
