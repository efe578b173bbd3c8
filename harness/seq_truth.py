"""Truth in arrival order, for consumer groups sharing one store (``harness/group.py``, the
shared-store tests): a document is a duplicate when a document with a smaller seq has exact
Jaccard >= threshold with it, and the clusters a reader makes of the verdicts must be the
components at the threshold. Development harness, not shipped: the product's own truth
(``replay/truth.py``) is the file-order one its reports use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamdedup.replay.truth import Corpus, SetPairs, component_labels, set_similarities


def seq_truth(sets: Mapping[str, np.ndarray], seqs: Mapping[str, int], threshold: float
              ) -> dict[str, bool]:
    """Is each document a duplicate by the shared store's definition: does a document with a
    smaller seq have exact Jaccard >= threshold? ``sets``: doc id -> sorted shingles (one
    text per id); ``seqs``: doc id -> seq. Distinct sets and a sparse product, so thousands
    of documents take a second."""
    return _seq_truth(_SetGraph.of(sets, threshold), seqs)


@dataclass(frozen=True)
class _SetGraph:
    """The documents grouped by distinct set (a ``Corpus``), and the pairs of sets at the
    threshold."""

    corpus: Corpus
    pairs: SetPairs | None

    @classmethod
    def of(cls, sets: Mapping[str, np.ndarray], threshold: float) -> _SetGraph:
        corpus = Corpus.from_shingles(list(sets), list(sets.values()))
        pairs = set_similarities(corpus.sets, threshold) if len(corpus.sets) > 1 else None
        return cls(corpus, pairs)


def _seq_truth(graph: _SetGraph, seqs: Mapping[str, int]) -> dict[str, bool]:
    c = graph.corpus
    has = c.set_index >= 0
    seq = np.array([seqs[d] for d in c.ids], dtype=np.int64)
    first = np.full(len(c.sets), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, c.set_index[has], seq[has])
    neighbour_first = first.copy()  # earliest seq among the set and its similar sets
    if graph.pairs is not None:
        np.minimum.at(neighbour_first, graph.pairs.i, first[graph.pairs.j])
        np.minimum.at(neighbour_first, graph.pairs.j, first[graph.pairs.i])
    return {doc_id: bool(has[k] and neighbour_first[c.set_index[k]] < seq[k])  # an earlier
            for k, doc_id in enumerate(c.ids)}                                  # neighbour


def reader_clusters(verdicts: Mapping[str, Mapping[str, Any]]) -> list[frozenset[str]]:
    """The clusters a reader of the verdicts (by id; the monitor) makes of them, in seq
    order: a document joins the cluster its ``cluster_id`` names (its own id if none), and
    each cluster in ``merged`` moves into it (a later verdict that names a merged cluster
    means where it moved)."""
    members: dict[str, set[str]] = {}
    moved: dict[str, str] = {}

    def now(label: str) -> str:
        while label in moved:
            label = moved[label]
        return label

    for doc_id, v in sorted(verdicts.items(), key=lambda kv: kv[1]["seq"]):
        into = now(str(v.get("cluster_id") or doc_id))
        members.setdefault(into, set()).add(doc_id)
        for label in v.get("merged") or ():
            old = now(str(label))
            if old != into:
                members[into] |= members.pop(old, set())
                moved[old] = into
    return [frozenset(c) for c in members.values()]


def check_seq_order(verdicts: Mapping[str, Mapping[str, Any]], sets: Mapping[str, np.ndarray],
                    threshold: float) -> dict[str, Any]:
    """Verdicts (by id) against ``seq_truth``: seqs unique integers, duplicate flags equal to
    the truth (precision and recall), no match with the document itself or a later seq, and
    the clusters a reader makes of ``cluster_id`` and ``merged`` equal to the components at
    the threshold (two verdicts of a group named a cluster that had merged, unannounced)."""
    seqs = {i: v.get("seq") for i, v in verdicts.items()}
    bad_seq = sorted(i for i, s in seqs.items() if not isinstance(s, int) or isinstance(s, bool))
    good = {i: int(s) for i, s in seqs.items() if i not in bad_seq}  # type: ignore[arg-type]
    known = {i: sets[i] for i in good}
    graph = _SetGraph.of(known, threshold)
    truth = _seq_truth(graph, good)
    components: dict[int, set[str]] = {}
    for doc_id, label in zip(graph.corpus.ids, component_labels(graph.corpus, graph.pairs).tolist(),
                             strict=True):
        components.setdefault(label, set()).add(doc_id)
    want = {frozenset(c) for c in components.values()}
    got = set(reader_clusters({i: verdicts[i] for i in good}))
    unlike = sorted(min(c) for c in got - want)  # a cluster a reader sees that is not one
    # A document that reached max_candidates may miss a match, and so a link between two
    # clusters the components have: the clusters are not compared then (None).
    capped = any(verdicts[i].get("skipped") for i in good)
    flagged = {i for i in good if verdicts[i]["duplicate"]}
    true = {i for i, t in truth.items() if t}
    later = sorted(i for i in good for m in verdicts[i].get("matches", ())
                   if m["id"] == i or m["id"] not in good or good[m["id"]] >= good[i])
    return {
        "verdicts": len(verdicts), "bad_seq": len(bad_seq),
        "repeated_seqs": len(good) - len(set(good.values())),
        "duplicates": len(flagged), "true_duplicates": len(true),
        "false_positives": len(flagged - true), "false_negatives": len(true - flagged),
        "precision": round(len(flagged & true) / len(flagged), 6) if flagged else 1.0,
        "recall": round(len(flagged & true) / len(true), 6) if true else 1.0,
        "self_or_later_matches": len(later),
        "clusters": len(want), "clusters_unlike_the_truth": None if capped else len(unlike),
        "examples": {"false_positives": sorted(flagged - true)[:5],
                     "clusters_unlike_the_truth": unlike[:5],
                     "false_negatives": sorted(true - flagged)[:5],
                     "self_or_later_matches": later[:5], "bad_seq": bad_seq[:5]},
    }
