"""Ground truth: exact all-pairs Jaccard of a dump's documents, computed once and cached.

Everything works on *distinct* shingle sets with a weight (how many documents have that set),
because real dumps are mostly exact copies: the Kijiji dump has 3,127 ads but 1,176 distinct
sets, and 1.3 million true pairs, most of them between copies of one boilerplate text. Counts
of document pairs are sums of weight products, never enumerations, so a dump whose true pairs
run into the millions is measured in a second.

Two exact methods must agree before a truth is trusted: ``set_similarities`` (a blocked sparse
product over distinct sets, down to a similarity floor for the histogram) and ``all_pairs``
(the brute-force list of document pairs). The result is cached on disk (JSON + ``.npy``, never
pickle) under a key made of the dump's bytes and the sketch parameters, and checked against
the sets it is loaded for. Needs scipy (the ``report`` extra).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from streamdedup.core.document import Document
from streamdedup.core.shingles import set_fingerprint
from streamdedup.core.sketch import Sketcher
from streamdedup.extras import require
from streamdedup.settings import cache_root

sparse = require("scipy.sparse", "ground truth")
connected_components = require("scipy.sparse.csgraph", "ground truth").connected_components

CACHE_VERSION = 1
HISTOGRAM_MIN_SIM = 0.1
_PAIR_DTYPE = np.dtype([("i", ">u4"), ("j", ">u4"), ("sim", ">f8")])
_BLOCK_CELLS = 20_000_000  # rows x sets of one product block: bounds its memory if dense


def default_cache_dir() -> Path:
    """``$STREAMDEDUP_CACHE/groundtruth`` or ``~/.cache/streamdedup/groundtruth``."""
    return cache_root() / "groundtruth"


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_key(dump_sha256: str, params: Mapping[str, Any], min_sim: float) -> str:
    """Name of a ground-truth cache entry: dump bytes, sketch parameters, similarity floor."""
    blob = json.dumps(
        {"v": CACHE_VERSION, "dump": dump_sha256, "params": dict(params), "min_sim": min_sim},
        sort_keys=True, separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


# --------------------------------------------------------------------------------------------
# corpus: documents in arrival order, collapsed to distinct shingle sets


@dataclass(frozen=True)
class Corpus:
    """Documents in arrival order and the distinct non-empty shingle set of each.

    ``set_index[k]`` is the index in ``sets`` of document k's set, -1 for an empty set.
    """

    ids: tuple[str, ...]
    set_index: np.ndarray
    sets: tuple[np.ndarray, ...]

    @classmethod
    def build(cls, docs: Sequence[Document], sketcher: Sketcher) -> Corpus:
        return cls.from_shingles(
            [d.id for d in docs], [sketcher.shingle_fields(d.fields).shingles for d in docs]
        )

    @classmethod
    def from_shingles(cls, ids: Sequence[str], shingles: Sequence[np.ndarray]) -> Corpus:
        if len(ids) != len(shingles):
            raise ValueError("one shingle array per id")
        if len(set(ids)) != len(ids):
            raise ValueError("document ids must be unique")
        seen: dict[bytes, int] = {}
        sets: list[np.ndarray] = []
        index = np.full(len(ids), -1, dtype=np.int64)
        for k, sh in enumerate(shingles):
            if not sh.size:
                continue
            key = sh.tobytes()
            g = seen.get(key)
            if g is None:
                seen[key] = g = len(sets)
                sets.append(sh)
            index[k] = g
        return cls(tuple(ids), index, tuple(sets))

    @property
    def weights(self) -> np.ndarray:
        """Documents per distinct set."""
        return np.bincount(self.set_index[self.set_index >= 0], minlength=len(self.sets))

    @property
    def position(self) -> dict[str, int]:
        return {doc_id: k for k, doc_id in enumerate(self.ids)}

    def digest(self) -> str:
        """Identity of the distinct sets in order: a cache entry must match it."""
        fps = np.array([set_fingerprint(s) for s in self.sets], dtype=">i8")
        return xxhash.xxh3_128_hexdigest(fps.tobytes())


def copy_pairs(weights: np.ndarray) -> int:
    """Document pairs inside the sets themselves (exact copies)."""
    w = weights.astype(np.int64)
    return int((w * (w - 1) // 2).sum())


# --------------------------------------------------------------------------------------------
# exact similarities of distinct sets


@dataclass(frozen=True)
class SetPairs:
    """Pairs of distinct sets (i < j) with their exact Jaccard, all >= ``min_sim``."""

    i: np.ndarray
    j: np.ndarray
    sim: np.ndarray
    min_sim: float

    def at(self, threshold: float) -> SetPairs:
        if threshold < self.min_sim:
            raise ValueError(f"pairs were computed down to {self.min_sim}, not {threshold}")
        keep = self.sim >= threshold
        return SetPairs(self.i[keep], self.j[keep], self.sim[keep], threshold)

    def doc_pairs(self, weights: np.ndarray) -> int:
        """Document pairs these set pairs stand for (copies of a set excluded)."""
        w = weights.astype(np.int64)
        return int((w[self.i] * w[self.j]).sum())


def set_similarities(sets: Sequence[np.ndarray], min_sim: float) -> SetPairs:
    """Exact Jaccard of every pair of distinct sets with similarity >= ``min_sim`` (> 0).

    Intersections come from a sparse product of the set x shingle incidence matrix, in blocks
    of rows so that the product stays bounded on large dumps.
    """
    if not 0.0 < min_sim <= 1.0:
        raise ValueError(f"min_sim must be in (0, 1], not {min_sim}")
    empty = SetPairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), min_sim)
    if len(sets) < 2:
        return empty
    sizes = np.array([s.size for s in sets], dtype=np.int64)
    if not sizes.all():
        raise ValueError("sets must be non-empty")
    vocab, cols = np.unique(np.concatenate(sets), return_inverse=True)
    rows = np.repeat(np.arange(len(sets)), sizes)
    x = sparse.csr_matrix(
        (np.ones(cols.size, dtype=np.int32), (rows, cols)), shape=(len(sets), vocab.size)
    )
    xt = x.T.tocsc()
    parts_i, parts_j, parts_s = [], [], []
    step = max(1, _BLOCK_CELLS // len(sets))
    for start in range(0, len(sets), step):
        block = (x[start : start + step] @ xt).tocoo()
        gi = block.row.astype(np.int64) + start
        gj = block.col.astype(np.int64)
        upper = gj > gi
        gi, gj, inter = gi[upper], gj[upper], block.data[upper].astype(np.int64)
        sim = inter / (sizes[gi] + sizes[gj] - inter)
        keep = sim >= min_sim
        parts_i.append(gi[keep])
        parts_j.append(gj[keep])
        parts_s.append(sim[keep])
    i, j, s = np.concatenate(parts_i), np.concatenate(parts_j), np.concatenate(parts_s)
    order = np.lexsort((j, i))
    return SetPairs(i[order], j[order], s[order], min_sim)


# --------------------------------------------------------------------------------------------
# ground truth (cached)


@dataclass(frozen=True)
class GroundTruth:
    """Exact similarities of a corpus: set pairs down to ``pairs.min_sim``, and the threshold."""

    corpus: Corpus
    pairs: SetPairs
    threshold: float
    brute_force_s: float  # all_pairs over all documents, timed when first computed
    cached: bool = False

    @property
    def true_set_pairs(self) -> SetPairs:
        return self.pairs.at(self.threshold)

    @property
    def true_pairs(self) -> int:
        w = self.corpus.weights
        return self.true_set_pairs.doc_pairs(w) + copy_pairs(w)

    def true_pair_keys(self) -> np.ndarray:
        """Sorted keys ``i * n_sets + j`` of the true set pairs (copies not included)."""
        t = self.true_set_pairs
        return np.sort(t.i * len(self.corpus.sets) + t.j)

    def similarity_histogram(self, bins: int = 90) -> dict[str, list[float]]:
        """Document pairs by exact Jaccard (from ``min_sim`` to 1), copies counted at 1.0."""
        w = self.corpus.weights.astype(np.int64)
        edges = np.linspace(self.pairs.min_sim, 1.0, bins + 1)
        counts, _ = np.histogram(
            self.pairs.sim, bins=edges, weights=(w[self.pairs.i] * w[self.pairs.j]).astype(float)
        )
        counts[-1] += copy_pairs(w)
        return {"edges": edges.round(6).tolist(), "counts": counts.astype(np.int64).tolist()}


def ground_truth(
    corpus: Corpus,
    threshold: float,
    *,
    key: str | None = None,
    cache_dir: Path | None = None,
    min_sim: float = HISTOGRAM_MIN_SIM,
) -> GroundTruth:
    """Exact all-pairs Jaccard of the corpus; with a ``key``, read from / written to the cache."""
    min_sim = min(min_sim, threshold)
    digest = corpus.digest() if key else ""
    base = (cache_dir or default_cache_dir()) / key if key else None
    if base is not None:
        loaded = _load_cached(base, digest, len(corpus.sets), min_sim)
        if loaded is not None:
            pairs, brute_s = loaded
            return GroundTruth(corpus, pairs, threshold, brute_s, cached=True)

    shingles = [corpus.sets[g] if g >= 0 else np.zeros(0, np.uint64) for g in corpus.set_index]
    t0 = time.perf_counter()
    brute = all_pairs(shingles, threshold)
    brute_s = time.perf_counter() - t0
    pairs = set_similarities(corpus.sets, min_sim)
    truth = GroundTruth(corpus, pairs, threshold, brute_s)
    if len(brute) != truth.true_pairs:  # two exact methods must agree, or neither is trusted
        raise AssertionError(
            f"ground truth disagrees with all_pairs: {truth.true_pairs} != {len(brute)}"
        )
    if base is not None:
        _store_cached(base, pairs, {"digest": digest, "n_sets": len(corpus.sets),
                                    "min_sim": min_sim, "brute_force_s": brute_s})
    return truth


def _load_cached(base: Path, digest: str, n_sets: int, min_sim: float
                 ) -> tuple[SetPairs, float] | None:
    meta_path, data_path = base.with_suffix(".json"), base.with_suffix(".npy")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if (meta.get("version"), meta.get("digest"), meta.get("n_sets"), meta.get("min_sim")) != (
            CACHE_VERSION, digest, n_sets, min_sim
        ):
            return None
        data = np.load(data_path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if data.dtype != _PAIR_DTYPE or len(data) != meta.get("pairs"):
        return None
    pairs = SetPairs(data["i"].astype(np.int64), data["j"].astype(np.int64),
                     data["sim"].astype(np.float64), min_sim)
    return pairs, float(meta["brute_force_s"])


def _store_cached(base: Path, pairs: SetPairs, meta: dict[str, Any]) -> None:
    """Write data then metadata, each atomically: a reader sees a whole entry or none."""
    base.parent.mkdir(parents=True, exist_ok=True)
    data = np.empty(pairs.i.size, dtype=_PAIR_DTYPE)
    data["i"], data["j"], data["sim"] = pairs.i, pairs.j, pairs.sim
    tmp = base.with_name(f"{base.name}.{os.getpid()}.tmp.npy")
    np.save(tmp, data, allow_pickle=False)
    os.replace(tmp, base.with_suffix(".npy"))
    meta = {"version": CACHE_VERSION, "pairs": int(pairs.i.size), **meta}
    tmp_meta = base.with_name(f"{base.name}.{os.getpid()}.tmp.json")
    tmp_meta.write_text(json.dumps(meta, indent=1), encoding="utf-8")
    os.replace(tmp_meta, base.with_suffix(".json"))


def all_pairs(sets: Sequence[np.ndarray], threshold: float) -> list[tuple[int, int, float]]:
    """Every pair (i, j, similarity) with i < j and similarity >= threshold, exactly."""
    # Collapse identical sets: exact copies pair with each other at similarity 1.0.
    index: dict[bytes, int] = {}
    groups: list[list[int]] = []
    reps: list[np.ndarray] = []
    for i, s in enumerate(sets):
        if s.size == 0:
            continue
        key = s.tobytes()
        g = index.get(key)
        if g is None:
            index[key] = g = len(groups)
            groups.append([])
            reps.append(s)
        groups[g].append(i)

    pairs: list[tuple[int, int, float]] = []
    for members in groups:
        pairs.extend((a, b, 1.0) for k, a in enumerate(members) for b in members[k + 1 :])
    if len(reps) < 2:
        return sorted(pairs)

    sizes = np.array([r.size for r in reps], dtype=np.int64)
    vocab, cols = np.unique(np.concatenate(reps), return_inverse=True)
    rows = np.repeat(np.arange(len(reps)), sizes)
    x = sparse.csr_matrix(
        (np.ones(cols.size, dtype=np.int32), (rows, cols)), shape=(len(reps), vocab.size)
    )
    inter = sparse.triu(x @ x.T, k=1).tocoo()
    sim = inter.data / (sizes[inter.row] + sizes[inter.col] - inter.data)
    keep = sim >= threshold
    for gi, gj, value in zip(inter.row[keep], inter.col[keep], sim[keep], strict=True):
        similarity = float(value)
        for a in groups[gi]:
            for b in groups[gj]:
                pairs.append((min(a, b), max(a, b), similarity))
    return sorted(pairs)


def component_labels(corpus: Corpus, pairs: SetPairs | None) -> np.ndarray:
    """Cluster label of each document: the connected component of its distinct set under
    ``pairs`` (a document without shingles is a cluster of its own); what the clusters are,
    whatever the order."""
    n_sets = len(corpus.sets)
    i, j = (pairs.i, pairs.j) if pairs is not None else (np.zeros(0, int), np.zeros(0, int))
    graph = sparse.coo_matrix((np.ones(i.size, dtype=np.int8), (i, j)), shape=(n_sets, n_sets))
    _, set_labels = connected_components(graph, directed=False)
    labels = np.empty(len(corpus.ids), dtype=np.int64)
    has = corpus.set_index >= 0
    labels[has] = set_labels[corpus.set_index[has]]
    labels[~has] = n_sets + np.arange(int((~has).sum()))
    return labels
