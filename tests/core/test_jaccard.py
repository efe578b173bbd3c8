"""Exact Jaccard: one pair and one-vs-many against plain Python sets; the size bound."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from shingle_sets import SET, py_jaccard, u64

from streamdedup.core.jaccard import in_table, is_in, jaccard, jaccard_many, size_bounds

BIG_VALUES = st.lists(st.integers(2**63 - 3, 2**63 + 3), max_size=6).map(
    lambda xs: np.unique(np.array(xs, dtype=np.uint64))
)


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


# Hashes that share their slot under every window of ``is_in`` (bits 0-20, 21-41 and 42-61
# are all zero, or equal, for many of them), so its binary-search fallback is exercised too.
CLASHING = st.lists(
    st.sampled_from([0, 1, 2, 1 << 21, 1 << 42, (1 << 21) | (1 << 42), 1 << 62, 1 << 63,
                     (1 << 63) | 1, (1 << 62) | (1 << 21), 2**64 - 1, 2**64 - 2]),
    max_size=12,
).map(lambda xs: np.unique(np.array(xs, dtype=np.uint64)))


@settings(max_examples=300, deadline=None)
@given(CLASHING | SET | BIG_VALUES, st.lists(CLASHING | SET | BIG_VALUES, max_size=6))
def test_is_in_and_jaccard_many_are_exact_when_hashes_share_slots(
        query: np.ndarray, cands: list[np.ndarray]) -> None:
    values = np.concatenate([u64(), *cands])
    assert is_in(query, values).tolist() == np.isin(values, query).tolist()
    assert in_table(query, values).tolist() == np.isin(values, query).tolist()
    assert jaccard_many(query, cands).tolist() == [py_jaccard(query, c) for c in cands]


def test_is_in_on_random_hashes_of_a_big_query() -> None:
    """Thousands of uniform hashes: some share a slot under the first window, and whatever
    the window chosen, every value is found exactly."""
    rng = np.random.default_rng(7)
    for size in (1, 300, 5000, 40000):
        query = np.unique(rng.integers(0, 2**64 - 1, size, dtype=np.uint64))
        values = np.concatenate([query[::3], rng.integers(0, 2**64 - 1, 2 * size,
                                                          dtype=np.uint64)])
        assert is_in(query, values).tolist() == np.isin(values, query).tolist()
        assert in_table(query, values).tolist() == np.isin(values, query).tolist()


def test_jaccard_many_through_the_table_with_empty_candidates_among_them() -> None:
    """Enough candidates for ``is_in`` to build its table, empty ones mixed in, and query
    hashes at the extremes and sharing low bits."""
    rng = np.random.default_rng(3)
    query = np.unique(np.concatenate([
        u64(0, 1, 2**64 - 1, 1 << 21, 1 << 42, (1 << 63) | 1),
        rng.integers(0, 2**64 - 1, 40, dtype=np.uint64)]))
    cands = []
    for i in range(300):
        if i % 7 == 0:
            cands.append(u64())
            continue
        mine = query[rng.random(query.size) < 0.8]
        other = rng.integers(0, 2**64 - 1, 5, dtype=np.uint64)
        cands.append(np.unique(np.concatenate([mine, other, u64(2, 1 << 20)[: i % 3]])))
    assert sum(c.size for c in cands) >= 32 * query.size  # the table is used
    assert jaccard_many(query, cands).tolist() == [py_jaccard(query, c) for c in cands]


def test_jaccard_many_edge_cases() -> None:
    assert jaccard_many(u64(1), []).shape == (0,)
    assert jaccard_many(u64(), [u64(1), u64()]).tolist() == [0.0, 0.0]
    assert jaccard_many(u64(1), [u64(), u64()]).tolist() == [0.0, 0.0]
    assert jaccard_many(u64(1, 2), [u64(), u64(2), u64(), u64(1, 2)]).tolist() == [
        0.0, 0.5, 0.0, 1.0,
    ]


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
