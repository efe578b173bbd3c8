from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from streamdedup import garbage


@pytest.fixture
def restored() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


@pytest.mark.usefixtures("restored")
def test_settle_freezes_start_up_and_collects_the_young_less_often() -> None:
    gc.unfreeze()
    gc.set_threshold(700, 7, 9)
    kept = [[i] for i in range(1000)]  # long-lived containers made before settling
    garbage.settle()
    assert gc.get_threshold() == (garbage.YOUNG_THRESHOLD, 7, 9)
    assert gc.get_freeze_count() >= len(kept)


@pytest.mark.usefixtures("restored")
def test_cycles_are_still_collected_without_asking() -> None:
    """Less often is not never: a settle that disabled the collector would leak cycles."""
    garbage.settle()

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    del a, b
    churn = [[i] for i in range(3 * garbage.YOUNG_THRESHOLD)]  # allocations, no collect()
    assert ref() is None
    del churn
