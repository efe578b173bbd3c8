"""What the store tests write: settings' parameters, a set record, hashes at the edges of
64 bits (the contract suite over every backend and the SQLite file's tests share them)."""

from __future__ import annotations

import numpy as np

from streamdedup.core.sketch import Sketcher
from streamdedup.settings import Settings
from streamdedup.store.base import SetRecord

PARAMS = Sketcher(Settings()).params()
HIGH = np.array([0, 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1], dtype=np.uint64)


def rec(set_id: int, seq: int = 1, first_id: str = "d", parent: int | None = None) -> SetRecord:
    return SetRecord(set_id, seq, first_id, set_id if parent is None else parent)
