"""What the store tests write: settings' parameters, a set record, hashes at the edges of
64 bits (the contract suite over every backend and the SQLite file's tests share them); ads
that make copies, edits and replaced texts, and a small SQLite store built from them and
damaged on purpose (the store commands' tests on both backends share those)."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import numpy as np

from streamdedup.core.document import Document
from streamdedup.core.sketch import Sketcher
from streamdedup.detection.detector import Detector
from streamdedup.settings import Settings, build_settings
from streamdedup.store.base import SetRecord
from streamdedup.store.sqlite import SqliteStore
from streamdedup.store.sqlite.file import DB_NAME

PARAMS = Sketcher(Settings()).params()
HIGH = np.array([0, 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1], dtype=np.uint64)


def rec(set_id: int, seq: int = 1, first_id: str = "d", parent: int | None = None) -> SetRecord:
    return SetRecord(set_id, seq, first_id, set_id if parent is None else parent)


def band_keys(set_id: int, n: int = 25) -> list[int]:
    """``n`` band keys of their own for a set (no other set id draws the same)."""
    return np.random.default_rng(set_id).integers(-(2**62), 2**62, n).tolist()


def timed_set(store: SqliteStore, set_id: int, last_time: int) -> None:
    """A set whose newest document came at ``last_time``, in the buckets of ``band_keys``."""
    store.add_set(SetRecord(set_id, store.next_seq(), f"d{set_id}", set_id,
                            last_time=last_time), HIGH)
    store.add_to_buckets(band_keys(set_id), set_id, len(HIGH))


SETTINGS = build_settings("default", env={})


def ads(n: int, seed: int = 3) -> list[Document]:
    """n ads over 40 base texts: copies, edited copies and fresh ones."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnop") for _ in range(6)) for _ in range(300)]
    bases = [[rng.choice(vocab) for _ in range(60)] for _ in range(40)]
    docs = []
    for i in range(n):
        words = list(rng.choice(bases))
        if rng.random() < 0.5:
            words[rng.randrange(60)] = rng.choice(vocab)
        docs.append(Document(f"ad{i}", {"title": "Job", "description": " ".join(words)}))
    return docs


def built(directory: Path, n: int = 300) -> list[str]:
    store = SqliteStore(directory)
    try:
        store.put_params({"example": 1})
        verdicts = [v.to_json() for v in Detector(SETTINGS, store).process_many(ads(n))]
        store.commit()
    finally:
        store.close()
    return verdicts


def replacements() -> list[list[Document]]:
    """Batches in which the first documents of sets move on to other texts and come back."""
    a, b, c = ads(3, seed=5)
    return [[a, b], [Document(a.id, b.fields)], [Document(a.id, a.fields), c],
            [Document(b.id, c.fields)], [Document(b.id, b.fields)]]


def damage(directory: Path, *sql: str) -> None:
    conn = sqlite3.connect(directory / DB_NAME)
    for statement in sql:
        conn.execute(statement)
    conn.commit()
    conn.close()
