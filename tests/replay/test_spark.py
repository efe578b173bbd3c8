"""The Spark engine on real pyspark in local mode: task retries, the driver memory setting,
the texts staged or shipped, and the plan on RDDs against the in-process one."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamdedup.core.document import Document
from streamdedup.replay.dump import read_dump
from streamdedup.replay.pairs import sketch_rows
from streamdedup.settings import build_settings

SETTINGS = build_settings("reference", env={})


def test_local_masters_get_task_retries_and_a_bad_driver_memory_is_refused() -> None:
    from streamdedup.errors import ConfigError
    from streamdedup.replay import spark

    assert [spark.with_retries(m) for m in ("local", "local[2]", "local[*]", "local[2,1]",
                                            "spark://h:7077")] == [
        "local[1,4]", "local[2,4]", "local[*,4]", "local[2,1]", "spark://h:7077"]
    with (pytest.raises(ConfigError, match="--driver-memory must be like 3g"),
          spark.session("local[1]", lambda _m: None, "lots")):
        pass


@pytest.mark.slow
@pytest.mark.dump
def test_spark_reads_the_texts_from_the_driver_or_from_a_staged_file_alike_and_plans_alike(
        kijiji_path: Path, tmp_path: Path) -> None:
    """Local mode stages the texts in a file that Spark splits; a cluster master gets them
    from the driver (parallelize): the same rows, in the same order, either way. The plan on
    RDDs equals the in-process plan, with and without sets over max_candidates."""
    from streamdedup.replay import spark
    from streamdedup.replay.pairs import local_plan

    docs = [d for _, d in read_dump(kijiji_path, None, SETTINGS.text_fields)
            if isinstance(d, Document)][:600]
    fields = [d.fields for d in docs]
    with spark.session("local[2]", lambda _m: None) as (session, work):
        assert work is not None
        staged = spark.SparkSketches(session, SETTINGS, fields, 4, lambda _m: None,
                                     stage=work / "texts.jsonl")
        shipped = spark.SparkSketches(session, SETTINGS, fields, 4, lambda _m: None)
        got = list(staged.rows())
        assert got == list(shipped.rows()) and [r[0] for r in got] == list(range(600))
        plans = {cap: shipped.plan(SETTINGS.threshold, cap, keep_pairs=True) for cap in (2, 2000)}
        said: list[str] = []  # --partitions 2000 on 240 ads ran 2,036 tasks for minutes
        few = spark.SparkSketches(session, SETTINGS, fields[:5], 2000, said.append)
        assert few.partitions == 5 and "more than the 5 documents" in said[0]
        assert list(few.rows()) == got[:5]
    assert got == list(sketch_rows(SETTINGS, enumerate(fields)))
    for cap, plan in plans.items():
        assert plan == local_plan(got, SETTINGS.threshold, cap, keep_pairs=True)
    assert plans[2].over_cap > 0 and plans[2000].over_cap == 0
    assert plans[2000].verified_pairs > 0


def test_a_master_spark_refuses_is_one_line(tmp_path: Path) -> None:
    """`--master bogus` and `local[0]` ended in py4j tracebacks; a bad --driver-memory was
    refused only after the whole dump was read."""
    import subprocess
    import sys

    dump = tmp_path / "d.jsonl"
    dump.write_text('{"id": "a", "title": "Dev", "description": "Java"}\n', encoding="utf-8")
    for flags, said, code in (
            (["--master", "local[0]"], "Spark did not start (--master local[0]", 1),
            (["--master", "bogus"], "--master must be local, local[N]", 2),  # a bad value
            (["--driver-memory", "lots"], "--driver-memory must be like 3g", 2)):
        done = subprocess.run(
            [sys.executable, "-m", "streamdedup", "backfill", str(dump), "--engine", "spark",
             "--out", str(tmp_path / "v.jsonl"), "--store", str(tmp_path / flags[1]), *flags],
            capture_output=True, text=True, timeout=300)
        assert done.returncode == code and said in done.stderr, done.stderr[-3000:]
        assert "Traceback" not in done.stderr
        if "local[0]" not in flags:  # refused before the store is made
            assert not (tmp_path / flags[1]).exists()
