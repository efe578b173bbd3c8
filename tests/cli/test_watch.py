"""`streamdedup monitor` and `tail` before they read anything (the topics, the page: in
tests/monitor, against a real broker)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamdedup.process import free_port


@pytest.mark.parametrize(("content", "args", "said"), [
    ("", [], "empty.tsv is empty: a TSV dump starts with a header line"),
    ("title\tdescription\n", ["--id-field", "link"], "header has no column 'link'"),
    ("{}\n", ["--format", "tsv"], "the first line looks like JSON: --format jsonl?"),
])
def test_the_monitor_refuses_a_dump_it_cannot_read_at_its_start(
        tmp_path: Path, content: str, args: list[str], said: str) -> None:
    """Not at the first explanation, on the page, after the monitor came up. (A child
    process with a time bound: a monitor that took the dump would serve until stopped.)"""
    dump = tmp_path / "empty.tsv"
    dump.write_text(content, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMDEDUP_")}
    try:
        done = subprocess.run([sys.executable, "-m", "streamdedup", "monitor", "--dump",
                               str(dump), "--bootstrap-servers", "127.0.0.1:9",
                               "--monitor-port", str(free_port()), *args],
                              capture_output=True, text=True, env=env, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the monitor took the dump and served")
    assert done.returncode == 1 and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
