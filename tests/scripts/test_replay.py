"""`scripts/replay.py` (what `scripts/demo` runs): its own broker's lifetime around a replay."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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
