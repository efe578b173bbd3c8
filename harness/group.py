"""Chaos for a consumer group sharing one Redis index (one server or a Redis Cluster).

Three ``python -m streamdedup run --store-backend redis`` processes in one group read a
4-partition topic whose keys are the ids, so near-duplicates land on different partitions
and members. While the stream runs: a member is SIGKILLed and restarted, ``redis-server``
(a cluster: one master) is SIGKILLed and restarted from its AOF, a fourth member joins and
leaves (a rebalance), and another member is SIGKILLed. At the end every member gets SIGTERM
and must exit 0. Then every output record is read back and checked:

- the chaos invariants (``chaos.outcome.check``): nothing lost, no self-duplicate, no
  conflicting answers for an id;
- the shared store's definition (``harness.seq_truth.check_seq_order``): seqs are unique
  integers, the duplicate flags equal exact Jaccard truth evaluated in seq order (precision
  and recall), and no verdict matches itself or a later seq.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from harness import run_argv
from harness.chaos.config import ChaosConfig
from harness.chaos.harness import Harness, wait_assigned
from harness.chaos.outcome import check, collect
from harness.chaos.stream import Announcement, split
from harness.redis import RedisServer
from harness.seq_truth import check_seq_order
from streamdedup.core.document import Document
from streamdedup.core.sketch import Sketcher
from streamdedup.errors import MessageError
from streamdedup.process import ChildProcess
from streamdedup.service.message import decode_message
from streamdedup.settings import build_settings


class GroupRun(Harness):
    """One group run against ``redis`` (started by the caller with ``RedisServer.run``, so
    that its nodes can be killed and restarted)."""

    def __init__(self, config: ChaosConfig, redis: RedisServer, members: int = 3,
                 partitions: int = 4) -> None:
        super().__init__(config)
        self.redis = redis
        self.members = members
        self.partitions = partitions
        self.namespace = f"chaos-{uuid.uuid4().hex[:8]}"

    def _argv(self, lane: Any) -> list[str]:
        c = self.c
        return run_argv(preset=c.preset, bootstrap_servers=c.bootstrap, group_id=lane.group,
                        input_topic=lane.topic, output_topic=lane.out, dlq_topic=lane.dlq,
                        topic_partitions=self.partitions, metrics_port=0, log_every_s=5,
                        session_timeout_ms=c.session_timeout_ms, store_backend="redis",
                        redis_url=self.redis.url, redis_namespace=self.namespace,
                        redis_cluster=bool(self.redis.cluster) or None)

    def _start(self, lane: Any, label: str) -> ChildProcess:
        proc = self.launch(label, self._argv(lane))
        wait_assigned(proc, 120.0)
        return proc

    def _trickle(self, lane: Any, chunk: Sequence[Announcement], slices: int = 10,
                 gap_s: float = 0.25) -> None:
        """Produce a chunk over a few seconds, so that a fault finds work in flight."""
        for part in split(chunk, slices):
            self.produce(lane, part)
            time.sleep(gap_s)

    def run(self, stream: Sequence[Announcement]) -> dict[str, Any]:
        c = self.c
        lane = self.lane("grp", partitions=self.partitions)
        chunks = split(stream, 5)
        kind = f"cluster of {self.redis.cluster}" if self.redis.cluster else "one server"
        c.say(f"group: {len(stream)} messages, {self.members} members, {self.partitions} "
              f"partitions, Redis {kind}")
        members = [self._start(lane, f"member-{k}") for k in range(self.members)]
        self.produce(lane, chunks[0])
        self.wait_answered(lane, members)

        def kill_member(k: int) -> None:
            members[k].kill()
            self.event("kill_member", True, member=members[k].name)
            members[k] = self._start(lane, f"member-{k}")

        def kill_redis() -> None:
            node = self.rng.randrange(max(1, self.redis.cluster))
            self.redis.kill(node)
            time.sleep(2.0)
            self.redis.restart(node)
            self.event("kill_redis", True, node=node)

        def rebalance() -> None:
            extra = self._start(lane, "member-extra")  # joins: the group rebalances
            time.sleep(1.0)
            rc = extra.stop()  # and leaves: again
            self.event("rebalance_join_leave", rc == 0, exit_code=rc)

        # each fault strikes while its chunk is still being produced and judged
        for chunk, fault in ((chunks[1], lambda: kill_member(0)), (chunks[2], kill_redis),
                             (chunks[3], rebalance), (chunks[4], lambda: kill_member(1))):
            producer = threading.Thread(target=self._trickle, args=(lane, chunk))
            producer.start()
            time.sleep(0.8)
            fault()
            producer.join()
            self.wait_answered(lane, members)
        codes = [m.stop() for m in members]
        self.event("sigterm_exit_0", codes == [0] * len(members), exit_codes=codes)

        got = collect(self.cluster, lane.out, lane.dlq)
        result = check(lane.ids, got)
        verdicts = {i: _first(vs) for i, vs in got.verdicts.items()}
        result["seq_order"] = check_seq_order(verdicts, self._sets(stream, verdicts),
                                              build_settings(c.preset, env={}).threshold)
        result.update(messages=len(stream), members=self.members, partitions=self.partitions,
                      redis=kind)
        return result

    def _sets(self, stream: Sequence[Announcement], ids: Any) -> dict[str, Any]:
        settings = build_settings(self.c.preset, env={})
        sketcher = Sketcher(settings)
        out = {}
        for a in stream:
            if a.id in ids and a.id not in out:
                try:
                    doc: Document = decode_message(a.value, settings.text_fields,
                                                   settings.max_message_bytes)
                except MessageError:
                    continue
                out[a.id] = sketcher.shingle_fields(doc.fields).shingles
        return out


def _first(verdicts: list[str]) -> dict[str, Any]:
    return dict(json.loads(verdicts[0]))


def ok(result: dict[str, Any], events: Sequence[dict[str, Any]]) -> bool:
    s = result["seq_order"]
    return (result["lost"] == 0 and result["self_duplicates"] == 0 and result["conflicts"] == 0
            and s["false_positives"] == 0 and s["false_negatives"] == 0
            and s["self_or_later_matches"] == 0 and s["repeated_seqs"] == 0
            and s["bad_seq"] == 0 and s["clusters_unlike_the_truth"] in (0, None)
            and all(e["ok"] for e in events))


def table(result: dict[str, Any]) -> str:
    s = result["seq_order"]
    rows = [("redis", result["redis"]), ("members x partitions",
                                          f"{result['members']} x {result['partitions']}"),
            ("messages", result["messages"]), ("ids with a verdict", result["verdicts"]),
            ("ids with a dead letter", result["dead_letters"]), ("lost", result["lost"]),
            ("self duplicates", result["self_duplicates"]),
            ("conflicting answers", result["conflicts"]),
            ("repeated seqs", s["repeated_seqs"]), ("duplicates (true)",
                                                    f"{s['duplicates']} ({s['true_duplicates']})"),
            ("precision / recall", f"{s['precision']} / {s['recall']}"),
            ("matches of itself or a later seq", s["self_or_later_matches"]),
            ("clusters (unlike the truth)",
             f"{s['clusters']} ({s['clusters_unlike_the_truth']})")]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
