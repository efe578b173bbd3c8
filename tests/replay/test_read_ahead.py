"""`check` reads and sketches one batch ahead in a second process (replay/read_ahead.py): the
same verdicts as without it, bad rows passed on as they were, and a reader that dies is an
error, not a hang or a short output."""

from __future__ import annotations

import json
import os
import pickle
import signal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mixed_ads import ad_lines

from streamdedup.cli.main import main
from streamdedup.errors import InputError, MessageError
from streamdedup.replay import read_ahead
from streamdedup.replay.read_ahead import ReadAhead
from streamdedup.settings import Settings


def write_ads(path: Path, n: int, seed: int) -> Path:
    path.write_text("\n".join(ad_lines(n, seed)) + "\n", encoding="utf-8")
    return path


def check(ads: Path, store: Path, *flags: str) -> str:
    out = store.with_suffix(".jsonl")
    result = CliRunner().invoke(main, ["check", str(ads), "--store", str(store), "--out",
                                       str(out), *flags], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


def test_verdicts_are_the_same_with_and_without_reading_ahead(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[ReadAhead] = []

    class Counted(ReadAhead):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(read_ahead, "ReadAhead", Counted)
    ads = write_ads(tmp_path / "ads.jsonl", 1600, seed=3)  # four batches of 500
    ahead = check(ads, tmp_path / "ahead")
    assert len(started) == 1  # the default
    inline = check(ads, tmp_path / "inline", "--no-sketch-ahead")
    assert len(started) == 1
    assert ahead == inline
    records = [json.loads(line) for line in ahead.splitlines()]
    assert len(records) == 1600
    assert sum(r.get("duplicate", False) for r in records) > 300
    assert {r["error"] for r in records if "error" in r} == {"malformed_json", "empty_text"}
    # Again onto the stores they built: every verdict comes back unchanged.
    assert check(ads, tmp_path / "ahead") == ahead


def test_the_reader_holds_its_heap_for_the_next_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child sets the allocator (streamdedup/heap.py: a fifth of its CPU was page
    faults) before it reads: the fork carries this stand-in, which leaves a mark."""
    mark = tmp_path / "held"
    monkeypatch.setattr(read_ahead.heap, "hold", lambda: mark.write_text(str(os.getpid())))
    ahead = ReadAhead(write_ads(tmp_path / "ads.jsonl", 30, seed=1), None, Settings())
    try:
        assert sum(len(rows) for rows, _ in ahead) == 30
    finally:
        ahead.close()
    assert mark.read_text() not in ("", str(os.getpid()))  # set in the child, not here


def test_a_bad_row_crosses_between_processes_as_it_was() -> None:
    err = pickle.loads(pickle.dumps(MessageError("malformed_json", "line 3: Expecting value")))
    assert (err.reason, err.detail) == ("malformed_json", "line 3: Expecting value")


def test_an_input_error_found_by_the_reader_is_raised_in_the_caller(tmp_path: Path) -> None:
    ads = tmp_path / "ads.tsv"
    ads.write_text("a\tb\n1\t2\n", encoding="utf-8")
    ahead = ReadAhead(ads, None, Settings())
    try:
        with pytest.raises(InputError, match="header has none of the text fields"):
            list(ahead)
    finally:
        ahead.close()


def test_a_reader_that_dies_is_an_error_not_a_short_output(tmp_path: Path) -> None:
    ads = write_ads(tmp_path / "ads.jsonl", 600, seed=4)
    ahead = ReadAhead(ads, None, Settings(), batch=20)  # 30 batches; it blocks a few ahead
    got = 0
    try:
        with pytest.raises(InputError, match=r"stopped \(exit code -9\) before the end"):
            for _ in ahead:
                if got == 0:
                    os.kill(ahead._child.pid or 0, signal.SIGKILL)
                got += 1
    finally:
        ahead.close()
    assert 1 <= got < 30


def test_a_check_killed_leaves_no_reader_behind(tmp_path: Path) -> None:
    """SIGKILL of ``check`` cannot stop its child; the child must notice and end (it held
    the pipe's read end inherited from the fork, and waited forever on a full pipe)."""
    import subprocess
    import sys
    import time

    ads = write_ads(tmp_path / "ads.jsonl", 3000, seed=5)  # a batch's sketches fill the pipe
    proc = subprocess.Popen([sys.executable, "-m", "streamdedup", "check", str(ads),
                             "--store", str(tmp_path / "s"), "--out", str(tmp_path / "o")],
                            stderr=subprocess.DEVNULL)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.monotonic() + 60
    while not (kids := children.read_text().split()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kids, "check started no reader"
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    def running(pid: str) -> bool:
        try:  # state is the field after the parenthesized name; Z: ended, not reaped yet
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 30
    while any(map(running, kids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [k for k in kids if running(k)]
    for k in left:
        os.kill(int(k), signal.SIGKILL)
    assert not left, "the reader outlived its killed parent"


@pytest.mark.parametrize("how", ["ctrl_c", "sigterm", "sigterm_group"])
def test_ctrl_c_stops_check_with_one_line_and_a_sound_store(tmp_path: Path, how: str) -> None:
    """Ctrl-C reaches the whole process group: the reader printed a KeyboardInterrupt
    traceback (or a stray "Process streamdedup-read-ahead:") beside check's own line, and
    check said click's bare "Aborted!" with exit 1 instead of how far it got, with 130.
    SIGTERM (a supervisor's, to check alone) ended it at once without a word; to the group
    (`timeout`, systemd) the reader printed a traceback from the handler it was forked with."""
    import subprocess
    import sys
    import time

    ads = write_ads(tmp_path / "ads.jsonl", 30_000, seed=6)  # seconds of work left to stop
    proc = subprocess.Popen([sys.executable, "-m", "streamdedup", "check", str(ads),
                             "--store", str(tmp_path / "s"), "--out", str(tmp_path / "o")],
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    out = tmp_path / "o"
    deadline = time.monotonic() + 60
    while not (out.exists() and out.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.02)  # the first verdicts: the store is open, the reader ahead
    assert proc.poll() is None, "check ended before it could be interrupted"
    if how == "ctrl_c":
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it: to the group
    elif how == "sigterm_group":
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "read-ahead" not in err, err
    assert proc.returncode == 130 and "interrupted: " in err and "Aborted!" not in err, err
    done = subprocess.run([sys.executable, "-m", "streamdedup", "store", "verify", "--store",
                           str(tmp_path / "s")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
