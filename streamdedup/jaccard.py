"""Exact Jaccard similarity on sorted unique shingle arrays: one pair, one-vs-many, all pairs.

``all_pairs`` is the brute-force ground truth: it collapses identical sets first (real scrapes
are mostly exact copies), then counts intersections of the distinct sets with one sparse
matrix product, so it is exact and still fast on dumps of tens of thousands of ads.
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
    """Similarity of ``query`` with each candidate, in one vectorized pass: every candidate
    shingle is looked up in the sorted query by binary search (no sort of the whole lot,
    which ``np.isin`` does: twice as slow at a dozen candidates of ~1,000 shingles)."""
    out = np.zeros(len(candidates), dtype=np.float64)
    if query.size == 0 or not candidates:
        return out
    sizes = np.fromiter((c.size for c in candidates), dtype=np.int64, count=len(candidates))
    flat = np.concatenate(candidates)
    if not flat.size:
        return out
    at = np.minimum(np.searchsorted(query, flat), query.size - 1)
    found = np.concatenate(([0], np.cumsum(query[at] == flat)))
    ends = np.cumsum(sizes)
    inter = found[ends] - found[ends - sizes]
    nonempty = sizes > 0
    out[nonempty] = inter[nonempty] / (query.size + sizes[nonempty] - inter[nonempty])
    return out


def all_pairs(sets: Sequence[np.ndarray], threshold: float) -> list[tuple[int, int, float]]:
    """Every pair (i, j, similarity) with i < j and similarity >= threshold, exactly."""
    from scipy import sparse

    # Collapse identical sets: exact copies pair with each other at similarity 1.0.
    index: dict[bytes, int] = {}
    groups: list[list[int]] = []
    reps: list[np.ndarray] = []
    for i, s in enumerate(sets):
        if s.size == 0:
            continue
        key = s.tobytes()
        g = index.get(key)
        if g is None:
            index[key] = g = len(groups)
            groups.append([])
            reps.append(s)
        groups[g].append(i)

    pairs: list[tuple[int, int, float]] = []
    for members in groups:
        pairs.extend((a, b, 1.0) for k, a in enumerate(members) for b in members[k + 1 :])
    if len(reps) < 2:
        return sorted(pairs)

    sizes = np.array([r.size for r in reps], dtype=np.int64)
    vocab, cols = np.unique(np.concatenate(reps), return_inverse=True)
    rows = np.repeat(np.arange(len(reps)), sizes)
    x = sparse.csr_matrix(
        (np.ones(cols.size, dtype=np.int32), (rows, cols)), shape=(len(reps), vocab.size)
    )
    inter = sparse.triu(x @ x.T, k=1).tocoo()
    sim = inter.data / (sizes[inter.row] + sizes[inter.col] - inter.data)
    keep = sim >= threshold
    for gi, gj, s in zip(inter.row[keep], inter.col[keep], sim[keep], strict=True):
        s = float(s)
        for a in groups[gi]:
            for b in groups[gj]:
                pairs.append((min(a, b), max(a, b), s))
    return sorted(pairs)
