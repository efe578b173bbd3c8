"""`streamdedup monitor` and `tail` before they read anything (the topics, the page: in
tests/monitor, against a real broker)."""

from __future__ import annotations

from pathlib import Path

import pytest
from command_line import run


@pytest.mark.parametrize(("content", "args", "said"), [
    ("", [], "empty.tsv is empty: a TSV dump starts with a header line"),
    ("title\tdescription\n", ["--id-field", "link"], "header has no column 'link'"),
    ("{}\n", ["--format", "tsv"], "the first line looks like JSON: --format jsonl?"),
])
def test_the_monitor_refuses_a_dump_it_cannot_read_at_its_start(
        tmp_path: Path, content: str, args: list[str], said: str) -> None:
    """Not at the first explanation, on the page, after the monitor came up."""
    dump = tmp_path / "empty.tsv"
    dump.write_text(content, encoding="utf-8")
    code, _, err = run("monitor", "--dump", str(dump), "--bootstrap-servers", "127.0.0.1:9",
                       *args)
    assert code == 1 and said in err and "Traceback" not in err, err
