"""Progress bars: tqdm on a terminal only, and messages still get through without one."""

from __future__ import annotations

import sys

import pytest

from streamdedup.cli.progress import progress_bar


def test_off_a_terminal_the_bar_is_quiet_but_passes_messages_on(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    bar = progress_bar(unit="doc")
    bar.update(5)
    bar.write("phase 1 done", file=sys.stderr)
    bar.close()
    out = capsys.readouterr()
    assert out.err == "phase 1 done\n" and out.out == ""
    assert type(bar).__module__ == "streamdedup.cli.progress"


def test_on_a_terminal_it_is_tqdm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    bar = progress_bar(unit="doc", disable=True)
    try:
        assert type(bar).__module__.startswith("tqdm")
    finally:
        bar.close()
