"""LSH banding: the S-curve, the choice of bands x rows, and stable band keys.

A pair with Jaccard ``s`` becomes a candidate with probability ``1 - (1 - s**r)**b``. We verify
candidates exactly, so a false candidate costs only time while a missed one is lost for good:
``choose_bands`` therefore picks, among all (b, r) with ``b * r <= num_perm``, the most
selective one (largest r) whose recall at the threshold is at least ``min_recall`` (default
0.999), using as many bands as the permutations allow.
"""

from __future__ import annotations

import math

import numpy as np

from streamdedup.core.hashing import FNV_OFFSET, FNV_PRIME, splitmix64

BAND_SCHEME = "fnv1a64-rows+band+splitmix64/v1"
DEFAULT_MIN_RECALL = 0.999



def p_candidate(s: float | np.ndarray, bands: int, rows: int) -> float | np.ndarray:
    """Probability that a pair with Jaccard ``s`` shares at least one band."""
    if bands < 1 or rows < 1:
        raise ValueError(f"bands and rows must be >= 1, got {bands} x {rows}")
    s_arr = np.asarray(s, dtype=float)
    if not np.all((s_arr >= 0) & (s_arr <= 1)):  # written so that NaN is refused too
        raise ValueError("similarity must lie in [0, 1]")
    result = 1.0 - (1.0 - s_arr**rows) ** bands
    return float(result) if np.ndim(result) == 0 else result


def layout(threshold: float, num_perm: int, bands: int = 0, rows: int = 0) -> tuple[int, int]:
    """The (bands, rows) a detector uses: those given, else those the threshold chooses (the
    reports' band tables chose them even when --bands/--rows were given)."""
    return (bands, rows) if bands else choose_bands(threshold, num_perm)


def choose_bands(
    threshold: float, num_perm: int, min_recall: float = DEFAULT_MIN_RECALL
) -> tuple[int, int]:
    """(bands, rows) for a threshold: most selective setting that keeps recall at it."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], not {threshold}")
    if num_perm < 1:
        raise ValueError(f"num_perm must be >= 1, not {num_perm}")
    if not 0.0 < min_recall < 1.0:
        raise ValueError(f"min_recall must be in (0, 1), not {min_recall}")
    best = (num_perm, 1)  # one row per band: the most permissive setting
    for rows in range(1, num_perm + 1):
        bands = num_perm // rows
        if p_candidate(threshold, bands, rows) >= min_recall:
            best = (bands, rows)
    return best


def min_num_perm(threshold: float, min_recall: float = DEFAULT_MIN_RECALL) -> int:
    """The fewest permutations with which some (bands, rows) reaches ``min_recall`` at the
    threshold (one row per band, the most permissive: ``1 - (1 - t)**b >= min_recall``)."""
    if threshold >= 1.0:
        return 1
    return max(1, math.ceil(math.log(1.0 - min_recall) / math.log(1.0 - threshold)))


def band_keys(signature: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """One signed 64-bit key per band of one signature."""
    return band_keys_many(signature[None, :], bands, rows)[0]


def band_keys_many(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """Band keys of many signatures at once, shape (n, bands). The band index is mixed in,
    so keys never collide across bands and one flat bucket table serves all bands."""
    n = signatures.shape[0]
    grid = signatures[:, : bands * rows].astype(np.uint64).reshape(n, bands, rows)
    h = np.full((n, bands), FNV_OFFSET, dtype=np.uint64)
    h ^= np.arange(bands, dtype=np.uint64)[None, :]
    h *= FNV_PRIME
    for j in range(rows):
        h ^= grid[:, :, j]
        h *= FNV_PRIME
    return splitmix64(h).view(np.int64)
