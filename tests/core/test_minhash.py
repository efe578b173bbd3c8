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
    OPH_SCHEME,
    PROBE_SALT,
    PROBES,
    MinHasher,
    OnePermutationHasher,
    estimate_jaccard,
    make_hasher,
    splitmix64_stream,
)
from streamdedup.core.shingles import splitmix64
from streamdedup.errors import ConfigError
from streamdedup.settings import Settings

M64 = (1 << 64) - 1
HASHER = MinHasher(256, 7)
GOLDEN_OPH = [1087263488, 125127544, 1574671655, 543573277]


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
    big = docs[3]  # signed chunk by chunk: the minimum over all of them, as in one piece
    assert np.array_equal(h.sign(big), h._hash(big).min(axis=0))
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


# --- one permutation hashing (the default scheme)

def _splitmix64(x: int) -> int:
    x &= M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def _to_bin(x: int, k: int) -> int:
    return ((x >> 32) * k) >> 32


def oph_reference(h: OnePermutationHasher, values: set[int]) -> list[int]:
    """The documented scheme in plain integers: bins, minima, then densification."""
    k, gamma, salt = h.num_perm, 0x9E3779B97F4A7C15, int(h.salt)
    if not values:
        return [0xFFFFFFFF] * k
    bins: list[int | None] = [None] * k
    for x in values:
        y = _splitmix64(x ^ salt)
        b, v = _to_bin(y, k), y & 0xFFFFFFFF
        bins[b] = v if bins[b] is None else min(v, bins[b])  # type: ignore[type-var]

    def probe(i: int, t: int) -> int:
        if t < PROBES:  # element i * PROBES + t of the SplitMix64 stream of seed ^ salt
            n = i * PROBES + t + 1
            return _to_bin(_splitmix64(n * gamma + (h.seed ^ PROBE_SALT)), k)
        return _to_bin(_splitmix64((h.seed ^ PROBE_SALT) + (i << 32) + t), k)

    out = []
    for i in range(k):
        j, t = i, 0
        while bins[j] is None:
            j, t = probe(i, t), t + 1
        out.append(bins[j])
    return out  # type: ignore[return-value]


OPH = OnePermutationHasher(128, 7)


def test_oph_scheme_name_and_golden_signature() -> None:
    assert OPH_SCHEME == "oph-splitmix64-top-bins-low32+optimal-densification/v1"
    sig = OnePermutationHasher(128, 1).sign(shingle_like(range(500)))
    assert sig.dtype == np.uint32 and sig.shape == (128,)
    assert sig[:4].tolist() == GOLDEN_OPH


@settings(max_examples=150, deadline=None)
@given(st.sets(st.integers(0, M64), max_size=200), st.sampled_from([4, 16, 128, 100]))
def test_oph_sign_equals_the_documented_scheme(values: set[int], k: int) -> None:
    # Sets of 0-200 hashes in 4-128 bins: full signatures, a few empty bins, and sets so
    # small that probes run past the table (a 1-element set in 128 bins).
    h = OnePermutationHasher(k, 3)
    assert h.sign(as_set(values)).tolist() == oph_reference(h, values)


@pytest.mark.parametrize("seed", [3, -5, 2**64 + 9])
def test_oph_probes_past_the_table_for_a_tiny_set(seed: int) -> None:
    h = OnePermutationHasher(128, seed)
    one = {12345}
    sig = h.sign(as_set(one))
    assert len(set(sig.tolist())) == 1 and sig.tolist() == oph_reference(h, one)
    two = {1, 2}
    assert h.sign(as_set(two)).tolist() == oph_reference(h, two)


@pytest.mark.parametrize("hasher", [OPH, OnePermutationHasher(100, 2)])
def test_oph_sign_many_equals_sign_one_by_one(hasher: OnePermutationHasher) -> None:
    rng = np.random.default_rng(5)
    sizes = [0, 1, 5, 3000, 3, 0, 700, 2, 128, 1]
    docs = [np.unique(rng.integers(0, M64, n, dtype=np.uint64, endpoint=True)) for n in sizes]
    many = hasher.sign_many(docs)
    assert many.shape == (len(docs), hasher.num_perm) and many.dtype == np.uint32
    for i, doc in enumerate(docs):
        assert np.array_equal(many[i], hasher.sign(doc)), i
    assert many[0].tolist() == [int(EMPTY_VALUE)] * hasher.num_perm
    assert hasher.sign_many([]).shape == (0, hasher.num_perm)


def test_oph_estimate_is_unbiased_for_small_and_large_sets() -> None:
    # Mean error over many pairs, by set size: densification done wrong (a borrowed value
    # that two sets do not share) shows as a bias of several hundredths on small sets.
    rng = np.random.default_rng(3)
    for low, high in ((1, 20), (20, 128), (300, 1500)):
        errors = []
        for seed in range(300):
            h = OnePermutationHasher(128, seed)
            n_a, n_b = (int(x) for x in rng.integers(low, high, 2))
            shared = int(rng.integers(0, min(n_a, n_b) + 1))
            pool = splitmix64(rng.integers(0, 2**63, n_a + n_b, dtype=np.uint64))
            a, b = np.unique(pool[:n_a]), np.unique(pool[n_a - shared: n_a - shared + n_b])
            errors.append(estimate_jaccard(h.sign(a), h.sign(b)) - jaccard(a, b))
        assert abs(float(np.mean(errors))) < 0.012, (low, high, np.mean(errors))
        assert float(np.std(errors)) <= 1 / (2 * np.sqrt(128)) + 0.01


def test_unknown_scheme_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown minhash scheme"):
        make_hasher("rotation", 128, 1)
    assert isinstance(make_hasher("multiply-shift", 16, 1), MinHasher)
    with pytest.raises(ConfigError, match="minhash must be"):
        Settings(minhash="rotation")


@pytest.mark.parametrize("scheme", ["oph", "multiply-shift"])
def test_band_collisions_follow_the_s_curve(scheme: str) -> None:
    # 1,500 independent pairs of 600-shingle sets at J = 0.55 and 0.65 (25 bands x 5 rows):
    # the share that share a band is within 3 binomial sigma (~0.035) of 1 - (1 - J^5)^25.
    # One permutation hashing's bins are not independent rows; this is where it would show.
    from streamdedup.core import lsh
    from streamdedup.core.sketch import Sketcher

    sk = Sketcher(Settings(minhash=scheme))
    rng = np.random.default_rng(7)
    for inter in (426, 473):  # J = 426 / 774 = 0.550, 473 / 727 = 0.651
        a, b = [], []
        for _ in range(1500):
            pool = splitmix64(rng.integers(0, 2**63, 1200 - inter, dtype=np.uint64))
            a.append(np.unique(pool[:600]))
            b.append(np.unique(pool[600 - inter:]))
        ka, kb = sk.band_keys_many(a), sk.band_keys_many(b)
        rate = float(np.mean((ka == kb).any(axis=1)))
        expect = float(lsh.p_candidate(inter / (1200 - inter), sk.bands, sk.rows))
        assert abs(rate - expect) < 0.035, (inter, rate, expect)
