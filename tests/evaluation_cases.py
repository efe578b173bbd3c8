"""A generated dump with known relations, the detector run over it in process, its ground
truth, and the true pairs by a plain double loop: the evaluation's, the report's and the
replay runner's tests share them."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from streamdedup.core.document import Document
from streamdedup.core.jaccard import jaccard
from streamdedup.core.sketch import Sketcher
from streamdedup.core.verdict import Verdict
from streamdedup.detection.detector import Detector
from streamdedup.replay import truth as tr
from streamdedup.settings import Settings, build_settings
from streamdedup.store.memory import MemoryStore


def make_settings(**overrides: Any) -> Settings:
    base = {"store_backend": "memory", "stopwords": "", "stem_language": ""}
    return build_settings("default", env={}, overrides={**base, **overrides})


def generated_docs(seed: int = 7) -> list[Document]:
    """Ads with known relations: exact copies, light edits (near-duplicates), rewrites
    (same link, different text), unrelated ads, and one ad that normalizes to nothing."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghilmnoprstuvz"))
    vocab = ["".join(rng.choice(letters, rng.integers(4, 10))) for _ in range(600)]

    def words(n: int) -> list[str]:
        return [vocab[i] for i in rng.integers(0, len(vocab), n)]

    rows: list[dict[str, str]] = []
    for k in range(14):
        rows.append({"title": f"offerta {k}", "description": " ".join(words(60)),
                     "link": f"https://ads.example/{k}"})
    derived: list[dict[str, str]] = []
    for k in range(4):  # exact copies, one of them twice
        derived += [dict(rows[k])] * (2 if k == 0 else 1)
    for k in range(4, 9):  # light edits: one word changed
        desc = rows[k]["description"].split()
        desc[rng.integers(0, len(desc))] = "modificato"
        derived.append({**rows[k], "description": " ".join(desc)})
    for k in (9, 10):  # rewrites of the same announcement: another text entirely
        derived.append({**rows[k], "description": " ".join(words(60))})
    derived.append({"title": "", "description": "123 !!! 456", "link": "https://ads.example/x"})
    order = rng.permutation(len(derived))
    stream = rows[:7] + [derived[i] for i in order[: len(order) // 2]] + rows[7:] + [
        derived[i] for i in order[len(order) // 2 :]
    ]
    return [Document(f"d{k:03d}", {**fields, "id": f"d{k:03d}"})
            for k, fields in enumerate(stream)]


def detect(docs: Sequence[Document], settings: Settings) -> dict[str, Verdict]:
    detector = Detector(settings, MemoryStore())
    return {v.id: v for v in detector.process_many(docs)}


def truth_for(docs: Sequence[Document], settings: Settings, **kw: Any) -> tr.GroundTruth:
    corpus = tr.Corpus.build(docs, Sketcher(settings))
    return tr.ground_truth(corpus, settings.threshold, **kw)


def naive_true_pairs(docs: Sequence[Document], settings: Settings) -> dict[tuple[int, int], float]:
    sk = Sketcher(settings)
    sh = [sk.shingle_fields(d.fields).shingles for d in docs]
    out = {}
    for a, b in itertools.combinations(range(len(docs)), 2):
        s = jaccard(sh[a], sh[b])
        if s >= settings.threshold:
            out[(a, b)] = s
    return out
