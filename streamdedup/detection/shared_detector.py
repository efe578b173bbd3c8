"""The detector for a shared store: many consumers, one index, one arrival order.

A document is a duplicate iff a document with a smaller ``seq`` has Jaccard >= threshold
(``store/shared_store.py`` explains why publishing and claiming first makes every such document
visible). Compared with the single-writer ``Detector``:

- every document is probed and verified, exact copies too. The single writer answers a copy
  from the edges its set recorded when it was new; here a neighbour judged at the same moment
  on another consumer may not have written its edge yet. Shingle blobs never change (a set
  id is their fingerprint), so the store caches them, and a copy costs a probe round trip
  and some in-memory Jaccard, not a blob transfer;
- a candidate counts only if its set was first claimed before the document (``firsts``), and
  only its members with a smaller seq are matches (``members_before``): what arrives later,
  here or elsewhere, never changes a verdict;
- ``candidates`` and ``skipped`` count those earlier sets; everything else in the verdict is
  what the single writer gives on the same stream in the same order (tested on Kijiji).

Replaced documents follow the same rule as the single writer's (the store's ``claim``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from streamdedup.core.document import Document
from streamdedup.core.jaccard import jaccard_many, size_bounds
from streamdedup.core.sketch import Shingled, Sketcher, Sketches
from streamdedup.core.verdict import Verdict
from streamdedup.detection.detector import Detector, rank_candidates, rank_matches
from streamdedup.settings import Settings
from streamdedup.store.base import Store
from streamdedup.store.shared_store import Claim, SharedStore

KEY_CACHE = 65_536  # band keys of recent sets (~200 bytes each), so copies are not re-signed


class SharedDetector:
    """Turns documents into verdicts against a shared store; any number may run at once."""

    def __init__(self, settings: Settings, store: SharedStore,
                 sketcher: Sketcher | None = None) -> None:
        self.settings = settings
        self.store = store
        self.sketcher = sketcher or Sketcher(settings)
        self._keys: OrderedDict[int, np.ndarray] = OrderedDict()

    def process(self, doc: Document) -> Verdict:
        return self.process_many([doc])[0]

    def process_many(self, docs: Sequence[Document], sketches: Sketches | None = None
                     ) -> list[Verdict]:
        """Publish the batch's new sets, claim seqs for its documents, judge them
        (``sketches``: as ``Detector.process_many``)."""
        if sketches is None:
            shingled = [self.sketcher.shingle_fields(d.fields) for d in docs]
        else:
            shingled = list(sketches[0])
            for set_id, keys in sketches[1].items():
                self._keys[set_id] = keys
        self.publish(shingled)
        claims = self.store.claim([(d.id, s.set_id, bool(s.shingles.size))
                                   for d, s in zip(docs, shingled, strict=True)])
        return self.judge(docs, shingled, claims)

    def publish(self, shingled: Sequence[Shingled]) -> None:
        sets = {s.set_id: s.shingles for s in shingled if s.shingles.size}
        known = self.store.known(sets)
        new = [(set_id, sh) for set_id, sh in sets.items() if set_id not in known]
        keys = self._band_keys(dict(new))
        self.store.publish([(set_id, sh, keys[set_id].tolist()) for set_id, sh in new])

    def _band_keys(self, sets: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        cache = self._keys
        missing = [s for s in sets if s not in cache]
        if missing:
            signed = self.sketcher.band_keys_many([sets[s] for s in missing])
            for set_id, keys in zip(missing, signed, strict=True):
                cache[set_id] = keys
        out = {}
        for set_id in sets:
            out[set_id] = cache[set_id]
            cache.move_to_end(set_id)
        while len(cache) > KEY_CACHE:
            cache.popitem(last=False)
        return out

    def judge(self, docs: Sequence[Document], shingled: Sequence[Shingled],
              claims: Sequence[Claim]) -> list[Verdict]:
        """Verdicts of claimed documents; each is stored unless it was already (then the
        stored one is returned: a redelivery, or another consumer that got there first)."""
        s, store = self.settings, self.store
        todo = [i for i, c in enumerate(claims) if c.verdict is None and shingled[i].shingles.size]
        own = {shingled[i].set_id: shingled[i].shingles for i in todo}
        keys = self._band_keys(own)
        probed = dict(zip(own, store.probe_many(
            [keys[x].tolist() for x in own], [size_bounds(int(sh.size), s.threshold)
                                              for sh in own.values()]), strict=True))
        firsts = store.firsts({c for hits in probed.values() for c in hits})

        chosen: dict[int, tuple[list[int], int]] = {}
        for i in todo:
            set_id, seq = shingled[i].set_id, claims[i].seq
            hits = {c: n for c, n in probed[set_id].items()
                    if c != set_id and firsts.get(c, seq) < seq}
            ranked = rank_candidates(hits)
            chosen[i] = (ranked[: s.max_candidates], len(ranked))
        blobs = store.get_shingles({c for cs, _ in chosen.values() for c in cs})
        sims: dict[tuple[int, int], float] = {}
        matched: dict[int, list[tuple[int, float]]] = {}
        for i in todo:
            set_id = shingled[i].set_id
            todo_ids = [c for c in chosen[i][0] if c in blobs and (set_id, c) not in sims]
            for c, sim in zip(todo_ids, jaccard_many(own[set_id], [blobs[c] for c in todo_ids]),
                              strict=True):
                sims[(set_id, c)] = float(sim)
            matched[i] = [(c, sims[(set_id, c)]) for c in chosen[i][0]
                          if c in blobs and sims[(set_id, c)] >= s.threshold]

        queries = [(set_id, claims[i].seq) for i in todo
                   for set_id in (shingled[i].set_id, *(c for c, _ in matched[i]))]
        members = iter(store.members_before(queries, s.max_matches))
        joins = store.join([(docs[i].id, claims[i].seq, shingled[i].set_id,
                             [c for c, _ in matched[i]]) for i in todo])
        verdicts: dict[int, Verdict] = {}
        for i, (cluster, merged) in zip(todo, joins, strict=True):
            earlier_copies = next(members)
            found = [(1.0, seq, doc_id) for seq, doc_id in earlier_copies]
            for _, sim in matched[i]:
                found.extend((sim, seq, doc_id) for seq, doc_id in next(members))
            matches, duplicate_of = rank_matches(found, s.max_matches)
            verdicts[i] = Verdict(
                id=docs[i].id, duplicate=bool(matches), duplicate_of=duplicate_of,
                matches=matches, cluster_id=cluster, candidates=chosen[i][1],
                exact=bool(earlier_copies), shingles=int(shingled[i].shingles.size),
                skipped=chosen[i][1] - len(chosen[i][0]), merged=merged, seq=claims[i].seq)
        for i, claim in enumerate(claims):
            if claim.verdict is None and i not in verdicts:  # no shingles: nothing to match
                verdicts[i] = Verdict.alone(docs[i].id, claim.seq)
        order = sorted(verdicts)
        stored = store.finish([(docs[i].id, claims[i].seq, shingled[i].set_id,
                                verdicts[i].to_json()) for i in order])
        for i, text in zip(order, stored, strict=True):
            if text != verdicts[i].to_json():
                verdicts[i] = Verdict.from_json(text)
        return [verdicts[i] if claim.verdict is None else Verdict.from_json(claim.verdict)
                for i, claim in enumerate(claims)]


def detector_for(settings: Settings, store: Store, sketcher: Sketcher | None = None
                 ) -> Detector | SharedDetector:
    """The detector a store needs: the shared protocol for a shared store (Redis), the
    single-writer one otherwise."""
    if isinstance(store, SharedStore):
        return SharedDetector(settings, store, sketcher)
    return Detector(settings, store, sketcher)
