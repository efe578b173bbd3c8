"""The consumer's sketch worker (service/sketch_worker.py): a spawned process sketches the
next chunk of a big batch. Same verdicts as without it; a worker that dies is replaced by
sketching in process, with nothing lost; one left behind by a killed consumer exits."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from mixed_ads import ad_lines

from streamdedup.service.consumer import Service
from streamdedup.service.sketch_worker import SketchWorker
from streamdedup.settings import Settings
from streamdedup.store.memory import MemoryStore

SETTINGS = Settings(metrics_port=0, store_backend="memory")


class Record(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    value: bytes
    key: bytes | None = None


def batches(n: int, size: int, seed: int) -> list[list[Record]]:
    records = [Record("jobs", 0, i, 1_700_000_000_000 + i, line.encode())
               for i, line in enumerate(ad_lines(n, seed))]
    return [records[i:i + size] for i in range(0, n, size)]


def judged(service: Service, stream: list[list[Record]]) -> list[dict[str, Any]]:
    """Each record's outgoing verdict or dead letter, as the consumer would send it (but for
    the moment it was processed)."""
    out = []
    for batch in stream:
        for _tp, _offset, outgoing in service.process_records(batch):
            assert outgoing is not None
            record = json.loads(outgoing.value)
            record.get("source", {}).pop("processed_at", None)
            out.append(record)
    return out


def with_worker(monkeypatch: pytest.MonkeyPatch, used: list[int]) -> Service:
    service = Service(SETTINGS, store=MemoryStore())
    worker = service.sketch_worker = SketchWorker(SETTINGS)
    real = worker.result

    def counted(future: Any) -> Any:
        found = real(future)
        used.append(found is not None)
        return found

    monkeypatch.setattr(worker, "result", counted)
    return service


def test_verdicts_are_the_same_with_and_without_the_worker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    stream = batches(1500, 500, seed=5) + batches(300, 100, seed=6)  # big and small batches
    alone = judged(Service(SETTINGS, store=MemoryStore()), stream)
    used: list[int] = []
    service = with_worker(monkeypatch, used)
    try:
        assert judged(service, stream) == alone
    finally:
        assert service.sketch_worker is not None
        service.sketch_worker.close()
    assert len(used) == 12 and all(used)  # 3 big batches in 4 chunks; small ones in process
    assert sum(v.get("duplicate", False) for v in alone) > 300
    assert any("error" in v or "reason" in v for v in alone)  # dead letters among them


def test_a_worker_that_dies_is_replaced_by_sketching_in_process(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    stream = batches(2000, 500, seed=7)
    alone = judged(Service(SETTINGS, store=MemoryStore()), stream)
    used: list[int] = []
    service = with_worker(monkeypatch, used)
    worker = service.sketch_worker
    assert worker is not None
    got = judged(service, stream[:1])
    for pid in list(worker._pool._processes):  # type: ignore[union-attr]
        os.kill(pid, signal.SIGKILL)
    with caplog.at_level(logging.WARNING, logger="streamdedup.service.sketch_worker"):
        got += judged(service, stream[1:])
    assert got == alone
    assert not worker.alive and "sketching in process from now on" in caplog.text
    assert used[:4] == [True] * 4


def test_a_supervisors_sigterm_to_the_group_leaves_the_worker_to_the_consumer() -> None:
    """systemd and `timeout` send SIGTERM to every process of the consumer's group: the
    worker died at once, so the batch the consumer was finishing lost it ("the sketch
    worker failed") on the way to its final commit."""
    worker = SketchWorker(SETTINGS)
    try:
        fields = [{"title": "a", "description": "cerchiamo cuoco"}]
        assert worker.result(worker.submit([fields])[0]) is not None  # started
        for pid in list(worker._pool._processes):  # type: ignore[union-attr]
            os.kill(pid, signal.SIGTERM)
        time.sleep(0.5)
        assert worker.result(worker.submit([fields])[0]) is not None and worker.alive
    finally:
        worker.close()


def test_a_worker_left_behind_by_a_killed_consumer_exits(tmp_path: Path) -> None:
    script = (
        "import os, sys, time\n"
        "from streamdedup.service.sketch_worker import SketchWorker\n"
        "from streamdedup.settings import Settings\n"
        "w = SketchWorker(Settings())\n"
        "w.result(w.submit([[{'title': 'a', 'description': 'cerchiamo cuoco'}]])[0])\n"
        "print(*w._pool._processes, flush=True)\n"
        "time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None
    worker_pid = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _running(worker_pid):
        time.sleep(0.2)
    assert not _running(worker_pid)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
