"""Backfill a historical dump: sketches and candidate pairs computed in parallel (Spark, or
in-process), verdicts decided in arrival order by the stream's own detector, written into the
store the stream then continues from.

Why split it so: reading, normalizing, shingling and signing are about half of a fresh ad's
CPU and need nothing but the ad, so Spark executors do them (``replay/spark.py``), then find
every new set's candidates and verified neighbours for the whole dump at once (``replay/pairs.py``).
The decision for each ad depends on every earlier ad (first document of a set, cluster
merges, ``max_matches``), so it is made in the driver, in order, by ``Detector`` itself with
the precomputed sketches and neighbours: the verdicts are the stream's by construction, the
store is a normal store (``streamdedup run``/``check`` go on from it, ``seq`` continues), and
a second backfill of the same dump finds every (id, text) already judged and changes nothing
(with retention, an ad that has left the window is judged anew: ``docs/RETENTION.md``).
The pair plan is only used into an empty store (it knows this dump's sets, not the store's);
into a store that holds documents, the driver probes it as ``check`` does.

Rows that cannot be used go to an error file, as ``check`` reports them (``row``: the 0-based
row in file order, i.e. the JSONL line number minus one; ``error``: the reason), never
silently away.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from streamdedup.core.document import Document
from streamdedup.core.retention import parse_time
from streamdedup.core.sketch import Shingled, Sketcher
from streamdedup.core.verdict import Verdict
from streamdedup.detection.detector import Detector
from streamdedup.detection.outage import judged
from streamdedup.detection.shared_detector import detector_for
from streamdedup.errors import ConfigError, InputError, MessageError
from streamdedup.replay.bad_rows import BadRows
from streamdedup.replay.config import BATCH, ENGINES, ORDERS, STDOUT, BackfillConfig
from streamdedup.replay.dump import read_dump, row_number_warning
from streamdedup.replay.pairs import Plan, Row, local_plan, sketch_rows
from streamdedup.settings import Settings
from streamdedup.store.base import Evicted, Store
from streamdedup.store.payload import decode_shingles
from streamdedup.terminal import counted


@dataclass
class BackfillResult:
    documents: int = 0
    duplicates: int = 0
    bad: BadRows = field(default_factory=BadRows)
    unordered: int = 0  # rows without a usable timestamp (with --order-by timestamp): last
    untimed: int = 0  # documents without a time where retention reads one (the clock's)
    seconds: float = 0.0
    sketch_seconds: float = 0.0  # Spark: the parallel phase, all partitions at once
    plan_seconds: float = 0.0
    plan: dict[str, int] | None = None  # the pair plan's counts, when one was used
    errors_path: Path | None = None
    report: dict[str, Any] | None = None
    report_paths: dict[str, Path] = field(default_factory=dict)
    evicted: Evicted = field(default_factory=Evicted)  # by retention (check says it too)


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
    """A row's time in ms (``core/retention.py``'s reading), or None when it has none."""
    if value is None or value == "":
        return None
    try:
        return float(parse_time(value))
    except ValueError:
        return None


def backfill(settings: Settings, store: Store, config: BackfillConfig,
             progress: Callable[[int], None] = lambda _n: None,
             say: Callable[[str], None] = lambda _m: None) -> BackfillResult:
    if config.engine not in ENGINES:
        raise ConfigError(f"--engine must be one of {', '.join(ENGINES)}, not {config.engine!r}")
    if config.order_by not in ORDERS:
        raise ConfigError(f"--order-by must be one of {', '.join(ORDERS)}, not "
                          f"{config.order_by!r}")
    errors_path = config.errors_path
    result = BackfillResult(errors_path=errors_path)
    start = time.perf_counter()
    good: list[tuple[int, Document]] = []
    with _written(errors_path) as errors:
        try:
            read = read_dump(config.dump, config.fmt, settings.text_fields,
                             max_bytes=settings.max_message_bytes,
                             time_field=settings.read_time_field, id_field=settings.id_field)
            for row, item in read:
                if isinstance(item, MessageError):
                    errors.write(result.bad.add(row, item))
                else:
                    good.append((row, item))
        except InputError as exc:  # it reads the whole dump before judging any of it; the
            # bad rows said before it are kept, and an earlier run's file, if none (emptied
            # by a close as after success, then unlinked, it was lost)
            raise InputError(f"{exc}; the backfill judged none of the dump") from None
    ordered, result.unordered = order(good, config.order_by, settings.time_field)
    docs = [d for _, d in ordered]
    result.untimed = sum(d.time is None for d in docs) if settings.read_time_field else 0
    if config.report_dir is not None and len({d.id for d in docs}) != len(docs):
        raise InputError("--report needs a dump whose ids are unique (the report's brute "
                         "force compares documents, not versions of one id)")
    say(f"{counted(len(docs), 'document')}, {counted(result.bad.count, 'bad row')} "
        f"({config.errors_place})")  # the numbers as the summary line writes them
    detector = detector_for(settings, store, Sketcher(settings))
    # The plan knows this dump's sets only: used into an empty store; a store that already
    # holds documents is probed as the stream would. With retention, too: a pair plan knows
    # nothing of the window (the sketches still come from the engine).
    held = store.stats()
    warning = row_number_warning(config.dump, config.fmt, lambda: held["documents"],
                                 settings.id_field,
                                 lambda doc_id: store.get_doc(doc_id) is not None)
    if warning:
        say(warning)
    if config.report_dir is not None and held["documents"] and (
            held["documents"] > len(docs)
            or len(store.get_docs(d.id for d in docs)) < held["documents"]):
        # A store of this dump's own ads (a backfill resumed) is fine; another's are not.
        raise InputError("--report compares the verdicts with a brute force over this dump "
                         "alone, and the store holds documents of others (their matches "
                         "would count as false positives): give a new or empty --store, or "
                         "this dump's own")
    use_plan = (config.pairs and isinstance(detector, Detector)
                and held["documents"] == 0 and held["sets"] == 0
                and settings.retention_ms is None)
    keep = _Kept() if config.report_dir is not None else None
    with _written(config.out) as out:
        if config.engine == "local" or not docs:  # Spark took 10 s to judge no row
            rows: Iterable[Row] = _sketch_local(settings, docs)
            plan = None
            if use_plan:
                started = time.perf_counter()
                rows = list(rows)
                result.sketch_seconds = time.perf_counter() - started
                started = time.perf_counter()
                plan = local_plan(rows, settings.threshold, settings.max_candidates,
                                  keep_pairs=keep is not None)
                result.plan_seconds = time.perf_counter() - started
            _decide(detector, docs, iter(rows), plan, out, result, progress, say, keep)
        else:
            from streamdedup.replay import spark as sp

            with sp.session(config.master, say, config.driver_memory) as (spark, work):
                sketches = sp.SparkSketches(spark, settings, [d.fields for d in docs],
                                            config.partitions, say,
                                            stage=work / "texts.jsonl" if work else None)
                result.sketch_seconds = sketches.sketch()
                plan = None
                if use_plan:
                    started = time.perf_counter()
                    plan = sketches.plan(settings.threshold, settings.max_candidates,
                                         keep_pairs=keep is not None)
                    result.plan_seconds = time.perf_counter() - started
                say("deciding in arrival order")
                _decide(detector, docs, sketches.rows(), plan, out, result, progress, say,
                        keep)
    result.plan = plan.counts() if plan is not None else None
    result.seconds = time.perf_counter() - start
    result.evicted = getattr(detector, "evicted", Evicted())
    if keep is not None and config.report_dir is not None:
        say("report: exact Jaccard of every pair (brute force) and the band table")
        result.report, result.report_paths = _report(settings, config, docs, keep, plan,
                                                     result)
    return result


class _Named:
    """A file whose write errors name it (an OSError from ``write`` has no file name): a
    full disk or a closed pipe is then said in one line, as `check` says it. Opened (and
    emptied) at the first write, or at a close after success: a Spark that did not start
    emptied the verdicts of an earlier run."""

    def __init__(self, file: TextIO | None, name: str, path: Path | None = None) -> None:
        self.file, self.name, self.path = file, name, path

    def _failed(self, exc: OSError) -> OSError:
        return OSError(exc.errno, exc.strerror or str(exc), self.name)

    def _opened(self) -> TextIO:
        if self.file is None:
            assert self.path is not None
            self.file = self.path.open("w", encoding="utf-8")  # an error names it already
        return self.file

    def write(self, text: str) -> None:
        file = self._opened()
        try:
            file.write(text)
        except OSError as exc:
            raise self._failed(exc) from exc

    def close(self, done: bool = True) -> None:
        """``done``: the run succeeded, so a file nothing was written to is made empty."""
        if self.file is None and not done:
            return
        file = self._opened()
        try:
            file.flush() if file is sys.stdout else file.close()
        except OSError as exc:
            raise self._failed(exc) from exc


@contextmanager
def _written(path: Path) -> Iterator[_Named]:
    """``path`` for writing, checked at once and opened at the first write; STDOUT is
    standard output, left open (and flushed). An error in writing or closing it is an
    OSError naming it ("standard output" for STDOUT)."""
    if path == STDOUT:
        named = _Named(sys.stdout, "standard output")
    else:
        existed = path.exists()
        path.open("a", encoding="utf-8").close()  # writable? (an error names it); kept whole
        if not existed:
            path.unlink()
        named = _Named(None, str(path), path)
    try:
        yield named
    except BaseException:
        with suppress(OSError):
            named.close(done=False)
        raise
    named.close()


def _sketch_local(settings: Settings, docs: Sequence[Document]) -> Iterator[Row]:
    return sketch_rows(settings, ((i, d.fields) for i, d in enumerate(docs)))


@dataclass
class _Kept:
    """What the report needs from the decisions: every verdict, shingle set and set id."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)
    shingles: list[np.ndarray] = field(default_factory=list)
    set_ids: list[int] = field(default_factory=list)


def _decide(detector: Any, docs: Sequence[Document], rows: Iterator[Row],
            plan: Plan | None, out: _Named, result: BackfillResult,
            progress: Callable[[int], None], say: Callable[[str], None],
            keep: _Kept | None) -> None:
    """The driver's half: batches of sketches, in document order, through the detector."""
    batch: list[Row] = []

    def flush() -> None:
        part = [docs[p] for p, _, _, _ in batch]
        shingled = [Shingled(decode_shingles(sh), set_id) for _, set_id, sh, _ in batch]
        keys = {set_id: np.frombuffer(k, dtype=np.int64) for _, set_id, _, k in batch if k}
        # Committed, then the verdicts written, as check does (a redo gives the stored ones);
        # judged again after a store outage (``outage.py``)
        found = judged(detector, lambda: (
            detector.process_many(part, (shingled, keys)) if plan is None else
            detector.process_many(part, (shingled, keys), planned=plan.sets)), say)
        for verdict in found:
            if verdict.duplicate or not detector.settings.only_duplicates:  # as check does
                out.write(verdict.to_json() + "\n")
            result.documents += 1
            result.duplicates += verdict.duplicate
        if keep is not None:
            keep.verdicts.update((v.id, v) for v in found)
            keep.shingles += [s.shingles for s in shingled]
            keep.set_ids += [s.set_id for s in shingled]
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


def _report(settings: Settings, config: BackfillConfig, docs: Sequence[Document], keep: _Kept,
            plan: Plan | None, result: BackfillResult) -> tuple[dict[str, Any], dict[str, Path]]:
    """replay's report for the backfill's verdicts (precision and recall against exact
    Jaccard, the study's band table), plus a band-table row for this run's own candidate
    pairs: the chosen bands with the size bound applied, as the plan found them."""
    from streamdedup.core import lsh
    from streamdedup.replay import evaluation as ev
    from streamdedup.replay import report as rp
    from streamdedup.replay import truth as tr

    assert config.report_dir is not None
    corpus = tr.Corpus.from_shingles([d.id for d in docs], keep.shingles)
    truth = tr.ground_truth(corpus, settings.threshold)
    # the bad rows are the dump's "unreadable rows" below, not dead letters too (counted twice)
    report = ev.evaluate(docs, keep.verdicts, truth, settings, dead_letters=0)
    if plan is not None and plan.pairs is not None:
        index: dict[int, int] = {}  # sketch set id -> the corpus' set index
        for position, set_id in enumerate(keep.set_ids):
            if corpus.set_index[position] >= 0:
                index.setdefault(set_id, int(corpus.set_index[position]))
        ci = np.array([index[a] for a, _ in plan.pairs], dtype=np.int64)
        cj = np.array([index[b] for _, b in plan.pairs], dtype=np.int64)
        bands, rows = lsh.layout(settings.threshold, settings.num_perm, settings.bands,
                                 settings.rows)
        report["band_table"]["rows"].append(ev.table_row(
            truth, f"{bands}x{rows}, this backfill ({config.engine}; size bound applied)",
            ci, cj, bands=bands, rows=rows, num_perm=settings.num_perm,
            threshold=settings.threshold, sign_s=result.sketch_seconds,
            band_s=result.plan_seconds))
    report.update({
        "dump": {"path": str(config.dump), "name": config.dump.name,
                 "sha256": tr.file_sha256(config.dump), "rows": len(docs) + result.bad.count,
                 "unreadable_rows": result.bad.count},
        "settings": {**Sketcher(settings).params(), "max_matches": settings.max_matches,
                     "max_candidates": settings.max_candidates},
        "backfill": {"engine": config.engine, "master": config.master,
                     "order_by": config.order_by, "plan": plan.counts() if plan else None,
                     "sketch_s": result.sketch_seconds, "plan_s": result.plan_seconds},
        "elapsed_total_s": result.seconds,
    })
    paths = rp.write_report(report, config.report_dir)
    return report, paths
