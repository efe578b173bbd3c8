"""What the store commands of both persistent backends share (``sqlite/maintenance.py``,
``redis/maintenance.py``): a stored verdict's check against its record, times as stats
show them, and how many problems ``verify`` lists."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

MAX_LISTED = 20  # problems listed by verify; the count is always whole


def verdict_problems(doc_id: str, seq: int, verdict: str
                     ) -> tuple[list[str], dict[str, Any] | None]:
    """A stored verdict checked against its document's record (JSON, its id, its seq), for
    the stores' ``verify``; returns the problems and the parsed verdict (None: not JSON)."""
    try:
        parsed = json.loads(verdict)
    except ValueError:
        return [f"document {doc_id!r}: its verdict is not JSON"], None
    if not isinstance(parsed, dict):  # (an AttributeError traceback, where it was said)
        return [f"document {doc_id!r}: its verdict is not a JSON object"], None
    problems = []
    if parsed.get("id") != doc_id:
        problems.append(f"document {doc_id!r}: its verdict is for {parsed.get('id')!r}")
    if parsed.get("seq") not in (None, seq):
        problems.append(f"document {doc_id!r}: seq {seq} but its verdict says "
                        f"{parsed.get('seq')}")
    return problems, parsed


def format_time(ms: int | None) -> str | None:
    """Milliseconds since the epoch as ISO 8601 UTC to the second (``store stats``)."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")
