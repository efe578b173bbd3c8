"""The in-process benchmarks still run: each subcommand on a tiny input, its JSON checked.

No timing is asserted (speed is measured in BENCHMARKS.md, not here); these only keep the
scripts runnable. `growth` had failed with a StoreError for sessions before anyone ran it.
The broker benchmarks (e2e, group) are left to their own runs: they start a broker each.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def bench(tmp_path: Path, dump: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "result.json"
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench.py"), "--dump", str(dump),
                          "--repeats", "1", "--warmup", "0", "--json", str(out), *args],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.read_text())
    assert result["command"].startswith("scripts/bench.py ") and result["machine"]
    return result


@pytest.mark.slow
def test_growth_reports_each_size_and_the_reopening(tmp_path: Path, kijiji_path: Path) -> None:
    result = bench(tmp_path, kijiji_path, "growth", "--sizes", "1000,4000", "--rounds", "1",
                   "--window", "1", "--tmp", str(tmp_path))
    assert [p["docs"] for p in result["points"]] == [1000, 4000]
    assert all(p["store_bytes"] > 0 and p["per_doc_ms"] > 0 for p in result["points"])
    assert result["reopen_s"] >= 0 and result["stopped_early"] is None


@pytest.mark.slow
def test_stages_compare_and_hotbucket_run(tmp_path: Path, kijiji_path: Path) -> None:
    stages = bench(tmp_path, kijiji_path, "stages", "--copies", "1", "--presets", "default")
    assert "probe + add (SQLite)" in stages["presets"]["default"]
    compare = bench(tmp_path, kijiji_path, "compare", "--copies", "1", "--redis", "off",
                    "--only", "shortcut", "--ds-limit", "300", "--slow-repeats", "1")
    assert any("shortcut" in name for name in compare["results"])
    hot = bench(tmp_path, kijiji_path, "hotbucket", "--arrivals", "300", "--variants", "3")
    assert set(hot) >= {"one identical text", "3 variants"}


@pytest.mark.slow
def test_retention_runs_on_sqlite_and_on_a_redis_server_it_starts(tmp_path: Path,
                                                                  kijiji_path: Path) -> None:
    """Each backend's runs judged the same generated ads, with and without the window."""
    found = {}
    for backend in ("sqlite", "redis"):
        result = bench(tmp_path, kijiji_path, "retention", "--messages", "600", "--window",
                       "2h", "--backend", backend)
        assert result["backend"] == backend and set(result["runs"]) == {"off", "2h"}
        found[backend] = {name: (r[0]["documents"], r[0]["duplicates"])
                          for name, r in result["runs"].items()}
        sized = [r[0]["store_bytes"] for r in result["runs"].values()]
        assert all(s > 0 for s in sized) if backend == "sqlite" else sized == [None, None]
    assert found["sqlite"] == found["redis"]
    assert found["sqlite"]["off"][0] == 600
    assert found["sqlite"]["2h"][1] < found["sqlite"]["off"][1]  # the window forgot some
