"""The shared-store detector against the same brute-force oracle as the single writer, on a
real redis-server and a real 3-master Redis Cluster: reposts, edits, empty texts,
redeliveries and replaced texts, in batches."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from conftest import SHARED_STORES
from detector_oracle import WORDS, Oracle, doc, observable, random_stream, text, ws

from streamdedup.detection.shared_detector import SharedDetector


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


BASE = ws("a", *range(10))


@pytest.mark.parametrize("kind", SHARED_STORES)
def test_max_candidates_bounds_verification_and_counts_only_earlier_sets(
        kind: str, make_shared: Callable[..., Any]) -> None:
    """As the single writer's: at most ``max_candidates`` sets are verified, the rest are
    counted in ``skipped``. A set published in the same batch but claimed after the query
    (``late``) is probed too, and counts in neither."""
    settings = WORDS.replace(threshold=0.3, max_candidates=2)
    det = SharedDetector(settings, make_shared(kind))
    for i in range(5):  # five distinct texts, each 8/12 similar to the query below
        det.process(doc(f"p{i}", text(BASE[:8], ws(f"x{i}_", 1, 2))))
    v, late = det.process_many([doc("q", text(BASE)), doc("late", text(BASE[:9], ["y"]))])
    assert v.candidates == 5 and v.skipped == 3
    assert len(v.matches) == 2 and "late" not in [m.id for m in v.matches]
    assert late.candidates == 6  # the five and q, which came first


@pytest.mark.parametrize("kind", SHARED_STORES)
def test_a_second_consumer_gets_the_first_ones_verdicts_and_judges_after_them(
        kind: str, make_shared: Callable[..., Any]) -> None:
    """Two detectors on one namespace, as two members of a group: a batch the first has
    finished, delivered to the second (after a rebalance), gets the stored verdicts back,
    not new seqs; a new document on the second is judged against the first's."""
    namespace = f"t{uuid.uuid4().hex}"
    first = SharedDetector(WORDS, make_shared(kind, namespace))
    second = SharedDetector(WORDS, make_shared(kind, namespace))
    docs = [doc("a", "x1 x2 x3 x4"), doc("b", "x1 x2 x3 x5"), doc("c", "y1 y2")]
    judged = first.process_many(docs)
    assert second.process_many(docs) == judged
    v = second.process(doc("d", "x1 x2 x3 x4"))
    assert v.seq == 4 and v.duplicate_of == "a" and v.exact


@pytest.mark.parametrize("kind", SHARED_STORES)
def test_an_empty_text_publishes_no_set_and_matches_nothing(
        kind: str, make_shared: Callable[..., Any]) -> None:
    store = make_shared(kind)
    det = SharedDetector(WORDS, store)
    a, b = det.process_many([doc("e1", ""), doc("e2", "   ")])
    later = det.process(doc("e3", ""))
    empty = det.sketcher.shingle_fields(doc("e4", "").fields)
    assert [v.seq for v in (a, b, later)] == [1, 2, 3]
    assert not (a.duplicate or b.duplicate or later.duplicate)
    assert later.shingles == 0 and later.candidates == 0
    assert store.known([empty.set_id]) == set() and store.get_shingles({empty.set_id}) == {}


@pytest.mark.parametrize("kind", SHARED_STORES)
def test_a_bridge_of_three_clusters_names_the_two_absorbed_in_sorted_order(
        kind: str, make_shared: Callable[..., Any]) -> None:
    """As the single writer: the earliest cluster keeps its label, the others are named in
    ``merged`` sorted (here not their arrival order), so both detectors' verdicts agree."""
    from streamdedup.detection.detector import Detector
    from streamdedup.store.memory import MemoryStore

    settings = WORDS.replace(threshold=0.3)
    parts = {"z": ws("p", 1, 2, 3, 4), "m": ws("q", 1, 2, 3, 4), "a": ws("r", 1, 2, 3, 4)}
    docs = [*(doc(k, text(v)) for k, v in parts.items()),
            doc("bridge", text(*parts.values()))]  # 4/12 of each
    for det in (SharedDetector(settings, make_shared(kind)), Detector(settings, MemoryStore())):
        verdicts = [det.process(d) for d in docs]
        assert [v.merged for v in verdicts] == [(), (), (), ("a", "m")]
        assert verdicts[-1].cluster_id == "z"
