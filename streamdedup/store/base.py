"""The store interface: what the detector needs to remember, and nothing about how.

Four kinds of state, each with batched, idempotent operations, so that a networked store
(Redis, ``store/redis/``, shared by several consumers) implements them with pipelines:

- **buckets**: LSH band key -> ids of distinct shingle sets with their sizes (set-add; probe
  many keys at once, optionally only sets of a size range);
- **shingle sets**: set id -> sorted shingle hashes, plus the set's first document and its
  cluster parent (union-find), and verified edges to similar sets;
- **documents**: document id -> arrival sequence, set id, and the verdict it got;
- **metadata**: the sketch parameters the index was built with, and the retention clock.

Retention (``core/retention.py``): documents carry their announcement time and sets the time
of their newest document, so ``evict`` can remove, a bounded number at a time and oldest
first, documents and sets that left the window. A set still named as the parent of other
sets (union-find) stays as a *tombstone* (its record, no shingles, no buckets, no edges) until
none is, so a cluster keeps its id after its first document has gone; ``set_parent`` keeps the
count of children that decides it.

Buckets hold *distinct* shingle sets, not documents: exact copies (most of a real scrape) join
their set without touching a bucket, so hot buckets stay as small as the number of distinct
texts in them. Writes become durable, all together, at ``commit()``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from streamdedup.errors import StoreCorruptError, StoreParamsError, StoreRestartedError
from streamdedup.terminal import counted

V = TypeVar("V")


@dataclass(frozen=True)
class DocRecord:
    """A stored document: enough to answer a redelivery with the verdict it got."""

    doc_id: str
    seq: int
    set_id: int
    verdict: str  # the verdict JSON as first emitted
    time: int | None = None  # announcement time, ms since the epoch (retention); None: none


@dataclass(frozen=True)
class SetRecord:
    """A distinct shingle set; ``parent`` links it into its cluster (union-find)."""

    set_id: int
    first_seq: int
    first_id: str
    parent: int
    last_time: int | None = None  # newest announcement time of its documents (retention)
    children: int = 0  # sets whose parent it is, itself not counted
    evicted: bool = False  # a tombstone: left the window, kept while it has children


@dataclass(frozen=True)
class Evicted:
    """What retention removed: documents by their own time, sets (with their remaining
    documents) by their newest. Apart, since a window holding a few long-lived sets and many
    short-lived ads tells another story than the sum."""

    documents: int = 0
    sets: int = 0

    def __add__(self, other: Evicted) -> Evicted:
        return Evicted(self.documents + other.documents, self.sets + other.sets)

    def __str__(self) -> str:
        return (f"{self.documents} document{'' if self.documents == 1 else 's'} and "
                f"{self.sets} set{'' if self.sets == 1 else 's'} evicted")


DEFAULT_EDGE_CAP = 256


class Store(ABC):
    """Persistent state of the detector. One writer per store, used by one thread at a time
    (not necessarily always the same one); a ``SharedStore`` (``store/shared_store.py``)
    takes many writers."""

    def ping(self) -> None:  # noqa: B027 (deliberately a no-op for local stores)
        """Raise StoreError if the store cannot be reached now (a local one always can)."""

    def server_restarted(self) -> str | None:
        """What happened, once, when the server behind the store restarted since the last
        ask (it may have come back from an older copy: the consumer then checks its
        partitions against the store); None otherwise, and always for a local store."""
        return None

    # --- metadata
    @abstractmethod
    def get_params(self) -> dict[str, Any] | None:
        """The sketch parameters recorded at creation, or None for a new store."""

    @abstractmethod
    def put_params(self, params: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def next_seq(self) -> int:
        """A new arrival sequence number, strictly increasing over the store's life."""

    @abstractmethod
    def get_clock(self) -> int | None:
        """The retention clock (newest announcement time seen, ms) as of the last commit and
        the writes since, or None."""

    @abstractmethod
    def put_clock(self, clock_ms: int) -> None: ...

    # --- input positions
    @abstractmethod
    def put_positions(self, positions: Mapping[tuple[str, int], int]) -> None:
        """Record, with the next commit, how far each (topic, partition) has been stored: the
        next offset to read. The consumer compares it with the group's committed offsets at
        assignment, so a store that lost committed writes is noticed and rebuilt."""

    @abstractmethod
    def get_positions(self) -> dict[tuple[str, int], int]: ...

    @abstractmethod
    def store_id(self) -> str:
        """A random identity made with the store, kept for its life: offsets committed after
        this store's commits name it, so a consumer can tell its own store's lost writes
        from partitions another member (with another store) has processed."""

    # --- documents
    @abstractmethod
    def get_doc(self, doc_id: str) -> DocRecord | None: ...

    def get_docs(self, doc_ids: Iterable[str]) -> dict[str, DocRecord]:
        """``get_doc`` of each id, for the ids the store holds; one query where a store can
        (the detector asks for a batch's ids at once: 500 lookups in one statement)."""
        return {d: r for d in doc_ids if (r := self.get_doc(d)) is not None}

    @abstractmethod
    def put_doc(self, doc: DocRecord) -> None:
        """Insert or replace by id (idempotent); the first verdict of each (id, set) pair is
        also kept as that pair's version, whatever replaces the document later. A time moves
        its set's ``last_time`` forward."""

    @abstractmethod
    def delete_doc(self, doc_id: str) -> None:
        """The document leaves its set's members; its versions stay."""

    @abstractmethod
    def get_version(self, doc_id: str, set_id: int) -> str | None:
        """The verdict JSON the pair (id, set) got when it was first seen, or None: so a
        redelivered old version of a replaced document gets its old answer again."""

    @abstractmethod
    def members(self, set_id: int, limit: int, since: int | None = None
                ) -> list[tuple[int, str]]:
        """Up to ``limit`` (seq, doc id) of the set's documents, earliest first; with
        ``since``, only documents with no time or a time at or after it (in the window)."""

    # --- shingle sets and clusters
    @abstractmethod
    def get_sets(self, set_ids: Iterable[int]) -> dict[int, SetRecord]: ...

    @abstractmethod
    def add_set(self, record: SetRecord, shingles: np.ndarray, text: str | None = None
                ) -> None:
        """Store a new distinct set; a set id already present is left as it is, except a
        tombstone, which comes back to life (its shingles and ``last_time`` from here; its
        first document, parent and children as they were, so its cluster keeps its id).
        ``text``: the normalized text the shingles came from, which a store that was given
        a shingler (``keep_texts``) may keep instead of the hashes."""

    def keep_texts(self, shingler: Callable[[str], np.ndarray]) -> None:
        """Let the store keep a set's normalized text instead of its shingle hashes and
        shingle it again when it is read (``shingler(text)`` gives exactly the hashes). The
        SQLite store does: ~0.7 KB of text instead of ~5 KB of hashes per generated ad, so
        fewer bytes to write at every commit. Others keep hashes (the default: ignored)."""
        return None

    def set_parent(self, set_id: int, parent: int) -> None:
        """Link a set under ``parent``, keeping both parents' child counts; an old parent
        that is a tombstone and loses its last child goes (``_release``)."""
        rec = self.get_sets([set_id]).get(set_id)
        if rec is None or rec.parent == parent:
            return
        self._write_parent(set_id, parent)
        if parent != set_id:
            self._add_children(parent, 1)
        if rec.parent != set_id:
            self._lose_child(rec.parent)

    # --- retention
    @abstractmethod
    def evict(self, cutoff_ms: int, limit: int) -> Evicted:
        """Remove up to ``limit`` documents with a time before ``cutoff_ms``, oldest first
        (with their versions), and up to ``limit`` sets whose newest time is before it
        (``evict_set``); returns how many documents and sets went (the documents a set took
        with it not counted). Bounded, so a checkpoint
        after a jump of the clock does not stall; the detector ignores what is left."""

    def evict_set(self, set_id: int) -> None:
        """A set that left the window goes now: its documents and their versions, shingles,
        buckets and edges; its record too, unless it is a parent (then a tombstone)."""
        self._drop_set(set_id)
        self._release(set_id)

    @abstractmethod
    def forget_doc(self, doc_id: str) -> None:
        """A document that left the window goes now, with every version of its id."""

    def _release(self, set_id: int) -> None:
        """After a set's data went: keep its record as a tombstone while other sets name it
        as their parent, else delete it and let its parent lose a child, up the tree."""
        rec = self.get_sets([set_id]).get(set_id)
        if rec is None:
            return
        if rec.children > 0:
            self._mark_evicted(set_id)
            return
        self._delete_set(set_id)
        if rec.parent != set_id:
            self._lose_child(rec.parent)

    def _lose_child(self, set_id: int) -> None:
        """One set fewer names ``set_id`` as its parent; a tombstone left with none goes."""
        left = self._add_children(set_id, -1)
        rec = self.get_sets([set_id]).get(set_id)
        if rec is not None and rec.evicted and left == 0:
            self._release(set_id)

    # Primitives of the rules above, one per store.
    @abstractmethod
    def _write_parent(self, set_id: int, parent: int) -> None: ...

    @abstractmethod
    def _add_children(self, set_id: int, delta: int) -> int:
        """Change a set's child count; returns the new count (0 for a set not present)."""

    @abstractmethod
    def _drop_set(self, set_id: int) -> None:
        """Delete a set's documents (with their versions), shingles, bucket entries, edges
        (both ways) and crowded mark; leave its record."""

    @abstractmethod
    def _mark_evicted(self, set_id: int) -> None: ...

    @abstractmethod
    def _delete_set(self, set_id: int) -> None: ...

    @abstractmethod
    def get_shingles(self, set_ids: Iterable[int]) -> dict[int, np.ndarray]: ...

    @abstractmethod
    def add_edges(self, set_id: int, edges: Sequence[tuple[int, float]],
                  cap: int = DEFAULT_EDGE_CAP) -> None:
        """Record verified similarities, both directions (set-add, idempotent). A set that
        would hold more than ``cap`` edges becomes *crowded*: its edges are dropped and no
        more are kept for it, so edges grow with sets x cap, not with the square of a cluster
        of distinct variants (2,000 of them made 3,998,000 rows)."""

    @abstractmethod
    def neighbours(self, set_id: int) -> list[tuple[int, float]] | None:
        """The set's verified neighbours by set id, or None for a crowded set (whose
        neighbours the detector then finds by probing again)."""

    # --- LSH buckets
    @abstractmethod
    def probe(self, keys: Sequence[int], sizes: tuple[int, int] | None = None
              ) -> dict[int, int]:
        """Set ids found under any of ``keys``, each with the number of keys it was under.
        With ``sizes=(lo, hi)``, only sets of lo..hi shingles: the detector asks for the
        sizes that can still reach its threshold, so other sets are never read."""

    def probe_many(self, queries: Sequence[Sequence[int]],
                   sizes: Sequence[tuple[int, int]]) -> list[dict[int, int]]:
        """``probe`` of each query with its size range; one round trip where a store can."""
        return [self.probe(q, s) for q, s in zip(queries, sizes, strict=True)]

    @abstractmethod
    def add_to_buckets(self, keys: Sequence[int], set_id: int, size: int) -> None:
        """Set-add ``set_id`` (a set of ``size`` shingles) under every key (idempotent)."""

    # --- lifecycle
    @abstractmethod
    def commit(self) -> None:
        """Make every write so far durable, atomically."""

    def commit_landed(self) -> bool:
        """After ``commit()`` raised StoreUnavailableError and the server answers again:
        whether that commit reached it after all (only its reply was lost), which then
        stands as if it had returned. False: it did not, or the store cannot tell, and
        the caller rolls back (a local store's failed commit never lands)."""
        return False

    @abstractmethod
    def rollback(self) -> None:
        """Discard every write since the last commit (or raise StoreError if impossible)."""

    @abstractmethod
    def close(self) -> None:
        """Release the store; writes not committed are discarded."""

    @abstractmethod
    def stats(self) -> dict[str, int]:
        """Counts for metrics: documents, sets, bucket entries, bytes on disk."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Where a stored parameter comes from when its name is not a setting's.
_PARAM_HINTS = {"minhash_scheme": " (set by --minhash: 'multiply-shift' reads stores made "
                                  "before 'oph' became the default)",
                "normalizer_version": " (set by --normalizer-version: 1 reads stores made "
                                      "before 2 became the default)"}


def refuse_a_restart(store: Store) -> None:
    """For the commands that judge a dump (check, backfill), after each commit: a server
    that restarted under them may have come back from an older copy, or empty (a review's
    `check` into a Redis without persistence restarted 1.6 s in: exit 0, 1,976 of 3,127
    verdicts wrong, the namespace left without its parameters). The command stops before
    writing the batch in hand; the store has its identity again (``server_restarted``), so
    the same command again judges what it lost."""
    what = store.server_restarted()
    if what is not None:
        raise StoreRestartedError(f"{what} while the dump was judged, and may have lost "
                                    "this run's latest writes: the verdicts of the batch in "
                                    "hand are not written")


def split_held(ids: Iterable[int], held: Callable[[int], V | None],
               touch: Callable[[int], object] | None = None
               ) -> tuple[dict[int, V], list[int]]:
    """What an in-memory cache ``held`` (None: not held) has of ``ids``, and the ids to read
    from the tables, in order; ``touch`` is called with each id held (an LRU's reorder)."""
    found: dict[int, V] = {}
    missing: list[int] = []
    for i in ids:
        value = held(i)
        if value is None:
            missing.append(i)
        else:
            found[i] = value
            if touch is not None:
                touch(i)
    return found, missing


def param_differences(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """Each parameter the store and the settings give differently, as one line."""
    return [
        f"{key}: store has {stored.get(key)!r}, settings give {wanted.get(key)!r}"
        + _PARAM_HINTS.get(key, "")
        for key in sorted(set(stored) | set(wanted))
        if stored.get(key) != wanted.get(key)
    ]


def parsed_params(raw: str | bytes | None, where: str) -> dict[str, Any]:
    """A store's record of its parameters, read. Damaged (not JSON, not an object, NULL:
    a hand edit, a bad restore) it is said as damage, not a Python traceback of
    ``json.loads``, in every command that opens the store."""
    try:
        params = json.loads(raw) if raw is not None else None
    except ValueError:
        params = None
    if not isinstance(params, dict):
        raise StoreCorruptError(f"{where}: the store's record of its parameters is damaged "
                                f"({'empty' if raw is None else 'not a JSON object'}): "
                                "restore a backup, or use a new store")
    return params


def missing_params(documents: int) -> str:
    """A store that holds documents but no record of their parameters (the record deleted
    by hand): it took any settings and recorded them, mixing band keys of two kinds, and
    ``store verify`` said "ok"."""
    return (f"the store holds {counted(documents, 'document')} but no record of the "
            f"parameters {'it was' if documents == 1 else 'they were'} made with (deleted?): "
            "restore a backup, or use a new store")


def check_params(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> None:
    """Refuse to mix signatures made with different parameters; name every difference."""
    diffs = param_differences(stored, wanted)
    if diffs:
        raise StoreParamsError(
            "the store was built with other parameters; use a new store (--store, or "
            "--redis-namespace on Redis) or the same "
            "settings.\n  " + "\n  ".join(diffs)
        )
