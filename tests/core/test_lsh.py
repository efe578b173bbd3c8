"""LSH: the S-curve, the choice of (bands, rows), and band keys stable across processes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamdedup.core.lsh import (
    BAND_SCHEME,
    DEFAULT_MIN_RECALL,
    band_keys,
    band_keys_many,
    choose_bands,
    p_candidate,
)
from streamdedup.core.minhash import MinHasher
from streamdedup.core.shingles import char_shingles

# --- the S-curve


def test_p_candidate_known_values() -> None:
    assert p_candidate(0.0, 20, 5) == 0.0
    assert p_candidate(1.0, 20, 5) == 1.0
    assert p_candidate(0.5, 1, 1) == 0.5
    assert p_candidate(0.8, 20, 5) == pytest.approx(1 - (1 - 0.8**5) ** 20)
    assert p_candidate(0.8, 20, 5) == pytest.approx(0.99964, abs=1e-5)


def test_p_candidate_accepts_arrays() -> None:
    s = np.array([0.0, 0.5, 1.0])
    out = p_candidate(s, 4, 2)
    assert isinstance(out, np.ndarray)
    assert out.tolist() == pytest.approx([0.0, 1 - 0.75**4, 1.0])


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0, 1), st.floats(0, 1), st.integers(1, 64), st.integers(1, 16)
)
def test_s_curve_is_monotone_in_similarity_and_bounded(
    s1: float, s2: float, bands: int, rows: int
) -> None:
    lo, hi = sorted((s1, s2))
    p_lo, p_hi = p_candidate(lo, bands, rows), p_candidate(hi, bands, rows)
    assert 0.0 <= p_lo <= p_hi <= 1.0


@settings(max_examples=100, deadline=None)
@given(st.floats(0.01, 0.99), st.integers(1, 40), st.integers(1, 10))
def test_more_bands_raise_and_more_rows_lower_the_curve(s: float, bands: int, rows: int) -> None:
    assert p_candidate(s, bands + 1, rows) >= p_candidate(s, bands, rows)
    assert p_candidate(s, bands, rows + 1) <= p_candidate(s, bands, rows)


@pytest.mark.parametrize(
    ("s", "bands", "rows", "words"),
    [
        (0.5, 0, 5, "bands and rows"),
        (0.5, 5, 0, "bands and rows"),
        (-0.01, 5, 5, r"\[0, 1\]"),
        (1.01, 5, 5, r"\[0, 1\]"),
        (np.array([0.2, 1.5]), 5, 5, r"\[0, 1\]"),
        (float("nan"), 5, 5, r"\[0, 1\]"),
    ],
)
def test_p_candidate_refuses_bad_input(s, bands: int, rows: int, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        p_candidate(s, bands, rows)


# --- choosing bands and rows


@settings(max_examples=200, deadline=None)
@given(st.floats(0.3, 1.0), st.integers(1, 256), st.sampled_from([0.9, 0.99, 0.999]))
def test_choose_bands_meets_recall_and_is_maximal_in_rows(
    threshold: float, num_perm: int, min_recall: float
) -> None:
    bands, rows = choose_bands(threshold, num_perm, min_recall)
    assert bands == num_perm // rows and bands * rows <= num_perm
    feasible = [
        r for r in range(1, num_perm + 1)
        if p_candidate(threshold, num_perm // r, r) >= min_recall
    ]
    if feasible:
        assert p_candidate(threshold, bands, rows) >= min_recall
        assert rows == max(feasible)
    else:
        assert (bands, rows) == (num_perm, 1)  # nothing reaches: the most permissive


def test_choose_bands_known_choices() -> None:
    assert DEFAULT_MIN_RECALL == 0.999
    assert choose_bands(0.8, 128) == (25, 5)
    assert choose_bands(0.8, 100) == (20, 5)  # the study's 20 x 5
    assert choose_bands(0.5, 128) == (64, 2)
    assert choose_bands(1.0, 16) == (1, 16)
    assert choose_bands(0.01, 4) == (4, 1)  # unreachable recall: most permissive
    # Recall exactly at the bar is enough: 1 - (1 - 0.5**2)**2 = 0.4375, exact in binary.
    assert choose_bands(0.5, 4, 0.4375) == (2, 2)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((0.0, 128), "threshold"),
        ((1.5, 128), "threshold"),
        ((float("nan"), 128), "threshold"),
        ((0.8, 0), "num_perm"),
        ((0.8, 128, 1.0), "min_recall"),
        ((0.8, 128, 0.0), "min_recall"),
    ],
)
def test_choose_bands_refuses_bad_input(args: tuple, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        choose_bands(*args)


# --- band keys

SIGNER = MinHasher(128, 1)
SAMPLE = "offerta di lavoro"


def sample_keys() -> list[int]:
    return band_keys(SIGNER.sign(char_shingles(SAMPLE, 10)), 32, 4).tolist()


def test_band_scheme_name_and_golden_keys() -> None:
    assert BAND_SCHEME == "fnv1a64-rows+band+splitmix64/v1"
    keys = sample_keys()
    assert keys[:3] == [-5922556335708163984, 6595102829678610315, 8706586261558680394]


def test_band_keys_are_equal_in_a_fresh_interpreter_with_another_hash_seed() -> None:
    code = (
        "import json; from streamdedup.core.lsh import band_keys;"
        "from streamdedup.core.minhash import MinHasher;"
        "from streamdedup.core.shingles import char_shingles;"
        f"sh = char_shingles({SAMPLE!r}, 10);"
        "print(json.dumps([sh.tolist(), band_keys(MinHasher(128, 1).sign(sh), 32, 4).tolist()]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
        timeout=60,
    )
    shingles, keys = json.loads(out.stdout)
    assert shingles == char_shingles(SAMPLE, 10).tolist()
    assert keys == sample_keys()


def test_band_keys_shape_dtype_and_only_first_bands_x_rows_used() -> None:
    sig = SIGNER.sign(char_shingles(SAMPLE, 10))
    keys = band_keys(sig, 25, 5)
    assert keys.shape == (25,) and keys.dtype == np.int64
    tail_changed = sig.copy()
    tail_changed[125:] += 1
    assert np.array_equal(band_keys(tail_changed, 25, 5), keys)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 19), st.integers(0, 4))
def test_changing_one_row_changes_only_its_band(band: int, row: int) -> None:
    sig = SIGNER.sign(char_shingles(SAMPLE, 10))
    keys = band_keys(sig, 20, 5)
    changed = sig.copy()
    changed[band * 5 + row] ^= np.uint32(1)
    new = band_keys(changed, 20, 5)
    differs = np.flatnonzero(new != keys).tolist()
    assert differs == [band]


def test_equal_band_content_in_different_bands_gives_different_keys() -> None:
    sig = np.full(100, 7, dtype=np.uint32)
    keys = band_keys(sig, 20, 5)
    assert len(set(keys.tolist())) == 20


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**32 - 1), min_size=24, max_size=24), max_size=6))
def test_band_keys_many_equals_band_keys_row_by_row(rows: list[list[int]]) -> None:
    sigs = np.array(rows, dtype=np.uint32).reshape(len(rows), 24)
    many = band_keys_many(sigs, 6, 4)
    assert many.shape == (len(rows), 6)
    for i in range(len(rows)):
        assert np.array_equal(many[i], band_keys(sigs[i], 6, 4))


def test_candidate_rate_follows_the_s_curve() -> None:
    # Pairs of sets with exact Jaccard 0.6: the share sharing a band matches p_candidate.
    bands, rows = 8, 4
    hasher = MinHasher(bands * rows, 3)
    rng = np.random.default_rng(2)
    hits, trials = 0, 600
    for _ in range(trials):
        pool = np.unique(rng.integers(0, 2**64, 200, dtype=np.uint64))[:160]
        a, b = pool[:130], pool[30:160]  # |a & b| = 100, |a | b| = 160 ... J = 0.625
        ka = band_keys(hasher.sign(np.sort(a)), bands, rows)
        kb = band_keys(hasher.sign(np.sort(b)), bands, rows)
        hits += bool(np.intersect1d(ka, kb).size)
    p = p_candidate(100 / 160, bands, rows)
    sd = math.sqrt(p * (1 - p) / trials)
    assert abs(hits / trials - p) < 5 * sd
