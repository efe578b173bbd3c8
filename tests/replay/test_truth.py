"""The brute-force ground truth ``all_pairs`` against a plain Python loop."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from shingle_sets import SET, py_jaccard, u64

from streamdedup.replay.truth import all_pairs


def naive_all_pairs(sets: list[np.ndarray], threshold: float) -> list[tuple[int, int, float]]:
    out = []
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            s = py_jaccard(sets[i], sets[j])
            if sets[i].size and sets[j].size and s >= threshold:
                out.append((i, j, s))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(SET, max_size=12), st.sampled_from([0.01, 0.25, 0.5, 2 / 3, 0.8, 1.0]))
def test_all_pairs_equals_the_naive_loop(sets: list[np.ndarray], threshold: float) -> None:
    assert all_pairs(sets, threshold) == naive_all_pairs(sets, threshold)


def test_all_pairs_with_exact_copies_and_empties() -> None:
    a, b = u64(1, 2, 3, 4, 5), u64(1, 2, 3, 4)
    sets = [a, u64(), a.copy(), b, u64(), a.copy(), u64(9)]
    assert all_pairs(sets, 0.8) == [
        (0, 2, 1.0), (0, 3, 0.8), (0, 5, 1.0), (2, 3, 0.8), (2, 5, 1.0), (3, 5, 0.8),
    ]
    assert all_pairs([], 0.5) == [] and all_pairs([a], 0.5) == []
