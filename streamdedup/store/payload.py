"""How a shingle set is kept as bytes: its sorted 64-bit hashes, or the normalized text
they are made from (the SQLite store keeps texts: 0.7 KB instead of ~5 KB a generated ad),
and the checks ``verify`` runs on either."""

from __future__ import annotations

import numpy as np


def encode_shingles(shingles: np.ndarray) -> bytes:
    """Explicit big-endian uint64 bytes: a store file is data, never pickled code."""
    return shingles.astype(">u8", copy=False).tobytes()


def decode_shingles(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=">u8").astype(np.uint64)


# A text payload is its UTF-8 then 1-8 bytes 0xFF (never in UTF-8), so that its length is
# 1 modulo 8: never the length of a hash payload (8 bytes a hash). Stores tell them apart
# row by row, so a store holds both kinds (sets written before texts were kept, or by the
# backfill, which ships hashes) and needs no schema change.
_TEXT_END = 0xFF


def encode_text(text: str) -> bytes:
    data = text.encode("utf-8")
    return data + bytes([_TEXT_END]) * (8 - len(data) % 8 + 1 if len(data) % 8 else 1)


def is_text(blob: bytes) -> bool:
    return len(blob) % 8 == 1


def decode_text(blob: bytes) -> str:
    """The text of a text payload; ValueError if it is not one (damaged)."""
    if not is_text(blob) or blob[-1] != _TEXT_END:
        raise ValueError("not a text payload")
    return blob.rstrip(bytes([_TEXT_END])).decode("utf-8")


def valid_payload(blob: bytes) -> bool:
    """Whether ``blob`` is what a store writes for a set: sorted distinct hashes, or text."""
    if is_text(blob):
        try:
            decode_text(blob)
        except ValueError:
            return False
        return True
    return sorted_hashes(blob)


def sorted_hashes(blob: bytes) -> bool:
    """Whether ``blob`` is what ``encode_shingles`` writes: sorted, distinct 64-bit hashes."""
    if len(blob) % 8:
        return False
    values = decode_shingles(blob)
    # Compared pairwise, not by np.diff: a difference of unsigned hashes wraps around, so
    # hashes out of order looked sorted and only a hash written twice was caught.
    return bool((values[1:] > values[:-1]).all())
