"""The detector's test oracle: word 1-gram settings whose similarities can be designed by
hand, a brute-force oracle of what every verdict must be (no LSH, no store), and a random
stream of reposts, edits, empty texts, redeliveries and replaced texts. The detector's, the
shared detector's and retention's tests share them."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from streamdedup.core.document import Document
from streamdedup.core.sketch import Sketcher
from streamdedup.core.verdict import Verdict
from streamdedup.detection.detector import Detector
from streamdedup.settings import Settings

WORDS = Settings(
    text_fields=("description",),
    shingle_kind="word",
    shingle_size=1,
    stopwords="",
    stem_language="",
    strip_digits=False,
    threshold=0.5,
)


def doc(doc_id: str, text: str) -> Document:
    return Document(doc_id, {"description": text})


def ws(prefix: str, *numbers: int) -> list[str]:
    return [f"{prefix}{n}" for n in numbers]


def text(*parts: list[str]) -> str:
    return " ".join(w for part in parts for w in part)


class Oracle:
    """What the verdicts must be, by brute force over everything seen (no LSH, no store)."""

    def __init__(self, settings: Settings) -> None:
        self.sketcher = Sketcher(settings, text_cache=0)
        self.t = settings.threshold
        self.cap = settings.max_matches
        self.seq = 0
        self.current: dict[str, tuple[int, int]] = {}  # doc id -> (seq, set id)
        self.sets: dict[int, tuple[int, str, frozenset[int]]] = {}  # id -> first seq, doc, set
        self.verdicts: dict[str, dict[str, Any]] = {}
        self.versions: dict[tuple[str, int], dict[str, Any]] = {}  # (id, set) -> first verdict

    @staticmethod
    def sim(a: frozenset[int], b: frozenset[int]) -> float:
        return len(a & b) / len(a | b)

    def process(self, d: Document) -> dict[str, Any]:
        sh = self.sketcher.shingle_fields(d.fields)
        key, s = sh.set_id, frozenset(sh.shingles.tolist())
        cur = self.current.get(d.id)
        if cur is not None and cur[1] == key:
            return self.verdicts[d.id]
        if (d.id, key) in self.versions:  # an old text of a replaced id: its first answer
            return self.versions[(d.id, key)]
        self.current.pop(d.id, None)
        self.seq += 1
        if not s:
            v = {"seq": self.seq, "duplicate": False, "duplicate_of": None, "matches": [],
                 "cluster_id": d.id, "exact": False, "shingles": 0}
        else:
            seen = key in self.sets
            if not seen:
                self.sets[key] = (self.seq, d.id, s)
            found = []
            for other_id, (seq, other_key) in self.current.items():
                if other_key not in self.sets:
                    continue  # an empty text
                sim = self.sim(s, self.sets[other_key][2])
                if sim >= self.t:
                    found.append((-sim, seq, other_id))
            found.sort()
            v = {
                "seq": self.seq,
                "duplicate": bool(found),
                "duplicate_of": min(found, key=lambda f: f[1])[2] if found else None,
                "matches": [{"id": i, "jaccard": round(-n, 6)} for n, _, i in found[: self.cap]],
                "cluster_id": self.cluster(key),
                "exact": any(k == key for _, k in self.current.values()),
                "shingles": len(s),
            }
        self.current[d.id] = (self.seq, key)
        self.verdicts[d.id] = v
        self.versions[(d.id, key)] = v
        return v

    def cluster(self, key: int) -> str:
        """First document of the earliest set connected to ``key`` by similar sets."""
        todo, comp = [key], {key}
        while todo:
            a = self.sets[todo.pop()][2]
            for other, (_, _, b) in self.sets.items():
                if other not in comp and self.sim(a, b) >= self.t:
                    comp.add(other)
                    todo.append(other)
        return min(self.sets[k][:2] for k in comp)[1]


def observable(v: Verdict) -> dict[str, Any]:
    d = v.to_dict()
    for key in ("id", "candidates", "skipped", "merged"):  # merged: see the cluster test
        d.pop(key)
    return d


def random_stream(seed: int, n: int = 150) -> list[Document]:
    """Reposts (exact and edited), unrelated ads, empty texts, redeliveries, changed texts."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(80)]
    bases = [rng.sample(vocab, 12) for _ in range(6)]
    out: list[Document] = []
    for i in range(n):
        roll = rng.random()
        if roll < 0.05:
            out.append(doc(f"d{i}", "!!! -- ???"))  # empty once normalized
            continue
        if roll < 0.15 and out:
            out.append(rng.choice(out))  # redelivery of an earlier message
            continue
        words = list(rng.choice(bases))
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3, 6])):
            words[rng.randrange(len(words))] = rng.choice(vocab)
        rng.shuffle(words)
        doc_id = f"d{i}" if roll < 0.9 or not out else rng.choice(out).id  # or: new text
        out.append(doc(doc_id, " ".join(words)))
    return out


def run(det: Detector, docs: Sequence[Document], batch: int = 1) -> list[Verdict]:
    verdicts: list[Verdict] = []
    for start in range(0, len(docs), batch):
        verdicts += det.process_many(docs[start : start + batch])
        det.store.commit()
    return verdicts
