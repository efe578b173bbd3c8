"""Why two announcements are, or are not, near-duplicates: everything the detector would
weigh, for a person to read (``streamdedup explain`` and the monitor's side-by-side view).

Pure: two field mappings and a Sketcher in, an ``Explanation`` out. The texts shown are the
*normalized* texts (what is shingled), with the spans covered by shingles that the other text
also has (exactly what the Jaccard similarity counts) and the rest, what differs: the page
and ``explain`` highlight what differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from streamdedup.core.jaccard import jaccard, size_bounds
from streamdedup.core.minhash import estimate_jaccard
from streamdedup.core.shingles import windows
from streamdedup.core.sketch import Sketcher
from streamdedup.core.text import compose_text
from streamdedup.core.verdict import match_jaccard


@dataclass(frozen=True)
class Side:
    id: str
    raw: str  # the text fields as composed for normalization
    text: str  # normalized: what is shingled
    shared: tuple[tuple[int, int], ...]  # [start, end) character spans of shared shingles
    shingles: int

    @property
    def differs(self) -> tuple[tuple[int, int], ...]:
        """The spans no shared shingle covers, without their outer white space: what a
        reader looks for in a near-duplicate (a 0.91 pair highlighted by what it shares was
        all highlighted, and its one changed word hard to find)."""
        out, at = [], 0
        for x, y in (*self.shared, (len(self.text), len(self.text))):
            piece = self.text[at:x]
            if piece.strip():
                start = at + len(piece) - len(piece.lstrip())
                out.append((start, at + len(piece.rstrip())))
            at = max(at, y)
        return tuple(out)


@dataclass(frozen=True)
class Explanation:
    a: Side
    b: Side
    threshold: float
    jaccard: float
    estimate: float  # MinHash estimate: share of equal signature rows
    bands: int
    rows: int
    bands_shared: int
    size_range: tuple[int, int]  # set sizes that can reach the threshold with a's size
    candidate: bool  # LSH would propose the pair (a shared band, a possible size)
    duplicate: bool  # a candidate whose exact Jaccard reaches the threshold
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {
            "a": _side(self.a), "b": _side(self.b),
            "threshold": self.threshold, "jaccard": round(self.jaccard, 6),
            "minhash_estimate": round(self.estimate, 6), "bands": self.bands,
            "rows": self.rows, "bands_shared": self.bands_shared,
            "size_range": list(self.size_range), "candidate": self.candidate,
            "duplicate": self.duplicate, "reason": self.reason,
        }


def explain(sketcher: Sketcher, a_id: str, a: Mapping[str, str], b_id: str,
            b: Mapping[str, str]) -> Explanation:
    s = sketcher.settings
    raws = [compose_text(f, s.text_fields) for f in (a, b)]
    texts = [sketcher.normalize(r) for r in raws]
    sets = [sketcher.shingle_fields(f).shingles for f in (a, b)]
    sides = [Side(i, r, t, _shared_spans(t, other, s.shingle_kind, s.shingle_size),
                  int(sh.size))
             for i, r, t, sh, other in ((a_id, raws[0], texts[0], sets[0], sets[1]),
                                        (b_id, raws[1], texts[1], sets[1], sets[0]))]
    if not sets[0].size or not sets[1].size:
        return Explanation(sides[0], sides[1], s.threshold, 0.0, 0.0, sketcher.bands,
                           sketcher.rows, 0, (0, 0), False, False,
                           "an empty text (nothing left after normalization) matches nothing")
    sim = jaccard(sets[0], sets[1])
    sigs = [sketcher.hasher.sign(x) for x in sets]
    keys = [sketcher.band_keys(x) for x in sets]
    shared_bands = int(np.count_nonzero(keys[0] == keys[1]))
    lo, hi = size_bounds(int(sets[0].size), s.threshold)
    sized = lo <= sets[1].size <= hi
    candidate = shared_bands > 0 and sized
    duplicate = candidate and sim >= s.threshold
    if not sized:
        reason = (f"not a candidate: {sets[1].size} shingles is outside {lo}..{hi}, the sizes "
                  f"that can reach {s.threshold} with {sets[0].size}")
    elif not shared_bands:
        reason = (f"not a candidate: no band of {sketcher.bands} is equal (MinHash estimate "
                  f"{estimate_jaccard(sigs[0], sigs[1]):.3f})")
    elif not duplicate:
        reason = f"a candidate, verified below the threshold: {sim:.3f} < {s.threshold}"
    elif np.array_equal(sets[0], sets[1]):  # "25 bands shared" of a pair no band found
        # (not "found by the exact-set shortcut": a shared Redis store probes copies too)
        reason = (f"an exact copy once normalized: the same {sets[0].size} shingles, one set "
                  "(the later copy's verdict says `exact`)")
    else:
        reason = f"a duplicate: {shared_bands} bands shared, exact Jaccard {sim:.3f}"
    return Explanation(sides[0], sides[1], s.threshold, sim,
                       estimate_jaccard(sigs[0], sigs[1]), sketcher.bands, sketcher.rows,
                       shared_bands, (lo, hi), candidate, duplicate, reason)


def disagreement(verdict: Mapping[str, object], other_id: str, result: Explanation
                 ) -> str | None:
    """How the detector's verdict disagrees with ``result`` on the pair, or None: the
    explanation then used other settings (another preset read 155 of 200 duplicates as
    "not a duplicate"). The verdict's ``matches`` give the pair's Jaccard; when
    ``--max-matches`` left ``other_id`` out (``duplicate_of`` is the earliest match, the
    list the best ones) only its "duplicate" is left to compare."""
    said = match_jaccard(verdict, other_id)
    if said is not None:
        if abs(said - result.jaccard) > 1e-4:
            return (f"the detector measured Jaccard {said:.3f} for this pair, these "
                    f"settings {result.jaccard:.3f}")
        return None
    if verdict.get("duplicate_of") == other_id and not result.duplicate:
        return (f"the detector called this pair a duplicate (--max-matches left it out of "
                f"the verdict's matches), these settings do not ({result.reason})")
    return None


def _shared_spans(text: str, other: np.ndarray, kind: str, size: int
                  ) -> tuple[tuple[int, int], ...]:
    """Character spans of ``text`` covered by a shingle that is also in ``other`` (spans
    apart by white space only are one passage)."""
    if not text or not other.size:
        return ()
    hashes, spans = windows(text, kind, size)
    merged: list[tuple[int, int]] = []
    for i in np.flatnonzero(np.isin(hashes, other)):
        x, y = spans[int(i)]
        if merged and (x <= merged[-1][1] or text[merged[-1][1]:x].isspace()):
            merged[-1] = (merged[-1][0], max(merged[-1][1], y))
        else:
            merged.append((x, y))
    return tuple(merged)


def _side(side: Side) -> dict[str, object]:
    return {"id": side.id, "raw": side.raw, "text": side.text,
            "shared": [list(span) for span in side.shared],
            "differs": [list(span) for span in side.differs], "shingles": side.shingles}
