"""Helpers for tests of exact similarity: small shingle sets and plain-Python Jaccard."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

# Small universes, so that overlaps, exact copies and empty sets all come up often.
SET = st.lists(st.integers(0, 12), max_size=10).map(
    lambda xs: np.unique(np.array(xs, dtype=np.uint64))
)


def py_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    sa, sb = set(a.tolist()), set(b.tolist())
    return len(sa & sb) / len(sa | sb) if sa and sb else 0.0


def u64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.uint64)
