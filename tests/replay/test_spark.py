"""The Spark engine on real pyspark in local mode: task retries, the driver memory setting,
the texts staged or shipped, and the plan on RDDs against the in-process one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
            (["--master", "yarn"], "Spark did not start (--master yarn", 1),  # no Hadoop here
            (["--master", "bogus"], "--master must be local, local[N]", 2),  # a bad value
            (["--master", "local[0]"], "(N, F at least 1)", 2),  # a JVM's stack, then exit 1
            (["--master", "local[2,0]"], "(N, F at least 1)", 2),
            (["--driver-memory", "lots"], "--driver-memory must be like 3g", 2),
            (["--driver-memory", "0"], "(more than 0)", 2)):
        done = subprocess.run(
            [sys.executable, "-m", "streamdedup", "backfill", str(dump), "--engine", "spark",
             "--out", str(tmp_path / "v.jsonl"), "--store", str(tmp_path / flags[1]), *flags],
            capture_output=True, text=True, timeout=300)
        assert done.returncode == code and said in done.stderr, done.stderr[-3000:]
        assert "Traceback" not in done.stderr
        if code == 2:  # refused before the store is made
            assert not (tmp_path / flags[1]).exists()


@pytest.mark.dump
@pytest.mark.parametrize(("sig", "group", "at"), [
    ("SIGINT", False, "spark: candidate pairs"), ("SIGTERM", False, "spark: candidate pairs"),
    ("SIGINT", True, "spark: sketching in"),  # a terminal's Ctrl-C, while workers sketch
])
def test_ctrl_c_in_a_spark_phase_is_one_line_without_py4j_tracebacks(
        kijiji_path: Path, tmp_path: Path, sig: str, group: bool, at: str) -> None:
    """pyspark's own SIGINT handler cancelled the jobs inside the py4j call it interrupted:
    ~60 lines of tracebacks ("reentrant call", Py4JNetworkError) and the JVM's errors, before
    the command's line and exit 130. SIGTERM killed the driver at once, leaving its staging
    directory (a copy of the texts) in the temporary directory. A terminal's Ctrl-C, sent
    to the whole process group while tasks ran, had pyspark's daemon print BrokenPipeError
    tracebacks and the JVM its stack traces."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    temp = tmp_path / "tmp"
    temp.mkdir()
    dump, master = kijiji_path, "local[1]"
    if group:  # workers busy for seconds: 20,000 generated ads, four tasks at a time
        from harness.generator import Generator, learn

        dump, master = tmp_path / "ads.jsonl", "local[4]"
        with dump.open("w", encoding="utf-8") as fh:
            for ad in Generator(learn(kijiji_path), 5).ads(20_000):
                fh.write(json.dumps(ad) + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamdedup", "backfill", str(dump), "--engine",
         "spark", "--master", master, "--out", str(tmp_path / "v.jsonl"),
         "--store", str(tmp_path / "s")],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        env={**os.environ, "TMPDIR": str(temp)}, start_new_session=group,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stderr is not None
    said = []
    try:
        for line in proc.stderr:
            said.append(line)
            if line.startswith(at):  # a job runs: py4j is waiting
                assert list(temp.glob("streamdedup-backfill-*")), line  # staged here
                if group:
                    time.sleep(1.5)  # the tasks under way
                    os.killpg(proc.pid, getattr(signal, sig))
                else:
                    proc.send_signal(getattr(signal, sig))
                break
        said += proc.stderr.readlines()
        code = proc.wait(timeout=120)
    finally:
        proc.kill()
    text = "".join(said)
    assert code == 130 and text.splitlines()[-1].startswith("interrupted"), text[-3000:]
    assert "py4j" not in text.lower() and "reentrant" not in text, text[-3000:]
    assert "Traceback" not in text and "\tat " not in text, text[-3000:]
    assert not [x for x in said if " ERROR " in x], text[-3000:]  # the JVM's, as it stopped
    assert not list(temp.glob("streamdedup-backfill-*"))


def test_the_jvms_standard_error_is_passed_on_until_a_ctrl_c(
        capfd: pytest.CaptureFixture[str]) -> None:
    """A stand-in for the JVM, started inside ``jvm_stderr``, writes a line, then another
    after the Ctrl-C; our own lines after the start do not go through the pipe."""
    import subprocess
    import sys
    import time

    from streamdedup.replay import spark

    spark.INTERRUPTED.clear()
    go = "import sys, time; print('before', file=sys.stderr, flush=True); time.sleep(1.0); " \
         "print('after', file=sys.stderr, flush=True)"
    with spark.jvm_stderr():
        child = subprocess.Popen([sys.executable, "-c", go])
    print("ours", file=sys.stderr, flush=True)
    try:
        deadline = time.monotonic() + 30
        seen = ""
        while "before" not in seen:
            assert time.monotonic() < deadline, seen
            seen += capfd.readouterr().err
            time.sleep(0.05)
        spark.INTERRUPTED.set()
        assert child.wait(timeout=30) == 0
        time.sleep(0.3)  # the pipe's reader, to its end
        seen += capfd.readouterr().err
    finally:
        spark.INTERRUPTED.clear()
    assert "before" in seen and "ours" in seen and "after" not in seen, seen


def test_without_a_standard_error_the_jvm_is_started_as_it_was() -> None:
    """A driver run with ``2>&-`` has none to pass on (``os.dup(2)`` would fail)."""
    import os
    import subprocess
    import sys

    code = ("from streamdedup.replay.spark import jvm_stderr\n"
            "with jvm_stderr():\n    print('inside')\nprint('after')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          pass_fds=(), preexec_fn=lambda: os.close(2), timeout=60)
    assert (done.returncode, done.stdout) == (0, "inside\nafter\n")


def test_a_jvm_that_went_away_is_not_called_a_failed_job() -> None:
    from streamdedup.replay.spark import failed

    class Py4JNetworkError(Exception):  # py4j's, by name: importing py4j needs pyspark
        pass

    said = str(failed(Py4JNetworkError("Answer from Java side is empty")))
    assert said.startswith("Spark's JVM stopped answering") and "run it again" in said
    assert str(failed(RuntimeError("Job aborted due to stage failure: x"))).startswith(
        "the Spark job failed after its task retries: RuntimeError: Job aborted")


def test_staging_left_by_a_killed_backfill_is_removed_and_no_other(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL leaves a backfill's staging directory (a copy of the texts); the next
    backfill removes those whose process, of this PID space, is gone."""
    import os
    import subprocess
    import sys
    import tempfile

    from streamdedup.pids import PID_SPACE
    from streamdedup.replay.spark import STAGING, sweep_staging

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    names = {"dead": f"{STAGING}{PID_SPACE}-{child.pid}-abc123",
             "alive": f"{STAGING}{PID_SPACE}-{os.getpid()}-abc123",
             "elsewhere": f"{STAGING}0badc0de.1-{child.pid}-abc123",
             "old form": f"{STAGING}k2j3h4"}
    for name in names.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "texts.jsonl").write_text("{}\n")
    assert sweep_staging() == [tmp_path / names["dead"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        n for k, n in names.items() if k != "dead")


def test_a_spark_that_does_not_start_is_said_by_its_root_cause() -> None:
    """`--master k8s://x` ended "Spark did not start (...): An error has occurred.", the
    cause (an unknown host) 376 Java lines up; a JVM that exited pointed nowhere. The Java
    exceptions here are stand-ins with py4j's method names."""
    from streamdedup.replay.spark import _java_reason

    class Java:
        def __init__(self, message: str, cause: Java | None = None, name: str = "Exception"):
            self.message, self.cause, self.name = message, cause, name

        def getMessage(self) -> str:
            return self.message

        def getCause(self) -> Java | None:
            return self.cause

        def getClass(self) -> Any:
            return type("C", (), {"getSimpleName": lambda _: self.name})()

    class Py4JJavaError(Exception):
        def __init__(self, java: Java) -> None:
            super().__init__("An error occurred while calling None.JavaSparkContext.\n: ...")
            self.java_exception = java

    host = Java("x", name="UnknownHostException")
    top = Java("An error has occurred.", Java("External scheduler cannot be instantiated", host))
    assert _java_reason(Py4JJavaError(top)) == (
        "An error has occurred. (caused by UnknownHostException: x)")
    assert _java_reason(Py4JJavaError(Java("Master must start with yarn"))) == (
        "Master must start with yarn")
    exited = RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending "
                          "its port number.")
    assert _java_reason(exited).endswith("(Java's own lines above say why)")
