"""Evaluation numbers checked against naive reference computations on a generated dump.

The detector runs in-process (Detector + MemoryStore); the expected numbers come from plain
double loops over ``jaccard()`` and a dict-based union-find, independent of the vectorized
code under test.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
from evaluation_cases import detect, generated_docs, make_settings, naive_true_pairs, truth_for

from streamdedup.core import lsh
from streamdedup.core.document import Document
from streamdedup.core.jaccard import jaccard
from streamdedup.core.minhash import make_hasher
from streamdedup.core.sketch import Sketcher
from streamdedup.core.verdict import Match, Verdict
from streamdedup.replay import evaluation as ev
from streamdedup.replay import truth as tr
from streamdedup.replay.truth import all_pairs
from streamdedup.settings import Settings

# --- naive references ---------------------------------------------------------------------


def naive_clusters(ids: Sequence[str], verdicts: Mapping[str, Verdict]) -> dict[str, str]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            x = parent[x]
        return x

    for doc_id in ids:
        find(doc_id)
        v = verdicts.get(doc_id)
        for other in ([v.cluster_id, *(m.id for m in v.matches)] if v else []):
            parent[find(other)] = find(doc_id)
    return {i: find(i) for i in ids}


def naive_metrics(docs: Sequence[Document], verdicts: Mapping[str, Verdict],
                  settings: Settings) -> dict[str, float]:
    ids = [d.id for d in docs]
    pos = {i: k for k, i in enumerate(ids)}
    true = naive_true_pairs(docs, settings)
    actual = [any((e, k) in true for e in range(k)) for k in range(len(docs))]
    flagged = [verdicts[i].duplicate for i in ids]
    tp = sum(a and f for a, f in zip(actual, flagged, strict=True))
    named = {tuple(sorted((pos[i], pos[m.id]))) for i in ids for m in verdicts[i].matches}
    root = naive_clusters(ids, verdicts)
    together = sum(root[ids[a]] == root[ids[b]] for a, b in true)
    comps: dict[str, int] = {}
    for r in root.values():
        comps[r] = comps.get(r, 0) + 1
    return {
        "doc_precision": tp / max(1, sum(flagged)),
        "doc_recall": tp / max(1, sum(actual)),
        "pair_precision": sum(p in true for p in named) / max(1, len(named)),
        "pair_recall": together / len(true),
        "true_pairs": len(true),
        "clusters": sum(c >= 2 for c in comps.values()),
    }


# --- ground truth ---------------------------------------------------------------------------


def test_set_similarities_match_brute_force() -> None:
    docs = generated_docs()
    settings = make_settings()
    truth = truth_for(docs, settings)
    expected = naive_true_pairs(docs, settings)
    assert truth.true_pairs == len(expected) == len(all_pairs(
        [Sketcher(settings).shingle_fields(d.fields).shingles for d in docs], settings.threshold))
    c = truth.corpus
    for i, j, s in zip(truth.pairs.i, truth.pairs.j, truth.pairs.sim, strict=True):
        assert s == pytest.approx(jaccard(c.sets[i], c.sets[j]))
        assert s >= truth.pairs.min_sim
    # every pair of distinct sets down to min_sim is there
    n_low = sum(jaccard(a, b) >= truth.pairs.min_sim
                for a, b in itertools.combinations(c.sets, 2))
    assert truth.pairs.i.size == n_low


def test_set_similarities_blocks_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    sets = tr.Corpus.build(generated_docs(), Sketcher(make_settings())).sets
    whole = tr.set_similarities(sets, 0.05)
    monkeypatch.setattr(tr, "_BLOCK_CELLS", 3)  # one row per product block
    blocked = tr.set_similarities(sets, 0.05)
    for name in ("i", "j", "sim"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(blocked, name))


def test_ground_truth_cache_round_trip(tmp_path: Path) -> None:
    docs = generated_docs()
    settings = make_settings()
    key = tr.cache_key("0" * 64, Sketcher(settings).params(), tr.HISTOGRAM_MIN_SIM)
    first = truth_for(docs, settings, key=key, cache_dir=tmp_path)
    assert not first.cached
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".json", ".npy"]
    np.load(tmp_path / f"{key}.npy", allow_pickle=False)  # plain data, no pickle
    second = truth_for(docs, settings, key=key, cache_dir=tmp_path)
    assert second.cached
    assert second.brute_force_s == first.brute_force_s
    for name in ("i", "j", "sim"):
        np.testing.assert_array_equal(getattr(first.pairs, name), getattr(second.pairs, name))
    # the same key over other documents is not trusted
    other = truth_for(docs[:-3], settings, key=key, cache_dir=tmp_path)
    assert not other.cached
    # a damaged entry is recomputed, not an error
    (tmp_path / f"{key}.npy").write_bytes(b"garbage")
    assert not truth_for(docs[:-3], settings, key=key, cache_dir=tmp_path).cached


def test_default_cache_dir_follows_the_environment(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMDEDUP_CACHE", str(tmp_path))
    assert tr.default_cache_dir() == tmp_path / "groundtruth"


def test_cache_key_depends_on_dump_and_params(tmp_path: Path) -> None:
    dump = tmp_path / "d.tsv"
    dump.write_bytes(b"title\tdescription\nx\ty\n")
    params = Sketcher(make_settings()).params()
    k1 = tr.cache_key(tr.file_sha256(dump), params, 0.1)
    assert k1 == tr.cache_key(tr.file_sha256(dump), dict(params), 0.1)
    assert k1 != tr.cache_key(tr.file_sha256(dump), {**params, "threshold": 0.7}, 0.1)
    dump.write_bytes(b"title\tdescription\nx\tz\n")
    assert k1 != tr.cache_key(tr.file_sha256(dump), params, 0.1)


# --- metrics of in-process verdicts --------------------------------------------------------


def test_metrics_perfect_detector_match_naive() -> None:
    docs = generated_docs()
    settings = make_settings()
    verdicts = detect(docs, settings)
    report = ev.evaluate(docs, verdicts, truth_for(docs, settings), settings)
    naive = naive_metrics(docs, verdicts, settings)
    assert naive["doc_recall"] == naive["pair_recall"] == 1.0
    for key in ("doc_precision", "doc_recall", "pair_precision", "pair_recall", "clusters"):
        assert report[key] == pytest.approx(naive[key]), key
    assert report["doc_f1"] == 1.0
    assert report["pair_counts"]["true_pairs"] == naive["true_pairs"]
    # 4 originals copied (one twice) + 5 light edits: 10 later ads have an earlier twin
    assert report["doc_counts"]["true_duplicates"] == 10
    assert report["clusters"] == report["true_clusters"] == 9
    assert report["verdicts"] == len(docs) and report["missing_verdicts"] == 0
    json.dumps(report)  # JSON-able as it is


def test_tiny_bands_give_a_known_false_negative() -> None:
    """One band of 16 rows: near-duplicates at J ~ 0.9 mostly miss; copies never do."""
    docs = generated_docs()
    settings = make_settings(num_perm=16, bands=1, rows=16, threshold=0.6)
    verdicts = detect(docs, settings)
    report = ev.evaluate(docs, verdicts, truth_for(docs, settings), settings)
    naive = naive_metrics(docs, verdicts, settings)
    assert report["doc_recall"] < 1.0
    assert report["pair_recall"] < 1.0
    assert report["doc_precision"] == report["pair_precision"] == 1.0  # verified exactly
    for key in ("doc_precision", "doc_recall", "pair_precision", "pair_recall", "clusters"):
        assert report[key] == pytest.approx(naive[key]), key
    # a missed near-duplicate stays alone: fewer clusters of >= 2, more components overall
    assert report["clusters"] < report["true_clusters"]
    assert report["components_with_singletons"] > report["true_components_with_singletons"]
    counts = report["doc_counts"]
    assert counts["fn"] == counts["true_duplicates"] - counts["tp"] > 0
    apart = report["unclustered_examples"]
    assert apart and all(e["jaccard"] >= 0.6 and not e["later_duplicate"] for e in apart)


def test_pair_recall_follows_merged_clusters() -> None:
    """Cluster ids are the earliest document *at verdict time*; later merges must count."""
    docs = [Document(i, {"title": t}) for i, t in
            [("a", "alpha beta gamma delta"), ("b", "omega psi chi phi"),
             ("c", "alpha beta gamma delta"), ("d", "omega psi chi phi")]]
    settings = make_settings(shingle_size=3)
    truth = truth_for(docs, settings)
    assert truth.true_pairs == 2  # (a, c) and (b, d)

    def v(doc_id: str, cluster: str, *matches: str) -> Verdict:
        return Verdict(doc_id, bool(matches), matches[0] if matches else None,
                       tuple(Match(m, 1.0) for m in matches), cluster, 0)

    # d names only b's *old* cluster id; a later verdict links b into a's cluster.
    verdicts = {"a": v("a", "a"), "b": v("b", "b"), "c": v("c", "a", "a"),
                "d": v("d", "b", "b")}
    m = ev.pair_metrics(truth, verdicts, ev.verdict_clusters(truth.corpus.ids, verdicts))
    assert m["pair_precision"] == m["pair_recall"] == 1.0
    merged = {**verdicts, "c": v("c", "a", "a", "b")}  # c (wrongly) links b's cluster to a's
    labels = ev.verdict_clusters(truth.corpus.ids, merged)
    assert len(set(labels.tolist())) == 1
    m = ev.pair_metrics(truth, merged, labels)
    assert m["pair_precision"] == pytest.approx(2 / 3)  # (a, c), (b, d) true; (b, c) not
    assert m["pair_recall"] == 1.0
    split = {**verdicts, "d": v("d", "d")}  # d missed: recall 1 of 2
    m = ev.pair_metrics(truth, split, ev.verdict_clusters(truth.corpus.ids, split))
    assert m["pair_recall"] == 0.5
    assert m["unclustered_examples"] == [{
        "earlier": "b", "later": "d", "jaccard": 1.0, "later_duplicate": False,
        "later_matches": 0, "later_has_verdict": True}]


def test_missing_verdicts_count_as_not_flagged() -> None:
    docs = generated_docs()
    settings = make_settings()
    verdicts = detect(docs, settings)
    dup = next(i for i, v in verdicts.items() if v.duplicate)
    partial = {i: v for i, v in verdicts.items() if i != dup}
    report = ev.evaluate(docs, partial, truth_for(docs, settings), settings,
                         with_band_table=False)
    assert report["missing_verdicts"] == 1
    assert report["doc_counts"]["fn"] == 1
    assert "band_table" not in report


def test_evaluate_refuses_other_documents() -> None:
    docs = generated_docs()
    settings = make_settings()
    with pytest.raises(ValueError, match="other documents"):
        ev.evaluate(docs[1:], {}, truth_for(docs, settings), settings)


# --- the study's table ---------------------------------------------------------------------


def test_band_table_matches_naive_candidate_counts() -> None:
    docs = generated_docs()
    settings = make_settings(threshold=0.5)
    truth = truth_for(docs, settings)
    true = naive_true_pairs(docs, settings)
    table = ev.band_table(truth, settings, layouts=((4, 2), (1, 16)), num_perm=16)
    b, r = lsh.choose_bands(0.5, settings.num_perm)
    assert [row["setting"] for row in table["rows"]] == ["4x2", "1x16", f"{b}x{r}, chosen"]
    sk = Sketcher(settings)
    sh = [sk.shingle_fields(d.fields).shingles for d in docs]
    for row in table["rows"]:
        hasher = make_hasher(settings.minhash, row["num_perm"], settings.seed)
        keys = [set(lsh.band_keys(hasher.sign(s), row["bands"], row["rows"]).tolist())
                if s.size else set() for s in sh]
        cand = {(a, b) for a, b in itertools.combinations(range(len(docs)), 2)
                if keys[a] & keys[b]}
        assert row["candidate_pairs"] == len(cand), row["setting"]
        assert row["true_pairs"] == len(true)
        assert row["true_candidates"] == len(cand & set(true))
        assert row["fp_rate"] == pytest.approx(len(cand - set(true)) / len(cand))
        assert row["fn_rate"] == pytest.approx(len(set(true) - cand) / len(true))
        # between distinct texts: one representative document per set
        sets = {sh[k].tobytes(): k for k in range(len(docs) - 1, -1, -1) if sh[k].size}
        reps = set(sets.values())
        d = row["distinct"]
        assert d["candidate_pairs"] == len({p for p in cand if set(p) <= reps})
        assert d["true_pairs"] == len({p for p in true if set(p) <= reps})
    assert table["pairwise_estimate_s"] > 0
    assert table["rows"][1]["fn_rate"] > 0  # one band of 16 rows misses most edits



def test_the_band_table_shows_the_layout_given_not_the_one_the_threshold_would_choose(
        ) -> None:
    """With --bands 4 --rows 25 the table's own row (and the S-curve) showed 25x5, the
    threshold's choice: the layout that missed the run's duplicates appeared nowhere."""
    docs = generated_docs()
    settings = make_settings(bands=4, rows=25)
    table = ev.band_table(truth_for(docs, settings), settings, layouts=((4, 2),), num_perm=16)
    assert [row["setting"] for row in table["rows"]] == ["4x2", "4x25, given"]
    assert (table["rows"][1]["bands"], table["rows"][1]["rows"]) == (4, 25)

def test_similarity_histogram_counts_document_pairs() -> None:
    docs = generated_docs()
    settings = make_settings()
    truth = truth_for(docs, settings)
    hist = truth.similarity_histogram(bins=10)
    sk = Sketcher(settings)
    sh = [sk.shingle_fields(d.fields).shingles for d in docs]
    sims = [jaccard(a, b) for a, b in itertools.combinations(sh, 2)]
    assert sum(hist["counts"]) == sum(s >= hist["edges"][0] for s in sims)
    assert hist["counts"][-1] >= truth.true_pairs - sum(
        s >= settings.threshold and s < hist["edges"][-2] for s in sims)


# --- labels, latency ------------------------------------------------------------------------


def test_link_labels_count_flagged_reposts_and_show_misses() -> None:
    docs = generated_docs()
    settings = make_settings()
    verdicts = detect(docs, settings)
    truth = truth_for(docs, settings)
    labels = ev.verdict_clusters(truth.corpus.ids, verdicts)
    out = ev.link_labels(truth, docs, verdicts, labels, settings.text_fields)
    # reposts: 5 copies + 5 light edits + 2 rewrites
    assert out["reposts"] == 12
    assert out["flagged"] == out["true_duplicates"] == 10
    assert out["missed"] == 2 and len(out["misses"]) == 2
    for miss in out["misses"]:
        assert miss["jaccard"] < settings.threshold
        assert miss["text"] and miss["first_text"] and miss["text"] != miss["first_text"]


def test_latency_stats() -> None:
    produced = {str(i): float(i) for i in range(100)}
    seen = {str(i): i + (i + 1) / 1000 for i in range(100)}  # 1 ms .. 100 ms
    out = ev.latency_stats(produced, seen)
    assert out["latency_ms"]["p50"] == pytest.approx(50.5)
    assert out["latency_ms"]["p99"] == pytest.approx(99.01)
    assert out["docs_per_second"] == pytest.approx(100 / 99.1)
    assert ev.latency_stats({}, {})["docs_per_second"] == 0.0
