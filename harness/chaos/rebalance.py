"""Phase C, ``RebalanceRun``: a multi-partition topic, a second consumer joining the group and
leaving, each consumer with its own store; the near-duplicates missed because their copies
sat in partitions owned by different consumers are counted against one uninterrupted
consumer over the same topic.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.chaos.harness import Harness, _last_assignment, wait_assigned
from harness.chaos.outcome import check, collect
from harness.chaos.stream import Announcement, split


class RebalanceRun(Harness):
    """Phase C: a multi-partition topic, a second consumer joining the group and leaving.

    Each consumer has its own store (one store cannot have two writers; see the
    second_writer fault). A consumer then sees only the documents of the partitions assigned
    to it, so near-duplicates whose copies sit in partitions owned by different consumers are
    missed; this phase counts them against one uninterrupted consumer over the same topic."""

    def run(self, stream: Sequence[Announcement]) -> dict[str, Any]:
        c = self.c
        lane = self.lane("rb", partitions=c.rebalance_partitions)
        chunks = split(stream, 3)
        c.say(f"phase C: {len(stream)} messages on {c.rebalance_partitions} partitions")
        extra = ["--topic-partitions", str(c.rebalance_partitions)]
        a = self.launch("rb-a", self.consumer_argv(lane, self.workdir / "store-a",
                                                   wrapped=False, extra=extra))
        wait_assigned(a, 120.0)
        self.produce(lane, chunks[0])
        self.wait_answered(lane, [a])
        b = self.launch("rb-b", self.consumer_argv(lane, self.workdir / "store-b",
                                                   wrapped=False, extra=extra))
        wait_assigned(b, 120.0)
        self.produce(lane, chunks[1])
        self.wait_answered(lane, [a, b])
        a_parts, b_parts = _last_assignment(a), _last_assignment(b)
        self.event("rebalance_join", bool(a_parts) and bool(b_parts) and not a_parts & b_parts,
                   a_partitions=sorted(a_parts), b_partitions=sorted(b_parts))
        rc_b = b.stop()
        self.produce(lane, chunks[2])
        self.wait_answered(lane, [a])
        a_after = _last_assignment(a)
        self.event("rebalance_leave", rc_b == 0 and len(a_after) == c.rebalance_partitions,
                   exit_code=rc_b, a_partitions_after=sorted(a_after))
        a.stop()
        got = collect(self.cluster, lane.out, lane.dlq)
        docs_a, docs_b = _store_ids(self.workdir / "store-a"), _store_ids(self.workdir / "store-b")
        ref = self.lane("rbref", topic=lane.topic)
        ref.ids = set(lane.ids)
        proc = self.launch("rb-ref", self.consumer_argv(ref, self.workdir / "store-rb-ref",
                                                        wrapped=False))
        self.wait_answered(ref, [proc])
        proc.stop()
        reference = collect(self.cluster, ref.out, ref.dlq)
        result = check(lane.ids, got)
        result.update(
            messages=len(stream), partitions=c.rebalance_partitions,
            docs_in_store_a=len(docs_a), docs_in_store_b=len(docs_b),
            docs_in_both_stores=len(docs_a & docs_b),
            duplicates_split_stores=got.duplicates(),
            duplicates_one_store=reference.duplicates(),
            missed_duplicates=sum(
                1 for i, vs in reference.verdicts.items()
                if json.loads(vs[0])["duplicate"] and i in got.verdicts
                and not json.loads(got.verdicts[i][0])["duplicate"]),
        )
        return result


def _store_ids(store: Path) -> set[str]:
    db = store / "index.sqlite"
    if not db.exists():
        return set()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {row[0] for row in conn.execute("SELECT doc_id FROM docs")}
    finally:
        conn.close()
