"""A document: an announcement's id and its text fields, as the core sees it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Document:
    """``fields`` holds the announcement's string fields (title, description, ...; numbers as
    their decimal text); ``time`` its announcement time in milliseconds since the epoch, when
    retention needs it (else None; see ``core/retention.py``). ``source`` is the object an
    automatic id was computed from (an announcement that came without one), kept so that it
    can be sent on as it came and keep that id: ``fields`` alone lack its nulls, booleans and
    lists, and hold its numbers as text."""

    id: str
    fields: Mapping[str, str] = field(default_factory=dict)
    time: int | None = None
    source: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
