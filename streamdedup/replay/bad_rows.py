"""A dump's rows that cannot be judged, as `check` and `backfill` count and write them: one
tally and one line for both (each wrote its own line once, and `backfill` did not escape
non-ASCII; each kept its own count of the first reason and of rows not in UTF-8).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from streamdedup.errors import MessageError


@dataclass
class BadRows:
    """How many rows were bad, the first one's reason (said when every row was: e.g. times
    that do not parse under ``--retention``), and how many were not UTF-8 (a file in another
    encoding: warned of at 5 % of the rows)."""

    count: int = 0
    first: str = ""  # "reason: detail"
    not_utf8: int = 0

    def add(self, row: int, error: MessageError) -> str:
        """Count a bad row; its line, for ``--errors``."""
        self.count += 1
        self.first = self.first or f"{error.reason}: {error.detail}"
        self.not_utf8 += error.reason == "not_utf8"
        return bad_row_line(row, error)


def bad_row_line(row: int, error: MessageError) -> str:
    """A row that cannot be judged, as `check --errors` and `backfill` write it (one JSON
    line; ASCII, so that a detail quoting undecodable bytes can still be written)."""
    return json.dumps({"row": row, "error": error.reason, "detail": error.detail}) + "\n"
