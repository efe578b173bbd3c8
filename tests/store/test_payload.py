"""A set's bytes (``store/payload.py``): the two on-disk forms and what ``verify`` refuses."""

from __future__ import annotations

import numpy as np
import pytest

from streamdedup.store.payload import (
    decode_shingles,
    decode_text,
    encode_shingles,
    encode_text,
    is_text,
    sorted_hashes,
    valid_payload,
)


@pytest.mark.parametrize("text", ["", "a", "abcdefg", "abcdefgh", "città è già", "x" * 1001])
def test_a_text_payload_round_trips_and_is_never_taken_for_hashes(text: str) -> None:
    blob = encode_text(text)
    assert is_text(blob) and decode_text(blob) == text and valid_payload(blob)
    assert len(blob) % 8 == 1  # hash payloads are multiples of 8 bytes
    hashes = encode_shingles(np.arange(1, 1 + len(text) // 8 + 1, dtype=np.uint64))
    assert not is_text(hashes) and valid_payload(hashes)
    with pytest.raises(ValueError):
        decode_text(blob[:-1] + b"\x00")


def test_the_bytes_on_disk_are_pinned() -> None:
    """Stores written by earlier releases must read back: the padding byte and the hashes'
    byte order are the file format, not a detail both sides merely agree on."""
    assert encode_text("abc") == b"abc" + b"\xff" * 6
    assert encode_text("a" * 8) == b"a" * 8 + b"\xff"
    assert encode_text("") == b"\xff"
    assert encode_shingles(np.array([1, 2**64 - 2], dtype=np.uint64)) == (
        b"\x00" * 7 + b"\x01" + b"\xff" * 7 + b"\xfe")
    assert decode_shingles(b"\x00" * 7 + b"\x05").tolist() == [5]


@pytest.mark.parametrize("blob, why", [
    (encode_shingles(np.array([5, 3], dtype=np.uint64)), "hashes out of order"),
    (encode_shingles(np.array([3, 3], dtype=np.uint64)), "a hash twice"),
    (b"x" * 12, "neither 8 bytes a hash nor text's 1 modulo 8"),
    (b"\xc3" + b"\xff" * 8, "text that is not UTF-8"),
    (b"a" * 9, "text without its 0xFF end"),
])
def test_a_damaged_payload_is_not_valid(blob: bytes, why: str) -> None:
    assert not valid_payload(blob), why


def test_sorted_hashes_takes_only_what_encode_shingles_writes() -> None:
    assert sorted_hashes(b"") and sorted_hashes(encode_shingles(np.array([7], dtype=np.uint64)))
    assert sorted_hashes(encode_shingles(np.array([3, 5, 2**64 - 1], dtype=np.uint64)))
    assert not sorted_hashes(encode_shingles(np.array([5, 3], dtype=np.uint64)))
    assert not sorted_hashes(encode_shingles(np.array([3, 3], dtype=np.uint64)))
    assert not sorted_hashes(b"x" * 9)  # a text payload is not hashes
