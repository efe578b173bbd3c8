"""The store interface: what the detector needs to remember, and nothing about how.

Four kinds of state, each with batched, idempotent operations so that a networked store
(Redis, shared by several consumers) can implement them with pipelines later:

- **buckets**: LSH band key -> ids of distinct shingle sets with their sizes (set-add; probe
  many keys at once, optionally only sets of a size range);
- **shingle sets**: set id -> sorted shingle hashes, plus the set's first document and its
  cluster parent (union-find), and verified edges to similar sets;
- **documents**: document id -> arrival sequence, set id, and the verdict it got;
- **metadata**: the sketch parameters the index was built with.

Buckets hold *distinct* shingle sets, not documents: exact copies (most of a real scrape) join
their set without touching a bucket, so hot buckets stay as small as the number of distinct
texts in them. Writes become durable, all together, at ``commit()``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamdedup.errors import StoreParamsError


@dataclass(frozen=True)
class DocRecord:
    """A stored document: enough to answer a redelivery with the verdict it got."""

    doc_id: str
    seq: int
    set_id: int
    verdict: str  # the verdict JSON as first emitted


@dataclass(frozen=True)
class SetRecord:
    """A distinct shingle set; ``parent`` links it into its cluster (union-find)."""

    set_id: int
    first_seq: int
    first_id: str
    parent: int


DEFAULT_EDGE_CAP = 256


class Store(ABC):
    """Persistent state of the detector. One writer per store, used by one thread at a time
    (not necessarily always the same one); a ``shared`` store (``store/shared.py``) takes
    many writers."""

    shared = False

    def ping(self) -> None:  # noqa: B027 (deliberately a no-op for local stores)
        """Raise StoreError if the store cannot be reached now (a local one always can)."""

    # --- metadata
    @abstractmethod
    def get_params(self) -> dict[str, Any] | None:
        """The sketch parameters recorded at creation, or None for a new store."""

    @abstractmethod
    def put_params(self, params: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def next_seq(self) -> int:
        """A new arrival sequence number, strictly increasing over the store's life."""

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

    @abstractmethod
    def put_doc(self, doc: DocRecord) -> None:
        """Insert or replace by id (idempotent); the first verdict of each (id, set) pair is
        also kept as that pair's version, whatever replaces the document later."""

    @abstractmethod
    def delete_doc(self, doc_id: str) -> None:
        """The document leaves its set's members; its versions stay."""

    @abstractmethod
    def get_version(self, doc_id: str, set_id: int) -> str | None:
        """The verdict JSON the pair (id, set) got when it was first seen, or None: so a
        redelivered old version of a replaced document gets its old answer again."""

    @abstractmethod
    def members(self, set_id: int, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` (seq, doc id) of the set's documents, earliest first."""

    # --- shingle sets and clusters
    @abstractmethod
    def get_sets(self, set_ids: Iterable[int]) -> dict[int, SetRecord]: ...

    @abstractmethod
    def add_set(self, record: SetRecord, shingles: np.ndarray) -> None:
        """Store a new distinct set; a set id already present is left as it is."""

    @abstractmethod
    def set_parent(self, set_id: int, parent: int) -> None: ...

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


def check_params(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> None:
    """Refuse to mix signatures made with different parameters; name every difference."""
    diffs = [
        f"{key}: store has {stored.get(key)!r}, settings give {wanted.get(key)!r}"
        for key in sorted(set(stored) | set(wanted))
        if stored.get(key) != wanted.get(key)
    ]
    if diffs:
        raise StoreParamsError(
            "the store was built with other parameters; use a new --store or the same "
            "settings.\n  " + "\n  ".join(diffs)
        )


def encode_shingles(shingles: np.ndarray) -> bytes:
    """Explicit big-endian uint64 bytes: a store file is data, never pickled code."""
    return shingles.astype(">u8", copy=False).tobytes()


def decode_shingles(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=">u8").astype(np.uint64)


def sorted_hashes(blob: bytes) -> bool:
    """Whether ``blob`` is what ``encode_shingles`` writes: sorted, distinct 64-bit hashes."""
    if len(blob) % 8:
        return False
    values = np.frombuffer(blob, dtype=">u8").astype(np.uint64)
    return bool(values.size < 2 or (np.diff(values) > 0).all())


def verdict_problems(doc_id: str, seq: int, verdict: str
                     ) -> tuple[list[str], dict[str, Any] | None]:
    """A stored verdict checked against its document's record (JSON, its id, its seq), for
    the stores' ``verify``; returns the problems and the parsed verdict (None: not JSON)."""
    try:
        parsed = json.loads(verdict)
    except ValueError:
        return [f"document {doc_id!r}: its verdict is not JSON"], None
    problems = []
    if parsed.get("id") != doc_id:
        problems.append(f"document {doc_id!r}: its verdict is for {parsed.get('id')!r}")
    if parsed.get("seq") not in (None, seq):
        problems.append(f"document {doc_id!r}: seq {seq} but its verdict says "
                        f"{parsed.get('seq')}")
    return problems, parsed
