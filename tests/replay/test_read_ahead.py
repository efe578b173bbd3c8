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
