"""The pure pipeline: fields -> normalized text -> shingles -> set id -> signature -> band keys.

No I/O and no state beyond what the settings fix, so it can run anywhere (a consumer, a
replay, a Spark executor of the backfill) and give identical keys for identical input.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamdedup.core import lsh
from streamdedup.core.minhash import make_hasher, scheme_name
from streamdedup.core.shingles import HASH_SCHEME, set_fingerprint, shingle, shingle_many
from streamdedup.core.text import Normalizer, compose_text
from streamdedup.errors import ConfigError
from streamdedup.settings import MAX_NUM_PERM, Settings


@dataclass(frozen=True)
class Shingled:
    """A document's shingle set, the id of that exact set, and the normalized text it was
    made from ("" when it came from elsewhere: the backfill ships hashes only)."""

    shingles: np.ndarray
    set_id: int
    text: str = ""


# Sketches computed elsewhere (the Spark backfill, `check`'s read-ahead, the consumer's
# sketch worker): each document's Shingled, in order, and
# band keys by set id (for the sets among them; missing ones are signed on the spot).
Sketches = tuple[Sequence[Shingled], Mapping[int, np.ndarray]]
# Set ids ``Sketcher.sketches`` remembers as signed (~60 MB of Python ints); then it forgets.
SIGNED_MEMORY = 1 << 20
# Sketches as they cross between processes (``pack``): each distinct set once, its shingles
# in one flat array, the band keys as one matrix. Unpickling 500 generated ads' sketches took
# 4 ms as objects, ~0.5 ms like this.
Packed = tuple[list[int], list[int], np.ndarray, np.ndarray, list[str], list[int], np.ndarray]


def pack(sketches: Sketches) -> Packed:
    shingled, keys = sketches
    where: dict[int, int] = {}
    unique: list[Shingled] = []
    which = []
    for sh in shingled:
        if sh.set_id not in where:
            where[sh.set_id] = len(unique)
            unique.append(sh)
        which.append(where[sh.set_id])
    flat = np.concatenate([u.shingles for u in unique]) if unique \
        else np.zeros(0, dtype=np.uint64)
    sizes = np.array([u.shingles.size for u in unique], dtype=np.int64)
    matrix = np.stack(list(keys.values())) if keys else np.zeros((0, 0), dtype=np.int64)
    return (which, [u.set_id for u in unique], flat, sizes, [u.text for u in unique],
            list(keys), matrix)


def unpack(packed: Packed) -> Sketches:
    which, set_ids, flat, sizes, texts, key_ids, matrix = packed
    ends = np.cumsum(sizes).tolist()
    starts = [0, *ends[:-1]] if ends else []
    # Views of the two arrays (a copy each cost more than the rest): a set kept after its
    # batch keeps the batch's arrays (~2.6 MB per 500 generated ads) until it goes.
    flat.flags.writeable = False  # shared by the documents of a set, as the text cache does
    unique = [Shingled(flat[a:b], set_id, text)
              for a, b, set_id, text in zip(starts, ends, set_ids, texts, strict=True)]
    return [unique[i] for i in which], dict(zip(key_ids, matrix, strict=True))


class Sketcher:
    """Everything that turns announcement fields into comparable sketches.

    Identical raw texts are the commonest duplicates in a scrape (reposts, boilerplate), so
    the last ``text_cache`` distinct texts keep their shingles: a repeat skips normalization
    and shingling entirely. ``text_cache=0`` disables it (benchmarks report both).
    """

    def __init__(self, settings: Settings, text_cache: int = 4096) -> None:
        self.settings = settings
        self.text_cache = text_cache
        self._cache: OrderedDict[str, Shingled] = OrderedDict()
        self.normalize = Normalizer(settings)
        self.hasher = make_hasher(settings.minhash, settings.num_perm, settings.seed)
        self.bands, self.rows = lsh.layout(settings.threshold, settings.num_perm,
                                           settings.bands, settings.rows)
        if not settings.bands and self.recall_at_threshold() < lsh.DEFAULT_MIN_RECALL:
            needed = lsh.min_num_perm(settings.threshold)
            raise ConfigError(
                f"num_perm {settings.num_perm} gives at most P(candidate | s="
                f"{settings.threshold}) = {self.recall_at_threshold():.4f} < "
                f"{lsh.DEFAULT_MIN_RECALL}: near-duplicates would be missed; "
                + (f"use num_perm >= {needed}" if needed <= MAX_NUM_PERM else
                   # (it said "num_perm >= 6907755471", which the limit refuses)
                   f"no num_perm up to {MAX_NUM_PERM} reaches it at this threshold: raise "
                   f"--threshold, or give --bands and --rows to accept a lower recall"))

    def shingle_fields(self, fields: Mapping[str, str]) -> Shingled:
        return self.shingle_fields_many([fields])[0]

    def shingle_fields_many(self, docs: Sequence[Mapping[str, str]]) -> list[Shingled]:
        """``shingle_fields`` of each document: texts not in the cache are normalized, then
        shingled together (``shingle_many``); the same results, in order."""
        names, cache = self.settings.text_fields, self._cache
        out: list[Shingled | None] = []
        todo: dict[str, list[int]] = {}
        for i, fields in enumerate(docs):
            raw = compose_text(fields, names)
            found = cache.get(raw)
            if found is not None:
                cache.move_to_end(raw)
            else:
                todo.setdefault(raw, []).append(i)
            out.append(found)
        texts = [self.normalize(raw) for raw in todo]
        shingled = shingle_many(texts, self.settings.shingle_kind, self.settings.shingle_size)
        for (raw, where), text, sh in zip(todo.items(), texts, shingled, strict=True):
            sh.flags.writeable = False  # shared between documents through the cache
            result = Shingled(sh, set_fingerprint(sh) if sh.size else 0, text)
            if self.text_cache:
                cache[raw] = result
                if len(cache) > self.text_cache:
                    cache.popitem(last=False)
            for i in where:
                out[i] = result
        return [s for s in out if s is not None]

    def sketches(self, docs: Sequence[Mapping[str, str]], signed: set[int]) -> Sketches:
        """What ``Detector.process_many`` takes as ``sketches``, made elsewhere (a second
        process): each document's ``Shingled`` and the band keys of its sets not in
        ``signed`` (which is updated; cleared past ``SIGNED_MEMORY`` ids). A set signed
        before is one the detector's store holds, or signs itself if it no longer does."""
        shingled = self.shingle_fields_many(docs)
        new: dict[int, np.ndarray] = {}
        for s in shingled:
            if s.shingles.size and s.set_id not in signed and s.set_id not in new:
                new[s.set_id] = s.shingles
        if len(signed) + len(new) > SIGNED_MEMORY:
            signed.clear()
        signed.update(new)
        keys = dict(zip(new, self.band_keys_many(list(new.values())), strict=True)) \
            if new else {}
        return shingled, keys

    def reshingle(self, text: str) -> np.ndarray:
        """The shingle hashes of a normalized text (what a store keeping texts reads back)."""
        return shingle(text, self.settings.shingle_kind, self.settings.shingle_size)

    def band_keys(self, shingles: np.ndarray) -> np.ndarray:
        return lsh.band_keys(self.hasher.sign(shingles), self.bands, self.rows)

    def band_keys_many(self, sets: Sequence[np.ndarray]) -> np.ndarray:
        return lsh.band_keys_many(self.hasher.sign_many(sets), self.bands, self.rows)

    def recall_at_threshold(self) -> float:
        return float(lsh.p_candidate(self.settings.threshold, self.bands, self.rows))

    def params(self) -> dict[str, Any]:
        """What makes signatures comparable; recorded in the store, checked at every open."""
        s = self.settings
        return {
            **self.normalize.describe(),
            "shingle_kind": s.shingle_kind,
            "shingle_size": s.shingle_size,
            "hash_scheme": HASH_SCHEME,
            "minhash_scheme": scheme_name(s.minhash),
            "band_scheme": lsh.BAND_SCHEME,
            "num_perm": s.num_perm,
            "seed": s.seed,
            "bands": self.bands,
            "rows": self.rows,
            "threshold": s.threshold,
        }
