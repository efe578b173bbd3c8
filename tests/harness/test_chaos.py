"""Chaos on the real broker, CI-sized: one run of the harness, then one test per promise.

The run (``harness.chaos``) streams a few hundred announcements through consumer
processes while it SIGKILLs them (at a random moment, inside the SQLite commit, between the
producer flush and the offset commit), restarts the broker, SIGTERMs a busy consumer, fills
the store's file system (or makes its writes fail), damages the store file before a start and
starts a second writer. Afterwards it compares every answer with an uninterrupted run over the
same input topic. ``scripts/chaos.py`` is the full-size version (RELIABILITY.md).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.chaos import ChaosConfig, run
from streamdedup.settings import build_settings

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def report(request: pytest.FixtureRequest, kafka_bootstrap: str, kijiji_path: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    try:  # the broker fault needs the session's LocalBroker; elsewhere it is left out
        broker = request.getfixturevalue("local_broker")
    except pytest.skip.Exception:
        broker = None
    config = ChaosConfig(
        bootstrap=kafka_bootstrap, dump=kijiji_path,
        workdir=tmp_path_factory.mktemp("chaos"), messages=500, kills=3,
        faults=("kill", "broker", "sigterm", "disk_full", "write_error", "corrupt",
                "second_writer"),
        corruptions=("truncate", "garbage_header", "zero_length"), broker=broker,
        tmpfs_mb=64, step_timeout_s=120.0, seed=11,
        say=lambda message: print(message, file=sys.stderr),
    )
    yield run(config)


def _events(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    found = [e for e in report["events"] if e["kind"] == kind]
    assert found, f"no {kind} fault in this run: {sorted(report['faults'])}"
    return found


def test_no_verdict_lost_contradicted_or_changed(report: dict[str, Any]) -> None:
    chaos = report["chaos"]
    assert chaos["ids"] > 400
    assert chaos["lost"] == 0, chaos["examples"]["lost"]
    assert chaos["self_duplicates"] == 0, chaos["examples"]["self_duplicates"]
    assert chaos["conflicts"] == 0, chaos["examples"]["conflicts"]
    assert chaos["mismatches"] == 0, chaos["examples"]["mismatches"]
    assert chaos["dead_letters"] > 0  # the bad messages did arrive, as dead letters


def test_sigkills_at_random_and_inside_the_commit_order(report: dict[str, Any]) -> None:
    kills = [e for e in report["events"] if e["kind"].startswith("kill_")]
    assert len(kills) == 3
    assert all(e["ok"] for e in kills), kills
    assert {e["kind"] for e in kills} >= {"kill_random", "kill_store_commit",
                                          "kill_after_flush"}


def test_no_consumer_died_on_its_own(report: dict[str, Any]) -> None:
    exits = [e for e in report["events"] if e["kind"] == "unexpected_exit"]
    assert not exits, exits


@pytest.mark.parametrize("kind", ["broker_restart", "broker_crash"])
def test_broker_stop_or_crash_mid_stream(report: dict[str, Any], kind: str) -> None:
    if not any(e["kind"].startswith("broker_") for e in report["events"]):
        pytest.skip("the broker is not this session's LocalBroker, so it was not restarted")
    (event,) = _events(report, kind)
    # The same consumer process caught up, no restart needed, and once idle its committed
    # offset reached the end of what was sent (a commit lost to the outage is made again).
    assert event["ok"], event
    assert event["committed"] == event["produced_to"], event
    # kafka-python's ~15 ERROR lines and two tracebacks are one WARNING a minute now.
    assert event["kafka_errors_logged"] == 0, event


def test_sigterm_in_a_busy_batch_commits_and_exits_0(report: dict[str, Any]) -> None:
    (event,) = _events(report, "sigterm")
    assert event["exit_code"] == 0, event
    assert event["committed"] == event["outputs_up_to"], event  # final commit covers all


@pytest.mark.parametrize("how", ["truncate", "garbage_header"])
def test_damaged_store_is_refused_at_start(report: dict[str, Any], how: str) -> None:
    (event,) = _events(report, f"corrupt_{how}")
    assert event["refused"] and event["exit_code"] == 1, event
    assert "index.sqlite" in event["message"], event


def test_zero_length_store_is_refused_at_start(report: dict[str, Any]) -> None:
    (event,) = _events(report, "corrupt_zero_length")
    assert event["refused"], event


@pytest.mark.parametrize("kind", ["disk_full", "write_error"])
def test_store_write_failures_stall_then_recover(report: dict[str, Any], kind: str) -> None:
    (event,) = _events(report, kind)
    assert event["ok"], event  # the error was logged and the same process caught up
    assert event["answered_while_broken"] == 0, event
    assert event["errors_logged"] >= 1


def test_second_writer_on_the_same_store_is_refused(report: dict[str, Any]) -> None:
    (event,) = _events(report, "second_writer")
    assert event["exit_code"] == 1, event
    assert "one writer per store" in event["message"]
    assert event["first_still_running"]


def test_store_content_digest_covers_every_table_of_the_schema(tmp_path: Path) -> None:
    """The corruption survey compares stores by this digest: it must read the current
    schema's tables (a renamed table would make every survey trial an error)."""
    import sqlite3

    from harness.chaos.store import _TABLES, _content
    from streamdedup.core.sketch import Sketcher
    from streamdedup.store import open_store
    from streamdedup.store.base import DocRecord, SetRecord

    store = open_store("sqlite", str(tmp_path / "s"), Sketcher(build_settings("default", env={}))
                       .params())
    store.add_set(SetRecord(5, 1, "a", 5), np.arange(3, dtype=np.uint64))
    store.add_to_buckets([11, 12], 5, 10)
    store.put_doc(DocRecord("a", 1, 5, "{}"))
    store.commit()
    store.close()
    db = tmp_path / "s" / "index.sqlite"
    conn = sqlite3.connect(db)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == set(_TABLES)
    before = _content(db)
    conn.execute("UPDATE verdicts SET verdict = '{\"x\":1}'")
    conn.commit()
    conn.close()
    assert _content(db) != before
