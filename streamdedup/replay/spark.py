"""The backfill's Spark engine: sketches and the pair plan computed by executors; the rows come
back to the driver in document order for the detector.

Executors run ``sketch_rows`` (normalize, shingle, sign: with reading, about half of a fresh
ad's CPU) with the driver's own streamdedup (shipped as a zip with ``addPyFile``), and the steps of
``replay/pairs.py`` on RDDs: distinct sets by ``reduceByKey``, buckets by ``groupByKey`` on
the band key, exact Jaccard on joined pairs. What is collected to the driver: the candidate
counts per set, the ids of the sets in some pair (broadcast back, to filter the shingles
that enter the joins), the verified neighbours, and with ``--report`` every candidate pair.
The sketches stay persisted and come back a partition at a time (``toLocalIterator``, the
next one prefetched), so the driver holds two partitions of sketches besides the documents
it decides.

Executors must run the same code on the same libraries as the driver: the package is
shipped, but Python, numpy, xxhash and nltk come from the executors' environment. In local
mode they are the driver's; on a cluster, install the same versions (the store pins the
sketch parameters, not the executors' libraries).

Failures: a task that dies (its Python worker killed, an executor lost) is retried by Spark;
local mode gives a task one attempt unless told otherwise, so ``local[N]`` runs as
``local[N,4]``, the attempts a cluster gives by default (``spark.task.maxFailures``). A job
that fails after its retries is a ``BackfillError``; what the driver committed before it is
a consistent store, and running the backfill again goes on from it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from streamdedup.errors import BackfillError, StreamdedupError
from streamdedup.extras import require
from streamdedup.pids import PID_SPACE, gone
from streamdedup.replay.config import BackfillConfig, check_spark_flags
from streamdedup.replay.pairs import (
    Plan,
    Row,
    assemble,
    bucket_entries,
    bucket_pairs,
    sketch_rows,
    verify_pair,
)
from streamdedup.settings import Settings

TASK_ATTEMPTS = 4  # Spark's default spark.task.maxFailures on a cluster
ADS_PER_PARTITION = 2_000  # each partition crosses to the driver whole: ~8 KB an ad
_LOCAL = re.compile(r"^local(?:\[(\*|\d+)\])?$")
STAGING = "streamdedup-backfill-"  # then the PID space, the pid and mkdtemp's letters
_STAGED = re.compile(r"streamdedup-backfill-(?P<space>[^-]+)-(?P<pid>\d+)-\w+")
INTERRUPTED = threading.Event()  # Ctrl-C: a py4j call it broke fails, and is not the job's


def with_retries(master: str) -> str:
    """``local`` / ``local[N]`` / ``local[*]`` with task retries; anything else unchanged."""
    m = _LOCAL.match(master.strip())
    return f"local[{m.group(1) or 1},{TASK_ATTEMPTS}]" if m else master


def _java_reason(exc: Exception) -> str:
    """The JVM's own message (Py4JJavaError's text is the whole Java stack) and its root
    cause (`--master k8s://x` said only "An error has occurred.": the cause was an
    UnknownHostException 376 lines up), else the first line of the error."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        with suppress(Exception):
            message = str(java.getMessage())
            root, cause = None, java.getCause()
            for _ in range(32):  # a chain, not a cycle
                if cause is None:
                    break
                root, cause = cause, cause.getCause()
            if root is not None:
                message += (f" (caused by {root.getClass().getSimpleName()}: "
                            f"{root.getMessage()})")
            return message
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if "JAVA_GATEWAY_EXITED" in first:  # the JVM's reason is in its own lines, above
        first += " (Java's own lines above say why)"
    return first


@contextmanager
def session(master: str, say: Callable[[str], None],
            driver_memory: str = BackfillConfig.driver_memory
            ) -> Iterator[tuple[Any, Path | None]]:
    """A Spark session, and in local mode a directory to stage the dump's texts in."""
    check_spark_flags(driver_memory, master)
    require("pyspark", "the Spark backfill")
    from pyspark.sql import SparkSession

    check_master_answers(master)
    given, master = master, with_retries(master)
    # The driver's JVM is started by this process, so its memory can still be set here.
    # Local mode runs the executors in it too: 1 GB (Spark's default) ran out on 50,000
    # generated ads.
    builder = (SparkSession.builder.master(master).appName("streamdedup-backfill")
               .config("spark.ui.showConsoleProgress", "false")  # ours names the phases
               .config("spark.driver.memory", driver_memory))
    if master.startswith("local"):
        # Python workers run this interpreter (the one with numpy and the other dependencies;
        # Spark would start `python3` from PATH); on a cluster, the executors' Python needs
        # streamdedup's dependencies installed (see the README).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    say(f"starting Spark ({master})")
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with jvm_stderr():
            spark = builder.getOrCreate()
    except Exception as exc:  # a master Spark refuses: py4j's or pyspark's error, a traceback
        raise BackfillError(f"Spark did not start (--master {given}, --driver-memory "
                          f"{driver_memory}): {_java_reason(exc)}") from None
    sweep_staging()
    work = Path(tempfile.mkdtemp(prefix=f"{STAGING}{PID_SPACE}-{os.getpid()}-"))
    interrupt = QuietInterrupt(spark.sparkContext)
    try:
        spark.sparkContext.setLogLevel("ERROR")  # task retries are reported by us, not logged
        spark.sparkContext.addPyFile(str(_package_zip(work)))  # for the executors to import
        yield spark, (work if master.startswith("local") else None)
    finally:
        try:  # a second Ctrl-C here still ends below: the texts' copy is removed
            interrupt.settle()
            with suppress(Exception):  # a JVM that died already: its error is raised
                spark.stop()
        finally:
            if threading.current_thread() is threading.main_thread():
                for sig, handler in before.items():
                    signal.signal(sig, handler)
            shutil.rmtree(work, ignore_errors=True)


@contextmanager
def jvm_stderr() -> Iterator[None]:
    """The standard error of a JVM started inside (and of the Python workers it starts, which
    inherit it) goes through a pipe, passed on to ours line by line until a Ctrl-C: then it
    is dropped. A Ctrl-C while workers sketched printed 2 to 4 ``BrokenPipeError`` tracebacks
    of pyspark's daemon as the cancelled tasks' sockets closed. fd 2 is the pipe only while
    the JVM starts; our own lines never go through it after."""
    if sys.stderr is None:  # no standard error at all (2>&-): nothing to pass on
        yield
        return
    sys.stderr.flush()
    ours, saved = os.dup(2), os.dup(2)
    read, write = os.pipe()

    def pass_on() -> None:
        with os.fdopen(read, "rb") as pipe, os.fdopen(ours, "wb", buffering=0) as out:
            for line in pipe:  # until every holder of the pipe (the JVM, its workers) ends
                if not INTERRUPTED.is_set():
                    with suppress(OSError):
                        out.write(line)

    threading.Thread(target=pass_on, name="jvm-stderr", daemon=True).start()
    os.dup2(write, 2)
    os.close(write)
    try:
        yield
    finally:
        sys.stderr.flush()  # what went into the pipe meanwhile is passed on
        os.dup2(saved, 2)
        os.close(saved)


def sweep_staging() -> list[Path]:
    """Remove the staging directories (a copy of the texts, 2.3 MB for the Kijiji dump) of
    backfills killed with SIGKILL, which had no chance to: those whose process, of this PID
    space, is gone. Another user's, or a live one's, are left. Returns those removed."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{STAGING}*"):
        m = _STAGED.fullmatch(path.name)
        if m and path.is_dir() and gone(int(m["pid"]), m["space"]):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class QuietInterrupt:
    """Ctrl-C (or SIGTERM) during a Spark job, without ~60 lines of tracebacks. pyspark's own SIGINT
    handler cancels the jobs from the main thread, inside the py4j call it interrupts (a
    "reentrant call" on the same socket, each step logged with its traceback), and the JVM
    then logs its executors' refusals as it stops. This one silences both logs, cancels the
    jobs from a thread of its own (its own py4j connection) and raises KeyboardInterrupt in
    the main thread, as pyspark's did, for the command's one line and exit 130."""

    def __init__(self, sc: Any) -> None:
        self.sc = sc
        self.cancelling: threading.Thread | None = None
        INTERRUPTED.clear()
        if threading.current_thread() is threading.main_thread():  # where signals arrive
            signal.signal(signal.SIGINT, self._handle)
            signal.signal(signal.SIGTERM, self._handle)  # a stop, as Ctrl-C: cleaned up

    def _handle(self, signum: int, frame: Any) -> None:
        INTERRUPTED.set()
        if self.cancelling is None:
            # py4j logs the interrupted call on the root logger, which would configure it.
            logging.getLogger().addHandler(logging.NullHandler())
            self.cancelling = threading.Thread(target=self._cancel, daemon=True)
            self.cancelling.start()
        raise KeyboardInterrupt

    def _cancel(self) -> None:
        with suppress(Exception):  # the context may be stopping already
            self.sc.setLogLevel("OFF")
            self.sc.cancelAllJobs()

    def settle(self, timeout_s: float = 10.0) -> None:
        """Let the cancelling finish before the context stops (its log is off by then)."""
        if self.cancelling is not None:
            self.cancelling.join(timeout_s)


def check_master_answers(master: str, timeout_s: float = 5.0) -> None:
    """A spark:// master that no address answers: one line now, not a minute of the JVM's
    retries and stack traces that ended in "Cannot call methods on a stopped SparkContext"."""
    if not master.startswith("spark://"):
        return
    tried: list[str] = []
    for address in master[len("spark://"):].split(","):  # a standby master: any may answer
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout_s).close()
            return
        except (OSError, ValueError) as exc:
            tried.append(f"{address}: {getattr(exc, 'strerror', None) or exc}")
    raise BackfillError(f"no Spark master answers at --master {master} ({'; '.join(tried)}): "
                      "is it running, and is this its address?")


class SparkSketches:
    """The dump's sketches as a persisted RDD, the plan from them, and the rows in order."""

    def __init__(self, spark: Any, settings: Settings, fields: Sequence[Mapping[str, str]],
                 partitions: int, say: Callable[[str], None], stage: Path | None = None
                 ) -> None:
        from pyspark import StorageLevel

        self.sc = spark.sparkContext
        self.say = say
        slices = partitions or max(self.sc.defaultParallelism * 4,
                                   len(fields) // ADS_PER_PARTITION + 1)
        if slices > max(1, len(fields)):  # --partitions 2000 on 240 ads: 2,036 empty tasks
            if partitions:
                say(f"--partitions {partitions} is more than the {len(fields):,} documents: "
                    f"{max(1, len(fields))} partitions")
            slices = max(1, len(fields))
        names = settings.text_fields  # all that sketching reads

        def work(items: Iterator[tuple[int, Mapping[str, str]]]) -> Iterator[Row]:
            return sketch_rows(settings, items)

        if stage is not None:
            # Local mode: the ordered texts as a JSONL file that Spark splits itself, so the
            # dump is not held in the driver's JVM as well (parallelize keeps every row
            # there: 3 GB ran out at 1M generated ads).
            with stage.open("w", encoding="utf-8") as fh:
                for f in fields:
                    fh.write(json.dumps({n: f[n] for n in names if n in f},
                                        ensure_ascii=False) + "\n")
            try:  # zipWithIndex runs a job (the lines per partition)
                source = (self.sc.textFile(stage.as_uri(), slices).zipWithIndex()
                          .map(lambda li: (li[1], json.loads(li[0]))))
            except Exception as exc:
                raise failed(exc) from exc
        else:
            source = self.sc.parallelize(
                [(i, {n: f[n] for n in names if n in f}) for i, f in enumerate(fields)], slices)
        self.rdd = source.mapPartitions(work)
        # On local disk, not in the JVM's heap: ~8 KB an ad, and MEMORY_AND_DISK ran out of
        # a 3 GB heap at 300,000 generated ads in local mode (the reads come back from the
        # page cache).
        self.rdd.persist(StorageLevel.DISK_ONLY)
        self.partitions = self.rdd.getNumPartitions()

    def sketch(self) -> float:
        """Every partition at once on all executors (kept on their disks). Seconds."""
        with self._phase(f"sketching in {self.partitions} partitions"):
            started = time.perf_counter()
            self.rdd.count()
            return time.perf_counter() - started

    def plan(self, threshold: float, max_candidates: int, keep_pairs: bool) -> Plan:
        """``replay/pairs.py``'s steps on RDDs; only the outcome comes to the driver."""
        with self._phase("candidate pairs and exact Jaccard"):
            # Each distinct set at its first position, without its shingles (a set's size
            # and band keys are ~200 bytes, its shingles ~8 KB): only the sets of some pair
            # send shingles through the joins below.
            firsts = (self.rdd.filter(lambda r: len(r[2]) > 0)
                      .map(lambda r: (r[1], (r[0], len(r[2]) // 8, r[3])))
                      .reduceByKey(lambda a, b: a if a[0] <= b[0] else b))
            firsts.persist()
            entries = firsts.flatMap(lambda kv: bucket_entries(kv[0], *kv[1]))
            cap = max_candidates
            pairs = (entries.groupByKey()
                     .flatMap(lambda kv: bucket_pairs(list(kv[1]), threshold, cap)).distinct())
            pairs.persist()
            candidates = dict(pairs.map(lambda p: (p[0], 1 if p[1] is not None else cap + 1))
                              .reduceByKey(lambda a, b: a + b).collect())
            capped = {s for s, n in candidates.items() if n > cap}
            listed = pairs.filter(lambda p: p[0] not in capped)  # (None marks are capped)
            involved = self.sc.broadcast(set(listed.flatMap(lambda p: p).distinct().collect()))
            blobs = (self.rdd.filter(lambda r: r[1] in involved.value)
                     .map(lambda r: (r[1], r[2]))
                     .reduceByKey(lambda a, _b: a))  # copies: the same set, the same shingles
            found = (listed
                     .join(blobs)                                # (later, (earlier, later's))
                     .map(lambda kv: (kv[1][0], (kv[0], kv[1][1])))  # (earlier, (later, ..))
                     .join(blobs)
                     .map(lambda kv: (kv[1][0][0], kv[0],
                                      verify_pair(threshold, kv[1][0][1], kv[1][1])))
                     .filter(lambda t: t[2] is not None)
                     .collect())
            plan = assemble(found, candidates, max_candidates, firsts.count())
            if keep_pairs:
                plan.pairs = sorted(listed.collect())
            pairs.unpersist()
            firsts.unpersist()
            involved.destroy()
            return plan

    def rows(self) -> Iterator[Row]:
        """The sketches in document order (partitions are contiguous ranges, fetched one
        after another, the next while one is decided)."""
        with self._phase("sending sketches to the driver"):
            yield from self.rdd.toLocalIterator(prefetchPartitions=True)
        self.rdd.unpersist()

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Name the phase and report its tasks while it runs (Spark's own console bar is
        off with the log level, and says nothing of what a stage is for)."""
        done = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(name, done), daemon=True)
        watcher.start()
        try:
            yield
        except StreamdedupError:
            raise
        except Exception as exc:  # py4j and Spark errors: the job failed after its retries
            if INTERRUPTED.is_set():
                raise KeyboardInterrupt from None
            raise failed(exc) from exc
        finally:
            done.set()
            watcher.join()

    def _watch(self, name: str, done: threading.Event, every_s: float = 5.0) -> None:
        tracker = self.sc.statusTracker()
        last = ""
        self.say(f"spark: {name}")
        while not done.wait(every_s):
            with suppress(Exception):  # the context is stopping
                stages = [s for s in (tracker.getStageInfo(i)
                                      for i in tracker.getActiveStageIds()) if s]
                if not stages:
                    continue
                line = ", ".join(
                    f"stage {s.stageId}: {s.numCompletedTasks}/{s.numTasks} tasks"
                    + (f" ({s.numFailedTasks} failed, retried)" if s.numFailedTasks else "")
                    for s in stages)
                if line != last:
                    self.say(f"spark: {name}: {line}")
                    last = line


def failed(exc: BaseException) -> BackfillError:
    """The line of a py4j error that says why (its first names only the call that failed)."""
    lines = [x.strip() for x in str(exc).strip().splitlines() if x.strip()]
    why = next((x for x in lines if "Job aborted" in x), lines[0] if lines else "")
    hint = (" The JVM ran out of memory: give it more with --driver-memory."
            if "OutOfMemoryError" in str(exc) else "")
    what = ("Spark's JVM stopped answering (killed, or it died)"
            if type(exc).__name__ == "Py4JNetworkError" or isinstance(exc, ConnectionError)
            else "the Spark job failed after its task retries")
    return BackfillError(f"{what}: {type(exc).__name__}: {why[:400]} (what the backfill "
                         f"decided before is committed: run it again to go on).{hint}")


def _package_zip(work: Path) -> Path:
    """The streamdedup package as a zip (its .py files); executors import it from there, so
    they run the driver's exact code."""
    import streamdedup

    package = Path(streamdedup.__file__).parent
    target = work / "streamdedup.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(package.rglob("*.py")):
            zf.write(path, Path("streamdedup") / path.relative_to(package))
    return target
