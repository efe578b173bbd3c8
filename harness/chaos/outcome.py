"""Outcomes and checks: ``collect`` reads every output and dead-letter record of a run back into
an ``Outcome`` (answers by input id), ``check`` counts the invariants (lost, self-duplicates,
conflicts, and mismatches against a reference run), with a few examples of each failure.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.chaos.cluster import Cluster


@dataclass
class Outcome:
    """Everything the consumer wrote for one run: answers by input id."""

    verdicts: dict[str, list[str]] = field(default_factory=dict)  # canonical JSON, no source
    dead: dict[str, list[str]] = field(default_factory=dict)  # reasons
    records: int = 0
    max_source_offset: dict[int, int] = field(default_factory=dict)  # input partition -> max

    def answers(self, doc_id: str) -> set[tuple[str, str]]:
        return ({("verdict", v) for v in self.verdicts.get(doc_id, ())}
                | {("dead", r) for r in self.dead.get(doc_id, ())})

    def answered(self) -> set[str]:
        return set(self.verdicts) | set(self.dead)

    def duplicates(self) -> int:
        """Ids whose (first) verdict says duplicate."""
        return sum(1 for vs in self.verdicts.values() if json.loads(vs[0])["duplicate"])


def collect(cluster: Cluster, output_topic: str, dlq_topic: str) -> Outcome:
    out = Outcome()

    def note_source(body: Mapping[str, Any]) -> None:
        src = body.get("source") or {}
        p, off = src.get("partition"), src.get("offset")
        if isinstance(p, int) and isinstance(off, int):
            out.max_source_offset[p] = max(out.max_source_offset.get(p, -1), off)

    for rec in cluster.read(output_topic):
        body = json.loads(rec.value)
        note_source(body)
        body.pop("source", None)
        out.verdicts.setdefault(str(body["id"]), []).append(
            json.dumps(body, sort_keys=True, ensure_ascii=False))
        out.records += 1
    for rec in cluster.read(dlq_topic):
        body = json.loads(rec.value)
        note_source(body)
        key = body.get("key_b64")
        doc_id = base64.b64decode(key).decode("utf-8", "replace") if key else "?"
        out.dead.setdefault(doc_id, []).append(str(body.get("reason")))
        out.records += 1
    return out


def _self_duplicate(doc_id: str, verdict: Mapping[str, Any]) -> bool:
    return (verdict.get("duplicate_of") == doc_id
            or any(m.get("id") == doc_id for m in verdict.get("matches", ())))


def check(ids: Iterable[str], got: Outcome, reference: Outcome | None = None,
          examples: int = 5) -> dict[str, Any]:
    """The invariants of a run, as counts (and a few examples of each failure)."""
    ids = set(ids)
    lost = sorted(ids - got.answered())
    self_dups = sorted({i for i, vs in got.verdicts.items() for v in set(vs)
                        if _self_duplicate(i, json.loads(v))})
    conflicts = sorted(i for i in got.answered() if len(got.answers(i)) > 1)
    result: dict[str, Any] = {
        "ids": len(ids),
        "verdicts": len(got.verdicts),
        "dead_letters": len(got.dead),
        "output_records": got.records,
        "repeated_records": got.records - sum(len(got.answers(i)) for i in got.answered()),
        "lost": len(lost),
        "self_duplicates": len(self_dups),
        "conflicts": len(conflicts),
        "duplicates": got.duplicates(),
        "examples": {"lost": lost[:examples], "self_duplicates": self_dups[:examples],
                     "conflicts": conflicts[:examples]},
    }
    if reference is not None:
        mismatched = sorted(i for i in ids if got.answers(i) != reference.answers(i))
        result["mismatches"] = len(mismatched)
        result["reference_duplicates"] = reference.duplicates()
        result["examples"]["mismatches"] = [
            {"id": i, "run": sorted(got.answers(i)), "reference": sorted(reference.answers(i))}
            for i in mismatched[:examples]
        ]
    return result
