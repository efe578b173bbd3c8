"""The detector: sketches in arrival order, probes the store, verifies exactly, stores, decides.

Hot buckets: real scrapes are dominated by exact copies (1,951 of the 2,003 Kijiji ads with an
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

Retention (``--retention``, ``core/retention.py``): a document whose time is before the
window's cutoff is never matched, whether the store has evicted it yet or not: expired
documents are left out of ``members``, sets whose newest document expired are left out of
candidates and neighbours, a document meeting an expired document of its own id makes the
store forget that one first, and one meeting an expired set of its own text makes the store
evict everything that has left the window first (rare: eviction keeps up in a steady
stream), because whether that set's record stays as a tombstone decides its cluster. So a
verdict is the same however far the bounded eviction (at the start of each batch) has got.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from operator import itemgetter

import numpy as np

from streamdedup.core.document import Document
from streamdedup.core.jaccard import jaccard_many, size_bounds
from streamdedup.core.retention import Window, now_ms
from streamdedup.core.sketch import Shingled, Sketcher, Sketches
from streamdedup.core.verdict import Match, Verdict
from streamdedup.settings import Settings
from streamdedup.store.base import DEFAULT_EDGE_CAP, DocRecord, Evicted, SetRecord, Store

# A new set's plan, computed ahead (the backfill): (candidates, verified earlier neighbours
# as (set id, Jaccard)); None: more candidates than max_candidates, probe and verify it here.
Planned = tuple[int, Sequence[tuple[int, float]]] | None
# Evicted per batch at least (documents, then sets): twice a batch of 500 keeps up with a
# steady stream, and a clock that jumps is caught up over several batches.
EVICT_AT_LEAST = 1000
EVICT_ALL = 1 << 62


class Detector:
    """Turns documents into verdicts against a store. Call ``store.commit()`` to persist."""

    edge_cap = DEFAULT_EDGE_CAP  # edges a set may hold before it is crowded (tests lower it)

    def __init__(self, settings: Settings, store: Store, sketcher: Sketcher | None = None):
        self.settings = settings
        self.store = store
        self.sketcher = sketcher or Sketcher(settings)
        store.keep_texts(self.sketcher.reshingle)
        # This batch's new sets by band key, as (set id, size): most documents share no key
        # with them, which one test tells; the others add up their shared keys per set.
        self._added: dict[int, tuple[tuple[int, int], ...]] = {}
        self._planned: Mapping[int, Planned] | None = None
        # The batch's documents as the store held them before the batch (one query for all
        # of them) and the ids judged since: an id met again in the batch is read anew.
        self._prior: dict[str, DocRecord] | None = None
        self._judged: set[str] = set()
        self.window = Window(settings.retention_ms)
        self.evicted = Evicted()  # by retention, for the summary lines and the metrics
        self._arrival: int | None = None

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
        window = self.window
        if window.length_ms is not None:
            # From the store, not from memory: after a rollback the batch is judged again
            # with the clock it had before, as it would have been without the fault.
            window.clock_ms = self.store.get_clock()
            if window.cutoff_ms is not None:
                self.evicted += self.store.evict(window.cutoff_ms,
                                                 max(EVICT_AT_LEAST, 2 * len(docs)))
            self._arrival = now_ms()
            if self.settings.read_time_field and window.clock_ms is None:
                # A fresh store's untimed first rows: the batch's first time, not today's
                # (one untimed first row of a 2024 dump moved the clock to today, and every
                # later ad was judged outside the window: exact reposts came out "new").
                self._arrival = next((d.time for d in docs if d.time is not None),
                                     self._arrival)
        self._prior, self._judged = self.store.get_docs(d.id for d in docs), set()
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
        verdicts = [self._decide(d, s, keys.get(s.set_id), probed.get(s.set_id))
                    for d, s in zip(docs, shingled, strict=True)]
        if window.clock_ms is not None:
            self.store.put_clock(window.clock_ms)
        return verdicts

    def _decide(self, doc: Document, sh: Shingled, keys: np.ndarray | None,
                probed: dict[int, int] | None) -> Verdict:
        store = self.store
        window = self.window
        time: int | None = None
        if window.length_ms is not None:
            # Its time; else, when times are read (a time field), the clock's: as new as the
            # newest ad seen (the wall clock for one untimed row of a 2024 dump moved the
            # clock to today and emptied the window); before any clock, the batch's first
            # time; else its arrival (no time field: the wall clock, per batch, moves the
            # clock).
            late = self.settings.read_time_field and window.clock_ms is not None
            time = doc.time if doc.time is not None else (
                window.clock_ms if late else self._arrival)
            assert time is not None
            window.see(time)
        if self._prior is None or doc.id in self._judged:
            prev = store.get_doc(doc.id)
        else:
            prev = self._prior.get(doc.id)
        self._judged.add(doc.id)
        if prev is not None and not window.live(prev.time):
            store.forget_doc(doc.id)  # left the window: as if evicted already
            prev = None
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
            verdict = Verdict.alone(doc.id, seq)
            store.put_doc(DocRecord(doc.id, seq, sh.set_id, verdict.to_json(), time))
            return verdict

        candidates = skipped = 0
        merged: tuple[str, ...] = ()
        existing = store.get_sets([sh.set_id]).get(sh.set_id)
        revived = None  # a tombstone of this text (its cluster still has live sets)
        if existing is not None and (existing.evicted or not window.live(existing.last_time)):
            # The text of a set that left the window is back. Whether its record stays (a
            # tombstone: some set of its cluster is still in the window) must not depend on
            # how far eviction has got, so the store first evicts all that has left.
            if window.cutoff_ms is not None:  # (None: a store evicted before, now kept)
                self.evicted += store.evict(window.cutoff_ms, EVICT_ALL)
                self._prior = None  # it may take documents of this batch: read them anew
            revived = store.get_sets([sh.set_id]).get(sh.set_id)
            existing = None
        if existing is not None:
            near = store.neighbours(sh.set_id)
            if near is None:  # a crowded set keeps no edges: verify its candidates again
                near, candidates, skipped = self._verify(sh, self._probe_now(sh)[1])
            else:
                near = self._in_window(near)
            matched = [(sh.set_id, 1.0), *near]
            root = self._find(sh.set_id)
        else:
            plan = None if self._planned is None or revived is not None else \
                self._planned.get(sh.set_id, (0, []))
            if plan is not None:  # verified elsewhere (the backfill's pair plan)
                keys = self.sketcher.band_keys(sh.shingles) if keys is None else keys
                candidates, found = plan
                matched, skipped = self._in_window(found), 0
            else:
                if keys is None or probed is None:  # not new at the start of the batch, or
                    # left to us by the plan (over max_candidates):
                    keys, hits = self._probe_now(sh)  # probe now (the store has the adds)
                else:
                    hits = self._with_added(probed, sh, keys)
                matched, candidates, skipped = self._verify(sh, hits)
            store.add_set(SetRecord(sh.set_id, seq, doc.id, sh.set_id, last_time=time),
                          sh.shingles, sh.text or None)
            key_list = keys.tolist()
            size = int(sh.shingles.size)
            store.add_to_buckets(key_list, sh.set_id, size)
            self._index_added(key_list, sh.set_id, size)
            store.add_edges(sh.set_id, matched, self.edge_cap)
            roots = self._roots([other for other, _ in matched])
            if revived is not None:  # it still hangs in its old cluster
                roots.add(self._find(sh.set_id))
            root, merged = self._join(sh.set_id, roots)

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
        store.put_doc(DocRecord(doc.id, seq, sh.set_id, verdict.to_json(), time))
        return verdict

    def _in_window(self, pairs: Iterable[tuple[int, float]]) -> list[tuple[int, float]]:
        """(set id, similarity) of the sets still in the retention window."""
        pairs = list(pairs)
        live = self._live({s for s, _ in pairs})
        return [(s, sim) for s, sim in pairs if s in live]

    def _live(self, set_ids: set[int]) -> set[int]:
        """The sets among ``set_ids`` still in the retention window (all, without one)."""
        if self.window.cutoff_ms is None or not set_ids:
            return set_ids
        recs = self.store.get_sets(set_ids)
        return {s for s, r in recs.items() if not r.evicted and self.window.live(r.last_time)}

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
        added = self._added
        if added.keys().isdisjoint(key_list := keys.tolist()):
            return hits
        lo, hi = self._bounds(sh.shingles.size)
        for key in added.keys() & key_list:  # each shared key once, as the store counts
            for set_id, size in added[key]:
                if lo <= size <= hi:
                    hits[set_id] = hits.get(set_id, 0) + 1
        return hits

    def _index_added(self, keys: list[int], set_id: int, size: int) -> None:
        """A new set under its band keys in ``_added``. Most share no key with the batch's
        other new sets: one tuple then goes under every key (6 us a set, against 16 us for a
        list per key, measured over batches of 500 sets of 25 keys)."""
        added = self._added
        entry = ((set_id, size),)
        if added.keys().isdisjoint(keys):
            for key in keys:
                added[key] = entry
        else:
            for key in dict.fromkeys(keys):
                added[key] = added.get(key, ()) + entry

    def _verify(self, sh: Shingled, hits: dict[int, int]
                ) -> tuple[list[tuple[int, float]], int, int]:
        hits.pop(sh.set_id, None)
        if self.window.cutoff_ms is not None and hits:
            live = self._live(set(hits))
            hits = {s: n for s, n in hits.items() if s in live}
        if not hits:  # most fresh ads: nothing to read
            return [], 0, 0
        t = self.settings.threshold
        ranked = rank_candidates(hits)
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
        by_sim: dict[float, list[tuple[int, str]]] = {}
        populated: set[int] = set()
        earliest: tuple[int, str, float] | None = None
        since = self.window.cutoff_ms
        for set_id, sim in matched:
            members = self.store.members(set_id, limit, since)
            if members:
                populated.add(set_id)
                by_sim.setdefault(sim, []).extend(members)
                seq, doc_id = min(members)
                if earliest is None or seq < earliest[0]:
                    earliest = (seq, doc_id, sim)
        # Only the documents of the best similarities can be listed: they are ranked from
        # the highest down until ``limit`` are in hand (a late variant of the soak's hot
        # bucket matches ~100 documents and lists 10), and the earliest of all joins them.
        found: list[tuple[float, int, str]] = []
        for sim in sorted(by_sim, reverse=True):
            if len(found) >= limit:
                if earliest is not None and earliest[2] <= sim:
                    found.append((earliest[2], earliest[0], earliest[1]))
                break
            found.extend((sim, seq, doc_id) for seq, doc_id in by_sim[sim])
        return (*rank_matches(found, limit), populated)

    def _find(self, set_id: int, parents: dict[int, int] | None = None) -> int:
        """Cluster root of a set, compressing the path behind it. ``parents``: the parent of
        each set read so far (kept up to date here), so that many finds read each set once."""
        parents = {} if parents is None else parents
        path = []
        node = set_id
        while True:
            parent = parents.get(node)
            if parent is None:
                parent = parents[node] = self.store.get_sets([node])[node].parent
            if parent == node:
                break
            path.append(node)
            node = parent
        for p in path[:-1]:
            self.store.set_parent(p, node)
            parents[p] = node
        return node

    def _roots(self, set_ids: list[int]) -> set[int]:
        """Cluster roots of many sets (a hot-bucket variant matches hundreds): their records
        read in one call, the paths above them walked through ``parents``."""
        if not set_ids:  # most fresh ads match nothing
            return set()
        parents = {s: r.parent for s, r in self.store.get_sets(set_ids).items()}
        return {self._find(s, parents) for s in set_ids}

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


def rank_candidates(hits: Mapping[int, int]) -> list[int]:
    """Candidate sets by bands shared, most first (ties: the smaller set id), so that
    ``max_candidates`` keeps the likeliest matches, the same ones on every run."""
    return sorted(hits, key=lambda c: (-hits[c], c))


def rank_matches(found: Iterable[tuple[float, int, str]], limit: int
                 ) -> tuple[tuple[Match, ...], str | None]:
    """(similarity, seq, doc id) of matched documents -> the ``limit`` best (ties: earliest
    first) and the earliest of all. A selection, not a sort: in the soak's hot bucket a
    late variant matches ~100 documents (members of ~28 sets) and lists 10."""
    keyed = [(-sim, seq, doc_id) for sim, seq, doc_id in found]
    if not keyed:
        return (), None
    earliest = min(keyed, key=itemgetter(1))[2]
    best = heapq.nsmallest(limit, keyed)  # seqs are unique: the same order as sorted()
    return tuple(Match(doc_id, round(-neg, 6)) for neg, _, doc_id in best), earliest


def _sketched(sketcher: Sketcher, docs: Sequence[Document], sketches: Sketches | None
              ) -> tuple[list[Shingled], dict[int, np.ndarray]]:
    """Each document's shingle set, and the band keys already known by set id."""
    if sketches is None:
        return sketcher.shingle_fields_many([d.fields for d in docs]), {}
    shingled, keys = sketches
    if len(shingled) != len(docs):
        raise ValueError(f"{len(shingled)} sketches for {len(docs)} documents")
    return list(shingled), dict(keys)
