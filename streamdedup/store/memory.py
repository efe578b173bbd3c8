"""In-memory store: for tests, dry runs and benchmarks of the core alone. Nothing persists."""

from __future__ import annotations

import heapq
import itertools
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from streamdedup.errors import StoreError
from streamdedup.store.base import DEFAULT_EDGE_CAP, DocRecord, SetRecord, Store


class MemoryStore(Store):
    def __init__(self) -> None:
        self._params: dict[str, Any] | None = None
        self._seq = 0
        self._docs: dict[str, DocRecord] = {}
        self._versions: dict[tuple[str, int], str] = {}
        self._positions: dict[tuple[str, int], int] = {}
        self._store_id = uuid.uuid4().hex
        self._members: dict[int, dict[str, int]] = defaultdict(dict)
        self._sets: dict[int, SetRecord] = {}
        self._shingles: dict[int, np.ndarray] = {}
        self._edges: dict[int, dict[int, float]] = defaultdict(dict)
        self._crowded: set[int] = set()
        self._buckets: dict[int, set[int]] = defaultdict(set)
        self._sizes: dict[int, int] = {}  # set id -> shingles, as given to add_to_buckets
        self._unordered: set[int] = set()  # sets whose members were not added in seq order

    def get_params(self) -> dict[str, Any] | None:
        return None if self._params is None else dict(self._params)

    def put_params(self, params: Mapping[str, Any]) -> None:
        self._params = dict(params)

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def put_positions(self, positions: Mapping[tuple[str, int], int]) -> None:
        self._positions.update(positions)

    def get_positions(self) -> dict[tuple[str, int], int]:
        return dict(self._positions)

    def store_id(self) -> str:
        return self._store_id

    def get_doc(self, doc_id: str) -> DocRecord | None:
        return self._docs.get(doc_id)

    def put_doc(self, doc: DocRecord) -> None:
        old = self._docs.get(doc.doc_id)
        if old is not None:
            self._members[old.set_id].pop(old.doc_id, None)
        self._docs[doc.doc_id] = doc
        self._versions.setdefault((doc.doc_id, doc.set_id), doc.verdict)
        members = self._members[doc.set_id]
        if members and doc.seq < next(reversed(members.values())):
            self._unordered.add(doc.set_id)
        members[doc.doc_id] = doc.seq

    def delete_doc(self, doc_id: str) -> None:
        old = self._docs.pop(doc_id, None)
        if old is not None:
            self._members[old.set_id].pop(doc_id, None)

    def get_version(self, doc_id: str, set_id: int) -> str | None:
        return self._versions.get((doc_id, set_id))

    def members(self, set_id: int, limit: int) -> list[tuple[int, str]]:
        found = self._members.get(set_id)
        if not found:
            return []
        if set_id in self._unordered:
            return heapq.nsmallest(limit, ((seq, doc_id) for doc_id, seq in found.items()))
        # Sequence numbers only grow, so insertion order is arrival order: no sort needed
        # (sorting a hot set's thousands of members per document made this store quadratic).
        return [(seq, doc_id) for doc_id, seq in itertools.islice(found.items(), limit)]

    def get_sets(self, set_ids: Iterable[int]) -> dict[int, SetRecord]:
        return {i: self._sets[i] for i in set_ids if i in self._sets}

    def add_set(self, record: SetRecord, shingles: np.ndarray) -> None:
        if record.set_id not in self._sets:
            self._sets[record.set_id] = record
            self._shingles[record.set_id] = shingles.copy()

    def set_parent(self, set_id: int, parent: int) -> None:
        rec = self._sets.get(set_id)
        if rec is None:
            return  # as in SQLite: an UPDATE of no row
        self._sets[set_id] = SetRecord(rec.set_id, rec.first_seq, rec.first_id, parent)

    def get_shingles(self, set_ids: Iterable[int]) -> dict[int, np.ndarray]:
        return {i: self._shingles[i] for i in set_ids if i in self._shingles}

    def add_edges(self, set_id: int, edges: Sequence[tuple[int, float]],
                  cap: int = DEFAULT_EDGE_CAP) -> None:
        for a, b, sim in [(set_id, o, s) for o, s in edges] + [(o, set_id, s) for o, s in edges]:
            if a in self._crowded:
                continue
            self._edges[a][b] = sim
            if len(self._edges[a]) > cap:
                self._crowded.add(a)
                del self._edges[a]

    def neighbours(self, set_id: int) -> list[tuple[int, float]] | None:
        if set_id in self._crowded:
            return None
        return sorted(self._edges.get(set_id, {}).items())

    def probe(self, keys: Sequence[int], sizes: tuple[int, int] | None = None
              ) -> dict[int, int]:
        hits: dict[int, int] = defaultdict(int)
        for key in {int(k) for k in keys}:
            for set_id in self._buckets.get(key, ()):
                hits[set_id] += 1
        if sizes is not None:
            lo, hi = sizes
            return {s: n for s, n in hits.items() if lo <= self._sizes[s] <= hi}
        return dict(hits)

    def add_to_buckets(self, keys: Sequence[int], set_id: int, size: int) -> None:
        self._sizes[set_id] = size
        for key in keys:
            self._buckets[int(key)].add(set_id)

    def commit(self) -> None:
        """Nothing to flush: memory is as durable as it gets."""

    def rollback(self) -> None:
        raise StoreError("the memory store cannot roll back; restart to rebuild it")

    def close(self) -> None:
        """Nothing to release."""

    def stats(self) -> dict[str, int]:
        return {
            "documents": len(self._docs),
            "sets": len(self._sets),
            "bucket_entries": sum(len(v) for v in self._buckets.values()),
            "bytes": 0,
        }
