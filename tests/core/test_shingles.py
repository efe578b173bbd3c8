"""Shingles: stable 64-bit hashes of character k-shingles and word n-grams.

The vectorized hashing is checked against a plain-Python reference of the documented scheme
(FNV-1a over code points / word xxh3 hashes, then the splitmix64 finalizer), and a few golden
values are pinned: stored indexes depend on them, so a change must bump ``HASH_SCHEME``.
"""

from __future__ import annotations

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from streamdedup.core.shingles import (
    HASH_SCHEME,
    char_shingles,
    set_fingerprint,
    shingle,
    shingle_many,
    splitmix64,
    word_shingles,
)

M64 = (1 << 64) - 1


def ref_splitmix64(x: int) -> int:
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def ref_fnv(units: list[int]) -> int:
    h = 0xCBF29CE484222325
    for u in units:
        h = ((h ^ u) * 0x100000001B3) & M64
    return h


def ref_char_shingles(text: str, k: int) -> list[int]:
    if not text:
        return []
    cps = [ord(c) for c in text]
    k = min(k, len(cps))
    return sorted({ref_splitmix64(ref_fnv(cps[i : i + k])) for i in range(len(cps) - k + 1)})


def ref_word_shingles(text: str, n: int) -> list[int]:
    words = [xxhash.xxh3_64_intdigest(w.encode("utf-8")) for w in text.split()]
    if not words:
        return []
    n = min(n, len(words))
    return sorted({ref_splitmix64(ref_fnv(words[i : i + n])) for i in range(len(words) - n + 1)})


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
WORDS = st.lists(st.sampled_from(["a", "b", "c", "lavoro", "java", "è", "😀"]), max_size=12).map(
    " ".join
)


# --- golden values: a failure here means stored indexes would silently stop matching


def test_hash_scheme_name_is_pinned() -> None:
    assert HASH_SCHEME == "fnv1a64-codepoints+splitmix64/v1"


def test_splitmix64_matches_the_published_sequence() -> None:
    # splitmix64 seeded with 0 outputs mix(1 * gamma), mix(2 * gamma), ...
    gamma = 0x9E3779B97F4A7C15
    out = splitmix64(np.array([gamma, (2 * gamma) & M64], dtype=np.uint64))
    assert out.tolist() == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4]
    assert splitmix64(np.array([0, 1, M64], dtype=np.uint64)).tolist() == [
        0, 0x5692161D100B05E5, 0xB4D055FCF2CBBD7B,
    ]


def test_golden_shingle_hashes_and_fingerprint() -> None:
    sh = char_shingles("offerta di lavoro", 10)
    assert sh.size == 8
    assert sh[:3].tolist() == [0x165B1D2876B6DABE, 0x2626112304947851, 0x5848D5F59C0387F0]
    assert word_shingles("offerta di lavoro java", 2).tolist() == [
        0x0A4BD34A1DB0B754, 0x7118AEFBC1E9ABEF, 0xB5393853EB42B773,
    ]
    assert set_fingerprint(sh) == 3384628392741636447


def test_splitmix64_does_not_modify_its_input() -> None:
    x = np.array([1, 2, 3], dtype=np.uint64)
    splitmix64(x)
    assert x.tolist() == [1, 2, 3]


# --- the vectorized code equals the reference


@settings(max_examples=200, deadline=None)
@given(TEXT, st.integers(1, 12))
def test_char_shingles_equal_the_reference(text: str, k: int) -> None:
    out = char_shingles(text, k)
    assert out.dtype == np.uint64
    assert out.tolist() == ref_char_shingles(text, k)


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT, max_size=12), st.integers(1, 12), st.sampled_from(["char", "word"]))
def test_a_batch_gives_each_text_its_own_shingles(texts: list[str], k: int, kind: str
                                                  ) -> None:
    # Texts laid end to end: windows across two texts must never leak into either.
    many = shingle_many(texts, kind, k)
    assert len(many) == len(texts)
    for text, got in zip(texts, many, strict=True):
        assert got.dtype == np.uint64 and got.tolist() == shingle(text, kind, k).tolist()


@settings(max_examples=200, deadline=None)
@given(WORDS, st.integers(1, 4))
def test_word_shingles_equal_the_reference(text: str, n: int) -> None:
    out = word_shingles(text, n)
    assert out.dtype == np.uint64
    assert out.tolist() == ref_word_shingles(text, n)


@settings(max_examples=200, deadline=None)
@given(TEXT, st.integers(1, 12))
def test_one_hash_per_distinct_substring(text: str, k: int) -> None:
    if len(text) >= k:
        distinct = {text[i : i + k] for i in range(len(text) - k + 1)}
        assert char_shingles(text, k).size == len(distinct)


@settings(max_examples=100, deadline=None)
@given(TEXT, st.integers(1, 12))
def test_identical_texts_give_identical_shingles(text: str, k: int) -> None:
    copy = "".join(list(text))  # an equal but distinct str object
    assert np.array_equal(char_shingles(text, k), char_shingles(copy, k))
    assert np.array_equal(word_shingles(text, 2), word_shingles(copy, 2))


# --- short and empty texts


@pytest.mark.parametrize("text", ["a", "ciao", "nove char", "😀 è"])
def test_text_shorter_than_k_is_exactly_one_shingle_of_the_whole_text(text: str) -> None:
    assert len(text) < 10
    out = char_shingles(text, 10)
    assert out.size == 1
    assert out.tolist() == ref_char_shingles(text, len(text))
    assert not np.array_equal(out, char_shingles(text + "x", 10))


def test_text_of_exactly_k_is_one_shingle() -> None:
    assert char_shingles("abcdefghij", 10).size == 1
    assert char_shingles("abcdefghijk", 10).size == 2


def test_fewer_words_than_n_is_one_shingle() -> None:
    assert word_shingles("java developer", 3).size == 1
    assert not np.array_equal(word_shingles("java developer", 3), word_shingles("java", 3))


@pytest.mark.parametrize("fn", [char_shingles, word_shingles])
def test_empty_text_has_no_shingles(fn) -> None:
    out = fn("", 5)
    assert out.size == 0 and out.dtype == np.uint64


def test_whitespace_only_has_no_word_shingles_but_has_char_shingles() -> None:
    assert word_shingles(" \n\t ", 2).size == 0
    assert char_shingles("  ", 10).size == 1


def test_word_shingles_ignore_how_words_are_separated() -> None:
    assert np.array_equal(word_shingles("a  b\nc", 2), word_shingles("a b c", 2))
    assert not np.array_equal(word_shingles("a b c", 2), word_shingles("b a c", 2))


def test_char_shingles_see_every_code_point() -> None:
    # Non-BMP characters are one code point each, not two UTF-16 units.
    assert char_shingles("😀😀😀", 2).size == 1
    assert not np.array_equal(char_shingles("é", 1), char_shingles("e", 1))


def test_shingle_dispatches_on_kind() -> None:
    assert np.array_equal(shingle("a b c d", "char", 3), char_shingles("a b c d", 3))
    assert np.array_equal(shingle("a b c d", "word", 3), word_shingles("a b c d", 3))
    with pytest.raises(ValueError, match="unknown shingle kind 'byte'"):
        shingle("abc", "byte", 3)


# --- set fingerprints


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, M64), max_size=20, unique=True))
def test_fingerprint_is_a_signed_64_bit_id_of_the_set(values: list[int]) -> None:
    a = np.array(sorted(values), dtype=np.uint64)
    fp = set_fingerprint(a)
    assert -(1 << 63) <= fp < (1 << 63)
    assert fp == set_fingerprint(a.copy())
    # Same values in another dtype or byte order: same id (it hashes big-endian u8).
    assert fp == set_fingerprint(a.astype(">u8"))
    if values:
        assert fp != set_fingerprint(a[1:])
