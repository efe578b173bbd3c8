"""`streamdedup produce`: refused announcements, Ctrl-C with the broker away, id-less rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from command_line import run, write_tsv
from topics import topic_keys, topic_records


@pytest.mark.broker
@pytest.mark.parametrize(("limit", "count", "big"), [(100_000, 101, 60), (2_000, 40, 4)])
def test_produce_says_when_the_broker_refused_announcements(
        tmp_path: Path, kafka_bootstrap: str, limit: int, count: int, big: int) -> None:
    """A batch over the topic's max.message.bytes is refused whole by the broker; produce
    used to say every announcement was sent and exit 0 (50 of 101 were on the topic). Then
    kafka-python's idempotent producer failed every send after the refused one (a gap in its
    sequence numbers), so one oversized ad lost the rest of the dump. Under 64 KB (the
    producer's batch), kafka-python splits a refused batch and its flush() fails ("Future
    not done"): produce said not all were acknowledged, in a traceback, with every ad but
    the big one on the topic."""
    import uuid

    from harness.broker import create_topics

    topic = f"produce-{uuid.uuid4().hex[:8]}"
    create_topics(kafka_bootstrap, {topic: 1}, {"max.message.bytes": str(limit)})
    rows = [{"id": str(i), "title": "t", "description": "word " * (limit // 2 if i == big
                                                                   else 5)}
            for i in range(count)]
    dump = tmp_path / "ads.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, _, err = run("produce", str(dump), "--bootstrap-servers", kafka_bootstrap,
                       "--input-topic", topic)
    assert code == 1 and "Traceback" not in err, err
    assert f"the broker refused 1 of {count} announcements" in err, err
    assert f"{count - 1} were written" in err and sorted(
        map(int, topic_keys(kafka_bootstrap, topic))) == [i for i in range(count) if i != big]
    code, _, err = run("produce", str(tmp_path / "ads.jsonl"), "--bootstrap-servers",
                       kafka_bootstrap, "--input-topic", topic, "--max-message-bytes", "1000")
    assert code == 0 and f"{count - 1} announcements sent" in err, err


def test_produce_interrupted_with_the_broker_away_says_what_was_acknowledged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Closing the producer raised (KafkaTimeoutError) over the command's own line: a
    traceback, exit 1, and "closing it sends them", which it did not. (A fake producer: the
    broker being away is what it stands for; the real broker's path is tested above.)"""
    from kafka.errors import KafkaTimeoutError

    import streamdedup.service.kafka as kafka_module

    class Pending:  # a send the broker never answered
        def add_callback(self, fn: object) -> Pending:
            return self

        def add_errback(self, fn: object) -> Pending:
            return self

    class AwayProducer:
        sends = 0

        def send(self, *args: object, **kwargs: object) -> Pending:
            self.sends += 1
            if self.sends == 3:
                raise KeyboardInterrupt
            return Pending()

        def close(self, timeout: float) -> None:
            raise KafkaTimeoutError("Timeout waiting for future")

    monkeypatch.setattr(kafka_module, "announcement_producer", lambda *a, **k: AwayProducer())
    monkeypatch.setattr(kafka_module, "ensure_broker", lambda settings: None)  # it answered
    dump = tmp_path / "ads.jsonl"
    dump.write_text("".join(json.dumps({"id": str(i), "title": "t"}) + "\n" for i in range(5)))
    code, _, err = run("produce", str(dump))
    assert code == 130 and "Traceback" not in err, err
    assert "interrupted: 2 announcements handed to the producer, 0 acknowledged" in err, err


@pytest.mark.broker
def test_produce_warns_of_row_number_ids(
        tmp_path: Path, kafka_bootstrap: str) -> None:
    """A TSV without ids went out keyed 0, 1, ... silently (check and backfill warn)."""
    import uuid

    tsv = write_tsv(tmp_path / "ads.tsv", [["t", "un annuncio", "Milano", "2020", "l"]])
    args = ["produce", str(tsv), "--bootstrap-servers", kafka_bootstrap, "--input-topic",
            f"produce-{uuid.uuid4().hex[:8]}"]
    code, _, err = run(*args)
    assert code == 0 and "has no id column" in err and "1 announcement sent" in err, err
    linked = [*args[:-1], args[-1] + "-link", "--id-field", "link"]  # the link is the id
    code, _, err = run(*linked)
    assert code == 0 and "no id column" not in err and "1 announcement sent" in err, err
    sent = topic_records(kafka_bootstrap, linked[-3], 10_000)
    assert [r.key for r in sent] == [b"l"] and json.loads(sent[0].value)["id"] == "l"


@pytest.mark.parametrize(("rate", "said"), [
    ("nan", "not nan"), ("-1", "not -1.0"), ("1e-9", "not 1e-09"), ("0.0002", "not 0.0002"),
    # too small for a float: it read as 0, no limit, the opposite of what was asked
    ("1e-400", "1e-400 is below one message an hour (as a float it is 0, no limit)"),
    ("x", "'x' is not a number")])
@pytest.mark.parametrize("command", ["produce", "replay"])
def test_a_rate_that_is_no_number_or_below_one_message_an_hour_is_refused(
        tmp_path: Path, rate: str, said: str, command: str) -> None:
    """--rate nan ran unlimited; 1e-9 was taken (one message in 31 years), and replay's
    1e-300 ended in an OverflowError from time.sleep. Refused before any broker is asked
    (none answers here); exactly one an hour, and 0, are taken."""
    tsv = write_tsv(tmp_path / "ads.tsv", [["t", "un annuncio", "Milano", "2020", "l"]])
    args = ([str(tsv)] if command == "produce" else
            ["--dump", str(tsv), "--report-dir", str(tmp_path / "r"), "--no-consumer"])
    code, _, err = run(command, *args, "--bootstrap-servers", "127.0.0.1:1", "--rate", rate)
    assert code == 2 and "Invalid value for '--rate'" in err and said in err, err
    for taken in (str(1 / 3600), "0"):
        code, _, err = run(command, *args, "--bootstrap-servers", "127.0.0.1:1", "--rate",
                           taken)
        assert code == 1 and "Invalid value" not in err, err  # on to the broker


@pytest.mark.broker
def test_produce_sends_an_id_less_row_that_the_consumer_gives_the_same_id(
        tmp_path: Path, kafka_bootstrap: str) -> None:
    """Rows without an id holding a number, a null or a list went out as their string fields
    under the id their whole content gave: every one was a ``reserved_id`` dead letter."""
    import uuid

    from streamdedup.core.document import Document
    from streamdedup.replay.dump import read_dump
    from streamdedup.service.message import decode_message

    rows = [{"title": f"annuncio {i}", "description": "cameriere", "timestamp": 1700000000 + i,
             "remote": i % 2 == 0, "salary": None, "tags": ["sala", i]} for i in range(20)]
    dump = tmp_path / "ads.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    topic = f"produce-{uuid.uuid4().hex[:8]}"
    code, _, err = run("produce", str(dump), "--bootstrap-servers", kafka_bootstrap,
                       "--input-topic", topic)
    assert code == 0 and "20 announcements sent" in err, err
    fields = ("title", "description")
    want = [d.id for _, d in read_dump(dump, None, fields) if isinstance(d, Document)]
    sent = [(rec.key.decode(), decode_message(rec.value, fields, 1 << 20))
            for rec in topic_records(kafka_bootstrap, topic, 10_000)]
    assert len(want) == 20 and [key for key, _ in sent] == want
    assert [doc.id for _, doc in sent] == want


@pytest.mark.broker
def test_produce_sends_no_message_over_the_limit_the_consumer_holds_it_to(
        tmp_path: Path, kafka_bootstrap: str) -> None:
    """The limit was measured on the dump's row: a JSON line of numbers, re-encoded with
    them as text, and a TSV cell of backslashes went out larger, as dead letters of run."""
    import uuid

    line = json.dumps({"id": "n", "title": "t", **{f"k{i}": i for i in range(100)}},
                      separators=(",", ":"))
    assert len(line) <= 1000 < len(line) + 2 * 100
    dump = tmp_path / "ads.jsonl"
    dump.write_text(line + "\n" + json.dumps({"id": "ok", "title": "t"}) + "\n",
                    encoding="utf-8")
    tsv = write_tsv(tmp_path / "ads.tsv", [["Cuoco", "\\" * 900, "Roma", "", ""],
                                           ["Sarto", "x" * 900, "Roma", "", ""]])
    topic = f"produce-{uuid.uuid4().hex[:8]}"
    for path in (dump, tsv):
        code, _, err = run("produce", str(path), "--bootstrap-servers", kafka_bootstrap,
                           "--input-topic", topic, "--max-message-bytes", "1000")
        assert code == 0 and "1 announcement sent" in err and "1 row not sent" in err, err
        assert "bytes as a message > limit 1000" in err, err
    records = topic_records(kafka_bootstrap, topic, 10_000)
    assert [rec.key.decode() for rec in records] == ["ok", "1"]
    assert all(len(rec.value) <= 1000 for rec in records)
