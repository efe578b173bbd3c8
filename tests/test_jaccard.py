"""Exact Jaccard: one pair, one-vs-many, and all pairs, against plain Python sets."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamdedup.jaccard import all_pairs, jaccard, jaccard_many, size_bounds

# Small universes, so that overlaps, exact copies and empty sets all come up often.
SET = st.lists(st.integers(0, 12), max_size=10).map(
    lambda xs: np.unique(np.array(xs, dtype=np.uint64))
)
BIG_VALUES = st.lists(st.integers(2**63 - 3, 2**63 + 3), max_size=6).map(
    lambda xs: np.unique(np.array(xs, dtype=np.uint64))
)


def py_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    sa, sb = set(a.tolist()), set(b.tolist())
    return len(sa & sb) / len(sa | sb) if sa and sb else 0.0


def u64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


def test_known_values() -> None:
    assert jaccard(u64(1, 2, 3), u64(1, 2, 3)) == 1.0
    assert jaccard(u64(1, 2), u64(3, 4)) == 0.0
    assert jaccard(u64(1, 2, 3), u64(2, 3, 4, 5)) == 2 / 5
    assert jaccard(u64(), u64()) == 0.0
    assert jaccard(u64(), u64(1)) == 0.0


@settings(max_examples=200, deadline=None)
@given(SET | BIG_VALUES, SET | BIG_VALUES)
def test_jaccard_equals_python_sets_and_is_symmetric(a: np.ndarray, b: np.ndarray) -> None:
    assert jaccard(a, b) == py_jaccard(a, b)
    assert jaccard(a, b) == jaccard(b, a)


@settings(max_examples=200, deadline=None)
@given(SET, st.lists(SET, max_size=8))
def test_jaccard_many_equals_jaccard_pairwise(query: np.ndarray, cands: list[np.ndarray]) -> None:
    out = jaccard_many(query, cands)
    assert out.dtype == np.float64 and out.shape == (len(cands),)
    assert out.tolist() == [jaccard(query, c) for c in cands]


def test_jaccard_many_edge_cases() -> None:
    assert jaccard_many(u64(1), []).shape == (0,)
    assert jaccard_many(u64(), [u64(1), u64()]).tolist() == [0.0, 0.0]
    assert jaccard_many(u64(1), [u64(), u64()]).tolist() == [0.0, 0.0]
    assert jaccard_many(u64(1, 2), [u64(), u64(2), u64(), u64(1, 2)]).tolist() == [
        0.0, 0.5, 0.0, 1.0,
    ]


def naive_all_pairs(sets: list[np.ndarray], threshold: float) -> list[tuple[int, int, float]]:
    out = []
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            s = py_jaccard(sets[i], sets[j])
            if sets[i].size and sets[j].size and s >= threshold:
                out.append((i, j, s))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(SET, max_size=12), st.sampled_from([0.01, 0.25, 0.5, 2 / 3, 0.8, 1.0]))
def test_all_pairs_equals_the_naive_loop(sets: list[np.ndarray], threshold: float) -> None:
    assert all_pairs(sets, threshold) == naive_all_pairs(sets, threshold)


def test_all_pairs_with_exact_copies_and_empties() -> None:
    a, b = u64(1, 2, 3, 4, 5), u64(1, 2, 3, 4)
    sets = [a, u64(), a.copy(), b, u64(), a.copy(), u64(9)]
    assert all_pairs(sets, 0.8) == [
        (0, 2, 1.0), (0, 3, 0.8), (0, 5, 1.0), (2, 3, 0.8), (2, 5, 1.0), (3, 5, 0.8),
    ]
    assert all_pairs([], 0.5) == [] and all_pairs([a], 0.5) == []


def test_size_bounds_keep_every_size_that_can_reach_the_threshold() -> None:
    """A set of m shingles reaches similarity m/n with a set of n >= m when it is a subset
    of it (the best case); the bounds keep every m that can, and are loose by at most one."""
    for t in (0.05, 1 / 3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.99, 1.0):
        for n in range(1, 400):
            lo, hi = size_bounds(n, t)

            def reaches(m: int, n: int = n, t: float = t) -> bool:
                small, big = min(m, n), max(m, n)
                return jaccard(np.arange(small, dtype=np.uint64),
                               np.arange(big, dtype=np.uint64)) >= t

            assert not reaches(lo - 1) or lo - 1 < 1, (t, n, lo)
            assert not reaches(hi + 1), (t, n, hi)
            assert reaches(lo) or reaches(lo + 1), (t, n, lo)
            assert reaches(hi) or reaches(hi - 1), (t, n, hi)
            assert reaches(n)
