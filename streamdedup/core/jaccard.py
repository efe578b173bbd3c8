"""Exact Jaccard similarity on sorted unique shingle arrays: one pair, one-vs-many, and the
size bound that rules out sets which cannot reach a threshold.

The brute-force all-pairs ground truth lives with the evaluation (``replay/truth.py``): it
needs scipy, which the detector does not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """|a & b| / |a | b| of two sorted unique arrays; two empty sets have similarity 0."""
    if a.size == 0 or b.size == 0:
        return 0.0
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / (a.size + b.size - inter)


def size_bounds(size: int, threshold: float) -> tuple[int, int]:
    """Sizes a set can have and still reach ``threshold`` with a set of ``size``: Jaccard is
    at most the smaller size over the larger. Rounded outwards, so float error never rules
    out a set that could match (verification decides; this only saves reading the rest)."""
    return math.floor(size * threshold), math.ceil(size / threshold)


def jaccard_many(query: np.ndarray, candidates: Sequence[np.ndarray]) -> np.ndarray:
    """Similarity of ``query`` with each candidate, in one vectorized pass over all their
    shingles (``is_in``), summed per candidate with one ``reduceat``. A hot bucket verifies
    up to 2,000 candidates of ~300 shingles per document, 600,000 lookups: 29 -> 13 ms
    against the binary search and cumulative sum this replaced (500 of ~1,000: 25 -> 6)."""
    out = np.zeros(len(candidates), dtype=np.float64)
    if query.size == 0 or not candidates:
        return out
    sizes = np.fromiter((c.size for c in candidates), dtype=np.int64, count=len(candidates))
    nonempty = sizes > 0
    if not nonempty.any():
        return out
    found = is_in(query, np.concatenate(candidates))
    sizes = sizes[nonempty]
    inter = np.add.reduceat(found, np.cumsum(sizes) - sizes, dtype=np.int64)
    out[nonempty] = inter / (query.size + sizes - inter)
    return out


# Bit offsets of the hash windows that may address the table of ``in_table``: the one
# under which the fewest query hashes share a slot is used (the first with none ends the
# search; with ~300 hashes in 2^14 slots, ~5 pairs share one under any window).
_WINDOWS = (0, 21, 42)
# Values per query hash from which ``is_in`` builds its table (measured: up to ~30
# candidate sets of the query's size a binary search is as fast; 2-4x slower from ~60).
_TABLE_FROM = 32


def is_in(query: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values[i] in query`` for a sorted unique uint64 ``query`` and uint64 ``values``,
    exactly. Many values (a hot bucket's thousands of candidates) are compared with the
    query hash in their slot of a direct-address table (``in_table``): one gather instead
    of a binary search each. Few values (most documents: a handful of candidates) are
    searched directly: the table would cost more."""
    if values.size < _TABLE_FROM * query.size or not query.size \
            or query.dtype != np.uint64 or values.dtype != np.uint64:
        return _search(query, values)
    return in_table(query, values)


def in_table(query: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``is_in`` through the direct-address table, whatever the number of values. The table
    has 32-64 slots per query hash (2^10 to 2^20: fewer per hash above 32,768 hashes),
    addressed by bits of the hash; query hashes that share a slot are searched for the
    values in their slots only."""
    bits = min(20, max(10, int(query.size).bit_length() + 5))
    mask = np.int64((1 << bits) - 1)
    signed = query.view(np.int64)
    best: tuple[int, np.ndarray, np.ndarray] | None = None
    for shift in _WINDOWS:
        slots = (signed >> shift) & mask
        # Empty slots hold a value whose own slot is another one, so nothing equals them.
        table = np.full(1 << bits, 1 << shift, dtype=np.int64)
        table[1] = 0
        table[slots] = signed
        lost = query[table[slots] != signed]
        if best is None or lost.size < best[2].size:
            best = (shift, table, lost)
        if not lost.size:
            break
    assert best is not None
    shift, table, lost = best
    where = (values.view(np.int64) >> shift) & mask
    found = table[where] == values.view(np.int64)
    if lost.size:
        shared = np.zeros(1 << bits, dtype=bool)
        shared[(lost.view(np.int64) >> shift) & mask] = True
        pick = np.flatnonzero(shared[where])
        found[pick] |= _search(lost, values[pick])
    return found


def _search(query: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values[i] in query`` by binary search in the sorted ``query``."""
    if not query.size:
        return np.zeros(values.size, dtype=bool)
    at = np.minimum(query.searchsorted(values), query.size - 1)
    return query[at] == values
