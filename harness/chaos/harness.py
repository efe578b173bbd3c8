"""``Harness``, the machinery every phase shares: lanes (an input topic, its outputs and group,
followed by a ``Tally``), consumers launched and sampled, waits until every id is answered or
a consumer holds its partitions, and the events a run reports.

Consumers are given ``--session-timeout-ms`` at the broker's minimum (6 s), since after every
SIGKILL the group waits that long for the dead member before the restarted consumer gets its
partitions; ``session_timeout_ms=0`` leaves the product's default (10 s). A consumer with a
trip wire runs as ``python -m harness.chaos consumer --trip STAGE -- run ...``
(``trips.py``).
"""

from __future__ import annotations

import contextlib
import random
import re
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import child_env, run_argv, run_flags
from harness.chaos.cluster import Cluster
from harness.chaos.config import ChaosConfig
from harness.chaos.errors import ChaosError, ConsumerDied
from harness.chaos.resources import Sampler
from harness.chaos.stream import Announcement
from streamdedup.process import ChildProcess

_ASSIGNED_LINE = re.compile(r"assigned \[(.*)\]")


class Tally:
    """Follows a lane's output and dead-letter topics and notes which ids were answered.

    Progress is measured on the outputs, not on committed offsets: offset commits are
    asynchronous, and one lost while the stream is idle stays lost until the next message."""

    def __init__(self, bootstrap: str, topics: Sequence[str]) -> None:
        self.bootstrap = bootstrap
        self.topics = list(topics)
        self.answered: set[str] = set()
        self.records = 0
        self._consumer: Any = None

    def _open(self) -> Any:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                                 client_id="chaos-tally", enable_auto_commit=False,
                                 auto_offset_reset="earliest")
        tps = [TopicPartition(t, p) for t in self.topics
               for p in sorted(consumer.partitions_for_topic(t) or {0})]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        self.answered.clear()
        self.records = 0
        return consumer

    def poll(self, timeout_ms: int = 200) -> int:
        """Read what arrived; returns how many ids are answered."""
        try:
            if self._consumer is None:
                self._consumer = self._open()
            for records in self._consumer.poll(timeout_ms=timeout_ms,
                                               max_records=20000).values():
                for rec in records:
                    self.records += 1
                    if rec.key is not None:
                        self.answered.add(rec.key.decode("utf-8", "replace"))
        except Exception:  # the broker may be restarting: start over once it is back
            self.close()
            time.sleep(0.2)
        return len(self.answered)

    def close(self) -> None:
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.close()
            self._consumer = None


@dataclass
class Lane:
    """One input topic, the outputs and group that answer it, and the ids sent to it."""

    topic: str
    out: str
    dlq: str
    group: str
    tally: Tally
    ids: set[str] = field(default_factory=set)

    def pending(self) -> int:
        self.tally.poll(50)
        return len(self.ids - self.tally.answered)


class Harness:
    """Shared machinery of a run: topics, consumers, waits, events."""

    def __init__(self, config: ChaosConfig) -> None:
        self.c = config
        self.rng = random.Random(config.seed)
        self.run_id = f"chaos-{uuid.uuid4().hex[:8]}"
        self.workdir = config.workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs = self.workdir / "logs"
        self.logs.mkdir(exist_ok=True)
        self.cluster = Cluster(config.bootstrap)
        self.sampler = Sampler().start()
        self.events: list[dict[str, Any]] = []
        self.topics: list[str] = []
        self.lanes: list[Lane] = []
        self.procs: list[ChildProcess] = []
        self._n = 0

    def lane(self, name: str, partitions: int = 1, topic: str | None = None) -> Lane:
        """Topics of a new lane (the input topic may be shared with another lane)."""
        base = f"{self.run_id}-{name}"
        lane = Lane(topic or f"{base}-in", f"{base}-out", f"{base}-dlq", f"{base}-group",
                    Tally(self.c.bootstrap, [f"{base}-out", f"{base}-dlq"]))
        for t, n in ((lane.out, 1), (lane.dlq, 1), *(() if topic else ((lane.topic,
                                                                       partitions),))):
            self.cluster.create_topic(t, n)
            self.topics.append(t)
        self.lanes.append(lane)
        return lane

    def produce(self, lane: Lane, chunk: Sequence[Announcement]) -> None:
        self.cluster.produce(lane.topic, chunk)
        lane.ids.update(a.id for a in chunk)

    # --- consumers
    def consumer_argv(self, lane: Lane, store: Path, *, trip: str | None = None,
                      wrapped: bool = True, extra: Sequence[str] = ()) -> list[str]:
        c = self.c
        flags = [*run_flags(preset=c.preset, bootstrap_servers=c.bootstrap, store=store,
                            group_id=lane.group, input_topic=lane.topic,
                            output_topic=lane.out, dlq_topic=lane.dlq, metrics_port=0,
                            log_every_s=5),
                 *extra,
                 *run_flags(commit_every=c.commit_every, commit_interval_s=c.commit_interval_s,
                            poll_max_records=c.poll_max_records)]
        if not wrapped:  # as a user runs it: the product's own session timeout
            return run_argv(*flags)
        flags += run_flags(session_timeout_ms=c.session_timeout_ms or None,
                           group_instance_id=c.group_instance_id or None)
        if trip is None:
            return run_argv(*flags)
        return [sys.executable, "-m", "harness.chaos", "consumer", "--trip", trip,
                "--trip-seed", str(self.rng.randrange(1 << 30)), "--", "run", *flags]

    def launch(self, label: str, argv: Sequence[str]) -> ChildProcess:
        self._n += 1
        proc = ChildProcess(f"{label}-{self._n}", argv, self.logs / f"{label}.log",
                            env=child_env()).start()
        self.procs.append(proc)
        self.sampler.register(proc)
        return proc

    def wait_answered(self, lane: Lane, alive: Sequence[ChildProcess],
                      timeout: float | None = None) -> float:
        """Until every id sent to the lane has a verdict or a dead letter; returns seconds.
        Raises if a consumer that should be running exits, or on timeout."""
        t0 = time.monotonic()
        deadline = t0 + (timeout or self.c.step_timeout_s)
        while True:
            for proc in alive:
                if not proc.alive():
                    raise ConsumerDied(proc)
            lane.tally.poll(200)
            missing = lane.ids - lane.tally.answered
            if not missing:
                return time.monotonic() - t0
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {p.name}\n{p.tail()}" for p in alive)
                raise ChaosError(f"{len(missing)} ids sent to {lane.topic} got no answer "
                                 f"within {deadline - t0:.0f} s (e.g. {sorted(missing)[:3]})"
                                 f"\n{tails}")

    def event(self, kind: str, ok: bool, **details: Any) -> dict[str, Any]:
        ev = {"kind": kind, "ok": ok, **details}
        self.events.append(ev)
        self.c.say(f"  {kind:<26} {'ok ' if ok else 'BAD'} "
                   + ", ".join(f"{k}={v}" for k, v in details.items()
                               if not isinstance(v, (list, dict)))[:200])
        return ev

    def close(self) -> None:
        for proc in self.procs:
            if proc.alive():
                proc.kill()
        for lane in self.lanes:
            lane.tally.close()
        self.sampler.stop()
        self.cluster.delete_topics(self.topics)  # best effort: a shared broker stays tidy
        self.cluster.close()


def wait_assigned(proc: ChildProcess, timeout: float) -> None:
    """Until the consumer logs its partition assignment (it is then inside its loop)."""
    deadline = time.monotonic() + timeout
    while not proc.grep(_ASSIGNED_LINE):
        if not proc.alive():
            raise ChaosError(f"consumer {proc.name} exited ({proc.returncode}) before it was "
                             f"assigned partitions:\n{proc.tail()}")
        if time.monotonic() > deadline:
            raise ChaosError(f"consumer {proc.name} got no partitions in {timeout:.0f} s")
        time.sleep(0.05)


def _last_assignment(proc: ChildProcess) -> set[str]:
    lines = proc.grep(_ASSIGNED_LINE)
    if not lines:
        return set()
    match = _ASSIGNED_LINE.search(lines[-1])
    assert match is not None
    return {p.strip().strip("'\"") for p in match.group(1).split(",") if p.strip()}
