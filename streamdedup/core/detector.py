"""The detector: sketches in arrival order, probes the store, verifies exactly, stores, decides.

Hot buckets: real scrapes are dominated by exact copies (1,950 of the 2,003 Kijiji ads with an
earlier near-duplicate share its exact shingle set). A document whose shingle set is already
stored joins that set: its matches are the set's documents plus the set's verified neighbours,
which were recorded when they were verified; it needs no probe, no verification and no bucket
write. Buckets therefore hold distinct sets only, and the cost of a document does not grow
with the number of identical earlier documents. The verdict is the same as re-probing would
give, because equal sets have equal band keys and equal similarities to every other set.

Edges are bounded: a set that would hold more than 256 (a cluster of thousands of distinct
variants made edges quadratic: 2,000 variants, 3,998,000 rows) becomes crowded and keeps
none; a document whose set is crowded is verified against its candidates again, so its
verdict is the one a probe gives, as for any new set.

Distinct sets that collide in a bucket are verified most-band-hits first (more shared bands
means higher estimated similarity), at most ``max_candidates`` per document; the verdict
reports how many were skipped, which is zero unless a bucket holds that many distinct texts.
Sets whose size alone rules out the threshold are not candidates: the store leaves them out
of the probe, so their shingles are never read (in a big index most collisions are those).

Idempotence: a document id seen before with the same text gets back its stored verdict,
byte for byte, and nothing is written. Replaced documents (the rule): the same id with a new
text is a new arrival (a new ``seq``); the old text's set, its edges and its cluster stay, but
the id leaves the old set's members, so later documents no longer match it by its old text.
Each (id, text) pair is judged once: an old text of an id seen again (a redelivery after the
replacement) gets back the verdict it got then, and nothing changes; so replaying any stream
onto its own store returns every verdict unchanged. ``exact`` means that documents with the
identical set exist now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from streamdedup.core.document import Document
from streamdedup.core.jaccard import jaccard_many, size_bounds
from streamdedup.core.sketch import Shingled, Sketcher, Sketches
from streamdedup.core.verdict import Match, Verdict
from streamdedup.settings import Settings
from streamdedup.store.base import DEFAULT_EDGE_CAP, DocRecord, SetRecord, Store

# A new set's plan, computed ahead (the backfill): (candidates, verified earlier neighbours
# as (set id, Jaccard)); None: more candidates than max_candidates, probe and verify it here.
Planned = tuple[int, Sequence[tuple[int, float]]] | None


class Detector:
    """Turns documents into verdicts against a store. Call ``store.commit()`` to persist."""

    edge_cap = DEFAULT_EDGE_CAP  # edges a set may hold before it is crowded (tests lower it)

    def __init__(self, settings: Settings, store: Store, sketcher: Sketcher | None = None):
        self.settings = settings
        self.store = store
        self.sketcher = sketcher or Sketcher(settings)
        self._added: dict[int, list[tuple[int, int]]] = {}  # key -> (set id, size), this batch
        self._planned: Mapping[int, Planned] | None = None

    def process(self, doc: Document) -> Verdict:
        return self.process_many([doc])[0]

    def process_many(self, docs: Sequence[Document], sketches: Sketches | None = None,
                     planned: Mapping[int, Planned] | None = None) -> list[Verdict]:
        """Verdicts in order. The sets new to the store are signed and probed in one batch,
        against the store as it was before the batch; what the batch itself adds to the
        buckets is matched in memory as it goes (``_added``), so each document still sees
        every earlier one. ``sketches`` (each document's shingles and its set's band keys)
        skips the sketching, and ``planned`` (by set id: a new set's candidates and all its
        verified earlier neighbours; absent: none; ``None``: probe this one) the probe and
        the verification: the backfill computes both for a whole dump at once (in Spark
        executors), for a store that held nothing before it."""
        self._planned = planned
        shingled, given = _sketched(self.sketcher, docs, sketches)
        known = self.store.get_sets({s.set_id for s in shingled if s.shingles.size})
        fresh: dict[int, np.ndarray] = {}
        for s in shingled:
            if s.shingles.size and s.set_id not in known and s.set_id not in fresh:
                fresh[s.set_id] = s.shingles
        unsigned = [x for x in fresh if x not in given]
        keys = {**given, **dict(zip(unsigned, self.sketcher.band_keys_many(
            [fresh[x] for x in unsigned]), strict=True))}
        keys = {x: keys[x] for x in fresh}
        probed = {} if planned is not None else dict(zip(fresh, self.store.probe_many(
            [keys[s].tolist() for s in fresh], [self._bounds(sh.size) for sh in fresh.values()]),
            strict=True))
        self._added = {}
        return [self._decide(d, s, keys.get(s.set_id), probed.get(s.set_id))
                for d, s in zip(docs, shingled, strict=True)]

    def _decide(self, doc: Document, sh: Shingled, keys: np.ndarray | None,
                probed: dict[int, int] | None) -> Verdict:
        store = self.store
        prev = store.get_doc(doc.id)
        if prev is not None and prev.set_id == sh.set_id:
            return _stored(prev.verdict, prev.seq)  # redelivery or replay: same answer
        if prev is not None:
            # An (id, text) pair seen before keeps its first answer and changes nothing, even
            # after the id was given another text: a redelivered old version must not become
            # a duplicate of documents that arrived after it.
            old = store.get_version(doc.id, sh.set_id)
            if old is not None:
                return _stored(old, None)
            store.delete_doc(doc.id)  # same id, new text: the new version replaces the old
        seq = store.next_seq()
        if not sh.shingles.size:
            verdict = Verdict(doc.id, False, None, (), doc.id, 0, shingles=0, seq=seq)
            store.put_doc(DocRecord(doc.id, seq, sh.set_id, verdict.to_json()))
            return verdict

        candidates = skipped = 0
        merged: tuple[str, ...] = ()
        existing = store.get_sets([sh.set_id]).get(sh.set_id)
        if existing is not None:
            near = store.neighbours(sh.set_id)
            if near is None:  # a crowded set keeps no edges: verify its candidates again
                near, candidates, skipped = self._verify(sh, self._probe_now(sh)[1])
            matched = [(sh.set_id, 1.0), *near]
            root = self._find(sh.set_id)
        else:
            plan = None if self._planned is None else self._planned.get(sh.set_id, (0, []))
            if plan is not None:  # verified elsewhere (the backfill's pair plan)
                keys = self.sketcher.band_keys(sh.shingles) if keys is None else keys
                candidates, found = plan
                matched, skipped = list(found), 0
            else:
                if keys is None or probed is None:  # not new at the start of the batch, or
                    # left to us by the plan (over max_candidates):
                    keys, hits = self._probe_now(sh)  # probe now (the store has the adds)
                else:
                    hits = self._with_added(probed, sh, keys)
                matched, candidates, skipped = self._verify(sh, hits)
            store.add_set(SetRecord(sh.set_id, seq, doc.id, sh.set_id), sh.shingles)
            key_list = keys.tolist()
            size = int(sh.shingles.size)
            store.add_to_buckets(key_list, sh.set_id, size)
            for k in key_list:
                self._added.setdefault(k, []).append((sh.set_id, size))
            store.add_edges(sh.set_id, matched, self.edge_cap)
            root, merged = self._join(sh.set_id, {self._find(other) for other, _ in matched})

        matches, duplicate_of, populated = self._expand(matched)
        cluster = store.get_sets([root])[root].first_id
        verdict = Verdict(
            id=doc.id,
            duplicate=bool(matches),
            duplicate_of=duplicate_of,
            matches=matches,
            cluster_id=cluster,
            candidates=candidates,
            # Identical to an earlier document's set, not merely to a set that once existed:
            # the set's documents may all have been replaced since.
            exact=existing is not None and sh.set_id in populated,
            shingles=int(sh.shingles.size),
            skipped=skipped,
            merged=merged,
            seq=seq,
        )
        store.put_doc(DocRecord(doc.id, seq, sh.set_id, verdict.to_json()))
        return verdict

    def _probe_now(self, sh: Shingled) -> tuple[np.ndarray, dict[int, int]]:
        """One set's band keys and its hits in the store as it is now, batch adds included."""
        keys = self.sketcher.band_keys(sh.shingles)
        return keys, self.store.probe(keys.tolist(), self._bounds(sh.shingles.size))

    def _bounds(self, size: int) -> tuple[int, int]:
        """Set sizes that can still reach the threshold with a set of ``size`` shingles."""
        return size_bounds(int(size), self.settings.threshold)

    def _with_added(self, probed: dict[int, int], sh: Shingled, keys: np.ndarray
                    ) -> dict[int, int]:
        """Hits from the store before the batch plus the batch's own adds under ``keys``."""
        hits = dict(probed)
        if self._added:
            lo, hi = self._bounds(sh.shingles.size)
            for k in set(keys.tolist()):
                for set_id, size in self._added.get(k, ()):
                    if lo <= size <= hi:
                        hits[set_id] = hits.get(set_id, 0) + 1
        return hits

    def _verify(self, sh: Shingled, hits: dict[int, int]
                ) -> tuple[list[tuple[int, float]], int, int]:
        hits.pop(sh.set_id, None)
        t = self.settings.threshold
        ranked = sorted(hits, key=lambda c: (-hits[c], c))
        chosen = ranked[: self.settings.max_candidates]
        stored = self.store.get_shingles(chosen)
        chosen = [c for c in chosen if c in stored]
        sims = jaccard_many(sh.shingles, [stored[c] for c in chosen])
        matched = [(c, float(s)) for c, s in zip(chosen, sims, strict=True) if s >= t]
        return matched, len(ranked), len(ranked) - len(chosen)

    def _expand(self, matched: Iterable[tuple[int, float]]
                ) -> tuple[tuple[Match, ...], str | None, set[int]]:
        """Documents of the matched sets: best first, then earliest; the earliest one; and the
        sets that have documents now."""
        limit = self.settings.max_matches
        found: list[tuple[float, int, str]] = []
        populated: set[int] = set()
        for set_id, sim in matched:
            members = self.store.members(set_id, limit)
            if members:
                populated.add(set_id)
            found.extend((sim, seq, doc_id) for seq, doc_id in members)
        return (*rank_matches(found, limit), populated)

    def _find(self, set_id: int) -> int:
        """Cluster root of a set, compressing the path behind it."""
        path = []
        node = set_id
        while True:
            parent = self.store.get_sets([node])[node].parent
            if parent == node:
                break
            path.append(node)
            node = parent
        for p in path[:-1]:
            self.store.set_parent(p, node)
        return node

    def _join(self, set_id: int, roots: set[int]) -> tuple[int, tuple[str, ...]]:
        """Merge a new set and the clusters it matched: the root whose first document arrived
        earliest wins (never the new set, which arrived last). Returns the root and the
        labels of the other clusters it absorbed."""
        if not roots:
            return set_id, ()
        recs = self.store.get_sets(roots)
        root = min(roots, key=lambda r: (recs[r].first_seq, r))
        self.store.set_parent(set_id, root)
        for r in roots - {root}:
            self.store.set_parent(r, root)
        return root, tuple(sorted(recs[r].first_id for r in roots if r != root))


def _stored(verdict_json: str, seq: int | None) -> Verdict:
    """A stored verdict as it was emitted; one stored before verdicts had ``seq`` gets the
    document's arrival number from its record."""
    verdict = Verdict.from_json(verdict_json)
    return verdict if verdict.seq is not None or seq is None else replace(verdict, seq=seq)


def rank_matches(found: Iterable[tuple[float, int, str]], limit: int
                 ) -> tuple[tuple[Match, ...], str | None]:
    """(similarity, seq, doc id) of matched documents -> the ``limit`` best (ties: earliest
    first) and the earliest of all."""
    ordered = sorted((-sim, seq, doc_id) for sim, seq, doc_id in found)
    if not ordered:
        return (), None
    earliest = min(ordered, key=lambda f: f[1])[2]
    return tuple(Match(doc_id, round(-neg, 6)) for neg, _, doc_id in ordered[:limit]), earliest


def _sketched(sketcher: Sketcher, docs: Sequence[Document], sketches: Sketches | None
              ) -> tuple[list[Shingled], dict[int, np.ndarray]]:
    """Each document's shingle set, and the band keys already known by set id."""
    if sketches is None:
        return [sketcher.shingle_fields(d.fields) for d in docs], {}
    shingled, keys = sketches
    if len(shingled) != len(docs):
        raise ValueError(f"{len(shingled)} sketches for {len(docs)} documents")
    return list(shingled), dict(keys)
