"""Chaos harness: the real broker and real consumer processes, with faults injected on purpose.

Why: the checkpoint's commit order (``checkpoint.py``) promises that no crash point loses or
contradicts a verdict. That promise is only worth something if it is exercised against the
real thing: a Kafka broker, ``python -m streamdedup run`` as a separate process, an SQLite
store on a real file system. A run here produces a stream of announcements (Kijiji rows and
near-duplicates made by small edits), injects faults while the consumer works, then reads
every output record back and checks:

- every input id has a verdict or a dead letter (``lost``);
- no document is its own duplicate (``self_duplicates``);
- no id got two different answers (``conflicts``);
- verdicts equal those of an uninterrupted run over the same input topic (``mismatches``;
  the ``source`` provenance object is ignored).

Faults: SIGKILL at random moments under load and at chosen points of the commit order
(trip wires, below); broker stop/start; SIGTERM in a busy batch; disk full (a small tmpfs
filled up, when this process may mount one) and write errors (RLIMIT_FSIZE set on the
running consumer, which needs no privileges); damaged store files at start; a second writer
on the same store; a consumer group rebalance with separate stores.

Trip wires: ``python -m harness.chaos consumer [--trip STAGE] -- run ...`` runs the
unchanged CLI after wrapping one method so that the process SIGKILLs itself at that stage
(e.g. after the producer flush and before the offset commit). Consumers are given
``--session-timeout-ms`` at the broker's minimum (6 s), since after every SIGKILL the group
waits that long for the dead member before the restarted consumer gets its partitions;
``session_timeout_ms=0`` leaves the product's default (10 s). Nothing in the product code
knows about the harness.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import json
import os
import random
import re
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import child_env
from harness.broker import create_topics
from harness.edits import mutate
from streamdedup.core.document import Document
from streamdedup.replay.dump import read_dump
from streamdedup.replay.process import ChildProcess
from streamdedup.settings import Settings

FAULTS = ("kill", "broker", "sigterm", "disk_full", "write_error", "corrupt", "second_writer",
          "rebalance")
TRIP_STAGES = ("store_commit", "after_flush", "after_store_commit", "before_flush",
               "after_offset_commit")
CORRUPTIONS = ("truncate", "garbage_header", "page_scribble", "zero_length")
SURVEY_KINDS = (*CORRUPTIONS, "byte_flip")
TRIP_MARK = "CHAOS-TRIP"
_FAILED_LINE = re.compile(r"(checkpoint|store) failed")
_ASSIGNED_LINE = re.compile(r"assigned \[(.*)\]")


class ChaosError(RuntimeError):
    """The harness itself could not go on (a consumer died unexpectedly, a wait timed out)."""


class ConsumerDied(ChaosError):
    """A consumer exited while it should have been running."""

    def __init__(self, proc: ChildProcess) -> None:
        super().__init__(f"consumer {proc.name} exited ({proc.returncode}) while it should "
                         f"run:\n{proc.tail()}")
        self.proc = proc


# --------------------------------------------------------------------------------------------
# the input stream


@dataclass(frozen=True)
class Announcement:
    """One input message; ``kind`` is row, repost, variant, resend or bad."""

    id: str
    value: bytes
    kind: str

    @property
    def key(self) -> bytes:
        return self.id.encode("utf-8")


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """The dump's usable rows as announcement fields (without the row-index ``id``)."""
    return [{k: v for k, v in doc.fields.items() if k != "id"}
            for _, doc in read_dump(path, None, Settings.text_fields)
            if isinstance(doc, Document)]


def _bad_payload(k: int, doc_id: str) -> bytes:
    """Every way a message can be unusable, in turn (each must become a dead letter)."""
    kinds: tuple[bytes, ...] = (
        b'{"id": "' + doc_id.encode() + b'", "description": "troncato',
        b"\xff\xfe not utf-8 \xc3\x28",
        b"[1, 2, 3]",
        json.dumps({"id": doc_id, "description": 12}).encode(),
        json.dumps({"id": doc_id, "description": "  \n "}).encode(),
        json.dumps({"id": [doc_id], "description": "Cercasi sviluppatore"}).encode(),
        b"[" * 5000,
        b"",
    )
    return kinds[k % len(kinds)]


def build_stream(rows: Sequence[Mapping[str, str]], n: int, seed: int = 7,
                 variant_share: float = 0.4, repost_edit_share: float = 1.0
                 ) -> list[Announcement]:
    """``n`` announcements in a fixed order: rows in file order (then again as reposts under
    new ids once the file is used up, ``repost_edit_share`` of them edited), near-duplicates
    of earlier rows, a few exact resends (same id, same bytes: an at-least-once producer) and
    about 1% bad messages."""
    rng = random.Random(seed)
    out: list[Announcement] = []
    good: list[tuple[Announcement, dict[str, str]]] = []
    next_row = 0
    while len(out) < n:
        pos = len(out)
        roll = rng.random()
        if roll < 0.01:
            doc_id = f"bad-{pos}"
            out.append(Announcement(doc_id, _bad_payload(pos, doc_id), "bad"))
            continue
        if good and roll < 0.03:
            again = rng.choice(good)[0]
            out.append(Announcement(again.id, again.value, "resend"))
            continue
        if good and roll < 0.03 + variant_share:
            source, fields = rng.choice(good)
            doc_id = f"{source.id}-v{pos}"
            fields = {**fields, "description": mutate(rng, fields.get("description", ""))}
            kind = "variant"
        else:
            row = rows[next_row % len(rows)]
            cycle = next_row // len(rows)
            doc_id = f"k{next_row % len(rows)}" + (f"-c{cycle}" if cycle else "")
            fields = {k: v for k, v in row.items() if isinstance(v, str)}
            if cycle and rng.random() < repost_edit_share:
                fields["description"] = mutate(rng, fields.get("description", ""))
            kind = "repost" if cycle else "row"
            next_row += 1
        item = Announcement(doc_id, json.dumps({"id": doc_id, **fields},
                                               ensure_ascii=False).encode("utf-8"), kind)
        out.append(item)
        good.append((item, fields))
    return out


# --------------------------------------------------------------------------------------------
# processes: sampling, consumers


def rss_mb(pid: int) -> float | None:
    """Resident set size from /proc (no psutil needed)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


class Sampler:
    """Samples RSS and open fds of every registered process in a daemon thread."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.every_s = every_s
        self.procs: dict[str, ChildProcess] = {}
        self.peak_rss: dict[str, float] = {}
        self.series: dict[str, list[tuple[float, float, int]]] = {}
        self.track: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="chaos-sampler")
        self._lock = threading.Lock()

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def register(self, proc: ChildProcess) -> None:
        with self._lock:
            self.procs[proc.name] = proc

    def sample(self) -> None:
        with self._lock:
            procs = list(self.procs.values())
        for proc in procs:
            pid = proc.pid
            if pid is None or not proc.alive():
                continue
            rss, fds = rss_mb(pid), open_fds(pid)
            if rss is None or fds is None:
                continue
            self.peak_rss[proc.name] = max(self.peak_rss.get(proc.name, 0.0), rss)
            if proc.name in self.track:
                self.series.setdefault(proc.name, []).append((time.monotonic(), rss, fds))

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    @property
    def peak_mb(self) -> float:
        return max(self.peak_rss.values(), default=0.0)


# --------------------------------------------------------------------------------------------
# the child side: trip wires and a shorter session timeout, then the unchanged CLI


def _die(stage: str, note: str) -> None:
    os.write(2, f"{TRIP_MARK} {stage} {note}\n".encode())
    os.kill(os.getpid(), signal.SIGKILL)


def install_trip(stage: str, seed: int | None = None) -> None:
    """Make this process SIGKILL itself at ``stage`` of the first checkpoint that reaches it.

    ``store_commit`` fires from another thread a few microseconds into the SQLite commit (the
    sqlite3 module releases the GIL there), so the kill lands inside or just after it; the
    note says which."""
    from kafka import KafkaConsumer, KafkaProducer

    from streamdedup.store.sqlite import SqliteStore

    rng = random.Random(seed)
    # The loop commits offsets with commit_async, the final and pre-rebalance commits with
    # commit: a stage may hook several methods; whichever runs first trips.
    where: dict[str, tuple[list[tuple[type, str]], str]] = {
        "store_commit": ([(SqliteStore, "commit")], "during"),
        "after_store_commit": ([(SqliteStore, "commit")], "after"),
        "before_flush": ([(KafkaProducer, "flush")], "before"),
        "after_flush": ([(KafkaProducer, "flush")], "after"),
        "after_offset_commit": ([(KafkaConsumer, "commit"), (KafkaConsumer, "commit_async")],
                                "after"),
    }
    if stage not in where:
        raise SystemExit(f"unknown trip stage {stage!r}; known: {', '.join(where)}")
    methods, when = where[stage]
    for cls, name in methods:
        setattr(cls, name, _tripping(getattr(cls, name), stage, when, rng))


def _tripping(original: Callable[..., Any], stage: str, when: str,
              rng: random.Random) -> Callable[..., Any]:
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if when == "before":
            _die(stage, "before")
        if when == "during":
            done = threading.Event()
            go = threading.Event()
            delay = rng.uniform(0.0, 0.0005)

            def fire() -> None:
                go.wait()
                end = time.perf_counter() + delay
                while time.perf_counter() < end:
                    pass
                _die(stage, "after_commit_returned" if done.is_set() else "in_commit")

            threading.Thread(target=fire, daemon=True).start()
            go.set()
            result = original(self, *args, **kwargs)
            done.set()
            time.sleep(5)  # the killer fires meanwhile
            return result
        result = original(self, *args, **kwargs)
        _die(stage, "after")
        return result

    return wrapper


def child_main(argv: Sequence[str]) -> int:
    """``consumer [--trip STAGE] -- run <streamdedup run flags>``."""
    parser = argparse.ArgumentParser(prog="python -m harness.chaos")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("consumer", help="run the streamdedup CLI with trip wires")
    p.add_argument("--trip", choices=TRIP_STAGES, default=None)
    p.add_argument("--trip-seed", type=int, default=None)
    p.add_argument("cli", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    cli_args = args.cli[1:] if args.cli[:1] == ["--"] else args.cli
    if args.trip:
        install_trip(args.trip, args.trip_seed)
    from streamdedup.cli.main import main as cli_main

    cli_main(args=cli_args, prog_name="streamdedup")
    return 0


# --------------------------------------------------------------------------------------------
# Kafka from the harness's side


class Cluster:
    """The harness's own Kafka clients (producer, admin, a group-less reader), made lazily so
    that they can be dropped and remade around a broker restart."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._producer: Any = None
        self._admin: Any = None
        self._reader: Any = None
        self.next_offset: dict[tuple[str, int], int] = {}  # (topic, partition) -> end
        self.placed: dict[str, tuple[int, int]] = {}  # id -> (partition, offset), last send

    def close(self) -> None:
        for client in (self._producer, self._admin, self._reader):
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close(timeout=5) if client is self._producer else client.close()
        self._producer = self._admin = self._reader = None

    @property
    def producer(self) -> Any:
        if self._producer is None:
            from kafka import KafkaProducer

            self._producer = KafkaProducer(
                bootstrap_servers=self.bootstrap, client_id="chaos-producer", acks="all",
                linger_ms=5, max_request_size=4 << 20, request_timeout_ms=15000,
            )
        return self._producer

    @property
    def admin(self) -> Any:
        if self._admin is None:
            from kafka import KafkaAdminClient

            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap,
                                           client_id="chaos-admin", request_timeout_ms=15000)
        return self._admin

    @property
    def reader(self) -> Any:
        if self._reader is None:
            from kafka import KafkaConsumer

            self._reader = KafkaConsumer(
                bootstrap_servers=self.bootstrap, client_id="chaos-reader", group_id=None,
                enable_auto_commit=False, auto_offset_reset="earliest",
                max_partition_fetch_bytes=8 << 20,
            )
        return self._reader

    def create_topic(self, name: str, partitions: int) -> None:
        create_topics(self.admin, {name: partitions})

    def delete_topics(self, names: Iterable[str]) -> None:
        with contextlib.suppress(Exception):
            self.admin.delete_topics(list(names), timeout_ms=10000)

    def produce(self, topic: str, items: Sequence[Announcement], attempts: int = 10) -> None:
        """Send and wait for every ack; failed sends are retried (the producer is idempotent,
        so a retry does not duplicate, and one partition keeps its order)."""
        pending = list(items)
        for attempt in range(attempts):
            try:
                sent = [(a, self.producer.send(topic, key=a.key, value=a.value)) for a in pending]
                self.producer.flush(timeout=120)
            except Exception as exc:
                if attempt == attempts - 1:
                    raise ChaosError(f"cannot produce to {topic}: {exc}") from exc
                time.sleep(1.0)
                continue
            failed = []
            for a, future in sent:
                try:
                    md = future.get(timeout=0)
                except Exception:
                    failed.append(a)
                    continue
                self.placed[a.id] = (md.partition, md.offset)
                key = (topic, md.partition)
                self.next_offset[key] = max(self.next_offset.get(key, 0), md.offset + 1)
            if not failed:
                return
            pending = failed
            time.sleep(1.0)
        raise ChaosError(f"{len(pending)} messages could not be produced to {topic}")

    def targets(self, topic: str) -> dict[int, int]:
        """End offset of each partition of ``topic`` that this harness has produced to."""
        return {p: end for (t, p), end in self.next_offset.items() if t == topic}

    def committed(self, group: str, topic: str, attempts: int = 10) -> dict[int, int]:
        """The group's committed offsets; retried, since the coordinator moves during
        rebalances and broker restarts (NotCoordinator, CoordinatorLoadInProgress)."""
        from kafka.errors import KafkaError

        for attempt in range(attempts):
            try:
                admin = self.admin
                if hasattr(admin, "list_group_offsets"):
                    found = admin.list_group_offsets({group: None}).get(group, {})
                else:  # kafka-python 2.x
                    found = admin.list_consumer_group_offsets(group)
                return {tp.partition: oam.offset for tp, oam in found.items()
                        if tp.topic == topic and oam.offset >= 0}
            except KafkaError:
                if attempt == attempts - 1:
                    raise
                with contextlib.suppress(Exception):
                    self.admin.close()
                self._admin = None
                time.sleep(0.3)
        raise AssertionError("unreachable")

    def read(self, topic: str, timeout: float = 120.0) -> list[Any]:
        """Every record of ``topic`` from the beginning to its current end."""
        from kafka import TopicPartition

        reader = self.reader
        parts = reader.partitions_for_topic(topic)
        if not parts:
            reader.topics()  # refresh metadata once
            parts = reader.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        if not tps:
            return []
        reader.assign(tps)
        reader.seek_to_beginning(*tps)
        ends = reader.end_offsets(tps)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while any(reader.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise ChaosError(f"reading {topic} timed out")
            for records in reader.poll(timeout_ms=500, max_records=5000).values():
                out.extend(records)
        return out


# --------------------------------------------------------------------------------------------
# outcomes and checks


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


# --------------------------------------------------------------------------------------------
# the store's file system


class StoreDir:
    """A consumer's store directory; on a small tmpfs of its own when this process may mount
    one, so that 'disk full' is a real ENOSPC that goes away when the filler is removed."""

    def __init__(self, path: Path, tmpfs_mb: int = 0) -> None:
        self.path = path
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.mounted = False
        self.mount_error = ""
        if tmpfs_mb > 0:
            if os.geteuid() != 0:
                self.mount_error = "not root"
            else:
                proc = subprocess.run(
                    ["mount", "-t", "tmpfs", "-o", f"size={tmpfs_mb}m,mode=0700", "tmpfs",
                     str(self.path)], capture_output=True, text=True, check=False)
                self.mounted = proc.returncode == 0
                self.mount_error = proc.stderr.strip()

    @property
    def filler(self) -> Path:
        return self.path / "chaos-filler"

    def fill(self) -> int:
        """Take every free byte; returns how many were taken."""
        written = 0
        chunk = b"\0" * (1 << 20)
        with open(self.filler, "wb") as fh:
            try:
                while True:
                    written += fh.write(chunk)
                    fh.flush()
            except OSError:
                pass
        with contextlib.suppress(OSError), open(self.filler, "ab") as fh:
            try:
                while True:
                    written += fh.write(b"\0" * 4096)
                    fh.flush()
            except OSError:
                pass
        return written

    def unfill(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.filler.unlink()

    def files(self) -> list[Path]:
        return sorted(p for p in self.path.iterdir() if p.is_file() and p != self.filler)

    def backup(self, dest: Path) -> None:
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for p in self.files():
            shutil.copy2(p, dest / p.name)

    def restore(self, src: Path) -> None:
        """Put a backup back in place (inside the directory: it may be a mount point)."""
        for p in self.files():
            p.unlink()
        for p in src.iterdir():
            shutil.copy2(p, self.path / p.name)

    def close(self) -> None:
        if self.mounted:
            proc = subprocess.run(["umount", str(self.path)], capture_output=True, check=False)
            if proc.returncode != 0:
                subprocess.run(["umount", "-l", str(self.path)], capture_output=True,
                               check=False)
            self.mounted = False


def corrupt_store(db: Path, how: str, rng: random.Random) -> str:
    """Damage ``index.sqlite`` the way real accidents do; returns what was done."""
    size = db.stat().st_size
    if how == "truncate":
        keep = max(4096, size // 2 // 4096 * 4096 + 1000)
        os.truncate(db, keep)
        return f"truncated {size} -> {keep} bytes"
    if how == "zero_length":
        os.truncate(db, 0)
        return f"truncated {size} -> 0 bytes"
    with open(db, "r+b") as fh:
        if how == "garbage_header":
            fh.write(rng.randbytes(100))
            return "first 100 bytes overwritten"
        if how == "page_scribble":
            pages = max(2, size // 4096)
            page = rng.randrange(1, pages)
            fh.seek(page * 4096)
            fh.write(rng.randbytes(4096))
            return f"page {page + 1} of {pages} overwritten with random bytes"
        if how == "byte_flip":
            where = rng.randrange(4096, max(4097, size))
            fh.seek(where)
            old = fh.read(1)
            fh.seek(where)
            fh.write(bytes([old[0] ^ (1 << rng.randrange(8))]) if old else b"\xff")
            return f"one bit flipped at byte {where} of {size}"
    raise ValueError(f"unknown corruption {how!r}")


_TABLES = ("counters", "docs", "verdicts", "versions", "positions", "sets", "shingles", "edges",
           "crowded", "bucket_log", "meta")


def _content(db: Path) -> str:
    """A digest of every row of the store's tables (what verdicts are computed from)."""
    import hashlib

    digest = hashlib.sha256()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        for table in _TABLES:
            for row in sorted(repr(r) for r in conn.execute(f"SELECT * FROM {table}")):
                digest.update(row.encode())
    finally:
        conn.close()
    return digest.hexdigest()


def survey_corruption(store: Path, preset: str, kinds: Sequence[str], trials: int,
                      work: Path, seed: int = 0) -> dict[str, dict[str, int]]:
    """Damage copies of a (closed) store many times and open each as the consumer would.

    Outcomes per kind: ``refused`` (a StoreError at open: the clear error we want),
    ``other_error`` (some other exception: unclear), ``intact`` (opened, every row the same:
    the damage hit unused space), ``damage_on_read`` (opened, but reading the rows fails
    later: loud, at run time), ``silent`` (opened and rows differ: verdicts computed from
    them can be wrong without any error); of those, ``silent_found_by_verify`` are the ones
    `streamdedup store verify` (the full check on demand) reports."""
    from streamdedup.core.sketch import Sketcher
    from streamdedup.errors import StoreError
    from streamdedup.settings import build_settings
    from streamdedup.store import open_store
    from streamdedup.store.sqlite.maintenance import verify

    params = Sketcher(build_settings(preset, env={})).params()
    rng = random.Random(seed)
    conn = sqlite3.connect(store / "index.sqlite")  # fold any WAL into the file we copy
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    original = _content(store / "index.sqlite")
    out: dict[str, dict[str, int]] = {}
    for how in kinds:
        counts: Counter[str] = Counter()
        for _ in range(trials):
            copy = work / "survey"
            shutil.rmtree(copy, ignore_errors=True)
            copy.mkdir(parents=True)
            shutil.copy2(store / "index.sqlite", copy / "index.sqlite")
            corrupt_store(copy / "index.sqlite", how, rng)
            try:
                opened = open_store("sqlite", str(copy), params)
            except StoreError:
                counts["refused"] += 1
                continue
            except Exception:
                counts["other_error"] += 1
                continue
            opened.close()
            try:
                same = _content(copy / "index.sqlite") == original
            except Exception:
                counts["damage_on_read"] += 1
                continue
            counts["intact" if same else "silent"] += 1
            if not same:
                try:
                    counts["silent_found_by_verify"] += bool(verify(copy))
                except StoreError:
                    counts["silent_found_by_verify"] += 1
        out[how] = dict(counts)
        shutil.rmtree(work / "survey", ignore_errors=True)
    return out


# --------------------------------------------------------------------------------------------
# a run


@dataclass
class ChaosConfig:
    """One chaos run. ``faults`` picks the kinds; ``kills`` counts SIGKILLs (about half at
    random moments under load, half at trip-wire stages). Consumer settings left at None keep
    the product's defaults."""

    bootstrap: str
    dump: Path
    workdir: Path
    messages: int = 3000
    kills: int = 12
    faults: tuple[str, ...] = FAULTS
    corruptions: tuple[str, ...] = CORRUPTIONS
    seed: int = 7
    broker: Any = None  # a LocalBroker that may be stopped and started (else no broker fault)
    preset: str = "reference"
    session_timeout_ms: int = 6000
    group_instance_id: str = ""  # phase A's consumers as one static member (restart at once)
    commit_every: int | None = None
    commit_interval_s: float | None = None
    poll_max_records: int | None = None
    tmpfs_mb: int = 256
    rebalance_partitions: int = 4
    rebalance_messages: int = 0  # 0 = half of ``messages``
    step_timeout_s: float = 180.0
    survey_trials: int = 0  # corruption survey on the final store (0 = none)
    say: Callable[[str], None] = lambda _msg: None


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
        flags = [
            "--preset", c.preset, "--bootstrap-servers", c.bootstrap, "--store", str(store),
            "--group-id", lane.group, "--input-topic", lane.topic, "--output-topic", lane.out,
            "--dlq-topic", lane.dlq, "--metrics-port", "0", "--log-every-s", "5", *extra,
        ]
        for flag, value in (("--commit-every", c.commit_every),
                            ("--commit-interval-s", c.commit_interval_s),
                            ("--poll-max-records", c.poll_max_records)):
            if value is not None:
                flags += [flag, str(value)]
        if not wrapped:  # as a user runs it: the product's own session timeout
            return [sys.executable, "-m", "streamdedup", "run", *flags]
        if c.session_timeout_ms:
            flags += ["--session-timeout-ms", str(c.session_timeout_ms)]
        if c.group_instance_id:
            flags += ["--group-instance-id", c.group_instance_id]
        if trip is None:
            return [sys.executable, "-m", "streamdedup", "run", *flags]
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
        chunks = _split(stream, len(steps) + 1)
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
        feeder = threading.Thread(target=self._trickle, args=(_split(chunk, 10), 0.04, sent),
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
        failures_before = proc.count(_FAILED_LINE)
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
                   failed_checkpoints_logged=proc.count(_FAILED_LINE) - failures_before)

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


class RebalanceRun(Harness):
    """Phase C: a multi-partition topic, a second consumer joining the group and leaving.

    Each consumer has its own store (one store cannot have two writers; see the
    second_writer fault). A consumer then sees only the documents of the partitions assigned
    to it, so near-duplicates whose copies sit in partitions owned by different consumers are
    missed; this phase counts them against one uninterrupted consumer over the same topic."""

    def run(self, stream: Sequence[Announcement]) -> dict[str, Any]:
        c = self.c
        lane = self.lane("rb", partitions=c.rebalance_partitions)
        chunks = _split(stream, 3)
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


def _last_assignment(proc: ChildProcess) -> set[str]:
    lines = proc.grep(_ASSIGNED_LINE)
    if not lines:
        return set()
    match = _ASSIGNED_LINE.search(lines[-1])
    assert match is not None
    return {p.strip().strip("'\"") for p in match.group(1).split(",") if p.strip()}


def _store_ids(store: Path) -> set[str]:
    db = store / "index.sqlite"
    if not db.exists():
        return set()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {row[0] for row in conn.execute("SELECT doc_id FROM docs")}
    finally:
        conn.close()


def _split(items: Sequence[Announcement], parts: int) -> list[Sequence[Announcement]]:
    size = max(1, -(-len(items) // max(1, parts)))
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    while len(chunks) < parts:
        chunks.append([])
    return chunks


# --------------------------------------------------------------------------------------------
# soak


def run_soak(config: ChaosConfig, messages: int, variant_share: float = 0.1
             ) -> dict[str, Any]:
    """One consumer against a backlog of ``messages``, produced before it starts so that it
    never waits for input: its highest sustained rate, and its RSS and open fds over time
    (they should level off, not grow with the number of messages)."""
    h = Harness(config)
    try:
        # By default a steady state, as in real scrapes: mostly reposts of known ads and few
        # new texts, so that caches fill up and a leak would show as growth after that.
        stream = build_stream(read_rows(config.dump), messages, config.seed + 1,
                              variant_share=variant_share, repost_edit_share=variant_share * 2)
        lane = h.lane("soak")
        config.say(f"soak: producing {len(stream)} messages")
        t0 = time.monotonic()
        for chunk in _split(stream, max(1, len(stream) // 5000)):
            h.produce(lane, chunk)
        produced_s = time.monotonic() - t0
        total = len(lane.ids)
        config.say(f"soak: produced in {produced_s:.0f} s; consuming")
        proc = h.launch("soak", h.consumer_argv(lane, config.workdir / "store-soak",
                                                wrapped=False))
        wait_assigned(proc, 120.0)
        h.sampler.track.add(proc.name)  # from here on: imports and start-up are done
        progress: list[tuple[float, int]] = []
        deadline = time.monotonic() + max(600.0, total / 20.0)
        last_say = time.monotonic()
        while True:
            if not proc.alive():
                raise ChaosError(f"soak consumer exited:\n{proc.tail()}")
            done = lane.tally.poll(1000)
            progress.append((time.monotonic(), done))
            if done >= total:
                break
            if time.monotonic() > deadline:
                raise ChaosError(f"soak did not finish: {done}/{total}")
            if time.monotonic() - last_say > 30:
                last_say = time.monotonic()
                config.say(f"soak: {done}/{total} answered, RSS {rss_mb(proc.pid or 0)} MB, "
                           f"fds {open_fds(proc.pid or 0)}")
        h.sampler.sample()
        h.sampler.track.discard(proc.name)  # not the shutdown
        store = config.workdir / "store-soak"
        store_bytes = sum(p.stat().st_size for p in store.iterdir())
        proc.stop()
        with contextlib.closing(sqlite3.connect(f"file:{store / 'index.sqlite'}?mode=ro",
                                                uri=True)) as conn:
            distinct_sets = conn.execute("SELECT count(*) FROM sets").fetchone()[0]
        got = collect(h.cluster, lane.out, lane.dlq)
        result = check(lane.ids, got)
        result.update(_soak_figures(progress, h.sampler.series.get(proc.name, []), total))
        result.update(messages=len(stream), produce_s=round(produced_s, 1),
                      store_mb=round(store_bytes / 2**20, 1), distinct_sets=distinct_sets)
        return result
    finally:
        h.close()


def _soak_figures(progress: Sequence[tuple[float, int]],
                  series: Sequence[tuple[float, float, int]], total: int) -> dict[str, Any]:
    """Rates from answered ids over 10 s windows; RSS and fds at 10% ... 100% of the work."""
    started = next((t for t, n in progress if n > 0), progress[0][0])
    end = progress[-1][0]
    windows: list[float] = []
    j = 0
    for t1, n1 in progress:
        while j < len(progress) and progress[j][0] < t1 + 10.0:
            j += 1
        if j < len(progress) and n1 > 0 and progress[j][1] < total:
            t2, n2 = progress[j]
            windows.append((n2 - n1) / (t2 - t1))

    def at(fraction: float) -> tuple[float, int] | None:
        goal = total * fraction
        moment = next((t for t, n in progress if n >= goal), end)
        near = [s for s in series if s[0] <= moment]
        return (near[-1][1], near[-1][2]) if near else None

    points = {f"{int(f * 100)}%": at(f) for f in (0.1, 0.25, 0.5, 0.75, 1.0)}
    rss = [s[1] for s in series]
    fds = [s[2] for s in series]
    half = [s for s in series if s[0] >= started + (end - started) / 2]
    return {
        "rate_overall": round(total / max(1e-9, end - started), 1),
        "rate_10s_median": round(statistics.median(windows), 1) if windows else None,
        "rate_10s_min": round(min(windows), 1) if windows else None,
        "rate_10s_max": round(max(windows), 1) if windows else None,
        "rss_mb": {k: (round(v[0], 1) if v else None) for k, v in points.items()},
        "fds": {k: (v[1] if v else None) for k, v in points.items()},
        "rss_mb_peak": round(max(rss), 1) if rss else None,
        "rss_mb_growth_second_half": round(half[-1][1] - half[0][1], 1) if len(half) > 1
        else 0.0,
        "fds_min_max": [min(fds), max(fds)] if fds else None,
        "consume_s": round(end - started, 1),
    }


# --------------------------------------------------------------------------------------------
# the whole thing


def run(config: ChaosConfig, soak: int = 0, soak_variant_share: float = 0.1
        ) -> dict[str, Any]:
    """Phases A+B (faults, reference), C (rebalance) if asked, and the soak if ``soak``."""
    rows = read_rows(config.dump)
    stream = build_stream(rows, config.messages, config.seed)
    report: dict[str, Any] = {"config": {
        "messages": config.messages, "kills": config.kills, "faults": list(config.faults),
        "corruptions": list(config.corruptions), "seed": config.seed, "preset": config.preset,
        "commit_every": config.commit_every, "commit_interval_s": config.commit_interval_s,
        "session_timeout_ms": config.session_timeout_ms,
        "group_instance_id": config.group_instance_id, "bootstrap": config.bootstrap,
    }}
    started = time.monotonic()
    events: list[dict[str, Any]] = []
    peak = 0.0
    chaos = ChaosRun(config)
    try:
        report["chaos"] = chaos.run(stream)
        if config.survey_trials:
            config.say(f"corruption survey: {config.survey_trials} damaged copies per kind")
            report["corruption_survey"] = survey_corruption(
                chaos.store.path, config.preset, SURVEY_KINDS, config.survey_trials,
                config.workdir, config.seed)
    finally:
        chaos.close()
        events += chaos.events
        peak = max(peak, chaos.sampler.peak_mb)
    if "rebalance" in config.faults:
        rb = RebalanceRun(config)
        try:
            n = config.rebalance_messages or max(300, config.messages // 2)
            report["rebalance"] = rb.run(build_stream(rows, n, config.seed + 2))
        finally:
            rb.close()
            events += rb.events
            peak = max(peak, rb.sampler.peak_mb)
    if soak:
        report["soak"] = run_soak(config, soak, soak_variant_share)
    a = report["chaos"]
    report.update(
        messages=a["messages"], verdicts=a["verdicts"], dead_letters=a["dead_letters"],
        lost=a["lost"], self_duplicates=a["self_duplicates"], conflicts=a["conflicts"],
        mismatches=a["mismatches"],
        faults=dict(Counter(e["kind"] for e in events)),
        faults_failed=[e for e in events if not e["ok"]],
        kills=sum(1 for e in events if e["kind"].startswith("kill_")),
        peak_rss_mb=round(peak, 1), events=events,
        elapsed_s=round(time.monotonic() - started, 1),
    )
    report["ok"] = (a["lost"] == 0 and a["self_duplicates"] == 0 and a["conflicts"] == 0
                    and a["mismatches"] == 0 and not report["faults_failed"])
    return report


def table(report: Mapping[str, Any]) -> str:
    """A plain-text summary of a report."""
    a = report["chaos"]
    rows: list[tuple[str, Any]] = [
        ("messages", a["messages"]), ("distinct ids", a["ids"]),
        ("ids with a verdict", a["verdicts"]), ("ids with a dead letter", a["dead_letters"]),
        ("output records", a["output_records"]), ("repeated records", a["repeated_records"]),
        ("lost", a["lost"]), ("self duplicates", a["self_duplicates"]),
        ("conflicting answers", a["conflicts"]), ("mismatches vs reference", a["mismatches"]),
        ("SIGKILLs", report["kills"]), ("peak consumer RSS (MB)", report["peak_rss_mb"]),
        ("elapsed (s)", report["elapsed_s"]),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines += ["", f"{'fault':<28}{'count':>6}{'failed':>8}"]
    failed = Counter(e["kind"] for e in report["faults_failed"])
    for kind, n in sorted(report["faults"].items()):
        lines.append(f"{kind:<28}{n:>6}{failed.get(kind, 0):>8}")
    for e in report["events"]:
        if e["kind"].startswith("corrupt_"):
            lines.append(f"  {e['kind']}: {'refused' if e['refused'] else 'NOT refused'}"
                         f" ({e['damage']}) {e['message'][-90:]}")
    if "corruption_survey" in report:
        lines += ["", "corruption survey (damaged copies of the final store, opened as the "
                  "consumer would):"]
        for how, counts in report["corruption_survey"].items():
            lines.append(f"  {how:<16} " + ", ".join(f"{k} {v}" for k, v in
                                                     sorted(counts.items())))
    if "rebalance" in report:
        r = report["rebalance"]
        lines += ["", f"rebalance ({r['partitions']} partitions, separate stores): lost "
                  f"{r['lost']}, self-dups {r['self_duplicates']}, conflicts {r['conflicts']},"
                  f" docs in both stores {r['docs_in_both_stores']}, duplicates "
                  f"{r['duplicates_split_stores']} vs {r['duplicates_one_store']} with one "
                  f"store (missed {r['missed_duplicates']})"]
    if "soak" in report:
        s = report["soak"]
        lines += ["", f"soak: {s['messages']} messages, {s['rate_overall']} msg/s overall "
                  f"(10 s windows: median {s['rate_10s_median']}, min {s['rate_10s_min']}), "
                  f"lost {s['lost']}, {s['distinct_sets']} distinct sets, RSS MB {s['rss_mb']},"
                  f" fds {s['fds']}"]
    lines += ["", "OK" if report["ok"] else "PROBLEMS FOUND"]
    return "\n".join(lines)


@contextlib.contextmanager
def local_broker(state_dir: Path, say: Callable[[str], None]) -> Iterator[Any]:
    """A LocalBroker of our own in ``state_dir``, always stopped (and its data removed)."""
    from harness.broker import LocalBroker

    broker = LocalBroker(state_dir, die_with_parent=True, startup_timeout=120.0)
    say(f"starting a local broker in {state_dir}")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
