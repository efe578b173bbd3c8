"""Phase A, ``ChaosRun``: one consumer on a one-partition topic while the faults hit it in a
shuffled order, each with the next chunk of the stream; then phase B, an uninterrupted
reference run over the same topic (so both see the same order), whose answers phase A's must
equal (``check``'s ``mismatches``).

Faults: SIGKILL at random moments under load and at chosen points of the commit order (trip
wires, ``trips.py``); broker stop/start; SIGTERM in a busy batch; disk full (a small tmpfs
filled up, when this process may mount one) and write errors (RLIMIT_FSIZE set on the
running consumer, which needs no privileges); damaged store files at start; a second writer
on the same store. A consumer that dies on its own is a finding (a failed event), then it is
restarted like a crashed service would be.
"""

from __future__ import annotations

import functools
import re
import resource
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from harness.chaos.config import ChaosConfig
from harness.chaos.errors import ChaosError, ConsumerDied
from harness.chaos.harness import Harness, wait_assigned
from harness.chaos.outcome import Outcome, check, collect
from harness.chaos.store import StoreDir, corrupt_store
from harness.chaos.stream import Announcement, split
from harness.chaos.trips import TRIP_MARK, TRIP_STAGES
from streamdedup.process import ChildProcess

_FAILED_LINE = re.compile(r"(checkpoint|store) failed")
_KAFKA_NOISE = re.compile(r"ERROR kafka\.|Traceback")  # kafka-python's own, on an outage


class ChaosRun(Harness):
    """Phase A (faults on a one-partition topic) and B (an uninterrupted reference run over
    the same topic, so both see the same order)."""

    def __init__(self, config: ChaosConfig) -> None:
        super().__init__(config)
        self.store = StoreDir(self.workdir / "store",
                              config.tmpfs_mb if "disk_full" in config.faults else 0)
        self.main = self.lane("a")
        self.consumer: ChildProcess | None = None

    def start_consumer(self, trip: str | None = None, label: str = "consumer") -> ChildProcess:
        return self.launch(label, self.consumer_argv(self.main, self.store.path, trip=trip))

    def running(self) -> ChildProcess:
        """The phase's consumer, started if needed and waited for until it has partitions
        (a signal before that only finds Python's default handlers)."""
        if self.consumer is None or not self.consumer.alive():
            self.consumer = self.start_consumer()
            wait_assigned(self.consumer, 120.0)
        return self.consumer

    def caught_up(self) -> float:
        return self.wait_answered(self.main, [self.running()])

    def survive(self, step: str, action: Callable[[], Any]) -> None:
        """Run a step; a consumer that dies on its own is a finding (an event that fails the
        run), then it is restarted like a crashed service would be, and the run goes on."""
        for _ in range(5):
            try:
                action()
                return
            except ConsumerDied as died:
                proc = died.proc
                error = next((line for line in reversed(proc.lines)
                              if "Error" in line and not line.startswith(" ")), "")
                self.event("unexpected_exit", False, step=step, consumer=proc.name,
                           exit_code=proc.returncode, error=error[-200:],
                           log=str(proc.log_path))
                self.consumer = None
                action = self.caught_up
        raise ChaosError(f"step {step}: consumers keep dying; see {self.logs}")

    # --- the plan
    def steps(self) -> list[str]:
        c = self.c
        steps: list[str] = []
        if "kill" in c.faults and c.kills > 0:
            trips = c.kills - c.kills // 2
            steps += [f"trip:{TRIP_STAGES[i % len(TRIP_STAGES)]}" for i in range(trips)]
            steps += ["kill"] * (c.kills - trips)
        if "broker" in c.faults and c.broker is not None:
            steps += ["broker:stop", "broker:kill"]
        for kind in ("sigterm", "disk_full", "write_error", "second_writer"):
            if kind in c.faults:
                steps.append(kind)
        if "corrupt" in c.faults:
            steps += [f"corrupt:{how}" for how in c.corruptions]
        self.rng.shuffle(steps)
        return steps

    def run(self, stream: Sequence[Announcement]) -> dict[str, Any]:
        c = self.c
        steps = self.steps()
        chunks = split(stream, len(steps) + 1)
        c.say(f"phase A: {len(stream)} messages, {len(steps)} fault steps, store "
              f"{'on tmpfs' if self.store.mounted else 'on disk'}")
        t0 = time.monotonic()
        self.running()
        for step, chunk in zip(steps, chunks, strict=False):
            kind, _, arg = step.partition(":")
            fault = getattr(self, f"_fault_{kind}")
            self.survive(step, functools.partial(fault, chunk, *((arg,) if arg else ())))
            self.survive(step, self.caught_up)
        self.produce(self.main, chunks[-1])
        self.survive("end", self.caught_up)
        rc = self.running().stop()
        elapsed = time.monotonic() - t0
        chaos = collect(self.cluster, self.main.out, self.main.dlq)
        c.say(f"phase A done in {elapsed:.0f} s (last consumer exit {rc}); reference run ...")
        reference, ref_s = self.reference_run()
        result = check(self.main.ids, chaos, reference)
        result.update(messages=len(stream), elapsed_s=round(elapsed, 1),
                      reference_elapsed_s=round(ref_s, 1), store_on_tmpfs=self.store.mounted,
                      tmpfs_note=self.store.mount_error)
        return result

    def reference_run(self) -> tuple[Outcome, float]:
        """The same input topic, read by a fresh group into a fresh store, without faults."""
        ref = self.lane("ref", topic=self.main.topic)
        ref.ids = set(self.main.ids)
        t0 = time.monotonic()
        proc = self.launch("reference", self.consumer_argv(ref, self.workdir / "store-ref",
                                                           wrapped=False))
        self.wait_answered(ref, [proc])
        elapsed = time.monotonic() - t0
        proc.stop()
        return collect(self.cluster, ref.out, ref.dlq), elapsed

    # --- faults (each gets the next chunk of input)
    def _fault_kill(self, chunk: Sequence[Announcement]) -> None:
        """SIGKILL at a random moment while the chunk trickles in (ten slices, 40 ms apart),
        so that messages are at every stage: fetched, detected, stored, produced."""
        proc = self.running()
        sent: list[str] = []
        feeder = threading.Thread(target=self._trickle, args=(split(chunk, 10), 0.04, sent),
                                  daemon=True)
        delay = self.rng.uniform(0.05, 0.45)
        feeder.start()
        time.sleep(delay)
        self.main.tally.poll(50)
        pending = len((self.main.ids | set(list(sent))) - self.main.tally.answered)
        proc.kill()
        feeder.join()
        self.main.ids.update(a.id for a in chunk)
        self.consumer = None
        self.event("kill_random", proc.returncode == -signal.SIGKILL, delay_s=round(delay, 2),
                   unanswered_at_kill=pending, chunk=len(chunk))
        self.running()

    def _trickle(self, slices: Sequence[Sequence[Announcement]], gap_s: float,
                 sent: list[str]) -> None:
        """(Feeder thread) produce slice by slice; ids are noted in ``sent`` only."""
        for part in slices:
            self.cluster.produce(self.main.topic, part)
            sent.extend(a.id for a in part)
            time.sleep(gap_s)

    def _fault_trip(self, chunk: Sequence[Announcement], stage: str) -> None:
        self.running().stop()
        proc = self.consumer = self.start_consumer(trip=stage, label=f"trip-{stage}")
        self.produce(self.main, chunk)
        rc = proc.wait(self.c.step_timeout_s / 2)
        marks = proc.grep(re.compile(TRIP_MARK))
        if rc is None:
            proc.kill()
        note = marks[-1].split()[-1] if marks else "not reached"
        self.consumer = None
        self.event(f"kill_{stage}", rc == -signal.SIGKILL and bool(marks), where=note,
                   unanswered_at_kill=self.main.pending(), chunk=len(chunk))
        self.running()

    def _fault_broker(self, chunk: Sequence[Announcement], how: str) -> None:
        broker = self.c.broker
        proc = self.running()
        failures_before, noise_before = proc.count(_FAILED_LINE), proc.count(_KAFKA_NOISE)
        self.produce(self.main, chunk)
        time.sleep(self.rng.uniform(0.0, 0.1))
        pending = self.main.pending()
        self.cluster.close()
        t0 = time.monotonic()
        if how == "kill":
            broker.kill()
        else:
            broker.stop(keep_data=True)
        time.sleep(2.0)
        broker.start()
        down = time.monotonic() - t0
        recovered = self.wait_answered(self.main, [proc])
        # Nothing more is sent: an offset commit lost to the outage must still be made by
        # the idle consumer (RELIABILITY, known problem 6), or the group shows lag for work
        # that is done. It commits again once a second while idle.
        end = self.cluster.targets(self.main.topic).get(0, 0)
        deadline = time.monotonic() + 15.0
        committed = self.cluster.committed(self.main.group, self.main.topic).get(0, 0)
        while committed < end and time.monotonic() < deadline:
            time.sleep(0.5)
            committed = self.cluster.committed(self.main.group, self.main.topic).get(0, 0)
        self.event(f"broker_{'crash' if how == 'kill' else 'restart'}",
                   proc.alive() and committed >= end,
                   down_s=round(down, 1), unanswered_at_stop=pending,
                   recovered_s=round(recovered, 1), consumer_restarted=False,
                   committed=committed, produced_to=end,
                   failed_checkpoints_logged=proc.count(_FAILED_LINE) - failures_before,
                   kafka_errors_logged=proc.count(_KAFKA_NOISE) - noise_before)

    def _fault_sigterm(self, chunk: Sequence[Announcement]) -> None:
        proc = self.running()
        self.produce(self.main, chunk)
        time.sleep(self.rng.uniform(0.0, 0.1))
        pending = self.main.pending()
        t0 = time.monotonic()
        proc.signal(signal.SIGTERM)
        rc = proc.wait(60)
        stop_s = time.monotonic() - t0
        if rc is None:
            proc.kill()
        self.consumer = None
        committed = self.cluster.committed(self.main.group, self.main.topic).get(0, 0)
        got = collect(self.cluster, self.main.out, self.main.dlq)
        produced_to = got.max_source_offset.get(0, -1) + 1
        self.event("sigterm", rc == 0 and produced_to == committed, exit_code=rc,
                   stop_s=round(stop_s, 2), unanswered_at_sigterm=pending, committed=committed,
                   outputs_up_to=produced_to, chunk=len(chunk))
        self.running()

    def _stalled_store(self, kind: str, chunk: Sequence[Announcement],
                       inject: Callable[[ChildProcess], Any],
                       repair: Callable[[ChildProcess], Any], **details: Any) -> None:
        """Shared by disk_full and write_error: break writes under load, see the consumer log
        it and answer nothing more, repair, see the same process catch up."""
        proc = self.running()
        failures_before = proc.count(_FAILED_LINE)
        inject(proc)
        self.produce(self.main, chunk)
        t0 = time.monotonic()
        noticed = None
        while time.monotonic() - t0 < 30 and proc.alive():
            if proc.count(_FAILED_LINE) > failures_before:
                noticed = time.monotonic() - t0
                break
            time.sleep(0.05)
        self.main.tally.poll(500)
        held_from = len(self.main.tally.answered)
        time.sleep(3.0)
        self.main.tally.poll(500)
        held_to = len(self.main.tally.answered)
        repair(proc)
        recovered = self.wait_answered(self.main, [proc])
        errors = proc.grep(_FAILED_LINE)[failures_before:]
        self.event(kind, noticed is not None and proc.alive() and held_to == held_from,
                   **details, noticed_s=None if noticed is None else round(noticed, 2),
                   answered_while_broken=held_to - held_from,
                   recovered_s=round(recovered, 1), errors_logged=len(errors),
                   first_error=errors[0][-160:] if errors else "", chunk=len(chunk))

    def _fault_disk_full(self, chunk: Sequence[Announcement]) -> None:
        if not self.store.mounted:
            self._fault_write_error(chunk, kind="disk_full",
                                    method=f"rlimit_fsize (no tmpfs: {self.store.mount_error})")
            return
        self._stalled_store("disk_full", chunk, lambda _p: self.store.fill(),
                            lambda _p: self.store.unfill(), method="tmpfs ENOSPC")

    def _fault_write_error(self, chunk: Sequence[Announcement], kind: str = "write_error",
                           method: str = "rlimit_fsize") -> None:
        old: list[tuple[int, int]] = []

        def inject(proc: ChildProcess) -> None:
            assert proc.pid is not None
            old.append(resource.prlimit(proc.pid, resource.RLIMIT_FSIZE))
            resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (4096, old[0][1]))

        def repair(proc: ChildProcess) -> None:
            if proc.pid is not None and old:
                resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, old[0])

        self._stalled_store(kind, chunk, inject, repair, method=method)

    def _fault_corrupt(self, chunk: Sequence[Announcement], how: str) -> None:
        rc = self.running().stop()
        self.consumer = None
        backup = self.workdir / "store-backup"
        self.store.backup(backup)
        done = corrupt_store(self.store.path / "index.sqlite", how, self.rng)
        proc = self.start_consumer(label=f"corrupt-{how}")
        exit_code = proc.wait(60)
        refused = exit_code is not None and exit_code != 0
        if exit_code is None:
            proc.stop()
        message = next((line for line in reversed(proc.lines) if "Error" in line), "")
        self.store.restore(backup)
        self.event(f"corrupt_{how}", refused and "index.sqlite" in message, damage=done,
                   refused=refused, exit_code=exit_code, previous_exit=rc,
                   message=message[-200:])
        self.running()
        self.produce(self.main, chunk)

    def _fault_second_writer(self, chunk: Sequence[Announcement]) -> None:
        first = self.running()
        self.produce(self.main, chunk)
        second = self.launch("second-writer", self.consumer_argv(
            self.main, self.store.path, wrapped=False))
        rc = second.wait(60)
        if rc is None:
            second.kill()
        message = next((line for line in reversed(second.lines) if "writer" in line), "")
        self.event("second_writer", rc not in (None, 0) and "one writer per store" in message
                   and first.alive(), exit_code=rc, message=message[-200:],
                   first_still_running=first.alive())

    def close(self) -> None:
        super().close()
        self.store.close()
