"""The verdict on one document: the detector's output and the output topic's payload."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from math import isfinite
from typing import Any

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_BOOL = {True: "true", False: "false"}


@dataclass(frozen=True)
class Match:
    id: str
    jaccard: float


@dataclass(frozen=True)
class Verdict:
    """Is this document a near-duplicate of an earlier one, of which, how similar.

    ``duplicate_of`` is the earliest-arrived verified match; ``matches`` lists verified
    matches best first (ties: earliest first), capped by ``max_matches``; ``cluster_id`` is
    the earliest document of the cluster the document joined (connected components of
    verified matches). ``exact`` says the shingle set equals an earlier document's;
    ``candidates`` counts the distinct earlier sets LSH proposed whose size could reach the
    threshold (Jaccard is at most the smaller size over the larger), ``skipped`` those beyond
    ``max_candidates`` that were not verified. ``merged`` names the other clusters (by
    their earlier ``cluster_id``) that this document joined into ``cluster_id``: a dashboard
    can relabel them, and cluster membership stays exact even when ``matches`` is capped.
    ``seq`` is the document's arrival number in its store (unique; in a shared store, the
    order that defines "earlier": only documents with a smaller ``seq`` are matched). It is
    None only in verdicts stored before it existed.
    """

    id: str
    duplicate: bool
    duplicate_of: str | None
    matches: tuple[Match, ...]
    cluster_id: str
    candidates: int
    exact: bool = False
    shingles: int = 0
    skipped: int = 0
    merged: tuple[str, ...] = ()
    seq: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def alone(cls, doc_id: str, seq: int) -> Verdict:
        """The verdict of an ad with no shingles (an empty text once normalized): nothing
        can match it, and it is its own cluster."""
        return cls(doc_id, False, None, (), doc_id, 0, shingles=0, seq=seq)

    def to_dict(self) -> dict[str, Any]:
        """Written out by hand: ``dataclasses.asdict`` deep-copies and was the hot spot."""
        return {
            "id": self.id,
            "seq": self.seq,
            "duplicate": self.duplicate,
            "duplicate_of": self.duplicate_of,
            "matches": [{"id": m.id, "jaccard": m.jaccard} for m in self.matches],
            "cluster_id": self.cluster_id,
            "candidates": self.candidates,
            "exact": self.exact,
            "shingles": self.shingles,
            "skipped": self.skipped,
            "merged": list(self.merged),
            **self.extra,
        }

    def to_json(self) -> str:
        """Compact JSON, made once: the store keeps it and the output writes it (``extra``
        is not to change after this is called)."""
        text: str | None = self.__dict__.get("_json")
        if text is None:
            text = _written(self)
            if text is None:
                text = _ENCODER.encode(self.to_dict())
            object.__setattr__(self, "_json", text)
        return text

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        known = {
            "id", "duplicate", "duplicate_of", "matches", "cluster_id", "candidates",
            "exact", "shingles", "skipped", "merged", "seq",
        }
        return cls(
            id=data["id"],
            duplicate=data["duplicate"],
            duplicate_of=data["duplicate_of"],
            matches=tuple(Match(m["id"], m["jaccard"]) for m in data["matches"]),
            cluster_id=data["cluster_id"],
            candidates=data["candidates"],
            exact=data.get("exact", False),
            shingles=data.get("shingles", 0),
            skipped=data.get("skipped", 0),
            merged=tuple(data.get("merged", ())),
            seq=data.get("seq"),
            extra={k: v for k, v in data.items() if k not in known},
        )

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        return cls.from_dict(json.loads(text))


def _written(v: Verdict) -> str | None:
    """``_ENCODER.encode(v.to_dict())`` byte for byte, written directly: json's C encoder
    formats each float through a Python callback (10.3 us for a verdict with two matches,
    3.6 us here; 0.53 -> 0.15 s for the 50,000 verdicts of the fresh benchmark; tested
    against the encoder). None leaves it to the encoder: extra fields, or a value of another
    type than its field declares (a bool or numpy integer would be written wrongly here)."""
    if v.extra or type(v.id) is not str or type(v.cluster_id) is not str:
        return None
    seq, dup_of = v.seq, v.duplicate_of
    if not (type(v.candidates) is int and type(v.shingles) is int  # exactly: not a bool
            and type(v.skipped) is int and (seq is None or type(seq) is int)
            and type(v.duplicate) is bool and type(v.exact) is bool
            and (dup_of is None or type(dup_of) is str)):
        return None
    matches = []
    for m in v.matches:
        if type(m.id) is not str or type(m.jaccard) is not float or not isfinite(m.jaccard):
            return None
        matches.append(f'{{"id":{encode_basestring(m.id)},"jaccard":{m.jaccard!r}}}')
    merged = []
    for x in v.merged:
        if type(x) is not str:
            return None
        merged.append(encode_basestring(x))
    return (f'{{"id":{encode_basestring(v.id)},"seq":{"null" if seq is None else seq},'
            f'"duplicate":{_BOOL[v.duplicate]},"duplicate_of":'
            f'{"null" if dup_of is None else encode_basestring(dup_of)},'
            f'"matches":[{",".join(matches)}],"cluster_id":{encode_basestring(v.cluster_id)},'
            f'"candidates":{v.candidates},"exact":{_BOOL[v.exact]},"shingles":{v.shingles},'
            f'"skipped":{v.skipped},"merged":[{",".join(merged)}]}}')


def match_jaccard(verdict: Mapping[str, object], other_id: object) -> float | None:
    """The Jaccard a verdict's ``matches`` give ``other_id`` (its ``duplicate_of`` is the
    earliest match, ``matches[0]`` the best); None when they do not list it. Here, not in
    ``explain.py``: ``tail`` and the monitor's state read it without numpy."""
    matches = verdict.get("matches")
    for match in matches if isinstance(matches, list) else ():
        if not isinstance(match, Mapping):  # a verdict read from a topic may be anything
            continue
        said = match.get("jaccard")
        if match.get("id") == other_id and isinstance(said, int | float):
            return float(said)
    return None
