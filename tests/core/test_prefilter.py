"""The MinHash-estimate prefilter: it never rules out a candidate that reaches the threshold,
rules out the dissimilar ones of a hot bucket, and leaves verdicts as they were."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from streamdedup.core.detector import Detector
from streamdedup.core.hashing import splitmix64
from streamdedup.core.jaccard import jaccard
from streamdedup.core.prefilter import MIN_CANDIDATES, Prefilter
from streamdedup.core.sketch import Sketcher
from streamdedup.settings import Settings, build_settings
from streamdedup.store.memory import MemoryStore

SK = Sketcher(Settings())


def pair(rng: np.random.Generator, size: int, shared: int) -> tuple[np.ndarray, np.ndarray]:
    pool = splitmix64(rng.integers(0, 2**63, 2 * size - shared, dtype=np.uint64))
    return np.unique(pool[:size]), np.unique(pool[size - shared:])


def test_a_candidate_at_or_above_the_threshold_is_never_ruled_out() -> None:
    # 3,000 candidates at J in [0.8, 1) around 20 queries: the margin's risk is 1e-9 each.
    rng = np.random.default_rng(11)
    pf = Prefilter(128, 0.8)
    for q in range(20):
        size = int(rng.integers(520, 1500))
        query = np.unique(splitmix64(rng.integers(0, 2**63, size, dtype=np.uint64)))
        cands = []
        for _ in range(150):
            keep = rng.random(query.size) < rng.uniform(0.89, 1.0)  # J ~ 0.8 .. 1
            extra = splitmix64(rng.integers(0, 2**63, int(rng.integers(0, 40)),
                                            dtype=np.uint64))
            cands.append(np.unique(np.concatenate([query[keep], extra])))
        cands = [c for c in cands if jaccard(query, c) >= 0.8]
        ids = list(range(q * 1000, q * 1000 + len(cands)))
        pf.remember(ids, SK.hasher.sign_many(cands))
        assert pf.sieve(SK.hasher.sign(query), query.size, ids) == ids
    assert pf.ruled_out == 0


def test_dissimilar_candidates_of_a_hot_bucket_are_ruled_out() -> None:
    rng = np.random.default_rng(3)
    pf = Prefilter(128, 0.8)
    query, near = pair(rng, 800, 760)  # J ~ 0.9
    far = [pair(rng, 800, 400)[1] for _ in range(40)]  # J ~ 0.33 with their own partner
    far = [np.unique(np.concatenate([query[:330], f[:470]])) for f in far]  # J ~ 0.26
    ids = list(range(41))
    pf.remember(ids, SK.hasher.sign_many([near, *far]))
    kept = pf.sieve(SK.hasher.sign(query), query.size, ids)
    assert kept == [0]
    assert pf.ruled_out == 40


def test_it_stands_aside_for_small_sets_few_or_unknown_signatures() -> None:
    rng = np.random.default_rng(5)
    pf = Prefilter(128, 0.8)
    query = np.unique(splitmix64(rng.integers(0, 2**63, 800, dtype=np.uint64)))
    others = [np.unique(splitmix64(rng.integers(0, 2**63, 800, dtype=np.uint64)))
              for _ in range(MIN_CANDIDATES)]
    ids = list(range(MIN_CANDIDATES))
    sig = SK.hasher.sign(query)
    pf.remember(ids[:-1], SK.hasher.sign_many(others[:-1]))
    assert pf.sieve(sig, query.size, ids) == ids  # one signature unknown: 15 known < 16
    pf.remember(ids[-1:], SK.hasher.sign_many(others[-1:]))
    assert pf.sieve(None, query.size, ids) == ids  # the query's signature unknown
    assert pf.sieve(sig, 4 * 128 - 1, ids) == ids  # a small query: rows depend on each other
    assert pf.sieve(sig, query.size, ids) == []  # all far: ruled out
    assert Prefilter(8, 0.8).cutoff <= 0  # too few rows to rule anything out


def test_it_keeps_at_most_its_capacity_newest_first() -> None:
    pf = Prefilter(128, 0.8, capacity=10)
    sigs = np.arange(20 * 128, dtype=np.uint32).reshape(20, 128)
    pf.remember(list(range(20)), sigs)
    assert list(pf._sigs) == list(range(10, 20))


def test_verdicts_are_the_same_with_and_without_it_on_the_soak_worst_case(
        kijiji_path: Path) -> None:
    from harness.chaos import build_stream, read_rows
    from streamdedup.errors import MessageError
    from streamdedup.service.message import decode_message

    settings = build_settings("reference", env={})
    stream = build_stream(read_rows(kijiji_path), 6000, 8, variant_share=0.4,
                          repost_edit_share=0.8)
    docs = []
    for a in stream:
        with contextlib.suppress(MessageError):  # the stream's bad messages
            docs.append(decode_message(a.value, settings.text_fields, 1 << 20))
    out = {}
    ruled = {}
    for on in (True, False):
        detector = Detector(settings, MemoryStore())
        if not on:
            detector.prefilter.cutoff = 0.0
        out[on] = [v.to_json() for i in range(0, len(docs), 500)
                   for v in detector.process_many(docs[i:i + 500])]
        ruled[on] = detector.prefilter.ruled_out
    assert out[True] == out[False]
    assert ruled[True] > 0 and ruled[False] == 0
