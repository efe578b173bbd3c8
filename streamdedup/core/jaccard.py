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
