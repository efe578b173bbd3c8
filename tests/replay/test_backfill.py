"""The backfill: the verdicts of `check`, with the sketches (and, with Spark, the candidate
pairs and their exact Jaccard) computed by an engine (in-process, or real Spark in local
mode); the store it writes is one that `check` continues from."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from streamdedup.core.detector import Detector
from streamdedup.core.document import Document
from streamdedup.core.sketch import Sketcher
from streamdedup.errors import StoreParamsError
from streamdedup.replay.backfill import BackfillConfig, backfill, order
from streamdedup.replay.dump import read_dump
from streamdedup.settings import build_settings
from streamdedup.store import open_store
from streamdedup.store.sqlite import SqliteStore

SETTINGS = build_settings("reference", env={})


def kijiji_jsonl(kijiji: Path, tmp: Path, n: int, name: str = "ads.jsonl") -> Path:
    """The first n usable Kijiji rows as JSONL, plus two unusable lines (rows 2 and n + 1)."""
    docs = [d for _, d in read_dump(kijiji, None, SETTINGS.text_fields)
            if isinstance(d, Document)][:n]
    lines = [json.dumps({"id": d.id, **d.fields}, ensure_ascii=False) for d in docs]
    lines.insert(2, "{broken")
    lines.append(json.dumps({"id": "no-text", "title": 7}))
    path = tmp / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def check_verdicts(path: Path, store: Any) -> list[str]:
    """What `streamdedup check` writes for the dump's usable rows, on ``store``."""
    det = Detector(SETTINGS, store)
    docs = [d for _, d in read_dump(path, None, SETTINGS.text_fields) if isinstance(d, Document)]
    out: list[str] = []
    for start in range(0, len(docs), 500):
        out += [v.to_json() for v in det.process_many(docs[start:start + 500])]
        store.commit()
    return out


def run_backfill(path: Path, store_dir: Path, out: Path, engine: str = "local") -> Any:
    store = open_store("sqlite", str(store_dir), Sketcher(SETTINGS).params())
    try:
        return backfill(SETTINGS, store, BackfillConfig(dump=path, out=out, engine=engine,
                                                        master="local[2]"))
    finally:
        store.close()


@pytest.mark.dump
def test_the_local_engine_gives_checks_verdicts_and_reports_bad_rows(
        kijiji_path: Path, tmp_path: Path) -> None:
    dump = kijiji_jsonl(kijiji_path, tmp_path, 700)
    result = run_backfill(dump, tmp_path / "store", tmp_path / "v.jsonl")
    want = check_verdicts(dump, SqliteStore(tmp_path / "check"))
    assert (tmp_path / "v.jsonl").read_text().splitlines() == want
    assert (result.documents, result.bad_rows) == (700, 2)
    assert result.duplicates == sum('"duplicate":true' in v for v in want) > 100
    errors = [json.loads(x) for x in (tmp_path / "v.errors.jsonl").read_text().splitlines()]
    assert [(e["row"], e["error"]) for e in errors] == [(2, "malformed_json"),
                                                         (701, "empty_text")]


@pytest.mark.dump
def test_backfill_then_check_continues_like_one_check_and_a_rerun_changes_nothing(
        kijiji_path: Path, tmp_path: Path) -> None:
    whole = kijiji_jsonl(kijiji_path, tmp_path, 800)
    lines = whole.read_text().splitlines()
    first, rest = tmp_path / "first.jsonl", tmp_path / "rest.jsonl"
    first.write_text("\n".join(lines[:400]) + "\n")
    rest.write_text("\n".join(lines[400:]) + "\n")
    run_backfill(first, tmp_path / "store", tmp_path / "a.jsonl")
    store = SqliteStore(tmp_path / "store")
    continued = check_verdicts(rest, store)
    store.close()
    split = (tmp_path / "a.jsonl").read_text().splitlines() + continued
    assert split == check_verdicts(whole, SqliteStore(tmp_path / "one-go"))
    seqs = [json.loads(v)["seq"] for v in split]
    assert seqs == list(range(1, len(split) + 1))  # seq continues across the two
    before = SqliteStore(tmp_path / "store")
    stats = before.stats()
    before.close()
    again = run_backfill(first, tmp_path / "store", tmp_path / "b.jsonl")
    assert (tmp_path / "b.jsonl").read_text() == (tmp_path / "a.jsonl").read_text()
    after = SqliteStore(tmp_path / "store")
    assert after.stats() == stats and again.documents == 399  # (one of the 400 lines: bad)
    after.close()


def test_a_store_of_other_parameters_is_refused(tmp_path: Path) -> None:
    open_store("sqlite", str(tmp_path / "s"), Sketcher(build_settings("default", env={}))
               .params()).close()
    with pytest.raises(StoreParamsError, match="other parameters"):
        open_store("sqlite", str(tmp_path / "s"), Sketcher(SETTINGS).params())


def test_timestamp_order_is_stable_and_puts_rows_without_one_last() -> None:
    rows = [(1, Document("a", {"timestamp": "2026-11-02T00:00:00Z"})),
            (2, Document("b", {"timestamp": ""})),
            (3, Document("c", {"timestamp": "1761955200"})),  # 2025-11-01, epoch seconds
            (4, Document("d", {"timestamp": "2026-11-02T00:00:00+00:00"})),
            (5, Document("e", {"timestamp": "not a time"})),
            (6, Document("f", {"timestamp": "nan"})),
            (7, Document("g", {"timestamp": "2026-11-01T23:00:00"}))]  # naive: UTC
    ordered, missing = order(rows, "timestamp", "timestamp")
    assert [d.id for _, d in ordered] == ["c", "g", "a", "d", "b", "e", "f"] and missing == 3
    assert order(rows, "file", "timestamp") == (rows, 0)


@pytest.mark.slow
@pytest.mark.dump
def test_spark_in_local_mode_gives_the_same_verdicts_through_the_cli(
        kijiji_path: Path, tmp_path: Path) -> None:
    """Real pyspark on the machine's Java, two local executor threads, candidate pairs and
    exact Jaccard computed in the executors: the command's verdicts equal `check`'s on the
    same dump, field by field, but for candidates and skipped (which count other things)."""
    dump = kijiji_jsonl(kijiji_path, tmp_path, 600)
    run = subprocess.run(
        [sys.executable, "-m", "streamdedup", "backfill", str(dump), "--engine", "spark",
         "--master", "local[2]", "--partitions", "3", "--store", str(tmp_path / "store"),
         "--out", str(tmp_path / "v.jsonl"), "--preset", "reference"],
        capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "600 documents" in run.stderr and "2 bad rows" in run.stderr
    assert "verified in Spark" in run.stderr
    got = [json.loads(x) for x in (tmp_path / "v.jsonl").read_text().splitlines()]
    want = [json.loads(x) for x in check_verdicts(dump, SqliteStore(tmp_path / "check"))]
    for v in got + want:
        del v["candidates"], v["skipped"]
    assert got == want and sum(v["duplicate"] for v in got) > 100


@pytest.mark.dump
def test_a_backfill_into_redis_gives_the_shared_stores_verdicts(
        kijiji_path: Path, tmp_path: Path, redis_url: str) -> None:
    """The shared store's detector takes the precomputed sketches too; its verdicts equal the
    single writer's but for candidates and skipped."""
    dump = kijiji_jsonl(kijiji_path, tmp_path, 500)
    store = open_store("redis", redis_url, Sketcher(SETTINGS).params(), f"bf{uuid.uuid4().hex}")
    try:
        backfill(SETTINGS, store, BackfillConfig(dump=dump, out=tmp_path / "v.jsonl",
                                                 engine="local"))
    finally:
        store.close()
    got = [json.loads(x) for x in (tmp_path / "v.jsonl").read_text().splitlines()]
    want = [json.loads(x) for x in check_verdicts(dump, SqliteStore(tmp_path / "c"))]
    for v in got + want:
        del v["candidates"], v["skipped"]
    assert got == want


def test_bucket_pairs_respect_the_size_bound_and_arrival_order() -> None:
    from streamdedup.replay.backfill import _bucket_pairs

    members = [(5, 50, 10), (1, 10, 10), (9, 90, 13), (3, 30, 40)]  # (first pos, set, size)
    # the stream's own bound, rounded outwards: with 10 shingles, up to ceil(10 / t)
    assert set(_bucket_pairs(members, 0.9)) == {(50, 10)}  # 13 > ceil(11.1); 40 never
    assert set(_bucket_pairs(members, 0.8)) == {(50, 10), (90, 50), (90, 10)}  # 13 <= 13
