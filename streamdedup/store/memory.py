"""In-memory store: for tests, dry runs and benchmarks of the core alone. Nothing persists."""

from __future__ import annotations

import heapq
import itertools
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from streamdedup.errors import StoreError
from streamdedup.store.base import DEFAULT_EDGE_CAP, DocRecord, Evicted, SetRecord, Store


class MemoryStore(Store):
    def __init__(self) -> None:
        self._params: dict[str, Any] | None = None
        self._seq = 0
        self._docs: dict[str, DocRecord] = {}
        self._versions: dict[tuple[str, int], str] = {}
        self._version_sets: dict[str, set[int]] = {}  # doc id -> set ids of its versions
        self._positions: dict[tuple[str, int], int] = {}
        self._store_id = uuid.uuid4().hex
        self._members: dict[int, dict[str, int]] = defaultdict(dict)
        self._sets: dict[int, SetRecord] = {}
        self._shingles: dict[int, np.ndarray] = {}
        self._edges: dict[int, dict[int, float]] = defaultdict(dict)
        self._crowded: set[int] = set()
        self._buckets: dict[int, set[int]] = defaultdict(set)
        self._sizes: dict[int, int] = {}  # set id -> shingles, as given to add_to_buckets
        self._keys: dict[int, list[int]] = {}  # set id -> its band keys (to leave buckets)
        self._unordered: set[int] = set()  # sets whose members were not added in seq order
        self._clock: int | None = None
        # Oldest first, checked against the record when popped (entries go stale).
        self._doc_times: list[tuple[int, str]] = []
        self._set_times: list[tuple[int, int]] = []

    def get_params(self) -> dict[str, Any] | None:
        return None if self._params is None else dict(self._params)

    def put_params(self, params: Mapping[str, Any]) -> None:
        self._params = dict(params)

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def get_clock(self) -> int | None:
        return self._clock

    def put_clock(self, clock_ms: int) -> None:
        self._clock = clock_ms

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
        self._version_sets.setdefault(doc.doc_id, set()).add(doc.set_id)
        members = self._members[doc.set_id]
        if members and doc.seq < next(reversed(members.values())):
            self._unordered.add(doc.set_id)
        members[doc.doc_id] = doc.seq
        if doc.time is not None:
            heapq.heappush(self._doc_times, (doc.time, doc.doc_id))
            rec = self._sets.get(doc.set_id)
            if rec is not None and (rec.last_time is None or doc.time > rec.last_time):
                self._sets[doc.set_id] = replace(rec, last_time=doc.time)
                heapq.heappush(self._set_times, (doc.time, doc.set_id))

    def delete_doc(self, doc_id: str) -> None:
        old = self._docs.pop(doc_id, None)
        if old is not None:
            self._members[old.set_id].pop(doc_id, None)

    def get_version(self, doc_id: str, set_id: int) -> str | None:
        return self._versions.get((doc_id, set_id))

    def members(self, set_id: int, limit: int, since: int | None = None
                ) -> list[tuple[int, str]]:
        found = self._members.get(set_id)
        if not found:
            return []
        if since is not None:
            docs = self._docs
            live = ((seq, d) for d, seq in found.items()
                    if docs[d].time is None or docs[d].time >= since)  # type: ignore[operator]
            return heapq.nsmallest(limit, live)
        if set_id in self._unordered:
            return heapq.nsmallest(limit, ((seq, doc_id) for doc_id, seq in found.items()))
        # Sequence numbers only grow, so insertion order is arrival order: no sort needed
        # (sorting a hot set's thousands of members per document made this store quadratic).
        return [(seq, doc_id) for doc_id, seq in itertools.islice(found.items(), limit)]

    def get_sets(self, set_ids: Iterable[int]) -> dict[int, SetRecord]:
        return {i: self._sets[i] for i in set_ids if i in self._sets}

    def add_set(self, record: SetRecord, shingles: np.ndarray, text: str | None = None
                ) -> None:
        old = self._sets.get(record.set_id)
        if old is not None and not old.evicted:
            return
        self._sets[record.set_id] = record if old is None else replace(
            old, evicted=False, last_time=record.last_time)
        self._shingles[record.set_id] = shingles.copy()
        if record.last_time is not None:
            heapq.heappush(self._set_times, (record.last_time, record.set_id))

    def _write_parent(self, set_id: int, parent: int) -> None:
        self._sets[set_id] = replace(self._sets[set_id], parent=parent)

    def _add_children(self, set_id: int, delta: int) -> int:
        rec = self._sets.get(set_id)
        if rec is None:
            return 0
        self._sets[set_id] = replace(rec, children=rec.children + delta)
        return rec.children + delta

    def _mark_evicted(self, set_id: int) -> None:
        self._sets[set_id] = replace(self._sets[set_id], evicted=True, last_time=None)

    def _delete_set(self, set_id: int) -> None:
        del self._sets[set_id]

    def _drop_set(self, set_id: int) -> None:
        for doc_id in list(self._members.get(set_id, {})):
            self.forget_doc(doc_id)
        self._members.pop(set_id, None)
        self._unordered.discard(set_id)
        self._shingles.pop(set_id, None)
        for key in self._keys.pop(set_id, ()):
            bucket = self._buckets[key]
            bucket.discard(set_id)
            if not bucket:
                del self._buckets[key]
        self._sizes.pop(set_id, None)
        for other in self._edges.pop(set_id, {}):
            self._edges.get(other, {}).pop(set_id, None)
        if set_id in self._crowded:  # its own edges went when it was crowded, not the
            for edges in self._edges.values():  # others' to it (a scan: crowded sets only)
                edges.pop(set_id, None)
        self._crowded.discard(set_id)

    def forget_doc(self, doc_id: str) -> None:
        self.delete_doc(doc_id)
        for set_id in self._version_sets.pop(doc_id, ()):
            self._versions.pop((doc_id, set_id), None)

    def evict(self, cutoff_ms: int, limit: int) -> Evicted:
        gone = 0
        while self._doc_times and self._doc_times[0][0] < cutoff_ms and gone < limit:
            time, doc_id = heapq.heappop(self._doc_times)
            doc = self._docs.get(doc_id)
            if doc is not None and doc.time == time:
                self.forget_doc(doc_id)
                gone += 1
        sets = 0
        while self._set_times and self._set_times[0][0] < cutoff_ms and sets < limit:
            time, set_id = heapq.heappop(self._set_times)
            rec = self._sets.get(set_id)
            if rec is not None and not rec.evicted and rec.last_time == time:
                self.evict_set(set_id)
                sets += 1
        return Evicted(gone, sets)

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
        self._keys.setdefault(set_id, []).extend(int(k) for k in keys)
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
