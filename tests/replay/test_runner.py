"""The replay end to end against a real broker, plus its broker-free parts.

The broker tests replay a generated TSV (multi-line quoted descriptions, as in the Kijiji dump)
with known duplicates, one row that must become a dead letter and one repost rewritten beyond
the threshold; the verdicts read back must equal an in-process run of the detector, and the
report's numbers must be the known ones.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from evaluation_cases import generated_docs, naive_true_pairs

from streamdedup.cli import main as cli_main
from streamdedup.core.document import Document
from streamdedup.core.verdict import Verdict
from streamdedup.detection.detector import Detector
from streamdedup.errors import ConfigError, InputError
from streamdedup.replay import report as report_module
from streamdedup.replay.runner import (
    ReplayConfig,
    consumer_env,
    load_rows,
    replay,
    replay_settings,
)
from streamdedup.settings import Settings, build_settings
from streamdedup.store.memory import MemoryStore

HEADER = ["title", "description", "location", "timestamp", "link"]
OVERRIDES = {"stopwords": "", "stem_language": "", "log_level": "WARNING"}


def write_tsv(path: Path) -> int:
    """The generated ads as a Kijiji-like TSV, plus one row with no text; returns rows."""
    docs = generated_docs()
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, delimiter="\t")
        w.writerow(HEADER)
        for k, d in enumerate(docs):
            words = d.fields["description"].split(" ")
            desc = "\n".join(" ".join(words[i : i + 9]) for i in range(0, len(words), 9))
            w.writerow([d.fields["title"], desc, "Roma", f"2019-01-{k % 28 + 1:02d}",
                        d.fields["link"]])
        w.writerow(["", "", "Milano", "2019-02-01", "https://ads.example/empty"])
    return len(docs) + 1


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    path = tmp_path / "ads.tsv"
    write_tsv(path)
    return path


def test_load_rows_reads_multiline_tsv_and_flags_dead_letters(dump: Path) -> None:
    settings = build_settings("default", env={}, overrides=OVERRIDES)
    rows, unreadable = load_rows(dump, None, settings)
    assert unreadable == 0
    assert [r.doc_id for r in rows] == [str(i) for i in range(len(rows))]
    assert [r.doc is None for r in rows].count(True) == 1 and rows[-1].doc is None
    first = json.loads(rows[0].payload)
    assert set(first) == {*HEADER, "id"} and "\n" in first["description"]


def test_load_rows_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "ads.jsonl"
    path.write_text("\n".join([
        json.dumps({"id": 7, "title": "a", "description": "uno due tre", "salary": 1200}),
        json.dumps({"title": "b", "description": "quattro cinque", "remote": True,
                    "salary": 900, "tags": None}),  # was sent so that it came back reserved_id
        "{not json",
        json.dumps({"id": "x", "title": "", "description": "", "link": "https://l"}),
        json.dumps({"id": "t", "title": "Cuoco", "timestamp": 1709600000}),  # as check reads
        # a number in location or link, which check and run judge, was an unreadable row
        json.dumps({"id": "n", "title": "Sarto", "location": 20100, "link": 5}),
        json.dumps({"id": "m", "location": 20100}),  # no text at all: unreadable
    ]) + "\n", encoding="utf-8")
    settings = build_settings("default", env={}, overrides=OVERRIDES)
    rows, unreadable = load_rows(path, None, settings)
    assert unreadable == 2
    assert rows[0].doc_id == "7" and json.loads(rows[0].payload)["id"] == "7"
    assert rows[1].doc_id.startswith("auto-") and rows[1].doc is not None
    assert rows[1].doc.id == rows[1].doc_id  # the consumer decodes the same id
    assert rows[2].doc_id == "x" and rows[2].doc is None  # no text: a dead letter
    assert json.loads(rows[3].payload)["timestamp"] == "1709600000" and rows[3].doc is not None
    assert rows[4].doc_id == "n" and rows[4].doc is not None
    assert rows[4].doc.fields["location"] == "20100" and len(rows) == 5


def test_load_rows_refuses_repeated_ids(tmp_path: Path) -> None:
    path = tmp_path / "ads.jsonl"
    path.write_text('{"id": 1, "title": "a"}\n{"id": "1", "title": "b"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="occurs twice"):
        load_rows(path, None, build_settings("default", env={}, overrides=OVERRIDES))


def test_consumer_env_rebuilds_the_same_settings() -> None:
    settings = build_settings("reference", env={}, overrides={
        "threshold": 0.75, "text_fields": ("title", "description"), "strip_html": False,
        "commit_interval_s": 0.25, "sasl_password": "s3cret"})
    env = consumer_env(settings, {"PATH": "/bin", "STREAMDEDUP_PRESET": "words-en"})
    assert env["PATH"] == "/bin" and "STREAMDEDUP_PRESET" not in env
    assert build_settings(env=env) == settings


@pytest.mark.parametrize(("name", "value", "env"), [
    ("retention", "60d", "STREAMDEDUP_RETENTION"),
    ("only_duplicates", True, "STREAMDEDUP_ONLY_DUPLICATES")])
def test_what_a_replay_cannot_use_is_refused_as_a_flag_and_left_out_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: object,
        env: str) -> None:
    """One environment serves every command: ``STREAMDEDUP_RETENTION`` set for ``run``
    stopped every replay (exit 1). Given as a flag it is still refused, as a setting (exit 2)."""
    config = ReplayConfig(dump=tmp_path / "d.tsv", report_dir=tmp_path / "r",
                          bootstrap_servers="127.0.0.1:9", overrides={name: value})
    with pytest.raises(ConfigError, match=f"drop --{name.replace('_', '-')}"):
        replay_settings(config, "127.0.0.1:9", tmp_path / "s")
    monkeypatch.setenv(env, "60d" if name == "retention" else "true")
    said: list[str] = []
    settings = replay_settings(dataclasses.replace(config, overrides={}), "127.0.0.1:9",
                               tmp_path / "s", said.append)
    assert not getattr(settings, name) and settings.read_time_field == ""
    assert len(said) == 1 and said[0].startswith(f"{env} is left out: ")
    monkeypatch.setenv(env, "garbage")  # left out, so not read: it was refused as no value
    said.clear()
    replay_settings(dataclasses.replace(config, overrides={}), "127.0.0.1:9", tmp_path / "s",
                    said.append)
    assert len(said) == 1 and said[0].startswith(f"{env} is left out: ")
    monkeypatch.setenv(env, " " if name == "retention" else "false")  # off: nothing to say
    said.clear()
    replay_settings(dataclasses.replace(config, overrides={}), "127.0.0.1:9", tmp_path / "s",
                    said.append)
    assert said == []


# --- against a real broker ------------------------------------------------------------------


def in_process(dump: Path, overrides: dict[str, object]) -> dict[str, Verdict]:
    settings = build_settings("default", env={}, overrides=overrides)
    rows, _ = load_rows(dump, None, settings)
    docs = [r.doc for r in rows if r.doc is not None]
    return {v.id: v for v in Detector(settings, MemoryStore()).process_many(docs)}


@pytest.mark.broker
def test_replay_against_broker(dump: Path, tmp_path: Path, kafka_bootstrap: str,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    config = ReplayConfig(dump=dump, report_dir=tmp_path / "r1", preset="default",
                          overrides=OVERRIDES, bootstrap_servers=kafka_bootstrap,
                          progress=False, timeout_s=60, cache_dir=tmp_path / "cache")
    result = replay(config)
    assert result.ok, (result.missing, result.consumer_exit)
    r = result.report
    docs = generated_docs()
    settings = build_settings("default", env={}, overrides=OVERRIDES)
    true_pairs = naive_true_pairs(docs, settings)

    assert r["docs"] == len(docs) and r["verdicts"] == len(docs)
    assert r["dead_letters"] == 1 and r["replay"]["dead_letter_reasons"] == {"empty_text": 1}
    assert r["missing_verdicts"] == 0 and r["replay"]["missing"] == 0
    assert r["doc_precision"] == r["doc_recall"] == r["doc_f1"] == 1.0
    assert r["pair_precision"] == r["pair_recall"] == 1.0
    assert r["pair_counts"]["true_pairs"] == len(true_pairs)
    assert r["doc_counts"]["true_duplicates"] == 10
    assert r["clusters"] == r["true_clusters"] == 9
    links = r["link_labels"]
    assert (links["reposts"], links["flagged"], links["missed"]) == (12, 10, 2)
    assert r["docs_per_second"] > 0 and r["latency_ms"]["p50"] > 0
    assert r["latency_ms"]["p50"] <= r["latency_ms"]["p95"] <= r["latency_ms"]["p99"]

    # the verdicts read back are exactly those of an in-process run, in produced order
    expected = in_process(dump, OVERRIDES)
    lines = result.paths["verdicts"].read_text(encoding="utf-8").splitlines()
    assert [Verdict.from_json(line) for line in lines] == [expected[str(i)]
                                                            for i in range(len(docs))]
    for name in ("json", "md", "s_curves", "precision_recall"):
        assert result.paths[name].is_file()
    assert (tmp_path / "r1" / "consumer.log").is_file()

    # deterministic: a second replay gives byte-identical verdicts
    again = replay(dataclasses.replace(config, report_dir=tmp_path / "r2"))
    assert again.report["verdicts_sha256"] == r["verdicts_sha256"]

    # Ctrl-C after the verdicts were written, before the report: no earlier report is left
    # beside them, as if it described them
    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(report_module, "write_report", interrupted)
    with pytest.raises(KeyboardInterrupt):
        replay(dataclasses.replace(config, report_dir=tmp_path / "r2"))
    left = sorted(p.name for p in (tmp_path / "r2").iterdir())
    assert left == ["consumer.log", "verdicts.jsonl"], left


@pytest.mark.broker
def test_a_replay_on_redis_writes_into_a_namespace_of_its_own_and_removes_it(
        dump: Path, tmp_path: Path, kafka_bootstrap: str, redis_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``STREAMDEDUP_STORE_BACKEND=redis`` (one environment serves ``run`` too) the
    replay's consumer wrote the whole dump into run's namespace; ``--store`` was accepted
    and meant nothing there."""
    import redis

    monkeypatch.setenv("STREAMDEDUP_STORE_BACKEND", "redis")
    monkeypatch.setenv("STREAMDEDUP_REDIS_URL", redis_url)
    monkeypatch.setenv("STREAMDEDUP_REDIS_NAMESPACE", "prod")
    config = ReplayConfig(dump=dump, report_dir=tmp_path / "r", preset="default",
                          overrides=OVERRIDES, bootstrap_servers=kafka_bootstrap,
                          progress=False, timeout_s=60, cache_dir=tmp_path / "cache")
    with pytest.raises(ConfigError, match="--store is a SQLite store's directory"):
        replay_settings(dataclasses.replace(config, store=tmp_path / "s"), kafka_bootstrap,
                        tmp_path / "s")
    settings = replay_settings(config, kafka_bootstrap, tmp_path / "s")
    assert settings.redis_namespace == settings.group_id.split(".")[0] + ".prod"
    client = redis.Redis.from_url(redis_url)
    before = set(client.scan_iter(count=1000))
    result = replay(config)
    assert result.ok and result.report["settings"]["store_backend"] == "redis"
    expected = in_process(dump, OVERRIDES)
    lines = result.paths["verdicts"].read_text(encoding="utf-8").splitlines()
    assert [Verdict.from_json(line) for line in lines] == [expected[str(i)]
                                                            for i in range(len(expected))]
    assert set(client.scan_iter(count=1000)) == before  # nothing in "prod", nothing left
    # a prefix that names a namespace another store holds: refused, and that store kept
    # (it was removed with the replay's, after its consumer refused its parameters)
    from streamdedup.core.sketch import Sketcher
    from streamdedup.store import open_store

    taken = f"t{uuid.uuid4().hex[:8]}."
    open_store("redis", redis_url, Sketcher(Settings(num_perm=256)).params(),
               namespace=taken + "prod").close()
    held = set(client.scan_iter(match=f"*{taken}prod*", count=1000))
    with pytest.raises(ConfigError, match=f"namespace '{taken}prod' already holds keys"):
        replay(dataclasses.replace(config, topic_prefix=taken, report_dir=tmp_path / "r2"))
    assert held and set(client.scan_iter(match=f"*{taken}prod*", count=1000)) == held
    assert not (tmp_path / "r2").exists()
    client.close()


def main(args: list[str]) -> int:
    """`streamdedup replay ARGS` in this process; its exit status."""
    try:
        cli_main(["replay", *args], prog_name="streamdedup")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


@pytest.mark.broker
def test_replay_timeout_reports_missing_ids(
    dump: Path, tmp_path: Path, kafka_bootstrap: str, kafka_topic_factory: Callable[..., str],
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No consumer runs: nothing answers, so the replay says which ids are missing."""
    monkeypatch.setenv("STREAMDEDUP_CACHE", str(tmp_path / "cache"))
    topics = [kafka_topic_factory() for _ in range(3)]
    code = main(["--dump", str(dump), "--report-dir", str(tmp_path / "r"),
                 "--bootstrap-servers", kafka_bootstrap, "--no-consumer", "--timeout", "2",
                 "--input-topic", topics[0], "--output-topic", topics[1],
                 "--dlq-topic", topics[2], "--no-band-table", "--no-progress",
                 "--stopwords", "", "--stem-language", ""])
    assert code == 1
    err = capsys.readouterr().err
    assert "ids got no verdict or dead letter within 2 s, e.g. 0, 1, 2" in err
    report = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))
    assert report["replay"]["missing"] == len(generated_docs()) + 1
    assert report["verdicts"] == 0 and report["doc_recall"] == 0.0


def test_replay_says_when_no_broker_answers(dump: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The product starts no broker of its own: a dead address is one clear line, exit 1,
    and the (empty) report directory the replay made for nothing is gone again."""
    code = main(["--dump", str(dump), "--report-dir", str(tmp_path / "r" / "new"),
                 "--no-consumer", "--bootstrap-servers", "127.0.0.1:9", "--no-progress"])
    assert code == 1
    err = capsys.readouterr().err
    assert "no Kafka broker answers at 127.0.0.1:9" in err and "Traceback" not in err
    assert not (tmp_path / "r" / "new").exists() and (tmp_path / "r").is_dir()
    mine = tmp_path / "mine"
    mine.mkdir()
    assert main(["--dump", str(dump), "--report-dir", str(mine), "--no-consumer",
                 "--bootstrap-servers", "127.0.0.1:9", "--no-progress"]) == 1
    assert mine.is_dir()  # the user's own directory stays


def test_a_report_directory_that_cannot_be_made_is_one_line(
        dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("x")
    code = main(["--dump", str(dump), "--report-dir", str(tmp_path / "afile" / "sub"),
                 "--no-consumer", "--bootstrap-servers", "127.0.0.1:9", "--no-progress"])
    err = capsys.readouterr().err
    # refused before anything runs (it was "cannot use ...", exit 1, after the replay)
    assert code == 2 and f"--report-dir {tmp_path / 'afile' / 'sub'}: {tmp_path / 'afile'} " \
        "is not a directory" in err, err
    assert "Traceback" not in err


def test_documents_keep_their_fields(dump: Path) -> None:
    settings = build_settings("reference", env={}, overrides=OVERRIDES)
    rows, _ = load_rows(dump, None, settings)
    doc = rows[0].doc
    assert isinstance(doc, Document) and doc.fields["location"] == "Roma"


@pytest.mark.broker
@pytest.mark.dump
def test_kijiji_reference_acceptance(kijiji_path: Path, tmp_path: Path,
                                     kafka_bootstrap: str) -> None:
    """The issue's acceptance numbers on the Kijiji dump with the reference preset."""
    result = replay(ReplayConfig(dump=kijiji_path, report_dir=tmp_path / "kijiji",
                                 preset="reference", bootstrap_servers=kafka_bootstrap,
                                 progress=False, cache_dir=tmp_path / "cache"))
    r = result.report
    assert result.ok, (result.missing[:10], result.consumer_exit)
    assert r["docs"] == r["verdicts"] == 3127 and r["dead_letters"] == 0
    assert r["doc_precision"] == 1.0 and r["doc_recall"] >= 0.999
    assert r["pair_precision"] == 1.0 and r["pair_recall"] >= 0.995
    assert r["link_labels"]["reposts"] == 149


def test_the_broker_check_reads_addresses_as_the_settings_do() -> None:
    """'localhost:PORT' worked, 'PLAINTEXT://localhost:PORT' (accepted by the settings) was
    "no Kafka broker answers"; nothing listening is still that one line."""
    import socket

    from streamdedup.errors import StreamdedupError
    from streamdedup.service.kafka import ensure_broker

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        for servers in (f"127.0.0.1:{port}", f"PLAINTEXT://127.0.0.1:{port}"):
            ensure_broker(build_settings(env={}, overrides={"bootstrap_servers": servers}))
    with pytest.raises(StreamdedupError, match="no Kafka broker answers"):
        ensure_broker(build_settings(env={}, overrides={
            "bootstrap_servers": f"PLAINTEXT://127.0.0.1:{port}"}))


def test_a_dead_letter_is_matched_to_the_id_the_replay_sent() -> None:
    """The payload's id was read: "None" for an ad without one (its id is the automatic one,
    the record's key) or for a payload not UTF-8, so the ad counted as missing. A key cut
    short (over 1,024 bytes) still falls back to the payload's id."""
    from streamdedup.errors import MessageError
    from streamdedup.replay.runner import _record_id
    from streamdedup.service.records import Source, dead_letter_record

    def letter(key: bytes, payload: bytes) -> str | None:
        record = dead_letter_record("dlq", MessageError("empty_text", "x"),
                                    Source("in", 0, 1), key, payload)
        return _record_id(record.value, record.key, is_verdict=False)

    assert letter(b"auto-0abc", b'{"title": ""}') == "auto-0abc"
    assert letter(b"a1", b'{"id": "a1", "title": "\xff"}') == "a1"  # not UTF-8: no text
    long_id = "x" * 2_000
    assert letter(long_id.encode(), json.dumps({"id": long_id}).encode()) == long_id
