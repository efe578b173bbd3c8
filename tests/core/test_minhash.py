"""MinHash: determinism, the documented permutation scheme, batching, and estimation error.

Error bound used below: with P permutations the estimate is a mean of P Bernoulli(J) rows, so
Hoeffding gives P(|est - J| >= e) <= 2 exp(-2 P e^2). For P = 256 and e = 0.15 that is 2e-5
per pair (the standard deviation is at most 1/(2 sqrt(256)) = 0.031, so 0.15 is ~4.8 sigma).
The hypothesis run is derandomized, so the examples (and this test's outcome) are fixed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamdedup.core.jaccard import jaccard
from streamdedup.core.minhash import (
    EMPTY_VALUE,
    MINHASH_SCHEME,
    MinHasher,
    estimate_jaccard,
    splitmix64_stream,
)
from streamdedup.core.shingles import splitmix64

M64 = (1 << 64) - 1
HASHER = MinHasher(256, 7)


def as_set(values) -> np.ndarray:
    return np.unique(np.asarray(list(values), dtype=np.uint64))


def shingle_like(values) -> np.ndarray:
    """Small ints spread like real shingle hashes (which are splitmix64 outputs)."""
    return np.unique(splitmix64(np.asarray(list(values), dtype=np.uint64)))


def test_scheme_name_is_pinned() -> None:
    assert MINHASH_SCHEME == "multiply-shift-u64-top32+splitmix64-perms/v2"


def test_permutations_come_from_the_published_splitmix64_stream() -> None:
    # SplitMix64 seeded with 0: the reference implementation's first three outputs.
    assert splitmix64_stream(0, 3).tolist() == [
        0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F,
    ]
    h = MinHasher(4, 0)
    stream = splitmix64_stream(0, 8)
    assert h.a.tolist() == [int(v) | 1 for v in stream[0::2]]
    assert h.b.tolist() == stream[1::2].tolist()


def test_same_seed_same_permutations_other_seed_other_ones() -> None:
    a, b, c = MinHasher(64, 1), MinHasher(64, 1), MinHasher(64, 2)
    assert np.array_equal(a.a, b.a) and np.array_equal(a.b, b.b)
    assert not np.array_equal(a.a, c.a)
    assert (a.a & np.uint64(1)).all()  # multipliers are odd


def test_golden_signature() -> None:
    sig = MinHasher(128, 1).sign(shingle_like(range(5)))
    assert sig.dtype == np.uint32 and sig.shape == (128,)
    assert sig[:4].tolist() == [158144997, 36747138, 288612296, 833340182]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, M64), min_size=1, max_size=30))
def test_sign_equals_the_documented_formula(values: list[int]) -> None:
    h = MinHasher(8, 3)
    sig = h.sign(as_set(values))
    a, b = [int(v) for v in h.a], [int(v) for v in h.b]
    expect = [min(((a[i] * x + b[i]) & M64) >> 32 for x in set(values)) for i in range(8)]
    assert sig.tolist() == expect


def test_empty_set_signs_as_all_max() -> None:
    sig = HASHER.sign(np.zeros(0, dtype=np.uint64))
    assert sig.tolist() == [int(EMPTY_VALUE)] * 256


def test_num_perm_must_be_positive() -> None:
    with pytest.raises(ValueError, match="num_perm"):
        MinHasher(0, 1)


@pytest.mark.parametrize("num_perm", [1024, 256, 100])
def test_sign_many_equals_sign_one_by_one_across_chunk_boundaries(num_perm: int) -> None:
    rng = np.random.default_rng(5)
    rows_per_chunk = (1 << 21) // num_perm  # MinHasher's chunk, in shingles
    sizes = [0, 1, 5, rows_per_chunk + 3, 3, 0, rows_per_chunk - 1, 2, rows_per_chunk // 2, 1]
    docs = [np.unique(rng.integers(0, M64, n, dtype=np.uint64, endpoint=True)) for n in sizes]
    h = MinHasher(num_perm, 11)
    many = h.sign_many(docs)
    assert many.shape == (len(docs), num_perm) and many.dtype == np.uint32
    for i, doc in enumerate(docs):
        assert np.array_equal(many[i], h.sign(doc)), i
    assert h.sign_many([]).shape == (0, num_perm)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 1000), max_size=40), max_size=8))
def test_sign_many_equals_sign_for_any_batch(docs: list[list[int]]) -> None:
    sets = [shingle_like(d) for d in docs]
    many = HASHER.sign_many(sets)
    for i, s in enumerate(sets):
        assert np.array_equal(many[i], HASHER.sign(s))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, M64), max_size=30), st.lists(st.integers(0, M64), max_size=30))
def test_signature_of_a_union_is_the_rowwise_minimum(a: list[int], b: list[int]) -> None:
    sa, sb, su = as_set(a), as_set(b), as_set(a + b)
    assert np.array_equal(HASHER.sign(su), np.minimum(HASHER.sign(sa), HASHER.sign(sb)))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, M64), min_size=1, max_size=30))
def test_identical_sets_have_identical_signatures_and_estimate_one(values: list[int]) -> None:
    s1, s2 = as_set(values), as_set(list(reversed(values)))
    assert np.array_equal(HASHER.sign(s1), MinHasher(256, 7).sign(s2))
    assert estimate_jaccard(HASHER.sign(s1), HASHER.sign(s2)) == 1.0


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.integers(1, 120),
    st.lists(st.integers(0, 150), min_size=1, max_size=80),
    st.lists(st.integers(0, 150), min_size=1, max_size=80),
)
def test_estimate_is_within_015_of_exact_jaccard(shift: int, a: list[int], b: list[int]) -> None:
    sa, sb = shingle_like(a), shingle_like(x + shift // 3 for x in b)
    est = estimate_jaccard(HASHER.sign(sa), HASHER.sign(sb))
    assert abs(est - jaccard(sa, sb)) <= 0.15


def test_estimate_has_no_visible_bias_over_many_pairs() -> None:
    # Mean error over 2,000 pairs: any bias of the hash family above 0.01 would show.
    rng = np.random.default_rng(1)
    errors = []
    for _ in range(2000):
        u = int(rng.integers(5, 200))
        a = shingle_like(rng.integers(0, u, int(rng.integers(1, 60))))
        b = shingle_like(rng.integers(0, u, int(rng.integers(1, 60))))
        errors.append(estimate_jaccard(HASHER.sign(a), HASHER.sign(b)) - jaccard(a, b))
    assert abs(float(np.mean(errors))) < 0.01
    assert float(np.std(errors)) <= 1 / (2 * 16) + 0.005  # <= the Bernoulli bound


def test_estimate_refuses_signatures_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        estimate_jaccard(np.zeros(4, np.uint32), np.zeros(5, np.uint32))
