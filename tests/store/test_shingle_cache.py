"""The stores' shingle cache: least recently used out first, its byte bound kept exactly."""

from __future__ import annotations

import numpy as np

from streamdedup.store.shingle_cache import ShingleCache


def arr(n: int, start: int = 0) -> np.ndarray:
    return np.arange(start, start + n, dtype=np.uint64)  # n * 8 bytes


def test_the_least_recently_used_set_leaves_first() -> None:
    cache = ShingleCache(max_bytes=3 * 80)
    for set_id in (1, 2, 3):
        cache.put(set_id, arr(10, set_id))
    assert cache.get(1) is not None  # 1 is now the most recent
    cache.put(4, arr(10))
    assert 2 not in cache and {1, 3, 4} == {s for s in (1, 2, 3, 4) if s in cache}
    assert cache.nbytes == 240 and len(cache) == 3


def test_bytes_are_counted_on_every_path() -> None:
    cache = ShingleCache(max_bytes=1000)
    cache.put(1, arr(10))
    cache.put(1, arr(50))  # a set id names one content: the first array stays
    first = cache.get(1)
    assert cache.nbytes == 80 and first is not None and first.size == 10
    cache.put(2, arr(20))
    cache.drop(1)
    cache.drop(99)
    assert cache.nbytes == 160
    cache.clear()
    assert cache.nbytes == 0 and len(cache) == 0 and cache.get(2) is None


def test_an_array_bigger_than_the_bound_is_returned_not_kept() -> None:
    cache = ShingleCache(max_bytes=100)
    cache.put(1, arr(5))
    big = cache.put(2, arr(50))
    assert big.size == 50 and 2 not in cache
    assert 1 in cache and cache.nbytes == 40  # and it pushed nothing out


def test_what_is_kept_is_uint64() -> None:
    kept = ShingleCache().put(3, np.array([1, 5, 9], dtype=np.int64))
    assert kept.dtype == np.uint64 and kept.tolist() == [1, 5, 9]


def test_a_view_is_copied_so_its_batch_array_is_not_pinned() -> None:
    batch = arr(1000)
    kept = ShingleCache().put(7, batch[10:20])
    assert kept.base is None and kept.tolist() == list(range(10, 20))
    own = arr(5)
    assert ShingleCache().put(8, own) is own


def test_split_hands_back_what_is_held_and_the_rest_in_order() -> None:
    cache = ShingleCache(max_bytes=2 * 80)
    cache.put(1, arr(10))
    cache.put(2, arr(10, 5))
    found, missing = cache.split([3, 2, 9, 1])
    assert sorted(found) == [1, 2] and found[2].tolist() == list(range(5, 15))
    assert missing == [3, 9]
    cache.split([1])  # 1 is now the most recent: 2 goes first
    cache.put(4, arr(10))
    assert 2 not in cache and 1 in cache
