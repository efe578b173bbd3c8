"""A dump's bad rows, as `check` and `backfill` count and write them."""

from __future__ import annotations

import json

from streamdedup.errors import MessageError
from streamdedup.replay.bad_rows import BadRows, bad_row_line


def test_a_bad_row_is_one_ascii_json_line_for_check_and_backfill_alike() -> None:
    """Each wrote its own: `check` escaped non-ASCII, `backfill` did not."""
    line = bad_row_line(3, MessageError("wrong_type", "tïtle \udc80"))
    assert line.endswith("\n") and line.isascii()
    assert json.loads(line) == {"row": 3, "error": "wrong_type", "detail": "tïtle \udc80"}


def test_the_tally_keeps_the_first_reason_and_counts_rows_not_in_utf8() -> None:
    bad = BadRows()
    lines = [bad.add(row, MessageError(reason, f"row {row}"))
             for row, reason in ((4, "not_utf8"), (7, "bad_time"), (9, "not_utf8"))]
    assert (bad.count, bad.first, bad.not_utf8) == (3, "not_utf8: row 4", 2)
    assert [json.loads(line)["row"] for line in lines] == [4, 7, 9]
