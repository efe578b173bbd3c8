"""The backfill's pair plan: every new set's candidates and verified earlier neighbours, for
a whole dump at once, so that the detector in the driver neither probes nor verifies.

The plan reproduces what the stream does one document at a time, into an empty store:

1. distinct sets, each at its first position (exact copies collapse: a Kijiji set has ~6
   documents on average);
2. per band key, the sets holding it; within a bucket, (later, earlier) pairs whose sizes
   pass the later set's bound (``size_bounds``, the probe's own filter), so the candidates of
   a set are exactly the ones its probe would have returned, and a hot bucket of many sizes is
   not squared;
3. exact Jaccard per pair, the detector's function; pairs below the threshold dropped.

A set with more than ``max_candidates`` candidates is left to the detector (``None`` in the
plan): the stream verifies only the ones with most shared bands, and the driver does exactly
that for it, so the verdict stays the stream's. The same functions run here in-process
(``--engine local``) and in Spark executors (``replay/spark.py``).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from streamdedup.core.jaccard import jaccard_many, size_bounds
from streamdedup.core.sketch import Sketcher
from streamdedup.detection.detector import Planned
from streamdedup.settings import Settings
from streamdedup.store.payload import decode_shingles, encode_shingles

# One document's sketch as it travels from an executor: position, set id, shingles as
# the stores' bytes (``encode_shingles``), band keys as int64 bytes (no pickle of numpy objects).
Row = tuple[int, int, bytes, bytes]
# A bucket member: (first position, set id, size).
Member = tuple[int, int, int]


@dataclass
class Plan:
    """The verified neighbours of every new set of a dump, and what it took to find them."""

    sets: dict[int, Planned] = field(default_factory=dict)  # only sets with candidates
    distinct_sets: int = 0
    candidate_pairs: int = 0  # a set over the cap counts as cap + 1 (its pairs are not listed)
    verified_pairs: int = 0
    over_cap: int = 0  # sets left to the detector (more than max_candidates candidates)
    pairs: list[tuple[int, int]] | None = None  # (later, earlier) set ids, when asked for;
    # without the pairs of sets over the cap

    def counts(self) -> dict[str, int]:
        return {"distinct_sets": self.distinct_sets, "candidate_pairs": self.candidate_pairs,
                "verified_pairs": self.verified_pairs, "over_cap": self.over_cap}


def sketch_rows(settings: Settings, items: Iterator[tuple[int, Mapping[str, str]]]
                ) -> Iterator[Row]:
    """What an executor computes for its partition (also the local engine's loop)."""
    sketcher = Sketcher(settings)
    for position, fields in items:
        sh = sketcher.shingle_fields(fields)
        keys = sketcher.band_keys(sh.shingles) if sh.shingles.size else np.zeros(0, np.int64)
        yield (position, sh.set_id, encode_shingles(sh.shingles),
               np.asarray(keys, dtype=np.int64).tobytes())


def bucket_entries(set_id: int, position: int, size: int, keys: bytes
                   ) -> list[tuple[int, Member]]:
    """A distinct set's (band key, member) entries, one per distinct key."""
    return [(key, (position, set_id, size))
            for key in set(np.frombuffer(keys, dtype=np.int64).tolist())]


def bucket_pairs(members: Iterable[Member], threshold: float, cap: int
                 ) -> Iterator[tuple[int, int | None]]:
    """(later set, earlier set) of one bucket, where the earlier set's size is one the later
    set's probe accepts; (later set, None) when this bucket alone gives it more than ``cap``
    (max_candidates) earlier candidates: the detector verifies that set itself, so its pairs
    are not listed. Members sorted by size, each looks only at the sizes its bound allows:
    a hot bucket yields at most ``cap`` pairs per member, not the square of its size (it is
    still scanned in time quadratic in its same-size members, without holding the pairs)."""
    ranked = sorted(members, key=lambda m: m[2])
    sizes = [m[2] for m in ranked]
    for pos, set_id, size in ranked:
        lo, hi = size_bounds(size, threshold)
        earlier = [set2 for pos2, set2, _ in ranked[bisect_left(sizes, lo):bisect_right(sizes, hi)]
                   if pos2 < pos]
        if len(earlier) > cap:
            yield set_id, None
        else:
            for set2 in earlier:
                yield set_id, set2


def verify_pair(threshold: float, later: bytes, earlier: bytes) -> float | None:
    """Exact Jaccard of two sets' shingle bytes if it reaches the threshold: the detector's
    function and comparison."""
    sim = float(jaccard_many(decode_shingles(later), [decode_shingles(earlier)])[0])
    return sim if sim >= threshold else None


def assemble(found: Iterable[tuple[int, int, float]], candidates: Mapping[int, int],
             max_candidates: int, distinct_sets: int) -> Plan:
    """The plan from verified (later, earlier, Jaccard) triples and candidates per set."""
    plan = Plan(distinct_sets=distinct_sets, candidate_pairs=sum(candidates.values()))
    near: dict[int, list[tuple[int, float]]] = {}
    for later, earlier, sim in found:
        near.setdefault(later, []).append((earlier, sim))
    for later, count in candidates.items():
        if count > max_candidates:
            plan.sets[later] = None
            plan.over_cap += 1
        else:
            plan.sets[later] = (count, sorted(near.get(later, [])))
            plan.verified_pairs += len(near.get(later, []))
    return plan


def local_plan(rows: Sequence[Row], threshold: float, max_candidates: int,
               keep_pairs: bool = False) -> Plan:
    """The plan in this process: the same steps as the Spark job, on dicts."""
    firsts: dict[int, Row] = {}
    for row in rows:
        if row[2] and row[1] not in firsts:
            firsts[row[1]] = row
    buckets: dict[int, list[Member]] = {}
    for pos, set_id, shingles, keys in firsts.values():
        for key, member in bucket_entries(set_id, pos, len(shingles) // 8, keys):
            buckets.setdefault(key, []).append(member)
    pairs = {p for members in buckets.values() if len(members) > 1
             for p in bucket_pairs(members, threshold, max_candidates)}
    candidates: dict[int, int] = {}
    for later, earlier in pairs:
        candidates[later] = candidates.get(later, 0) + (1 if earlier is not None
                                                        else max_candidates + 1)
    found: list[tuple[int, int, float]] = []
    for later, earlier in pairs:
        if earlier is not None and candidates[later] <= max_candidates:
            sim = verify_pair(threshold, firsts[later][2], firsts[earlier][2])
            if sim is not None:
                found.append((later, earlier, sim))
    plan = assemble(found, candidates, max_candidates, len(firsts))
    if keep_pairs:
        plan.pairs = sorted((a, b) for a, b in pairs
                            if b is not None and candidates[a] <= max_candidates)
    return plan
