"""The shared-store interface: one index that several consumers write at the same moment.

With one writer, "probe, verify, then insert" is enough. With several, two near-duplicates
judged at the same moment on two consumers could each probe before the other inserted, and
both would pass as new. The shared protocol orders every document by an arrival number
``seq`` handed out by the store, and defines: **a document is a duplicate iff a document
with a smaller seq has Jaccard >= threshold** (its matches name only such documents, never
itself). Per batch, in this order:

1. ``publish``  the new sets' shingles and band keys go where any probe finds them;
2. ``claim``    each document atomically gets its seq *and* joins its set's members, so
                whatever has a smaller seq was published and claimed before: a later probe
                sees it, and its seq tells whether it counts;
3. ``probe_many``, ``firsts``, ``get_shingles``, ``members_before``: the candidates, only
                sets first claimed before the document's seq, verified exactly;
4. ``join``     the clusters merge (find and link atomically: no cycles, no lost merges);
5. ``finish``   the verdict is stored unless the same (id, text) was judged already, in which
                case that stored verdict is the answer (first writer wins).

Every step is idempotent, and a claim that was never finished (a consumer crashed after step
2) keeps its seq: the redelivered message is judged again with the same seq and, since the
documents before it cannot change, gets the same verdict. Writes are visible to the other
consumers as soon as each step returns; ``commit()`` only stores the input positions.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from streamdedup.store.base import Store


@dataclass(frozen=True)
class Claim:
    """A document's place in the arrival order: its seq, and its stored verdict if this
    (id, text) pair was judged before (then the verdict is the answer, whatever seq says)."""

    seq: int
    verdict: str | None


class SharedStore(Store):
    """A store that any number of consumers use at once (``detector_for`` gives it the
    shared detector)."""

    @abstractmethod
    def known(self, set_ids: Iterable[int]) -> set[int]:
        """The sets some document has claimed: they were published before, so need not be."""

    @abstractmethod
    def publish(self, sets: Sequence[tuple[int, np.ndarray, Sequence[int]]]) -> None:
        """(set id, sorted shingles, band keys) of sets about to be claimed: shingles stored
        if absent, the set added under each key (scored by size). Idempotent."""

    @abstractmethod
    def claim(self, docs: Sequence[tuple[str, int, bool]]) -> list[Claim]:
        """(doc id, set id, has shingles) in order, atomically as a whole: a pair judged
        before gets its verdict; a pair claimed but not finished gets its seq again; anything
        else gets a new seq and joins the set's members, creating the set with itself as
        first document if it is new; an earlier text of the same id leaves its set as of
        this seq (it still counts for documents before it). A document without shingles gets
        a seq and joins no set."""

    @abstractmethod
    def firsts(self, set_ids: Iterable[int]) -> dict[int, int]:
        """The seq of each claimed set's first document; unclaimed sets are left out."""

    @abstractmethod
    def members_before(self, queries: Sequence[tuple[int, int]], limit: int
                       ) -> list[list[tuple[int, str]]]:
        """For each (set id, seq): up to ``limit`` (seq, doc id) of the set's documents with a
        smaller seq that had not left it by then, earliest first."""

    @abstractmethod
    def join(self, joins: Sequence[tuple[str, int, int, Sequence[int]]]
             ) -> list[tuple[str, tuple[str, ...]]]:
        """For each (doc id, its seq, its set, the earlier sets it matched), atomically:
        merge the clusters of all of them under the root whose first document is earliest;
        return that document's id (the cluster id) and the first documents of the other
        clusters merged (sorted; the document's own new set, first claimed at its seq, is
        not named unless a later document's verdict named it as its cluster: a document
        judged first on another consumer can join it before it joins its own cluster).
        A seq joined before and not finished gets the same answer again: a batch redone
        after a crash between join and finish is told what the lost one was."""

    @abstractmethod
    def finish(self, verdicts: Sequence[tuple[str, int, int, str]]) -> list[str]:
        """(doc id, seq, set id, verdict JSON): store each verdict unless the pair has one
        already; return the stored one either way. The pair's claim and its join's answer
        are no longer needed and go."""
