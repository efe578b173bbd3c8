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

from streamdedup.core.document import Document
from streamdedup.core.sketch import Sketcher
from streamdedup.detection.detector import Detector
from streamdedup.errors import StoreParamsError
from streamdedup.replay.backfill import BackfillConfig, backfill, order
from streamdedup.replay.dump import read_dump
from streamdedup.replay.pairs import sketch_rows
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


def check_verdicts(path: Path, store: Any, settings: Any = SETTINGS) -> list[str]:
    """What `streamdedup check` writes for the dump's usable rows, on ``store``."""
    det = Detector(settings, store)
    docs = [d for _, d in read_dump(path, None, settings.text_fields,
                                    time_field=settings.read_time_field)
            if isinstance(d, Document)]
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
    assert (result.documents, result.bad.count) == (700, 2)
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


def test_numeric_epoch_times_in_a_jsonl_dump_order_it(tmp_path: Path) -> None:
    """JSON numbers were dropped with the other non-string values, so every row of a dump
    timed in epoch milliseconds counted as untimed and kept its file order."""
    dump = tmp_path / "ads.jsonl"
    dump.write_text("".join(json.dumps({"id": i, "description": "x", "timestamp": t}) + "\n"
                            for i, t in (("late", 1761955300000), ("early", 1761955200.5),
                                         ("none", None))))
    rows = [(n, d) for n, d in read_dump(dump, None, ("description",))
            if isinstance(d, Document)]
    ordered, missing = order(rows, "timestamp", "timestamp")
    assert [d.id for _, d in ordered] == ["early", "late", "none"] and missing == 1


@pytest.mark.slow
@pytest.mark.dump
def test_spark_in_local_mode_gives_checks_verdicts_and_the_report_through_the_cli(
        kijiji_path: Path, tmp_path: Path) -> None:
    """Real pyspark on the machine's Java, two local executor threads, candidate pairs and
    exact Jaccard computed in the executors: the command's verdicts equal `check`'s on the
    same dump byte for byte, and its report holds the band table with this run's pairs."""
    dump = kijiji_jsonl(kijiji_path, tmp_path, 600)
    run = subprocess.run(
        [sys.executable, "-m", "streamdedup", "backfill", str(dump), "--engine", "spark",
         "--master", "local[2]", "--partitions", "3", "--store", str(tmp_path / "store"),
         "--out", str(tmp_path / "v.jsonl"), "--preset", "reference",
         "--report", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "600 documents" in run.stderr and "2 bad rows" in run.stderr
    assert "spark: sketching in 3 partitions" in run.stderr  # progress, phase by phase
    assert "spark: candidate pairs and exact Jaccard" in run.stderr
    got = (tmp_path / "v.jsonl").read_text().splitlines()
    assert got == check_verdicts(dump, SqliteStore(tmp_path / "check"))
    assert sum('"duplicate":true' in v for v in got) > 100
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    # the 2 bad rows once, as unreadable (they were dead letters too, counted twice)
    assert (report["verdicts"], report["dead_letters"]) == (600, 0)
    assert report["dump"]["unreadable_rows"] == 2
    assert report["doc_precision"] == report["doc_recall"] == 1.0
    rows = report["band_table"]["rows"]
    ours = next(r for r in rows if r["setting"].endswith("this backfill (spark; size bound "
                                                         "applied)"))["distinct"]
    chosen = next(r for r in rows if r["setting"].endswith(", chosen"))["distinct"]
    # the size bound only drops pairs that cannot reach the threshold: same misses, fewer FP
    assert ours["fn_rate"] == chosen["fn_rate"] and ours["true_pairs"] == chosen["true_pairs"]
    assert 0 < ours["candidate_pairs"] <= chosen["candidate_pairs"]
    assert "this backfill" in (tmp_path / "report" / "report.md").read_text()
    assert "precision 1.0000" in run.stdout


@pytest.mark.slow
@pytest.mark.dump
def test_a_spark_task_that_crashes_is_retried_and_a_job_that_fails_leaves_a_store_to_go_on(
        kijiji_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real Python workers die (os._exit) in the sketch stage and in the verification stage,
    the first task of each on its first attempt: Spark retries the tasks and the verdicts are
    check's. With task retries turned off (local[2,1]) the job fails with a clear error
    before anything is decided, and a second backfill into the same store gives check's
    verdicts."""
    from streamdedup.errors import BackfillError
    from streamdedup.replay import pairs, spark

    dump = kijiji_jsonl(kijiji_path, tmp_path, 400)
    marks = tmp_path / "crashed"
    marks.mkdir()

    def dies_once(where: str) -> None:
        import os

        from pyspark import TaskContext

        ctx = TaskContext.get()  # the first task of the stage to get here, first attempt
        if ctx is not None and ctx.attemptNumber() == 0 and not any(marks.glob(f"{where}-*")):
            (marks / f"{where}-{ctx.partitionId()}").touch()
            os._exit(1)  # the Python worker dies mid-task, as a SIGKILL would leave it

    def sketch_rows(settings: Any, items: Any) -> Any:
        dies_once("sketch")
        return pairs.sketch_rows(settings, items)

    def verify_pair(threshold: float, later: bytes, earlier: bytes) -> float | None:
        dies_once("verify")
        return pairs.verify_pair(threshold, later, earlier)

    monkeypatch.setattr(spark, "sketch_rows", sketch_rows)
    monkeypatch.setattr(spark, "verify_pair", verify_pair)
    want = check_verdicts(dump, SqliteStore(tmp_path / "check"))

    run_backfill(dump, tmp_path / "retried", tmp_path / "a.jsonl", engine="spark")
    assert {p.name.split("-")[0] for p in marks.iterdir()} == {"sketch", "verify"}
    assert (tmp_path / "a.jsonl").read_text().splitlines() == want

    for mark in marks.iterdir():
        mark.unlink()  # crash again
    store = open_store("sqlite", str(tmp_path / "failed"), Sketcher(SETTINGS).params())
    try:
        with pytest.raises(BackfillError, match=r"failed after its task retries: .*Job aborted "
                           r"due to stage failure: .* failed 1 times.*run it again"):
            backfill(SETTINGS, store, BackfillConfig(dump=dump, out=tmp_path / "b.jsonl",
                                                     engine="spark", master="local[2,1]"))
        assert store.stats()["documents"] == 0
    finally:
        store.close()
    monkeypatch.undo()
    run_backfill(dump, tmp_path / "failed", tmp_path / "c.jsonl", engine="spark")
    assert (tmp_path / "c.jsonl").read_text().splitlines() == want


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


def test_a_set_over_max_candidates_is_left_to_the_detector_and_still_equals_check(
        tmp_path: Path) -> None:
    """A hot bucket of 40 variants of one text with max_candidates 5: the stream verifies
    only the 5 candidates with most shared bands, so the plan hands those sets back to the
    detector, and the verdicts (candidates and skipped included) are check's, byte for byte."""
    import random

    from streamdedup.replay.pairs import local_plan

    settings = SETTINGS.replace(max_candidates=5)
    rng = random.Random(7)
    def word() -> str:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7))

    words = [word() for _ in range(150)]
    rows = []
    for n in range(40):
        text = list(words)
        for _ in range(rng.randrange(1, 6)):
            text[rng.randrange(len(text))] = word()
        rows.append(json.dumps({"id": f"v{n}", "title": "Driver", "description": " ".join(text)}))
    dump = tmp_path / "hot.jsonl"
    dump.write_text("\n".join(rows) + "\n")
    store = SqliteStore(tmp_path / "store")
    backfill(settings, store, BackfillConfig(dump=dump, out=tmp_path / "v.jsonl", engine="local"))
    store.close()
    check_store = SqliteStore(tmp_path / "check")
    det = Detector(settings, check_store)
    docs = [d for _, d in read_dump(dump, None, settings.text_fields) if isinstance(d, Document)]
    want = [v.to_json() for v in det.process_many(docs)]
    assert (tmp_path / "v.jsonl").read_text().splitlines() == want
    assert any(json.loads(v)["skipped"] > 0 for v in want)
    sketched = list(sketch_rows(settings, ((i, d.fields) for i, d in enumerate(docs))))
    plan = local_plan(sketched, settings.threshold, settings.max_candidates)
    assert plan.over_cap == sum(json.loads(v)["skipped"] > 0 for v in want) > 0


@pytest.mark.dump
def test_a_parquet_dump_gives_the_verdicts_of_the_same_rows_in_jsonl(
        kijiji_path: Path, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    dump = kijiji_jsonl(kijiji_path, tmp_path, 300)
    docs = [d for _, d in read_dump(dump, None, SETTINGS.text_fields) if isinstance(d, Document)]
    names = sorted({k for d in docs for k in d.fields})
    pq.write_table(pa.table({"id": [d.id for d in docs],
                             **{n: [d.fields.get(n) for d in docs] for n in names}}),
                   tmp_path / "ads.parquet", row_group_size=128)
    run_backfill(tmp_path / "ads.parquet", tmp_path / "store", tmp_path / "v.jsonl")
    assert (tmp_path / "v.jsonl").read_text().splitlines() == check_verdicts(
        dump, SqliteStore(tmp_path / "check"))


@pytest.mark.dump
def test_a_backfill_with_retention_gives_checks_verdicts(kijiji_path: Path,
                                                         tmp_path: Path) -> None:
    """With --retention the engine only sketches (a pair plan knows nothing of the window)
    and the driver probes: the verdicts are `check --retention`'s, byte for byte, and the
    window shows (fewer duplicates than without it)."""
    from harness.generator import Generator, learn

    dump = tmp_path / "ads.jsonl"
    with dump.open("w", encoding="utf-8") as fh:  # an ad every 60 s: 2,000 ads ~ 33 hours
        for ad in Generator(learn(kijiji_path), 3, dup_share=0.4, pool_size=1500).ads(2000):
            fh.write(json.dumps(ad) + "\n")
    settings = SETTINGS.replace(retention="6h")
    store = open_store("sqlite", str(tmp_path / "b"), Sketcher(settings).params())
    try:
        result = backfill(settings, store, BackfillConfig(dump=dump, out=tmp_path / "v.jsonl",
                                                          engine="local"))
    finally:
        store.close()
    want = check_verdicts(dump, SqliteStore(tmp_path / "c"), settings)
    assert (tmp_path / "v.jsonl").read_text().splitlines() == want
    forever = check_verdicts(dump, SqliteStore(tmp_path / "f"))
    assert result.duplicates < sum('"duplicate":true' in v for v in forever)
