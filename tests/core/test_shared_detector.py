"""The shared-store detector against the same brute-force oracle as the single writer, on a
real redis-server and a real 3-master Redis Cluster: reposts, edits, empty texts,
redeliveries and replaced texts, in batches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import SHARED_STORES
from detector_oracle import WORDS, Oracle, doc, observable, random_stream

from streamdedup.core.shared_detector import SharedDetector


@pytest.mark.parametrize("kind", SHARED_STORES)
@pytest.mark.parametrize("seed", [1, 2])
def test_random_stream_matches_the_oracle(kind: str, seed: int,
                                          make_shared: Callable[..., Any]) -> None:
    settings = WORDS.replace(max_matches=4)
    det, oracle = SharedDetector(settings, make_shared(kind)), Oracle(settings)
    docs = random_stream(seed)
    got = []
    for start in range(0, len(docs), 7):
        got += det.process_many(docs[start:start + 7])
    for d, v in zip(docs, got, strict=True):
        assert observable(v) == oracle.process(d), d
        assert d.id not in [m.id for m in v.matches]


@pytest.mark.parametrize("kind", SHARED_STORES)
def test_a_redelivered_batch_gets_the_same_verdicts(kind: str,
                                                   make_shared: Callable[..., Any]) -> None:
    det = SharedDetector(WORDS, make_shared(kind))
    docs = [doc("a", "x1 x2 x3 x4"), doc("b", "x1 x2 x3 x5"), doc("c", "y1 y2")]
    first = det.process_many(docs)
    assert det.process_many(docs) == first
    assert [v.seq for v in first] == [1, 2, 3] and first[1].duplicate_of == "a"
