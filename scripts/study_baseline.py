#!/usr/bin/env python3
"""The original study's approach, re-implemented in pure Python as a benchmark baseline.

Why: the issue asks how far streamdedup is from what the study did (GianRomani/LSH on the
Kijiji dump). The study's recipe, as described: character 10-shingles of the normalized
description; 100 hash functions, each one SHA-1 of (function salt + shingle) truncated to
32 bits, the signature row being the minimum over the shingles; 20 bands of 5 rows, each band
hashed in Python into a bucket table; candidates verified with exact Jaccard on the shingle
sets. This is written from that description, not from the study's code.

To be compared on the same work as streamdedup's detector, it runs as a stream: each document
queries the buckets, verifies candidates until the first one at or above the threshold (a
verified duplicate), and is then inserted. Normalization is streamdedup's own, so both sides
see identical texts; only sketching, bucketing and verification differ.

Usage: ``scripts/study_baseline.py ../shared/data/kijiji_jobs.tsv [--limit N]``.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

NUM_HASHES = 100
BANDS = 20
ROWS = 5
SHINGLE = 10
THRESHOLD = 0.8


def shingle_strings(text: str, k: int = SHINGLE) -> set[str]:
    """Character k-shingles as strings (a text shorter than k is one shingle)."""
    if not text:
        return set()
    if len(text) <= k:
        return {text}
    return {text[i : i + k] for i in range(len(text) - k + 1)}


@dataclass
class StudyIndex:
    """In-memory streaming index with the study's hashing; query-then-insert."""

    num_hashes: int = NUM_HASHES
    bands: int = BANDS
    rows: int = ROWS
    threshold: float = THRESHOLD
    salts: list[bytes] = field(default_factory=list)
    buckets: list[dict[int, list[str]]] = field(default_factory=list)
    sets: dict[str, set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.salts = [f"{i}:".encode() for i in range(self.num_hashes)]
        self.buckets = [{} for _ in range(self.bands)]

    def signature(self, shingles: Iterable[str]) -> list[int]:
        """One SHA-1 per (shingle, hash function): the study's cost model."""
        encoded = [s.encode("utf-8") for s in shingles]
        sig = []
        for salt in self.salts:
            best = 0xFFFFFFFF
            for s in encoded:
                h = int.from_bytes(hashlib.sha1(salt + s).digest()[:4], "big")
                if h < best:
                    best = h
            sig.append(best)
        return sig

    def band_hashes(self, sig: list[int]) -> list[int]:
        r = self.rows
        return [hash(tuple(sig[b * r : (b + 1) * r])) for b in range(self.bands)]

    def add(self, doc_id: str, text: str) -> tuple[str | None, int]:
        """(earliest verified match or None, candidates seen); then index the document."""
        shingles = shingle_strings(text)
        if not shingles:
            return None, 0
        keys = self.band_hashes(self.signature(shingles))
        seen: set[str] = set()
        found: str | None = None
        for table, key in zip(self.buckets, keys, strict=True):
            for other in table.get(key, ()):
                if other in seen:
                    continue
                seen.add(other)
                theirs = self.sets[other]
                inter = len(shingles & theirs)
                if inter / (len(shingles) + len(theirs) - inter) >= self.threshold:
                    found = other
                    break
            if found is not None:
                break
        for table, key in zip(self.buckets, keys, strict=True):
            table.setdefault(key, []).append(doc_id)
        self.sets[doc_id] = shingles
        return found, len(seen)


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from streamdedup.core.text import Normalizer, compose_text
    from streamdedup.errors import MessageError
    from streamdedup.replay.dump import read_dump
    from streamdedup.settings import build_settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", type=Path)
    parser.add_argument("--limit", type=int, default=0, help="first N documents only")
    args = parser.parse_args(argv)
    settings = build_settings("reference", env={})
    normalize = Normalizer(settings)
    docs = [d for _, d in read_dump(args.dump, None, settings.text_fields)
            if not isinstance(d, MessageError)]
    if args.limit:
        docs = docs[: args.limit]
    texts = [(d.id, normalize(compose_text(d.fields, settings.text_fields))) for d in docs]
    index = StudyIndex()
    start = time.perf_counter()
    dups = sum(index.add(doc_id, text)[0] is not None for doc_id, text in texts)
    elapsed = time.perf_counter() - start
    print(f"{len(texts)} documents, {dups} duplicates, {elapsed:.2f} s, "
          f"{len(texts) / elapsed:.0f} documents/s (normalization excluded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
