"""Set id -> set number in memory: the SQLite store's way to keep its tables append-mostly.

Why: set ids are content fingerprints, uniformly random. Tables and indexes keyed by them
(the sets table, documents by set) take each new set at a random page, so once they outgrow
a commit every new set dirties a page of its own: at a million generated ads a commit of 500
wrote ~900 random 4 KB pages, and commit time per document grew fivefold from 10k. The store
numbers sets in arrival order instead and keys its tables by that number, so a new set and
its documents land on the last pages, and reposts (which copy recent ads) land near them.
Only this map is keyed by the fingerprint, and it lives here: 16 bytes per set, rebuilt at
open from the sets table.

Layout: a sorted numpy pair (ids, numbers) for everything older than the last merge, and a
dict for the rest, merged into the arrays once it holds ``merge_at`` ids. Transactions
follow the store's: ``add`` is visible at once, ``commit()`` keeps, ``rollback()`` forgets.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

MERGE_AT = 1 << 16


class SetNumbers:
    """A map from set id to set number, with the store's commit and rollback."""

    def __init__(self, merge_at: int = MERGE_AT) -> None:
        self.merge_at = merge_at
        self._ids = np.zeros(0, dtype=np.int64)  # sorted
        self._numbers = np.zeros(0, dtype=np.int64)  # parallel to _ids
        self._recent: dict[int, int] = {}
        self._uncommitted: list[int] = []

    def __len__(self) -> int:
        return self._ids.size + len(self._recent)

    def get(self, set_id: int) -> int | None:
        found = self._recent.get(set_id)
        if found is not None or not self._ids.size:
            return found
        i = int(self._ids.searchsorted(set_id))
        if i < self._ids.size and int(self._ids[i]) == set_id and self._numbers[i] >= 0:
            return int(self._numbers[i])
        return None

    def get_many(self, set_ids: Iterable[int]) -> dict[int, int]:
        """Numbers of the ids that have one."""
        out: dict[int, int] = {}
        rest = []
        for set_id in set_ids:
            found = self._recent.get(set_id)
            if found is None:
                rest.append(set_id)
            else:
                out[set_id] = found
        if rest and self._ids.size:
            query = np.array(rest, dtype=np.int64)
            at = np.minimum(np.searchsorted(self._ids, query), self._ids.size - 1)
            hit = (self._ids[at] == query) & (self._numbers[at] >= 0)
            out.update(zip(query[hit].tolist(), self._numbers[at[hit]].tolist(), strict=True))
        return out

    def add(self, set_id: int, number: int) -> None:
        """Record a new id (the caller checked it has no number yet)."""
        self._recent[set_id] = number
        self._uncommitted.append(set_id)

    def remove(self, set_id: int) -> None:
        """Forget an id (its set was deleted). Not undone by ``rollback``: the store reloads
        the map after a rolled-back eviction."""
        if self._recent.pop(set_id, None) is not None:
            return
        i = int(np.searchsorted(self._ids, set_id))
        if i < self._ids.size and int(self._ids[i]) == set_id:
            self._numbers[i] = -1  # dropped at the next merge

    def add_many(self, set_ids: np.ndarray, numbers: np.ndarray) -> None:
        """Bulk load of committed ids (used when a store is opened)."""
        self._merge(set_ids.astype(np.int64, copy=False), numbers.astype(np.int64, copy=False))

    def state(self) -> dict[str, np.ndarray]:
        """Every committed id and its number, sorted by id (for the store's snapshot)."""
        if self._uncommitted:
            raise ValueError("the set numbers have uncommitted adds")
        copy = SetNumbers(self.merge_at)
        copy._ids, copy._numbers = self._ids, self._numbers
        copy._merge(np.fromiter(self._recent.keys(), dtype=np.int64, count=len(self._recent)),
                    np.fromiter(self._recent.values(), dtype=np.int64,
                                count=len(self._recent)))
        return {"ids": copy._ids, "numbers": copy._numbers}

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray]) -> SetNumbers:
        numbers = cls()
        numbers._ids, numbers._numbers = state["ids"], state["numbers"]
        return numbers

    def commit(self) -> None:
        self._uncommitted = []
        if len(self._recent) >= self.merge_at:
            recent, self._recent = self._recent, {}
            self._merge(np.fromiter(recent.keys(), dtype=np.int64, count=len(recent)),
                        np.fromiter(recent.values(), dtype=np.int64, count=len(recent)))

    def rollback(self) -> None:
        for set_id in self._uncommitted:
            self._recent.pop(set_id, None)
        self._uncommitted = []

    def _merge(self, ids: np.ndarray, numbers: np.ndarray) -> None:
        ids = np.concatenate((self._ids, ids))
        numbers = np.concatenate((self._numbers, numbers))
        kept = numbers >= 0
        ids, numbers = ids[kept], numbers[kept]
        order = np.argsort(ids, kind="stable")
        self._ids, self._numbers = ids[order], numbers[order]
