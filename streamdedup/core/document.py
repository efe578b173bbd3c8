"""A document: an announcement's id and its text fields, as the core sees it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Document:
    """``fields`` holds the announcement's string fields (title, description, ...; numbers as
    their decimal text); ``time`` its announcement time in milliseconds since the epoch, when
    retention needs it (else None; see ``core/retention.py``)."""

    id: str
    fields: Mapping[str, str] = field(default_factory=dict)
    time: int | None = None
