"""Quality metrics: how close are the verdicts to the exact ground truth (``truth.py``)?

Definitions (the report repeats them):

- **true pair**: two documents whose normalized shingle sets have exact Jaccard >= threshold
  (equal non-empty sets included; empty sets never pair);
- **doc level**: a document "has an earlier near-duplicate" when a true pair joins it to a
  document that arrived before it; a verdict says so with ``duplicate``;
- **pair precision**: share of the pairs (id, match id) named in verdicts that are true pairs;
- **pair recall**: share of true pairs whose documents end in the same final verdict cluster.
  Final clusters are the connected components of the links (id, cluster_id), (id, each id in
  ``merged``) and (id, match id), because a ``cluster_id`` is the cluster's earliest document
  *when the verdict was given* and clusters merge later (the merging verdict names them);
- **clusters**: connected components with at least two documents (singletons are counted
  separately), for verdict links and for true pairs alike.

Also the study's LSH table (candidate pairs, false-positive and false-negative rates per band
layout) and latency statistics. Needs scipy (the ``report`` extra).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from streamdedup.core import lsh
from streamdedup.core.document import Document
from streamdedup.core.jaccard import jaccard
from streamdedup.core.minhash import make_hasher
from streamdedup.core.text import compose_text
from streamdedup.core.verdict import Verdict
from streamdedup.extras import require
from streamdedup.replay.truth import Corpus, GroundTruth, component_labels, copy_pairs
from streamdedup.settings import Settings

connected_components = require("scipy.sparse.csgraph", "ground truth").connected_components
sparse = require("scipy.sparse", "ground truth")

STUDY_LAYOUTS: tuple[tuple[int, int], ...] = ((10, 10), (20, 5), (25, 4), (50, 2))
STUDY_NUM_PERM = 100
_FP_RATE_DEF = "candidate pairs that are not true pairs / candidate pairs"
_FN_RATE_DEF = "true pairs that are not candidate pairs / true pairs"


# --------------------------------------------------------------------------------------------
# metrics of verdicts


def _ratio(num: int, den: int) -> float:
    """num / den, and 1.0 when there is nothing to get wrong (den == 0)."""
    return num / den if den else 1.0


def _rate(num: int, den: int) -> float:
    """An error rate: num / den, and 0.0 when there is nothing to get wrong."""
    return num / den if den else 0.0


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def truly_duplicate(truth: GroundTruth) -> np.ndarray:
    """Per document: does a true pair join it to an earlier-arrived document?"""
    c = truth.corpus
    n = len(c.ids)
    g = c.set_index
    big = np.int64(n)
    first = np.full(len(c.sets), big, dtype=np.int64)
    np.minimum.at(first, g[g >= 0], np.flatnonzero(g >= 0))
    earliest = first.copy()  # earliest document of the set itself or of a true neighbour set
    t = truth.true_set_pairs
    np.minimum.at(earliest, t.i, first[t.j])
    np.minimum.at(earliest, t.j, first[t.i])
    out = np.zeros(n, dtype=bool)
    has = g >= 0
    out[has] = earliest[g[has]] < np.flatnonzero(has)
    return out


def verdict_clusters(ids: Sequence[str], verdicts: Mapping[str, Verdict]) -> np.ndarray:
    """Final cluster label of each document: components of (id, cluster_id), (id, merged
    cluster ids) and (id, match id)."""
    index = {doc_id: k for k, doc_id in enumerate(ids)}
    src: list[int] = []
    dst: list[int] = []

    def node(doc_id: str) -> int:
        k = index.get(doc_id)
        if k is None:  # an id outside the evaluated documents (e.g. from a reused store)
            k = index[doc_id] = len(index)
        return k

    for doc_id in ids:
        v = verdicts.get(doc_id)
        if v is None:
            continue
        a = index[doc_id]
        for other in (v.cluster_id, *v.merged, *(m.id for m in v.matches)):
            src.append(a)
            dst.append(node(other))
    n = len(index)
    graph = sparse.coo_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    return labels[: len(ids)]


def true_clusters(truth: GroundTruth) -> np.ndarray:
    """Cluster label of each document: components of true pairs (empty sets alone)."""
    return component_labels(truth.corpus, truth.true_set_pairs)


def _count_clusters(labels: np.ndarray) -> tuple[int, int]:
    """(components with >= 2 documents, all components)."""
    _, sizes = np.unique(labels, return_counts=True)
    return int((sizes >= 2).sum()), int(sizes.size)


def doc_metrics(truth: GroundTruth, verdicts: Mapping[str, Verdict]) -> dict[str, Any]:
    actual = truly_duplicate(truth)
    flagged = np.array([bool(v.duplicate) if (v := verdicts.get(i)) else False
                        for i in truth.corpus.ids], dtype=bool)
    tp = int((actual & flagged).sum())
    fp = int((~actual & flagged).sum())
    fn = int((actual & ~flagged).sum())
    p, r = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    return {
        "doc_precision": p, "doc_recall": r, "doc_f1": _f1(p, r),
        "doc_counts": {"true_duplicates": int(actual.sum()), "flagged": int(flagged.sum()),
                       "tp": tp, "fp": fp, "fn": fn},
    }


def pair_metrics(
    truth: GroundTruth, verdicts: Mapping[str, Verdict], labels: np.ndarray
) -> dict[str, Any]:
    """Pair precision over the verdicts' named matches; pair recall over final clusters."""
    c = truth.corpus
    n_sets = len(c.sets)
    pos = c.position
    named: set[tuple[int, int]] = set()
    unknown = 0
    for doc_id in c.ids:
        v = verdicts.get(doc_id)
        for m in v.matches if v else ():
            other = pos.get(m.id)
            if other is None:
                unknown += 1
            elif other != pos[doc_id]:
                a, b = pos[doc_id], other
                named.add((min(a, b), max(a, b)))
    if named:
        a, b = np.array(sorted(named), dtype=np.int64).T
        ga, gb = c.set_index[a], c.set_index[b]
        lo, hi = np.minimum(ga, gb), np.maximum(ga, gb)
        keys = truth.true_pair_keys()
        hit = np.isin(lo * n_sets + hi, keys) & (lo >= 0)
        named_true = int((hit | ((ga == gb) & (ga >= 0))).sum())
    else:
        named_true = 0

    # Same-cluster document pairs per set pair: (S S^T)[g, h] with S = set x cluster counts.
    has = c.set_index >= 0
    _, cl = np.unique(labels[has], return_inverse=True)
    s = sparse.csr_matrix(
        (np.ones(int(has.sum()), dtype=np.int64), (c.set_index[has], cl)),
        shape=(n_sets, int(cl.max()) + 1 if cl.size else 0),
    )
    s.sum_duplicates()
    together = (s @ s.T).tocoo()
    t = truth.true_set_pairs
    tkeys = t.i * n_sets + t.j
    mkeys = together.row.astype(np.int64) * n_sets + together.col
    order = np.argsort(mkeys)
    mkeys, mvals = mkeys[order], together.data[order]
    per_pair = np.zeros(tkeys.size, dtype=np.int64)
    if mkeys.size:
        at = np.minimum(np.searchsorted(mkeys, tkeys), mkeys.size - 1)
        per_pair = np.where(mkeys[at] == tkeys, mvals[at], 0)
    counts = s.data.astype(np.int64)
    within = int((counts * (counts - 1) // 2).sum())
    clustered = int(per_pair.sum()) + within
    total = truth.true_pairs
    w = c.weights.astype(np.int64)
    apart = np.flatnonzero(per_pair < w[t.i] * w[t.j])
    return {
        "pair_precision": _ratio(named_true, len(named)),
        "pair_recall": _ratio(clustered, total),
        "pair_counts": {"named_pairs": len(named), "named_true": named_true,
                        "named_unknown_ids": unknown, "true_pairs": total,
                        "true_pairs_clustered": clustered},
        "unclustered_examples": _apart_examples(truth, verdicts, labels, apart[:10]),
    }


def _apart_examples(truth: GroundTruth, verdicts: Mapping[str, Verdict], labels: np.ndarray,
                    which: np.ndarray, limit: int = 5) -> list[dict[str, Any]]:
    """True pairs of sets whose first documents no verdict link joins, for a person to read."""
    c = truth.corpus
    first = np.full(len(c.sets), len(c.ids), dtype=np.int64)
    has = np.flatnonzero(c.set_index >= 0)
    np.minimum.at(first, c.set_index[has], has)
    t = truth.true_set_pairs
    # copies of one set in another cluster than the set's first document, then set pairs
    copies = has[labels[has] != labels[first[c.set_index[has]]]]
    found = [(int(first[c.set_index[k]]), int(k), 1.0) for k in copies[:limit]]
    for k in which.tolist():
        a, b = sorted((int(first[t.i[k]]), int(first[t.j[k]])))
        if labels[a] != labels[b]:  # else only other copies of these sets are apart
            found.append((a, b, float(t.sim[k])))
    out = []
    for a, b, sim in found[:limit]:
        later = verdicts.get(c.ids[b])
        out.append({
            "earlier": c.ids[a], "later": c.ids[b], "jaccard": round(sim, 4),
            "later_duplicate": bool(later and later.duplicate),
            "later_matches": len(later.matches) if later else 0,
            "later_has_verdict": later is not None,
        })
    return out


def latency_stats(
    produced_at: Mapping[str, float], verdict_at: Mapping[str, float]
) -> dict[str, Any]:
    """End-to-end latency (produce -> verdict read back) percentiles and throughput."""
    common = [i for i in verdict_at if i in produced_at]
    if not common:
        return {"docs_per_second": 0.0, "elapsed_s": 0.0,
                "latency_ms": {"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}}
    lat = np.array([verdict_at[i] - produced_at[i] for i in common]) * 1000.0
    p50, p95, p99 = np.percentile(lat, [50, 95, 99])
    elapsed = max(verdict_at[i] for i in common) - min(produced_at[i] for i in common)
    return {
        "docs_per_second": len(common) / elapsed if elapsed > 0 else 0.0,
        "elapsed_s": elapsed,
        "latency_ms": {"p50": float(p50), "p95": float(p95), "p99": float(p99),
                       "max": float(lat.max())},
    }


# --------------------------------------------------------------------------------------------
# the original study's table: LSH candidates over all documents vs exact pairs


def candidate_set_pairs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of rows (i < j) that share at least one band key: group rows by key.

    ``keys`` is (rows, bands) with band-mixed keys, so one flat grouping serves all bands.
    """
    n = keys.shape[0]
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    _, bucket = np.unique(keys.ravel(), return_inverse=True)
    rows = np.repeat(np.arange(n), keys.shape[1])
    b = sparse.csr_matrix((np.ones(rows.size, dtype=np.int32), (rows, bucket.ravel())),
                          shape=(n, int(bucket.max()) + 1))
    shared = sparse.triu(b @ b.T, k=1).tocoo()
    return shared.row.astype(np.int64), shared.col.astype(np.int64)


def band_table(
    truth: GroundTruth,
    settings: Settings,
    layouts: Iterable[tuple[int, int]] = STUDY_LAYOUTS,
    num_perm: int = STUDY_NUM_PERM,
) -> dict[str, Any]:
    """Candidate pairs, FP and FN rates of LSH settings over the whole corpus (not streaming).

    Rows: the study's layouts at ``num_perm`` permutations, and the settings' own layout
    (their --bands x --rows, else what the threshold chooses for their ``num_perm``). A
    row's time is signing the distinct sets (done once per permutation count) plus band
    keys and grouping; the brute-force time is ``truth.all_pairs`` on all documents.
    Neither includes shingling, which both need.
    """
    c = truth.corpus
    used = lsh.layout(settings.threshold, settings.num_perm, settings.bands, settings.rows)
    how = "chosen" if used == lsh.choose_bands(settings.threshold, settings.num_perm) else "given"
    specs = [(f"{b}x{r}", b, r, num_perm) for b, r in layouts]
    specs.append((f"{used[0]}x{used[1]}, {how}", *used, settings.num_perm))
    signed: dict[int, tuple[np.ndarray, float]] = {}
    rows = []
    for label, b, r, perms in specs:
        if perms not in signed:  # one signing per permutation count, charged to every row
            t0 = time.perf_counter()
            sigs = make_hasher(settings.minhash, perms, settings.seed).sign_many(list(c.sets))
            signed[perms] = (sigs, time.perf_counter() - t0)
        sigs, sign_s = signed[perms]
        t0 = time.perf_counter()
        ci, cj = candidate_set_pairs(lsh.band_keys_many(sigs, b, r))
        band_s = time.perf_counter() - t0
        rows.append(table_row(truth, label, ci, cj, bands=b, rows=r, num_perm=perms,
                              threshold=settings.threshold, sign_s=sign_s, band_s=band_s))
    return {
        "rows": rows,
        "brute_force_s": truth.brute_force_s,
        "brute_force_cached": truth.cached,
        "pairwise_estimate_s": pairwise_seconds(c),
        "fp_rate_definition": _FP_RATE_DEF,
        "fn_rate_definition": _FN_RATE_DEF,
    }


def table_row(truth: GroundTruth, label: str, ci: np.ndarray, cj: np.ndarray, *, bands: int,
              rows: int, num_perm: int, threshold: float, sign_s: float, band_s: float
              ) -> dict[str, Any]:
    """One row of the band table from candidate pairs of distinct sets (corpus indices, any
    order within a pair): counts in document pairs (copies are always candidates), FP and FN
    rates against the brute force, and the same between distinct texts."""
    c = truth.corpus
    w = c.weights.astype(np.int64)
    n_sets = len(c.sets)
    ci, cj = np.minimum(ci, cj).astype(np.int64), np.maximum(ci, cj).astype(np.int64)
    copies = copy_pairs(w)
    true_keys = truth.true_pair_keys()
    true_total = truth.true_pairs
    cand = int((w[ci] * w[cj]).sum()) + copies
    is_true = np.isin(ci * n_sets + cj, true_keys)
    both = int((w[ci[is_true]] * w[cj[is_true]]).sum()) + copies
    distinct_both = int(is_true.sum())
    return {
        "setting": label, "bands": bands, "rows": rows, "num_perm": num_perm,
        "p_at_threshold": float(lsh.p_candidate(threshold, bands, rows)),
        "candidate_pairs": cand, "true_pairs": true_total, "true_candidates": both,
        "fp_rate": _rate(cand - both, cand), "fn_rate": _rate(true_total - both, true_total),
        "candidate_precision": _ratio(both, cand), "candidate_recall": _ratio(both, true_total),
        "sign_s": sign_s, "band_s": band_s, "time_s": sign_s + band_s,
        # the same between distinct texts: exact copies, trivially found, left out
        "distinct": {
            "candidate_pairs": int(ci.size), "true_pairs": int(true_keys.size),
            "true_candidates": distinct_both,
            "fp_rate": _rate(int(ci.size) - distinct_both, int(ci.size)),
            "fn_rate": _rate(int(true_keys.size) - distinct_both, int(true_keys.size)),
        },
    }


def pairwise_seconds(corpus: Corpus, sample: int = 10_000, seed: int = 0) -> float:
    """Time a naive brute force (``jaccard`` on every pair of documents, as the original
    study did) would take, extrapolated from a fixed random sample of document pairs."""
    n = len(corpus.ids)
    total = n * (n - 1) // 2
    if total == 0:
        return 0.0
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n, sample)
    b = (a + rng.integers(1, n, sample)) % n if n > 1 else a
    empty = np.zeros(0, dtype=np.uint64)
    sets = [corpus.sets[g] if g >= 0 else empty for g in corpus.set_index]
    t0 = time.perf_counter()
    for i, j in zip(a.tolist(), b.tolist(), strict=True):
        jaccard(sets[i], sets[j])
    return (time.perf_counter() - t0) / sample * total


# --------------------------------------------------------------------------------------------
# the dump's own labels: rows sharing a link are reposts of one announcement

_SPACES = re.compile(r"\s+")


def _clip(text: str, width: int) -> str:
    text = _SPACES.sub(" ", text).strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def link_labels(
    truth: GroundTruth,
    docs: Sequence[Document],
    verdicts: Mapping[str, Verdict],
    labels: np.ndarray,
    text_fields: Sequence[str],
    *,
    examples: int = 5,
    width: int = 300,
) -> dict[str, Any]:
    """How many reposts (all but the first row of each ``link``) the verdicts flag.

    ``true_duplicates`` counts reposts whose exact Jaccard with an earlier row of their link
    reaches the threshold; misses are shown most similar first, so a person can judge them.
    """
    c = truth.corpus
    groups: dict[str, list[int]] = {}
    for k, d in enumerate(docs):
        link = (d.fields.get("link") or "").strip()
        if link:
            groups.setdefault(link, []).append(k)
    empty = np.zeros(0, dtype=np.uint64)

    def shingles(k: int) -> np.ndarray:
        g = c.set_index[k]
        return c.sets[g] if g >= 0 else empty

    reposts = flagged = true_dup = same_cluster = 0
    misses: list[dict[str, Any]] = []
    for members in groups.values():
        for pos, k in enumerate(members[1:], start=1):
            reposts += 1
            best = max(jaccard(shingles(k), shingles(e)) for e in members[:pos])
            true_dup += best >= truth.threshold
            v = verdicts.get(docs[k].id)
            same_cluster += bool(labels[k] == labels[members[0]])
            if v is not None and v.duplicate:
                flagged += 1
                continue
            first = docs[members[0]]
            misses.append({
                "link": docs[k].fields.get("link", ""),
                "id": docs[k].id, "first_id": first.id,
                "jaccard": round(jaccard(shingles(k), shingles(members[0])), 4),
                "best_jaccard": round(best, 4),
                "title": _clip(docs[k].fields.get("title", ""), 120),
                "first_title": _clip(first.fields.get("title", ""), 120),
                "text": _clip(compose_text(docs[k].fields, tuple(text_fields)), width),
                "first_text": _clip(compose_text(first.fields, tuple(text_fields)), width),
            })
    misses.sort(key=lambda m: (-m["best_jaccard"], m["id"]))
    return {
        "links": len(groups), "reposts": reposts, "flagged": flagged,
        "same_cluster_as_first": same_cluster, "true_duplicates": true_dup,
        "missed": reposts - flagged, "misses": misses[:examples],
    }


# --------------------------------------------------------------------------------------------
# everything at once


def evaluate(
    docs: Sequence[Document],
    verdicts: Mapping[str, Verdict],
    truth: GroundTruth,
    settings: Settings,
    *,
    dead_letters: int = 0,
    produced_at: Mapping[str, float] | None = None,
    verdict_at: Mapping[str, float] | None = None,
    with_band_table: bool = True,
) -> dict[str, Any]:
    """The report's numbers (a JSON-able dict) for verdicts on ``docs`` in arrival order."""
    if tuple(d.id for d in docs) != truth.corpus.ids:
        raise ValueError("the ground truth was computed for other documents")
    ids = truth.corpus.ids
    labels = verdict_clusters(ids, verdicts)
    tlabels = true_clusters(truth)
    clusters, components = _count_clusters(labels)
    tclusters, tcomponents = _count_clusters(tlabels)
    report: dict[str, Any] = {
        "docs": len(ids),
        "distinct_sets": len(truth.corpus.sets),
        "verdicts": sum(1 for i in ids if i in verdicts),
        "missing_verdicts": sum(1 for i in ids if i not in verdicts),
        "dead_letters": dead_letters,
        "threshold": truth.threshold,
    }
    report.update(doc_metrics(truth, verdicts))
    report.update(pair_metrics(truth, verdicts, labels))
    report.update({
        "clusters": clusters, "true_clusters": tclusters,
        "components_with_singletons": components,
        "true_components_with_singletons": tcomponents,
        "cluster_definition": "connected components with >= 2 documents",
    })
    report.update(latency_stats(produced_at or {}, verdict_at or {}))
    if with_band_table:
        report["band_table"] = band_table(truth, settings)
    report["similarity_histogram"] = {"min_sim": truth.pairs.min_sim,
                                      **truth.similarity_histogram()}
    report["link_labels"] = link_labels(truth, docs, verdicts, labels, settings.text_fields)
    report["definitions"] = {
        "true_pair": f"exact Jaccard of normalized shingle sets >= {truth.threshold}",
        "doc_level": "a document has an earlier near-duplicate (verdict.duplicate)",
        "pair_precision": "named (id, match id) pairs that are true pairs / named pairs",
        "pair_recall": "true pairs inside one final verdict cluster / true pairs",
        "final_clusters": "components of (id, cluster_id), (id, merged) and (id, match id) links",
        "docs_per_second": "documents with a verdict / (last verdict time - first send time)",
        "latency": "per document: time of its verdict record - time it was sent",
        "empty_ratio": "a precision or recall with nothing to count (0/0) is reported as 1.0",
    }
    for key in ("doc_precision", "doc_recall", "doc_f1", "pair_precision", "pair_recall"):
        if math.isnan(report[key]):
            raise AssertionError(f"{key} is NaN")
    return report
