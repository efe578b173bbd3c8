"""The pair plan: each later set's probe candidates per bucket, capped hot buckets."""

from __future__ import annotations

from streamdedup.replay.pairs import bucket_pairs


def test_bucket_pairs_are_the_later_sets_probe_candidates() -> None:
    members = [(5, 50, 10), (1, 10, 10), (9, 90, 13), (3, 30, 40)]  # (first pos, set, size)
    # the later set's bound, as its probe applies it: 10 shingles at 0.9 accept 9..12
    assert set(bucket_pairs(members, 0.9, 100)) == {(50, 10)}
    assert set(bucket_pairs(members, 0.8, 100)) == {(50, 10), (90, 50), (90, 10)}  # 10..17
    # the bound is the later set's, rounded outwards: 11 at 0.8 accepts 8..14, 8 accepts 6..10
    assert list(bucket_pairs([(1, 1, 8), (2, 2, 11)], 0.8, 100)) == [(2, 1)]
    assert list(bucket_pairs([(1, 1, 11), (2, 2, 8)], 0.8, 100)) == []


def test_a_hot_bucket_yields_at_most_the_cap_per_set_not_its_square() -> None:
    members = [(pos, 1000 + pos, 50) for pos in range(300)]  # one size: all candidates
    pairs = list(bucket_pairs(members, 0.8, 5))
    assert len(pairs) == 5 * 6 // 2 + 294  # sets 0..5 list their 0..5 earlier ones
    assert {later for later, earlier in pairs if earlier is None} == set(range(1006, 1300))
