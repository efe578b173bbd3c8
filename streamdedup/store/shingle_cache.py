"""Sets' shingle hashes kept in memory, least recently used out first, up to a byte bound.

A set id is the fingerprint of its shingles, so an entry never goes stale: a store drops
one only when the set leaves (eviction) or when a rollback may have taken back its write.
Verification reads the same sets again and again (a hot bucket verifies up to 2,000
candidates per document, most of them the same from one document to the next), and a
store that keeps texts would shingle each one again: 128 MB hold ~50,000 sets of ~300
shingles. The soak's hot cluster (100,000 messages, 40 % new variants) needs ~130 MB: with
64 MB, 18.5 s of a 175-s run went to shingling missed sets again, with 128 MB 1.4 s of
117 s (RSS +46 MB); a long stream fills the cache whatever its bound, so the bound is
what it costs in RSS (the 1M-ad growth run peaked at 902 MiB with 64 MB).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

import numpy as np

from streamdedup.store.base import split_held

DEFAULT_BYTES = 128 << 20


class ShingleCache:
    """Sorted shingle arrays by set id; ``nbytes`` of the arrays held stays under
    ``max_bytes`` (an array bigger than that is handed back, not kept)."""

    def __init__(self, max_bytes: int = DEFAULT_BYTES) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._sets: OrderedDict[int, np.ndarray] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sets)

    def __contains__(self, set_id: int) -> bool:
        return set_id in self._sets

    def get(self, set_id: int) -> np.ndarray | None:
        found = self._sets.get(set_id)
        if found is not None:
            self._sets.move_to_end(set_id)
        return found

    def split(self, set_ids: Iterable[int]) -> tuple[dict[int, np.ndarray], list[int]]:
        """The arrays held for ``set_ids`` (each now most recently used), and the ids
        not held, in order: what a store reads from its tables. (The dict's own lookup and
        reorder, not ``get``: a hot bucket asks for up to 2,000 sets per document, 869 ->
        436 us.)"""
        return split_held(set_ids, self._sets.get, self._sets.move_to_end)

    def put(self, set_id: int, shingles: np.ndarray) -> np.ndarray:
        """Keep ``shingles`` as uint64 (a copy if it is a view: a slice of a batch's array
        must not pin the whole batch) and return what is kept for the set."""
        held = self._sets.get(set_id)
        if held is not None:
            return held
        shingles = np.asarray(shingles, dtype=np.uint64)
        if shingles.base is not None:
            shingles = shingles.copy()
        if shingles.nbytes > self.max_bytes:  # would push every other set out
            return shingles
        self._sets[set_id] = shingles
        self.nbytes += shingles.nbytes
        while self.nbytes > self.max_bytes:
            self.nbytes -= self._sets.popitem(last=False)[1].nbytes
        return shingles

    def drop(self, set_id: int) -> None:
        gone = self._sets.pop(set_id, None)
        if gone is not None:
            self.nbytes -= gone.nbytes

    def clear(self) -> None:
        self._sets.clear()
        self.nbytes = 0
