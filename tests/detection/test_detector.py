"""The detector, against a brute-force oracle and on the Kijiji dump; every store backend.

Most tests use word 1-gram shingles, so that a text's shingle set is its set of words and
similarities can be designed by hand. With threshold 0.5 and 128 permutations the bands are
64 x 2, which misses a pair at similarity 0.5 with probability 0.75**64 ~ 1e-8, so the
detector must agree exactly with the brute-force oracle (tests/detector_oracle.py).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from detector_oracle import WORDS, Oracle, doc, observable, random_stream, run, text, ws
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamdedup.core.document import Document
from streamdedup.core.sketch import Sketcher
from streamdedup.core.verdict import Match, Verdict
from streamdedup.detection.detector import Detector, rank_matches
from streamdedup.replay.dump import read_dump
from streamdedup.replay.truth import all_pairs
from streamdedup.settings import Settings, build_settings
from streamdedup.store.base import Store

# --- against the oracle


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_stream_matches_the_oracle(store: Store, seed: int) -> None:
    settings = WORDS.replace(max_matches=4)
    det, oracle = Detector(settings, store), Oracle(settings)
    docs = random_stream(seed)
    for d, v in zip(docs, run(det, docs, batch=7), strict=True):
        want = oracle.process(d)
        assert observable(v) == want, d
        assert v.id == d.id
        assert d.id not in [m.id for m in v.matches]  # never a self-match
        assert v.skipped == 0
    assert sum(v["duplicate"] for v in oracle.verdicts.values()) > 20  # the stream has some
    assert any(v["exact"] for v in oracle.verdicts.values())
    assert any(v["duplicate"] and not v["exact"] for v in oracle.verdicts.values())


@pytest.mark.parametrize("batch", [1, 5, 64])
def test_process_many_equals_process_one_by_one(
    make_store: Callable[..., Store], tmp_path: Path, batch: int
) -> None:
    docs = random_stream(7)
    one = Detector(WORDS, make_store("sqlite", tmp_path / "one"))
    many = Detector(WORDS, make_store("sqlite", tmp_path / "many"))
    expect = [one.process(d).to_json() for d in docs]
    assert [v.to_json() for v in run(many, docs, batch=batch)] == expect


def test_memory_and_sqlite_give_identical_verdicts(make_store: Callable[..., Store]) -> None:
    docs = random_stream(11, n=300)
    mem = run(Detector(WORDS, make_store("memory")), docs, batch=10)
    sql = run(Detector(WORDS, make_store("sqlite")), docs, batch=10)
    assert [v.to_json() for v in mem] == [v.to_json() for v in sql]


# --- designed cases

BASE = ws("a", *range(10))


def test_duplicates_are_flagged_with_the_earliest_match(store: Store) -> None:
    det = Detector(WORDS, store)
    first = det.process(doc("first", text(BASE)))
    assert not first.duplicate and first.duplicate_of is None and first.matches == ()
    assert first.cluster_id == "first"
    other = det.process(doc("other", text(ws("b", *range(10)))))
    assert not other.duplicate and other.cluster_id == "other"
    edited = det.process(doc("edited", text(BASE[:9], ["z"])))  # 9/11
    assert edited.duplicate and edited.duplicate_of == "first"
    assert [(m.id, m.jaccard) for m in edited.matches] == [("first", round(9 / 11, 6))]
    again = det.process(doc("again", text(BASE[:8], ["z", "y"])))  # 9/11 edited, 8/12 first
    assert again.duplicate_of == "first"
    assert [(m.id, m.jaccard) for m in again.matches] == [
        ("edited", round(9 / 11, 6)), ("first", round(8 / 12, 6)),
    ]
    assert {again.cluster_id, edited.cluster_id} == {"first"}


def test_matches_best_first_ties_earliest_first_capped(make_store: Callable[..., Store]) -> None:
    det = Detector(WORDS.replace(max_matches=3), make_store("memory"))
    det.process(doc("far", text(BASE[:7], ["x", "y", "z"])))  # 7/13 with BASE
    det.process(doc("near", text(BASE[:9], ["x"])))  # 9/11 with BASE
    det.process(doc("copy1", text(BASE)))
    det.process(doc("copy2", text(list(reversed(BASE)))))  # same word set
    v = det.process(doc("q", text(BASE)))
    assert v.exact and v.duplicate_of == "far"
    assert [(m.id, m.jaccard) for m in v.matches] == [
        ("copy1", 1.0), ("copy2", 1.0), ("near", round(9 / 11, 6)),
    ]


def test_clusters_merge_to_the_earliest_document(store: Store) -> None:
    settings = WORDS.replace(threshold=0.6)
    det = Detector(settings, store)
    shared = ws("s", 1, 2, 3, 4)
    a = text(ws("a", *range(6)), shared[:3], ["za"])
    b = text(ws("a", *range(6)), shared)  # J(a, b) = 9/11
    c = text(ws("c", *range(6)), shared[:3], ["zc"])
    d = text(ws("c", *range(6)), shared)  # J(c, d) = 9/11, J(b, d) = 4/16
    e = text(ws("a", *range(6)), ws("c", *range(6)), shared)  # J(e, b) = J(e, d) = 10/16
    v = {name: det.process(doc(name.upper(), t)) for name, t in zip("abcde", [a, b, c, d, e],
                                                                   strict=True)}
    assert [v[n].cluster_id for n in "abcd"] == ["A", "A", "C", "C"]
    assert [v[n].duplicate_of for n in "abcd"] == [None, "A", None, "C"]
    assert [(m.id, m.jaccard) for m in v["e"].matches] == [("B", 0.625), ("D", 0.625)]
    assert v["e"].duplicate_of == "B" and v["e"].cluster_id == "A"
    assert v["e"].merged == ("C",), "the verdict that bridges two clusters names the other"
    assert all(v[n].merged == () for n in "abcd")
    # Exact copies of the once separate cluster now report the merged cluster.
    f = det.process(doc("F", d))
    assert f.exact and f.cluster_id == "A" and f.duplicate_of == "C"
    assert [(m.id, m.jaccard) for m in f.matches] == [
        ("D", 1.0), ("C", round(9 / 11, 6)), ("E", 0.625),
    ]
    assert det.process(doc("G", c)).cluster_id == "A"
    # A new document similar only to C joins the merged cluster too.
    h = det.process(doc("H", text(ws("c", *range(6)), shared[:3], ["zh"])))
    assert h.cluster_id == "A" and h.duplicate_of == "C"
    assert f.merged == h.merged == (), "joining an already merged cluster merges nothing"


def test_redelivery_returns_the_same_verdict_and_stores_nothing(store: Store) -> None:
    det = Detector(WORDS, store)
    det.process(doc("a", text(BASE)))
    first = det.process(doc("b", text(BASE[:9], ["x"])))
    det.process(doc("c", text(BASE)))  # later matches do not change b's answer
    store.commit()
    before = store.stats()
    again = det.process(doc("b", text(BASE[:9], ["x"])))
    assert again.to_json() == first.to_json()
    store.commit()
    assert store.stats() == before
    # The same through the batch API, twice in one batch.
    assert [v.to_json() for v in det.process_many([doc("b", text(["x"], BASE[:9]))] * 2)] == [
        first.to_json(), first.to_json(),
    ]


def test_same_id_with_changed_text_replaces_the_old_version(store: Store) -> None:
    det = Detector(WORDS, store)
    old, new = text(BASE), text(ws("n", *range(10)))
    det.process(doc("a", old))
    assert det.process(doc("b", old)).duplicate_of == "a"
    replaced = det.process(doc("a", new))
    assert not replaced.duplicate  # nothing else has the new text
    assert store.stats()["documents"] == 2
    c = det.process(doc("c", old))
    assert c.duplicate_of == "b" and [m.id for m in c.matches] == ["b"]  # a no longer has it
    assert det.process(doc("d", new)).duplicate_of == "a"


def test_a_new_version_never_matches_its_own_old_version(store: Store) -> None:
    det = Detector(WORDS, store)
    det.process(doc("a", text(BASE)))
    v = det.process(doc("a", text(BASE[:9], ["x"])))  # 9/11 with its old text
    assert not v.duplicate and v.matches == ()
    v = det.process(doc("a", text(BASE)))  # back to the first text: an old set, no members
    assert not v.duplicate and v.matches == () and not v.exact


def test_exact_copies_skip_the_probe_and_match_like_a_probe(store: Store) -> None:
    det = Detector(WORDS, store)
    oracle = Oracle(WORDS)
    stream = [
        doc("a", text(BASE)),
        doc("b", text(BASE[:9], ["x"])),
        doc("c", text(BASE[:8], ["x", "y"])),
        doc("d", text(BASE)),  # exact copy of a
        doc("e", text(BASE[:9], ["x"])),  # exact copy of b
    ]
    verdicts = [det.process(d) for d in stream]
    expect = [oracle.process(d) for d in stream]
    assert [observable(v) for v in verdicts] == expect
    assert [v.exact for v in verdicts] == [False, False, False, True, True]
    assert [v.candidates for v in verdicts][3:] == [0, 0]
    assert verdicts[1].candidates == 1 and verdicts[2].candidates == 2


def test_empty_normalized_text_is_never_a_duplicate(store: Store) -> None:
    det = Detector(WORDS, store)
    first = det.process(doc("e1", "!!! ???"))
    second = det.process(doc("e2", "... ---"))
    real = det.process(doc("r", text(BASE)))
    for v, own in [(first, "e1"), (second, "e2")]:
        assert (v.duplicate, v.duplicate_of, v.matches, v.shingles) == (False, None, (), 0)
        assert v.cluster_id == own and v.candidates == 0
    assert not real.duplicate
    assert det.process(doc("e1", "!!! ???")).to_json() == first.to_json()


def test_short_texts_are_one_shingle_and_compare_whole(store: Store) -> None:
    det = Detector(Settings(stopwords="", stem_language=""), store)  # char 10-shingles
    assert det.process(doc("a", "Ciao")).shingles == 1
    b = det.process(doc("b", "  CIAO! "))
    assert b.duplicate_of == "a" and b.exact
    assert not det.process(doc("c", "Ciaone")).duplicate


@pytest.mark.parametrize("batch", [1, 2])
def test_a_set_at_the_edge_of_the_size_bound_matches_in_and_across_batches(
        store: Store, batch: int) -> None:
    """A set of 5 words and one of 10 that holds them: Jaccard 5/10, the threshold itself,
    and 5 the least size a set of 10 can match (``size_bounds``). Both the store's probe
    (another batch) and the batch's own adds (one batch) must keep that edge in."""
    det = Detector(WORDS, store)
    small, big = doc("small", text(BASE[:5])), doc("big", text(BASE))
    verdicts = run(det, [small, big], batch=batch)
    assert verdicts[1].duplicate_of == "small"
    assert verdicts[1].matches == (Match("small", 0.5),)


def test_a_stored_verdict_without_seq_gets_its_documents_seq_back(store: Store) -> None:
    """Verdicts stored before they had ``seq`` answer a redelivery with the seq of the
    document's record."""
    import json

    from streamdedup.store.base import DocRecord

    det = Detector(WORDS, store)
    first = det.process(doc("x", text(BASE)))
    record = store.get_doc("x")
    assert record is not None and first.seq is not None
    old = json.loads(first.to_json())
    del old["seq"]
    store.put_doc(DocRecord("x", record.seq, record.set_id, json.dumps(old), record.time))
    again = det.process(doc("x", text(BASE)))
    assert again.seq == first.seq == record.seq
    assert again.to_dict() == first.to_dict()


def test_max_candidates_bounds_verification_and_reports_skipped(store: Store) -> None:
    settings = WORDS.replace(threshold=0.3, max_candidates=2)
    det = Detector(settings, store)
    for i in range(5):  # five distinct texts, each 8/12 similar to the query below
        det.process(doc(f"p{i}", text(BASE[:8], ws(f"x{i}_", 1, 2))))
    v = det.process(doc("q", text(BASE)))
    assert v.candidates == 5 and v.skipped == 3
    assert len(v.matches) == 2


# --- the Kijiji acceptance test

KIJIJI_DUPLICATES = 2003  # docs with an earlier near-duplicate, reference preset
KIJIJI_NEAR_ONLY = 52  # ... of which no earlier one is an exact copy of the shingle set


@pytest.fixture(scope="module")
def kijiji_reference(kijiji_path: Path) -> tuple[Settings, list[Document], list[Verdict]]:
    """The reference preset's verdicts on the whole dump, in file order (memory store)."""
    from streamdedup.store.memory import MemoryStore

    settings = build_settings("reference", env={})
    docs = []
    for _, item in read_dump(kijiji_path, None, settings.text_fields):
        assert isinstance(item, Document), item
        docs.append(item)
    return settings, docs, run(Detector(settings, MemoryStore()), docs, batch=500)


@pytest.mark.dump
def test_kijiji_reference_precision_and_recall(
    kijiji_reference: tuple[Settings, list[Document], list[Verdict]],
) -> None:
    settings, docs, verdicts = kijiji_reference
    sketcher = Sketcher(settings, text_cache=0)
    sets = [sketcher.shingle_fields(d.fields).shingles for d in docs]
    earlier: dict[int, list[tuple[int, float]]] = {}
    for i, j, sim in all_pairs(sets, settings.threshold):
        earlier.setdefault(j, []).append((i, sim))
    truth = set(earlier)
    near = {j for j, found in earlier.items() if all(sim < 1.0 for _, sim in found)}
    near_any = {j for j, found in earlier.items() if any(sim < 1.0 for _, sim in found)}
    flagged = {i for i, v in enumerate(verdicts) if v.duplicate}

    assert len(truth) == KIJIJI_DUPLICATES
    assert len(near) == KIJIJI_NEAR_ONLY
    tp = len(flagged & truth)
    assert tp / len(flagged) == 1.0, sorted(flagged - truth)[:20]  # precision
    assert tp / len(truth) >= 0.999, sorted(truth - flagged)[:20]  # recall
    assert len(near & flagged) / len(near) >= 0.99, sorted(near - flagged)
    assert len(near_any & flagged) / len(near_any) >= 0.99
    # The earliest match is the earliest near-duplicate the brute force finds.
    right_first = sum(
        verdicts[j].duplicate_of == docs[min(i for i, _ in earlier[j])].id for j in truth
    )
    assert right_first / len(truth) >= 0.999
    assert all(v.skipped == 0 for v in verdicts)


@pytest.mark.dump
def test_kijiji_memory_and_sqlite_agree(
    kijiji_reference: tuple[Settings, list[Document], list[Verdict]],
    make_store: Callable[..., Store],
) -> None:
    settings, docs, mem = kijiji_reference
    sql = run(Detector(settings, make_store("sqlite")), docs, batch=500)
    assert [v.to_json() for v in sql] == [v.to_json() for v in mem]


# --- issue 17 item 4: replaced documents (same id, new text)

_TEXTS = (
    "Cercasi sviluppatore Python per progetto web a Roma, contratto a tempo indeterminato",
    "Cercasi sviluppatore Python per progetto web a Roma, contratto a tempo determinato",
    "Cercasi sviluppatore Python per progetto web a Milano, contratto a tempo indeterminato",
    "Azienda cerca magazziniere con patente per turni notturni nella zona di Bologna",
    "Azienda cerca magazziniere con patente per turni diurni nella zona di Bologna",
    "Studio dentistico assume assistente alla poltrona, anche prima esperienza",
)


def _replace_settings() -> Settings:
    return build_settings("default", env={}, overrides={
        "stopwords": "", "stem_language": "", "shingle_size": 5, "threshold": 0.6})


def _run(store: Store, stream: Sequence[tuple[str, int]], cuts: Sequence[int]) -> list[Verdict]:
    detector = Detector(_replace_settings(), store)
    docs = [Document(i, {"title": "", "description": _TEXTS[t]}) for i, t in stream]
    out: list[Verdict] = []
    bounds = sorted({0, len(docs), *(c % (len(docs) + 1) for c in cuts)})
    for lo, hi in itertools.pairwise(bounds):
        out.extend(detector.process_many(docs[lo:hi]))
        store.commit()
    return out


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_the_issues_replacement_cases(backend: str, make_store: Callable[..., Store],
                                      tmp_path: Path) -> None:
    store = make_store(backend, tmp_path / "s")
    # A:X, C:X, A:Y, then offset 0 redelivered: A:X must not become C's duplicate (a cycle)
    first = _run(store, [("A", 0), ("C", 0), ("A", 3)], [])
    again = _run(store, [("A", 0)], [])
    assert first[1].duplicate_of == "A" and again[0] == first[0]
    # B:X, A:Z, A:X, A:Z: 'exact' only with an identical set; the same pair, the same answer
    store2 = make_store(backend, tmp_path / "s2")
    v = _run(store2, [("B", 0), ("A", 1), ("A", 0), ("A", 1)], [])
    assert v[3] == v[1]
    for verdict in v:
        assert not verdict.exact or any(m.jaccard == 1.0 for m in verdict.matches)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(st.tuples(st.sampled_from("ABCDE"), st.integers(0, len(_TEXTS) - 1)),
                       min_size=1, max_size=30),
       cuts=st.lists(st.integers(0, 40), max_size=4),
       backend=st.sampled_from(["memory", "sqlite"]))
def test_replaying_any_stream_onto_its_own_store_changes_no_verdict(
        stream: list[tuple[str, int]], cuts: list[int], backend: str,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The property the issue asks for, over ids that are re-used with other texts, in
    batches cut anywhere: the replay's verdicts equal the first run's, no document matches
    itself, and ``exact`` comes with a match of similarity 1.0."""
    from streamdedup.store import open_store

    params = Sketcher(_replace_settings()).params()
    store = open_store(backend, str(tmp_path_factory.mktemp("store")), params)
    try:
        first = _run(store, stream, cuts)
        replayed = _run(store, stream, cuts[::-1])
    finally:
        store.close()
    assert replayed == first
    for verdict in first:
        assert verdict.id not in {m.id for m in verdict.matches}
        assert verdict.duplicate_of != verdict.id
        assert not verdict.exact or any(m.jaccard == 1.0 for m in verdict.matches)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_crowded_sets_give_the_verdicts_of_an_uncapped_store(
        backend: str, make_store: Callable[..., Store], tmp_path: Path) -> None:
    """40 distinct variants of one ad and reposts of them: with at most 5 edges per set the
    verdicts are those of a store that keeps every edge (a crowded set is verified again),
    and the edges stay under sets x cap instead of growing with the square of the cluster."""
    rng = random.Random(5)
    base = [f"w{i}" for i in range(60)]
    variants = []
    for k in range(40):
        words = list(base)
        for _ in range(3):
            words[rng.randrange(len(words))] = f"x{k}{rng.randrange(99)}"
        variants.append(" ".join(words))
    docs = [doc(f"v{k}", t) for k, t in enumerate(variants)]
    docs += [doc(f"r{k}", variants[rng.randrange(40)]) for k in range(40)]
    verdicts = {}
    for cap in (5, 10_000):
        store = make_store(backend, tmp_path / f"cap{cap}")
        det = Detector(WORDS, store)
        det.edge_cap = cap
        verdicts[cap] = [observable(v) for v in run(det, docs, batch=9)]
        edges = sum(len(store.neighbours(s) or []) for s in {det.sketcher.shingle_fields(
            d.fields).set_id for d in docs})
        if cap == 5:
            assert edges <= 40 * 5
        else:
            assert edges > 40 * 5  # uncapped, the cluster's edges are quadratic
    assert verdicts[5] == verdicts[10_000]
    assert sum(v["duplicate"] for v in verdicts[5]) > 40


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.8, 0.85, 0.9, 1.0]), st.integers(0, 10**6)),
                max_size=60, unique_by=lambda f: f[1]), st.integers(1, 12))
def test_matches_ranked_best_first_then_earliest(found: list[tuple[float, int]],
                                                 limit: int) -> None:
    """The selection gives what sorting everything did: the ``limit`` best, ties by arrival,
    and the earliest document of all (also when it is not among them)."""
    docs = [(sim, seq, f"d{seq}") for sim, seq in found]
    ordered = sorted(docs, key=lambda f: (-f[0], f[1]))
    matches, earliest = rank_matches(iter(docs), limit)
    assert matches == tuple(Match(d, sim) for sim, _, d in ordered[:limit])
    assert earliest == (min(docs, key=lambda f: f[1])[2] if docs else None)
