"""`scripts/replay.py` (what `scripts/demo` runs): its own broker's lifetime around a replay,
and the monitor it keeps beside the replay."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from streamdedup.process import free_port

ROOT = Path(__file__).resolve().parents[2]
ADS = [{"id": "a", "title": "Cuoco", "description": "Cercasi cuoco esperto per ristorante "
        "nel centro di Milano, turni serali e weekend, contratto a tempo indeterminato."},
       {"id": "b", "title": "Cuoco", "description": "Cercasi cuoco esperto per ristorante "
        "nel centro di Milano, turni serali e weekend, contratto a tempo determinato."}]


def script() -> Any:
    spec = importlib.util.spec_from_file_location("replay_script", ROOT / "scripts" / "replay.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_settings_flags_given_go_to_the_monitor_in_either_spelling() -> None:
    """``--preset=reference`` was left behind (the page measured pairs with the default),
    and --monitor-port went to the replay, which does not serve."""
    given = ["--dump", "d.tsv", "--preset=reference", "--monitor-port", "8090",
             "--no-strip-html", "--report-dir", "r", "--threshold", "0.7", "--input-topic",
             "x", "--topic-prefix", "p.", "--bootstrap-servers=b:1", "--rate", "5"]
    replay = script()
    assert replay.settings_flags(given) == [
        "--preset=reference", "--monitor-port", "8090", "--no-strip-html", "--threshold",
        "0.7"]
    assert replay.flag_value(given, "--topic-prefix") == "p."
    assert replay.flag_value(given, "--bootstrap-servers") == "b:1"  # the = spelling
    assert replay.flag_value([*given, "--topic-prefix=q."], "--topic-prefix") == "q."  # last
    assert replay.flag_value(given, "--group-id") is None
    assert replay.without(given, "--bootstrap-servers") == given[:-3] + given[-2:]
    assert replay.without(given, "--input-topic") == given[:10] + given[12:]


def _replay(tmp_path: Path, bootstrap: str, *more: str) -> subprocess.Popen[str]:
    dump = tmp_path / "ads.jsonl"
    dump.write_text("".join(json.dumps(ad) + "\n" for ad in ADS))
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMDEDUP_")}
    return subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "replay.py"), "--dump", str(dump),
         "--report-dir", str(tmp_path / "r"), "--bootstrap-servers", bootstrap, "--monitor",
         "--no-progress", "--no-band-table", *more],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        start_new_session=True)  # its monitor with it: killpg ends both


def _kill(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.broker
def test_a_monitor_that_cannot_serve_stops_it_before_the_replay(
        tmp_path: Path, kafka_bootstrap: str) -> None:
    """It replayed the whole dump, then said the port was taken, and exited 0."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _replay(tmp_path, kafka_bootstrap, "--monitor-port", str(port))
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, out
    assert f"cannot serve the monitor on 127.0.0.1:{port}" in out, out
    assert not (tmp_path / "r").exists(), out  # nothing replayed


@pytest.mark.broker
def test_the_monitor_shows_the_replay_with_its_settings_until_ctrl_c(
        tmp_path: Path, kafka_bootstrap: str) -> None:
    """Its settings flags in either spelling, its own topics and JSON lines: with
    ``--log-json`` it waited for the monitor's plain line for ever, and with ``--input-topic``
    the monitor read another topic than the replay wrote."""
    port = free_port()
    proc = _replay(tmp_path, kafka_bootstrap, "--monitor-port", str(port), "--preset",
                   "reference", "--log-json", "--input-topic=ads", "--topic-prefix=t1.")
    assert proc.stdout is not None
    said = []
    watchdog = threading.Timer(120, _kill, [proc])  # a bound on waiting: it waited for ever
    watchdog.start()
    try:
        for line in proc.stdout:
            said.append(line)
            if "the monitor goes on" in line:
                break
        assert any(f"monitor on http://127.0.0.1:{port}/ (topics t1.jobs.duplicates, "
                   "t1.jobs.dlq, t1.ads" in line for line in said), said
        base = f"http://127.0.0.1:{port}/api/"
        deadline = time.monotonic() + 60
        while True:  # the monitor reads the topics a little after the replay's end
            with urllib.request.urlopen(base + "summary", timeout=10) as r:
                if json.load(r)["verdicts"] == 2:
                    break
            assert time.monotonic() < deadline, "the monitor never read both verdicts"
            time.sleep(0.2)
        with urllib.request.urlopen(base + "explain?id=b&other=a", timeout=10) as r:
            explained = json.load(r)
        assert (explained["bands"], explained["rows"]) == (20, 5)  # the reference preset's
        assert "warning" not in explained
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        watchdog.cancel()
        _kill(proc)
    assert proc.returncode == 0, "".join(said) + out  # the replay's
    assert "Traceback" not in "".join(said) + out


@pytest.mark.broker
def test_ctrl_c_while_its_broker_starts_is_one_line_and_exit_130(tmp_path: Path) -> None:
    """Ctrl-C during the demo's broker start-up was a traceback (killed by SIGINT)."""
    dump = tmp_path / "ads.jsonl"
    dump.write_text('{"id": "a", "title": "Cuoco", "description": "Cercasi cuoco"}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMDEDUP_")}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "replay.py"), "--dump", str(dump),
         "--report-dir", str(tmp_path / "r")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
        # a terminal's Ctrl-C: the whole group, with SIGINT not ignored (as `&` makes it)
        preexec_fn=lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL), os.setpgrp()))
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "starting a local Kafka broker"
    assert "starting a local Kafka broker" in line and time.monotonic() < deadline
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert "Traceback" not in out and "interrupted" in out, out


def test_its_help_is_the_replays_as_typed_and_says_what_it_adds() -> None:
    """Its usage said "scripts/replay.py replay [OPTIONS]" and nothing of --monitor."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "replay.py"), "--help"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: scripts/replay.py [OPTIONS]\n"), done.stdout[:200]
    assert "--monitor: the monitor of the replay's topics" in done.stdout
    # the command's own help says it needs a running broker: not this script's
    assert "It needs a running broker" not in done.stdout, done.stdout
    assert "Without --bootstrap-servers (or its variable) it starts a local broker of its own" \
        in " ".join(done.stdout.split()), done.stdout
