"""Stable 64-bit hashing: the FNV-1a constants, the splitmix64 finalizer and stream, and the
signed view of a 64-bit digest.

Everything here ends up on disk (shingle hashes, band keys, permutation parameters, set ids),
so it must give the same numbers on every machine and Python version, forever: no built-in
``hash()``, no numpy random generators (whose streams are not promised across versions), and
wrapping uint64 arithmetic written out explicitly. Changing anything here changes stored
data; the schemes that use it carry a version in their names (``HASH_SCHEME`` and friends).
"""

from __future__ import annotations

import numpy as np

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
_SM_1 = np.uint64(0xBF58476D1CE4E5B9)
_SM_2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer, elementwise on uint64 (wrapping arithmetic is intended)."""
    x = x.copy()
    x ^= x >> _S30
    x *= _SM_1
    x ^= x >> _S27
    x *= _SM_2
    x ^= x >> _S31
    return x


def splitmix64_stream(seed: int, n: int) -> np.ndarray:
    """The first ``n`` outputs of the SplitMix64 generator seeded with ``seed``.

    Written out rather than taken from numpy's generators, whose methods are not promised to
    give the same numbers across versions: stored signatures must outlive library upgrades.
    """
    steps = np.arange(1, n + 1, dtype=np.uint64) * _GOLDEN_GAMMA
    return splitmix64(steps + np.uint64(seed % 2**64))


def signed64(digest: int) -> int:
    """An unsigned 64-bit digest as the signed integer SQLite and Redis scores can hold."""
    return digest - (1 << 64) if digest >= 1 << 63 else digest
