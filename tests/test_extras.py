"""Each command that needs an extra stops with one line naming it when the extra is absent.

The extra is made absent in a child process (``sys.modules[name] = None`` makes its import
fail as a missing package does), so the installed one stays usable for the other tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RUN_WITHOUT = ("import sys; sys.modules[sys.argv.pop(1)] = None; "
               "from streamdedup.cli.main import main; main(sys.argv[1:])")


def without(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMDEDUP_")}
    return subprocess.run([sys.executable, "-c", RUN_WITHOUT, module, *args],
                          capture_output=True, text=True, env=env, timeout=120)


def _parquet(tmp_path: Path) -> Path:
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    path = tmp_path / "ads.parquet"
    pq.write_table(pa.table({"id": ["a"], "description": ["un annuncio di lavoro"]}), path)
    return path


def _one_line(done: subprocess.CompletedProcess[str], extra: str) -> None:
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"pip install '.[{extra}]' in streamdedup's checkout" in done.stderr, done.stderr


@pytest.mark.parametrize("module", ["scipy", "matplotlib"])
def test_backfill_report_without_its_extra_stops_before_any_work(tmp_path: Path,
                                                                  module: str) -> None:
    """It judged the whole dump into the store and wrote every verdict, then said scipy was
    missing (exit 1); replay refused at once."""
    dump = tmp_path / "ads.jsonl"
    dump.write_text('{"id": "a", "description": "un annuncio di lavoro"}\n', encoding="utf-8")
    done = without(module, "backfill", str(dump), "--engine", "local", "--store",
                   str(tmp_path / "s"), "--out", str(tmp_path / "v.jsonl"), "--report",
                   str(tmp_path / "r"))
    _one_line(done, "report")
    assert not (tmp_path / "s").exists() and not (tmp_path / "v.jsonl").exists()


def test_scurve_without_matplotlib(tmp_path: Path) -> None:
    """It was a traceback: the formats matplotlib writes were asked outside any handler."""
    _one_line(without("matplotlib", "scurve", "--out", str(tmp_path / "s.png")), "report")


def test_check_without_pyarrow_or_redis(tmp_path: Path) -> None:
    """An existing --out is left as it was (it was emptied: the Parquet file was opened at
    the first row, after the output)."""
    out = tmp_path / "kept.jsonl"
    out.write_text('{"precious": 1}\n')
    _one_line(without("pyarrow", "check", str(_parquet(tmp_path)), "--store-backend",
                      "memory", "--out", str(out)), "parquet")
    assert out.read_text() == '{"precious": 1}\n'
    _one_line(without("redis", "check", str(_parquet(tmp_path)), "--store-backend", "redis",
                      "--redis-url", "redis://127.0.0.1:9/0"), "redis")


@pytest.mark.broker
def test_produce_without_pyarrow(tmp_path: Path, kafka_bootstrap: str) -> None:
    """It was a traceback: a Parquet dump is read as it is sent, past produce's handlers."""
    _one_line(without("pyarrow", "produce", str(_parquet(tmp_path)), "--bootstrap-servers",
                      kafka_bootstrap, "--input-topic", "extras-test"), "parquet")


def test_a_spark_backfill_without_pyspark_leaves_its_outputs_alone(tmp_path: Path) -> None:
    """It read the dump, said "1 documents, 0 bad rows", emptied --out and its errors file,
    then named the extra."""
    dump = tmp_path / "ads.jsonl"
    dump.write_text('{"id": "a", "description": "un annuncio di lavoro"}\n')
    out = tmp_path / "kept.jsonl"
    errors = tmp_path / "kept.errors.jsonl"
    for path in (out, errors):
        path.write_text("precious\n")
    done = without("pyspark", "backfill", str(dump), "--engine", "spark", "--out", str(out),
                   "--store", str(tmp_path / "s"))
    _one_line(done, "spark")
    assert "documents" not in done.stderr and not (tmp_path / "s").exists()
    assert out.read_text() == errors.read_text() == "precious\n"


def test_each_extra_named_installs_its_module() -> None:
    """``extras.EXTRAS`` names the extra a missing module is in; pyproject.toml is what
    installs it. A package moved from one extra to another would send users to the wrong one."""
    import re
    import tomllib

    from streamdedup.extras import EXTRAS

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml")
                            .read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    for module, extra in EXTRAS.items():
        names = {re.split(r"[<>=\[; ]", spec, maxsplit=1)[0].lower() for spec in extras[extra]}
        assert module in names, f"{module}: not in the {extra!r} extra ({sorted(names)})"
