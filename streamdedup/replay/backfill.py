"""Backfill a historical dump: sketches computed in parallel (Spark, or in-process), verdicts
decided in arrival order by the stream's own detector, written into the store the stream
then continues from.

Why split it so: normalizing, shingling and signing are ~70 % of a fresh ad's cost and need
nothing but the ad, so Spark executors do them (``mapPartitions`` with the same ``Sketcher``).
The decision for each ad depends on every earlier ad (first document of a set, cluster
merges, ``max_matches``), so it is made in the driver, in order, by ``Detector`` itself with
the precomputed sketches: the verdicts are the stream's by construction, the store is a
normal store (``streamdedup run``/``check`` go on from it, ``seq`` continues), and a second
backfill of the same dump finds every (id, text) already judged and changes nothing.

Rows that cannot be used go to an error file, as ``check`` reports them (``row``: the 0-based
row in file order, i.e. the JSONL line number minus one; ``error``: the reason), never
silently away.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from streamdedup.core.detector import Detector
from streamdedup.core.document import Document
from streamdedup.core.shared import detector_for
from streamdedup.core.sketch import Shingled, Sketcher
from streamdedup.errors import BackfillError, ConfigError, MessageError
from streamdedup.extras import require
from streamdedup.replay.dump import read_dump
from streamdedup.settings import Settings
from streamdedup.store.base import Store

BATCH = 500  # documents per detector call and store commit, as `check` does
ENGINES = ("spark", "local")
ORDERS = ("file", "timestamp")

# One document's sketch as it travels from an executor: position, set id, shingles as
# big-endian uint64 bytes, band keys as int64 bytes (no pickle of numpy objects).
Row = tuple[int, int, bytes, bytes]


@dataclass(frozen=True)
class BackfillConfig:
    dump: Path
    out: Path
    errors: Path | None = None  # default: <out>.errors.jsonl
    fmt: str | None = None
    engine: str = "spark"
    master: str = "local[*]"
    order_by: str = "file"
    timestamp_field: str = "timestamp"
    partitions: int = 0  # 0: Spark's default parallelism
    verify_in_spark: bool = True  # candidate pairs and exact Jaccard in the executors


@dataclass
class BackfillResult:
    documents: int = 0
    duplicates: int = 0
    bad_rows: int = 0
    unordered: int = 0  # rows without a usable timestamp (with --order-by timestamp): last
    seconds: float = 0.0
    sketch_seconds: float = 0.0  # Spark: the parallel phase, all partitions at once
    errors_path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def sketch_rows(settings: Settings, items: Iterator[tuple[int, Mapping[str, str]]]
                ) -> Iterator[Row]:
    """What an executor computes for its partition (also the local engine's loop)."""
    sketcher = Sketcher(settings)
    for position, fields in items:
        sh = sketcher.shingle_fields(fields)
        keys = sketcher.band_keys(sh.shingles) if sh.shingles.size else np.zeros(0, np.int64)
        yield (position, sh.set_id, sh.shingles.astype(">u8").tobytes(),
               np.asarray(keys, dtype=np.int64).tobytes())


def _local(settings: Settings, docs: Sequence[Document], config: BackfillConfig,
           timings: dict[str, float], shared: dict[str, Any]) -> Iterator[Row]:
    return sketch_rows(settings, ((i, d.fields) for i, d in enumerate(docs)))


def _spark(settings: Settings, docs: Sequence[Document], config: BackfillConfig,
           timings: dict[str, float], shared: dict[str, Any]) -> Iterator[Row]:
    """Sketches from Spark executors, back in the driver in document order (partitions are
    contiguous ranges, read one after another by ``toLocalIterator``)."""
    require("pyspark", "the Spark backfill")
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(config.master).appName("streamdedup-backfill")
               .config("spark.ui.showConsoleProgress", "true"))
    if config.master.startswith("local"):
        # Python workers run this interpreter (the one with numpy and the other dependencies;
        # Spark would start `python3` from PATH); on a cluster, the executors' Python needs
        # streamdedup's dependencies installed (see the README).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # Local mode runs the executors in the driver's JVM: 1 GB (Spark's default) ran out
        # on 50,000 generated ads (a partition on its way to the driver is its sketches,
        # ~8 KB an ad).
        builder = builder.config("spark.driver.memory", "3g")
    spark = builder.getOrCreate()
    try:
        sc = spark.sparkContext
        sc.addPyFile(str(_package_zip()))  # this streamdedup, for the executors to import
        # Partitions of ~2,000 ads (at least 4 per core): each one crosses to the driver
        # whole, so their size bounds the driver's memory, not the dump's.
        slices = config.partitions or max(sc.defaultParallelism * 4, len(docs) // 2000 + 1)
        data = [(i, d.fields) for i, d in enumerate(docs)]

        def work(items: Iterator[tuple[int, Mapping[str, str]]]) -> Iterator[Row]:
            return sketch_rows(settings, items)

        from pyspark import StorageLevel

        try:
            # First every partition at once on all executors (kept, spilling to disk), then
            # in order to the driver, the next partition fetched while one is decided.
            sketched = sc.parallelize(data, slices).mapPartitions(work)
            sketched.persist(StorageLevel.MEMORY_AND_DISK)
            started = time.perf_counter()
            sketched.count()
            timings["sketch_seconds"] = time.perf_counter() - started
            if config.verify_in_spark:
                started = time.perf_counter()
                found, counts = spark_neighbours(sketched, settings.threshold)
                shared["neighbours"] = found
                timings.update({k: float(v) for k, v in counts.items()},
                               verify_seconds=time.perf_counter() - started)
            yield from sketched.toLocalIterator(prefetchPartitions=True)
            sketched.unpersist()
        except Exception as exc:  # py4j and Spark errors: the job failed after its retries
            message = str(exc).strip().splitlines()
            raise BackfillError(f"the Spark job failed: {type(exc).__name__}: "
                                f"{message[0] if message else ''}") from exc
    finally:
        with contextlib.suppress(Exception):  # a JVM that died already: its error is raised
            spark.stop()


def _bucket_pairs(members: Any, threshold: float) -> Iterator[tuple[int, int]]:
    """(later set, earlier set) of one bucket's sets that can reach the threshold by size:
    members sorted by size, each compared only with the sizes its bound allows, so a hot
    bucket of many sizes is not squared (one of many equal sizes still is: see the README)."""
    from bisect import bisect_right

    from streamdedup.core.jaccard import size_bounds

    ranked = sorted(members, key=lambda m: m[2])  # (first position, set id, size)
    sizes = [m[2] for m in ranked]
    for i, (pos, set_id, size) in enumerate(ranked):
        hi = bisect_right(sizes, size_bounds(size, threshold)[1])  # the stream's own bound
        for pos2, set2, _ in ranked[i + 1:hi]:
            yield (set2, set_id) if pos2 > pos else (set_id, set2)


def _verify_pair(threshold: float, item: Any) -> tuple[int, tuple[int, float]] | None:
    """((later, (earlier, later's bytes)), earlier's bytes) -> (later, (earlier, sim)) if
    similar enough; the same function and comparison as the detector's."""
    from streamdedup.core.jaccard import jaccard_many

    earlier, ((later, later_bytes), earlier_bytes) = item
    a = np.frombuffer(later_bytes, dtype=">u8").astype(np.uint64)
    b = np.frombuffer(earlier_bytes, dtype=">u8").astype(np.uint64)
    sim = float(jaccard_many(a, [b])[0])
    return (later, (earlier, sim)) if sim >= threshold else None


def spark_neighbours(sketched: Any, threshold: float) -> tuple[dict[int, list[tuple[int, float]]],
                                                               dict[str, int]]:
    """Every distinct set's verified earlier neighbours, computed by the executors: distinct
    sets (exact copies collapse), their band-key entries grouped by key, candidate pairs
    within the size bound, exact Jaccard. Earlier = first seen earlier in arrival order."""
    firsts = (sketched.filter(lambda r: len(r[2]) > 0)
              .map(lambda r: (r[1], (r[0], r[2], r[3])))
              .reduceByKey(lambda a, b: a if a[0] <= b[0] else b))
    entries = firsts.flatMap(lambda kv: [
        (key, (kv[1][0], kv[0], len(kv[1][1]) // 8))
        for key in set(np.frombuffer(kv[1][2], dtype=np.int64).tolist())])
    candidates = (entries.groupByKey()
                  .flatMap(lambda kv: _bucket_pairs(list(kv[1]), threshold)).distinct())
    blobs = firsts.map(lambda kv: (kv[0], kv[1][1]))
    verified = (candidates.join(blobs)                        # (later, (earlier, later's))
                .map(lambda kv: (kv[1][0], (kv[0], kv[1][1])))  # (earlier, (later, later's))
                .join(blobs)
                .map(lambda item: _verify_pair(threshold, item))
                .filter(lambda x: x is not None))
    neighbours: dict[int, list[tuple[int, float]]] = {}
    for later, (earlier, sim) in verified.collect():
        neighbours.setdefault(later, []).append((earlier, sim))
    counts = {"distinct_sets": firsts.count(), "candidate_pairs": candidates.count(),
              "verified_pairs": sum(len(v) for v in neighbours.values())}
    return neighbours, counts


def _package_zip() -> Path:
    """The streamdedup package as a zip (its .py files), built once per process; executors
    import it from there, so they run the driver's exact code."""
    import tempfile
    import zipfile

    import streamdedup

    package = Path(streamdedup.__file__).parent
    target = Path(tempfile.mkdtemp(prefix="streamdedup-backfill-")) / "streamdedup.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(package.rglob("*.py")):
            zf.write(path, Path("streamdedup") / path.relative_to(package))
    return target


def order(docs: list[tuple[int, Document]], how: str, field_name: str
          ) -> tuple[list[tuple[int, Document]], int]:
    """Rows in arrival order: file order, or by timestamp (stable; rows without a usable
    timestamp keep their file order after all the others). Returns the count of those."""
    if how == "file":
        return docs, 0
    keyed = [(_epoch(d.fields.get(field_name)), n, row, d) for n, (row, d) in enumerate(docs)]
    missing = sum(1 for t, *_ in keyed if t is None)
    keyed.sort(key=lambda k: (k[0] is None, k[0] or 0.0, k[1]))
    return [(row, d) for _, _, row, d in keyed], missing


def _epoch(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        number = float(value)
        return number if math.isfinite(number) else None
    except (TypeError, ValueError):
        pass
    try:
        when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()  # naive: UTC


def backfill(settings: Settings, store: Store, config: BackfillConfig,
             progress: Callable[[int], None] = lambda _n: None) -> BackfillResult:
    if config.engine not in ENGINES:
        raise ConfigError(f"--engine must be one of {', '.join(ENGINES)}, not {config.engine!r}")
    if config.order_by not in ORDERS:
        raise ConfigError(f"--order-by must be one of {', '.join(ORDERS)}, not "
                          f"{config.order_by!r}")
    result = BackfillResult(errors_path=config.errors or config.out.with_suffix(".errors.jsonl"))
    start = time.perf_counter()
    good: list[tuple[int, Document]] = []
    assert result.errors_path is not None
    with result.errors_path.open("w", encoding="utf-8") as errors:
        for row, item in read_dump(config.dump, config.fmt, settings.text_fields,
                                   max_bytes=settings.max_message_bytes):
            if isinstance(item, MessageError):
                result.bad_rows += 1
                errors.write(json.dumps({"row": row, "error": item.reason,  # as `check`
                                         "detail": item.detail}, ensure_ascii=False) + "\n")
            else:
                good.append((row, item))
    ordered, result.unordered = order(good, config.order_by, config.timestamp_field)
    docs = [d for _, d in ordered]
    engine = _spark if config.engine == "spark" else _local
    detector = detector_for(settings, store, Sketcher(settings))
    timings: dict[str, float] = {}
    shared: dict[str, Any] = {}  # the engine's verified neighbours, once its rows begin
    # Neighbours verified in Spark cover this dump's sets only: used for an empty store; a
    # store that already holds documents is probed as the stream would.
    empty = store.stats()["documents"] == 0 and isinstance(detector, Detector)
    cfg = replace(config, verify_in_spark=config.verify_in_spark and empty)
    with config.out.open("w", encoding="utf-8") as out:
        _decide(detector, store, docs, engine(settings, docs, cfg, timings, shared), shared,
                out, result, progress)
    result.seconds = time.perf_counter() - start
    result.sketch_seconds = timings.pop("sketch_seconds", 0.0)
    result.extra = timings
    return result


def _decide(detector: Any, store: Store, docs: Sequence[Document], rows: Iterator[Row],
            shared: Mapping[str, Any], out: TextIO, result: BackfillResult,
            progress: Callable[[int], None]) -> None:
    """The driver's half: batches of sketches, in document order, through the detector."""
    batch: list[Row] = []

    def flush() -> None:
        part = [docs[p] for p, _, _, _ in batch]
        shingled = [Shingled(np.frombuffer(sh, dtype=">u8").astype(np.uint64), set_id)
                    for _, set_id, sh, _ in batch]
        keys = {set_id: np.frombuffer(k, dtype=np.int64) for _, set_id, _, k in batch if k}
        given = shared.get("neighbours")
        found = (detector.process_many(part, (shingled, keys)) if given is None else
                 detector.process_many(part, (shingled, keys), neighbours=given))
        for verdict in found:
            out.write(verdict.to_json() + "\n")
            result.documents += 1
            result.duplicates += verdict.duplicate
        store.commit()
        progress(len(batch))
        batch.clear()

    expected = 0
    for row in rows:
        if row[0] != expected:
            raise RuntimeError(f"sketch of document {row[0]} arrived where {expected} was "
                               "expected: the engine did not keep the order")
        expected += 1
        batch.append(row)
        if len(batch) >= BATCH:
            flush()
    if batch:
        flush()
    if expected != len(docs):
        raise RuntimeError(f"the engine returned {expected} sketches for {len(docs)} documents")
