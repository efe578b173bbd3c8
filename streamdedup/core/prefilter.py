"""The MinHash-estimate prefilter: candidates whose signature puts the threshold out of reach
are not verified exactly.

Exact Jaccard still decides every verdict; this only spares reading and comparing the
shingles of candidates that cannot pass. It matters in a hot bucket, where a new variant of a
boilerplate ad collides with hundreds of earlier variants (the soak's worst case verified up
to 2,000 sets per message and slowed from 1,085 to 254 messages/s).

Why it is safe: the share of equal signature rows is a mean of ``k`` rows each equal with
probability J, so by Hoeffding P(estimate <= J - m) <= exp(-2 k m^2). With ``k`` = 128 rows
and a risk of 1e-9 per pair, m = 0.284: a candidate is dropped only when its estimate is
below threshold - m (0.516 at 0.8), which a pair at or above the threshold reaches with
probability under 1e-9. Rows are kept as their low 8 bits (a row then also matches by chance
1/256 of the time, which raises the estimate, never lowers it). One permutation hashing
borrows bins for small sets, which makes rows depend on each other, so the prefilter only
runs for sets of at least 4 x ``k`` shingles (then under 5 % of bins are borrowed) and at
least 16 candidates with a known signature (fewer cost less to verify than to estimate).

Signatures are those this process computed (every new set is signed once, when it is
added), in an LRU of 65,536 (8 MB): a set stored before the process started is verified
exactly until it is signed again, so the verdicts never depend on what the cache holds.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

CAPACITY = 1 << 16
RISK = 1e-9  # per pair at or above the threshold
MIN_CANDIDATES = 16
MIN_SIZE_PER_ROW = 4


class Prefilter:
    """Signatures of recent sets and the test that rules candidates out."""

    def __init__(self, num_perm: int, threshold: float, capacity: int = CAPACITY) -> None:
        self.num_perm = num_perm
        self.capacity = capacity
        margin = math.sqrt(math.log(1 / RISK) / (2 * num_perm))
        self.cutoff = threshold - margin  # estimates below it are ruled out
        self._sigs: OrderedDict[int, np.ndarray] = OrderedDict()
        self.ruled_out = 0  # candidates not verified (for metrics and tests)

    def remember(self, set_ids: Sequence[int], signatures: np.ndarray) -> None:
        """Keep the signatures (rows of ``signatures``) of sets just signed."""
        if self.cutoff <= 0:
            return  # too few rows for the estimate to rule anything out
        low = signatures.astype(np.uint8)
        for set_id, sig in zip(set_ids, low, strict=True):
            self._sigs[set_id] = sig
            self._sigs.move_to_end(set_id)
        while len(self._sigs) > self.capacity:
            self._sigs.popitem(last=False)

    def sieve(self, signature: np.ndarray | None, size: int, candidates: list[int]
              ) -> list[int]:
        """The candidates that may reach the threshold with a query of ``signature`` (None:
        not known, all of them) and ``size`` shingles, in their order."""
        if (signature is None or size < MIN_SIZE_PER_ROW * self.num_perm
                or len(candidates) < MIN_CANDIDATES or self.cutoff <= 0):
            return candidates
        sigs = self._sigs
        known = [c for c in candidates if c in sigs]
        if len(known) < MIN_CANDIDATES:
            return candidates
        for c in known:
            sigs.move_to_end(c)
        query = signature.astype(np.uint8)
        estimate = (np.stack([sigs[c] for c in known]) == query).mean(axis=1)
        out = {c for c, e in zip(known, estimate.tolist(), strict=True) if e < self.cutoff}
        self.ruled_out += len(out)
        return [c for c in candidates if c not in out]
