"""What `check` and `backfill` say of how a run went (``cli/outcome.py``)."""

from __future__ import annotations

from streamdedup.cli.outcome import judged_before
from streamdedup.settings import Settings


def test_a_store_outage_says_what_stands_and_with_retention_what_a_run_again_changes() -> None:
    """A review's `check --retention 2d` stopped by a 130-s outage: run again, 3,430
    duplicates where a clean run had 4,141 (ads that had left the window judged anew), and
    the message had said only that the same command goes on."""
    plain = judged_before(1, Settings())
    assert plain == ("; the 1 document judged before it stands, and the same command again "
                     "goes on from what the store kept")
    windowed = judged_before(10_500, Settings().replace(retention="2d"))
    assert windowed.startswith("; the 10500 documents judged before it stand")
    assert "left the window since are judged anew" in windowed
    assert "start again with an empty store" in windowed
