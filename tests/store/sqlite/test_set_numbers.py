"""The set id -> number map against a dict model, across merges and rollbacks."""

from __future__ import annotations

import random

import numpy as np

from streamdedup.store.sqlite.set_numbers import SetNumbers


def test_matches_a_dict_model_through_merges_and_rollbacks() -> None:
    rng = random.Random(3)
    numbers = SetNumbers(merge_at=16)  # tiny: many merges
    committed: dict[int, int] = {}
    current: dict[int, int] = {}
    next_number = 1
    for step in range(600):
        set_id = rng.randrange(-(2**63), 2**63)
        numbers.add(set_id, next_number)
        current[set_id] = next_number
        next_number += 1
        if step % 5 == 4:
            if rng.random() < 0.3:
                numbers.rollback()
                current = dict(committed)
            else:
                numbers.commit()
                committed = dict(current)
        known = rng.sample(sorted(current), min(5, len(current)))
        unknown = [rng.randrange(-(2**63), 2**63) for _ in range(3)]
        assert all(numbers.get(s) == current[s] for s in known)
        assert all(numbers.get(s) is None for s in unknown)
        assert numbers.get_many(known + unknown) == {s: current[s] for s in known}
    assert len(numbers) == len(current)
    assert numbers._ids.size > 0  # the test did merge


def test_bulk_load_then_add() -> None:
    numbers = SetNumbers()
    numbers.add_many(np.array([30, -5, 7], dtype=np.int64), np.array([1, 2, 3]))
    numbers.add(8, 4)
    assert numbers.get_many([7, 8, -5, 30, 99]) == {7: 3, 8: 4, -5: 2, 30: 1}
    assert numbers.get(-(2**63)) is None and numbers.get(2**63 - 1) is None
    numbers.rollback()
    assert numbers.get(8) is None and numbers.get(7) == 3
