#!/usr/bin/env python3
"""Benchmarks of issue 5: stages, compare, e2e, growth, hotbucket, and a profile of the core.

Why one script: every figure must be reproducible from the line that printed it, so each
subcommand prints (and stores in its JSON) the command line, the machine (lscpu model, cores),
the commit, and for every measurement the median of ``--repeats`` runs after ``--warmup``
runs, with the individual runs, so noise is visible. Ratios are always against a baseline
measured in the same invocation. ``--update-md`` rewrites the matching generated section of
BENCHMARKS.md (between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``); the prose around
the sections is written by hand.

The machine has two cores: run one benchmark at a time.

    scripts/bench.py stages    [--dump PATH] [--copies 10]
    scripts/bench.py compare   [--copies 10] [--redis auto|off] [--study-limit 1000]
    scripts/bench.py e2e       [--messages 100000] [--rates 500,2000]
    scripts/bench.py growth    [--sizes 10000,100000,1000000] [--max-minutes 45]
    scripts/bench.py hotbucket [--arrivals 20000] [--variants 50]
    scripts/bench.py profile   [--preset reference] [--copies 10]
    scripts/bench.py group     [--messages 20000] [--members 1,2,4]   (bench_group.py)
    scripts/bench.py backfill  [--messages 100000]                    (bench_backfill.py)
    scripts/bench.py retention [--messages 100000] [--window 7d]      (bench_retention.py)
    scripts/bench.py fresh     [--messages 50000] [--before REV]      (bench_fresh.py)
    scripts/bench.py hotsoak   [--messages 100000]                    (bench_fresh.py)
    scripts/bench.py reopen    --store DIR                            (bench_fresh.py)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import inspect
import json
import multiprocessing
import os
import platform
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from streamdedup.core.detector import Detector  # noqa: E402
from streamdedup.core.document import Document  # noqa: E402
from streamdedup.core.jaccard import jaccard, jaccard_many, size_bounds  # noqa: E402
from streamdedup.core.shingles import set_fingerprint, shingle  # noqa: E402
from streamdedup.core.sketch import Sketcher  # noqa: E402
from streamdedup.core.text import compose_text  # noqa: E402
from streamdedup.errors import MessageError  # noqa: E402
from streamdedup.replay.dump import read_dump  # noqa: E402
from streamdedup.replay.process import ChildProcess, free_port  # noqa: E402
from streamdedup.replay.read_ahead import BATCH  # noqa: E402  (as check and backfill batch)
from streamdedup.settings import Settings, build_settings  # noqa: E402
from streamdedup.store import Store, open_store  # noqa: E402

DEFAULT_DUMP = ROOT.parent / "shared" / "data" / "kijiji_jobs.tsv"
DEFAULT_OUT = ROOT / "out" / "bench"
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"


# --------------------------------------------------------------------------- reporting
def machine() -> dict[str, Any]:
    """What the numbers were measured on: CPU model and cores, versions, commit. The CPU
    family and model numbers too: "AMD EPYC" named machines here that ran ``check`` at
    ~3,500 and at ~5,500 docs/s (2 December 2026)."""
    model = cores = ""
    generation: dict[str, str] = {}
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Model name":
                model = value.strip()
            elif key.strip() == "CPU(s)":
                cores = value.strip()
            elif key.strip() in ("CPU family", "Model", "Stepping"):
                generation[key.strip().split()[-1].lower()] = value.strip()
    if generation:
        model += " (" + ", ".join(f"{k} {v}" for k, v in generation.items()) + ")"
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no", "--", "streamdedup"))
    return {
        "cpu_model": model or platform.processor(),
        "cpus": cores or str(os.cpu_count()),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "os": platform.platform(),
        "commit": commit + ("+dirty core" if dirty else ""),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_at_start": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=False).stdout.strip()
    except OSError:
        return ""


@dataclass
class Timing:
    """Median seconds of ``runs`` (warm-up runs excluded) and what each run returned."""

    runs: list[float]
    results: list[Any]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    def spread(self) -> str:
        lo, hi = min(self.runs), max(self.runs)
        return f"{lo:.3g}-{hi:.3g} s"

    def as_dict(self, docs: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"median_s": self.median, "runs_s": self.runs}
        if docs:
            out["docs"] = docs
            out["docs_per_s"] = docs / self.median
        if self.results and self.results[0] is not None:
            out["result"] = self.results[0]
        return out


def measure(run: Callable[[Any], Any], setup: Callable[[], Any] = lambda: None,
            teardown: Callable[[Any], None] = lambda _s: None, *, repeats: int, warmup: int,
            label: str = "") -> Timing:
    """Time ``run(setup())``; setup and teardown are outside the clock; GC between runs."""
    times: list[float] = []
    results: list[Any] = []
    for i in range(warmup + repeats):
        state = setup()
        gc.collect()
        start = time.perf_counter()
        result = run(state)
        elapsed = time.perf_counter() - start
        teardown(state)
        if i >= warmup:
            times.append(elapsed)
            results.append(result)
        if label:
            tag = "warm-up" if i < warmup else f"run {i - warmup + 1}/{repeats}"
            print(f"  {label}: {tag} {elapsed:.3f} s", file=sys.stderr, flush=True)
    return Timing(times, results)


def header(args: argparse.Namespace, info: dict[str, Any]) -> str:
    return (f"$ {args.command_line}\n"
            f"machine: {info['cpu_model']}, {info['cpus']} CPUs; Python {info['python']}, "
            f"numpy {info['numpy']}; commit {info['commit']}; {info['date']}; "
            f"load average at start {info['loadavg_at_start']} (other work shares the machine)")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def save(args: argparse.Namespace, name: str, payload: dict[str, Any], markdown: str) -> None:
    """Print the markdown, write the JSON, and update BENCHMARKS.md if asked."""
    print(markdown)
    path = Path(args.json) if args.json else DEFAULT_OUT / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"\nJSON written to {path}", file=sys.stderr)
    if args.update_md:
        update_markdown(name, markdown)


def update_markdown(name: str, body: str) -> None:
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    text = BENCHMARKS_MD.read_text(encoding="utf-8") if BENCHMARKS_MD.exists() else ""
    block = f"{start}\n{body.strip()}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text)
    else:
        text = text.rstrip() + f"\n\n{block}\n"
    BENCHMARKS_MD.write_text(text, encoding="utf-8")
    print(f"BENCHMARKS.md section {name!r} updated", file=sys.stderr)


# --------------------------------------------------------------------------- data and core
def load_docs(path: Path, text_fields: tuple[str, ...]) -> list[Document]:
    return [d for _, d in read_dump(path, None, text_fields) if not isinstance(d, MessageError)]


def repeat_docs(docs: Sequence[Document], copies: int) -> list[Document]:
    """``copies`` concatenated copies of the dump, ids made unique (``<copy>-<id>``)."""
    return [Document(f"{c}-{d.id}", d.fields) for c in range(copies) for d in docs]


def make_sketcher(settings: Settings, text_cache: int | None = None) -> Sketcher:
    """A Sketcher, with the core's text cache set if this version of the core has one."""
    if text_cache is not None and "text_cache" in inspect.signature(Sketcher).parameters:
        return Sketcher(settings, text_cache=text_cache)
    return Sketcher(settings)


def has_text_cache() -> bool:
    return "text_cache" in inspect.signature(Sketcher).parameters


def settings_for(preset: str, **overrides: Any) -> Settings:
    return build_settings(preset, env={}, overrides=overrides)


@dataclass
class CoreRun:
    """A fresh detector on a fresh store in a temporary directory (setup, untimed)."""

    detector: Detector
    store: Store
    tmp: tempfile.TemporaryDirectory[str] | None

    def close(self) -> None:
        self.store.close()
        if self.tmp is not None:
            self.tmp.cleanup()


def new_core(settings: Settings, backend: str = "sqlite", text_cache: int | None = None,
             tmp_root: str | None = None) -> CoreRun:
    sketcher = make_sketcher(settings, text_cache)
    tmp = tempfile.TemporaryDirectory(prefix="sd-bench-", dir=tmp_root) if backend == "sqlite" \
        else None
    store = open_store(backend, tmp.name if tmp else "", sketcher.params())
    return CoreRun(Detector(settings, store, sketcher), store, tmp)


def run_core(core: CoreRun, docs: Sequence[Document], batch: int = BATCH) -> int:
    """The whole core as `streamdedup check` runs it: batches, one commit per batch."""
    dups = 0
    for i in range(0, len(docs), batch):
        dups += sum(v.duplicate for v in core.detector.process_many(docs[i : i + batch]))
        core.store.commit()
    return dups


# --------------------------------------------------------------------------- stages
def cmd_stages(args: argparse.Namespace) -> None:
    info = machine()
    presets = args.presets.split(",")
    report: dict[str, Any] = {"command": args.command_line, "machine": info, "presets": {}}
    rows = []
    for preset in presets:
        settings = settings_for(preset)
        base = load_docs(args.dump, settings.text_fields)
        docs = repeat_docs(base, args.copies)
        n = len(docs)
        print(f"[{preset}] {n} documents ({args.copies} x {len(base)})", file=sys.stderr)
        res = stage_timings(settings, docs, args)
        report["presets"][preset] = res
        whole = res["whole core, SQLite"]["median_s"]
        for name, r in res.items():
            rows.append([
                preset, name, fmt_rate(r["docs_per_s"]), f"{r['median_s']:.3f}",
                f"{100 * r['median_s'] / whole:.0f}%" if not name.startswith("whole") else "",
                r.get("note", ""),
            ])
    md = "\n".join([
        "```", header(args, info), "```", "",
        f"Medians of {args.repeats} runs after {args.warmup} warm-up; docs/s = stream documents "
        "/ stage seconds. Stage share = stage time / whole-core (SQLite, cache as shipped) time.",
        "",
        md_table(["preset", "stage", "docs/s", "median s", "share", "note"], rows),
    ])
    save(args, "stages", report, md)


def stage_timings(settings: Settings, docs: list[Document], args: argparse.Namespace
                  ) -> dict[str, dict[str, Any]]:
    rep, warm = args.repeats, args.warmup
    n = len(docs)
    fields = settings.text_fields
    out: dict[str, dict[str, Any]] = {}

    sketcher = make_sketcher(settings, 0)
    raw = [compose_text(d.fields, fields) for d in docs]

    def normalize_all(norm: Any) -> list[str]:
        return [norm(t) for t in raw]

    t = measure(normalize_all, lambda: make_sketcher(settings, 0).normalize,
                repeats=rep, warmup=warm, label="normalization")
    out["normalization"] = {**t.as_dict(n), "result": None,
                            "note": "fresh Normalizer per run (its word memo starts cold)"}
    texts = normalize_all(sketcher.normalize)

    def shingle_all(_: Any) -> list[np.ndarray]:
        kind, size = settings.shingle_kind, settings.shingle_size
        res = []
        for text in texts:
            sh = shingle(text, kind, size)
            if sh.size:
                set_fingerprint(sh)
            res.append(sh)
        return res

    t = measure(shingle_all, repeats=rep, warmup=warm, label="shingling")
    out["shingling + set id"] = {**t.as_dict(n), "result": None}
    sets = shingle_all(None)
    distinct: dict[int, np.ndarray] = {}
    for sh in sets:
        if sh.size:
            distinct.setdefault(set_fingerprint(sh), sh)
    fresh = list(distinct.values())

    def minhash_each(_: Any) -> None:
        for sh in sets:
            sketcher.band_keys(sh)

    t = measure(minhash_each, repeats=rep, warmup=warm, label="minhash per doc")
    out["MinHash + band keys, every doc"] = {
        **t.as_dict(n), "result": None, "note": "one sign() per stream document"}

    def minhash_batched(_: Any) -> np.ndarray:
        keys = [sketcher.band_keys_many(fresh[i : i + BATCH]) for i in range(0, len(fresh), BATCH)]
        return np.concatenate(keys)

    t = measure(minhash_batched, repeats=rep, warmup=warm, label="minhash distinct batched")
    out["MinHash + band keys, distinct sets batched"] = {
        **t.as_dict(n), "result": None,
        "note": f"{len(fresh)} distinct sets, sign_many per {BATCH} (what the detector does)"}
    keys = minhash_batched(None)
    set_ids = list(distinct.keys())

    def probe_add(core: CoreRun) -> list[list[int]]:
        store = core.store
        cands: list[list[int]] = []
        for i, (sid, sh, k) in enumerate(zip(set_ids, fresh, keys, strict=True)):
            kl = k.tolist()
            hits = store.probe(kl, size_bounds(int(sh.size), settings.threshold))
            ranked = sorted(hits, key=lambda c: (-hits[c], c))[: settings.max_candidates]
            cands.append(ranked)
            store.add_set(_set_record(sid, i, sh), sh)
            store.add_to_buckets(kl, sid, int(sh.size))
            if i % BATCH == BATCH - 1:
                store.commit()
        store.commit()
        return cands

    t = measure(probe_add, lambda: new_core(settings), lambda c: c.close(),
                repeats=rep, warmup=warm, label="probe+add")
    candidates = t.results[0]
    out["probe + add (SQLite)"] = {
        **t.as_dict(n), "result": None,
        "note": f"probe, add_set, add_to_buckets for the {len(fresh)} distinct sets; "
                f"commit per {BATCH}"}

    tmp = tempfile.TemporaryDirectory(prefix="sd-bench-")
    try:
        built = open_store("sqlite", tmp.name, sketcher.params())
        for i, (sid, sh, k) in enumerate(zip(set_ids, fresh, keys, strict=True)):
            built.add_set(_set_record(sid, i, sh), sh)
            built.add_to_buckets(k.tolist(), sid, int(sh.size))
        built.commit()
        built.close()

        def verify(store: Store) -> int:
            matched = 0
            thr = settings.threshold
            for sh, chosen in zip(fresh, candidates, strict=True):
                if not chosen:
                    continue
                stored = store.get_shingles(chosen)
                sims = jaccard_many(sh, [stored[c] for c in chosen if c in stored])
                matched += int((sims >= thr).sum())
            return matched

        t = measure(verify, lambda: open_store("sqlite", tmp.name, sketcher.params()),
                    lambda s: s.close(), repeats=rep, warmup=warm, label="verification")
        pairs = sum(len(c) for c in candidates)
        out["verification (get_shingles + jaccard_many)"] = {
            **t.as_dict(n), "result": None,
            "note": f"{pairs} candidate pairs, cold shingle cache per run"}
    finally:
        tmp.cleanup()

    variants: list[tuple[str, str, int | None]] = [("whole core, SQLite", "sqlite", None)]
    if has_text_cache():
        variants.append(("whole core, SQLite, text cache off", "sqlite", 0))
    variants.append(("whole core, memory store", "memory", None))
    for name, backend, cache in variants:
        t = measure(lambda c: run_core(c, docs),
                    lambda b=backend, tc=cache: new_core(settings, b, tc),  # type: ignore[misc]
                    lambda c: c.close(), repeats=rep, warmup=warm, label=name)
        out[name] = {**t.as_dict(n), "note": f"{t.results[0]} duplicates; batches of {BATCH}"}
    return out


def _set_record(set_id: int, seq: int, sh: np.ndarray) -> Any:
    from streamdedup.store import base

    return base.SetRecord(set_id, seq + 1, f"s{seq}", set_id)


# --------------------------------------------------------------------------- compare
def _identity(x: int) -> int:
    return x


class DatasketchRun:
    """datasketch 2.x MinHash + MinHashLSH, query then insert, exact verification added,
    stopping at the first verified match. ``exact_first`` adds a dict of exact shingle sets
    checked before the query (our detector's shortcut), so copies skip LSH entirely."""

    def __init__(self, settings: Settings, bands: int, rows: int, storage: dict[str, Any] | None,
                 exact_first: bool) -> None:
        from datasketch import MinHashLSH

        self.settings = settings
        self.sketcher = make_sketcher(settings)
        self.num_perm = settings.num_perm
        self.lsh = MinHashLSH(threshold=settings.threshold, num_perm=settings.num_perm,
                              params=(bands, rows), storage_config=storage)
        self.sets: dict[str, np.ndarray] = {}
        self.exact: dict[int, str] | None = {} if exact_first else None

    def run(self, docs: Sequence[Document]) -> int:
        from datasketch import MinHash

        thr = self.settings.threshold
        dups = 0
        for d in docs:
            sh = self.sketcher.shingle_fields(d.fields)
            if not sh.shingles.size:
                continue
            if self.exact is not None:
                if sh.set_id in self.exact:
                    dups += 1
                    continue
                self.exact[sh.set_id] = d.id
            m = MinHash(num_perm=self.num_perm, seed=self.settings.seed, scheme="affine64",
                        hashfunc=_identity)
            m.update_batch(sh.shingles.tolist())
            for c in self.lsh.query(m):
                if jaccard(sh.shingles, self.sets[c]) >= thr:
                    dups += 1
                    break
            self.lsh.insert(d.id, m, check_duplication=False)
            self.sets[d.id] = sh.shingles
        return dups


@contextlib.contextmanager
def redis_server() -> Iterator[tuple[str, int] | None]:
    """A throwaway redis-server on loopback without persistence (the harness's launcher), or
    None if there is none."""
    from harness.redis import RedisError, RedisServer

    tmp = tempfile.mkdtemp(prefix="sd-redis-")
    server = RedisServer(Path(tmp), durable=False)
    try:
        try:
            server.run()
        except RedisError as exc:
            print(f"no redis-server for the Redis rows: {exc}", file=sys.stderr)
            yield None
            return
        yield ("127.0.0.1", server.ports[0])
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def cmd_compare(args: argparse.Namespace) -> None:
    from study_baseline import StudyIndex

    info = machine()
    settings = settings_for("reference")
    sk = make_sketcher(settings)
    bands, rows = sk.bands, sk.rows
    base = load_docs(args.dump, settings.text_fields)
    stream = repeat_docs(base, args.copies)
    rep, warm = args.repeats, args.warmup
    results: dict[str, dict[str, Any]] = {}
    ours_by_n: dict[int, Timing] = {}

    def ours(n: int) -> Timing:
        if n not in ours_by_n:
            docs = stream[:n]
            ours_by_n[n] = measure(lambda c: run_core(c, docs), lambda: new_core(settings),
                                   lambda c: c.close(), repeats=rep, warmup=warm,
                                   label=f"streamdedup core, first {n}")
        return ours_by_n[n]

    def record(name: str, n: int, t: Timing, note: str = "") -> None:
        o = ours(n)
        results[name] = {**t.as_dict(n), "streamdedup_median_s": o.median,
                         "streamdedup_docs_per_s": n / o.median,
                         "streamdedup_duplicates": o.results[0],
                         "ratio_streamdedup_faster": t.median / o.median, "note": note}

    full = len(stream)
    ours(full)

    def ds(storage: dict[str, Any] | None, exact_first: bool) -> Callable[[], DatasketchRun]:
        return lambda: DatasketchRun(settings, bands, rows, storage, exact_first)

    only = set(args.only.split(","))
    slow = args.slow_repeats
    if "shortcut" in only:
        n_ds = min(full, args.ds_limit or full)
        t = measure(lambda r: r.run(stream[:n_ds]), ds(None, True), repeats=rep, warmup=warm,
                    label="datasketch memory + exact shortcut")
        record("datasketch MinHashLSH (memory), exact-set shortcut", n_ds, t,
               "our normalization/shingles; first verified match; exact copies skip LSH")
    if "plain" in only:
        n_naive = min(full, args.naive_limit or full)
        t = measure(lambda r: r.run(stream[:n_naive]), ds(None, False), repeats=slow,
                    warmup=min(warm, 1), label="datasketch memory, plain")
        record("datasketch MinHashLSH (memory), plain query-then-insert", n_naive, t,
               f"every copy queried and inserted (hot buckets grow); {slow} runs")

    if only & {"redis", "redis-plain"} and args.redis != "off":
        with redis_server() as addr:
            if addr is None:
                results["datasketch MinHashLSH (Redis)"] = {"skipped": "no redis-server"}
            else:
                import redis

                host, port = addr
                conf = {"type": "redis", "basename": b"sdbench",
                        "redis": {"host": host, "port": port}}

                def fresh_redis(exact: bool) -> Callable[[], DatasketchRun]:
                    def make() -> DatasketchRun:
                        redis.Redis(host=host, port=port).flushall()
                        return DatasketchRun(settings, bands, rows, conf, exact)
                    return make

                n_r = min(full, args.redis_limit or full)
                if "redis" in only:
                    t = measure(lambda r: r.run(stream[:n_r]), fresh_redis(True), repeats=rep,
                                warmup=warm, label="datasketch redis + exact shortcut")
                    record("datasketch MinHashLSH (Redis), exact-set shortcut", n_r, t,
                           f"redis-server on loopback; first {n_r:,} docs of the stream")
                if "redis-plain" in only:
                    n_rp = min(full, args.redis_plain_limit or full)
                    t = measure(lambda r: r.run(stream[:n_rp]), fresh_redis(False),
                                repeats=slow, warmup=min(warm, 1),
                                label="datasketch redis, plain")
                    record("datasketch MinHashLSH (Redis), plain query-then-insert", n_rp, t,
                           f"redis-server on loopback; first {n_rp:,} docs; {slow} runs")

    if "study" in only:
        n_s = min(full, args.study_limit)
        normalize = sk.normalize

        def study(index: StudyIndex) -> int:
            dups = 0
            for d in stream[:n_s]:  # same work: our normalization included
                text = normalize(compose_text(d.fields, settings.text_fields))
                dups += index.add(d.id, text)[0] is not None
            return dups

        t = measure(study, StudyIndex, repeats=slow, warmup=min(warm, 1),
                    label="study baseline")
        record("study re-implementation (pure Python, SHA-1)", n_s, t,
               f"first {n_s:,} docs of the stream; {slow} runs")

    rows_md = []
    for name, r in results.items():
        if "skipped" in r:
            rows_md.append([name, "", "", "", "", "", r["skipped"]])
            continue
        rows_md.append([
            name, f"{r['docs']:,}", fmt_rate(r["docs_per_s"]), f"{r['result']:,}",
            fmt_rate(r["streamdedup_docs_per_s"]), f"{r['streamdedup_duplicates']:,}",
            f"**{r['ratio_streamdedup_faster']:.1f}x**", r["note"],
        ])
    md = "\n".join([
        "```", header(args, info), "```", "",
        f"Reference preset ({bands} bands x {rows} rows, threshold {settings.threshold}), "
        f"stream = {args.copies} copies of the dump with unique ids ({full:,} docs). "
        f"Each competitor and streamdedup's core (SQLite store, batches of {BATCH}) run on the "
        f"same documents in the same invocation; medians of {rep} runs after {warm} warm-up. "
        "Ratio = competitor time / streamdedup time.",
        "",
        md_table(["competitor", "docs", "docs/s", "dups found", "streamdedup docs/s",
                  "streamdedup dups", "streamdedup faster by", "note"], rows_md),
    ])
    payload = {"command": args.command_line, "machine": info, "bands": bands, "rows": rows,
               "stream_docs": full, "results": results}
    save(args, "compare", payload, md)


# --------------------------------------------------------------------------- e2e
def _message(doc: Document, doc_id: str) -> bytes:
    body = {"id": doc_id, **{k: v for k, v in doc.fields.items() if k != "id"}}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _pace(bootstrap: str, topic: str, payloads: list[bytes], rate: float, start_at: float
          ) -> tuple[float, float]:
    """Child process: send ``payloads`` at ``rate`` per second from wall time ``start_at``."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    while time.time() < start_at:
        time.sleep(0.001)
    t0 = time.time()
    for i, p in enumerate(payloads):
        due = start_at + i / rate
        delay = due - time.time()
        if delay > 0:
            time.sleep(delay)
        producer.send(topic, p)
    producer.flush()
    t1 = time.time()
    producer.close()
    return t0, t1


class Consumer(ChildProcess):
    """`python -m streamdedup run` as a subprocess on its own topics, store and group."""

    def __init__(self, bootstrap: str, tag: str, workdir: Path, preset: str,
                 extra: Sequence[str] = ()) -> None:
        self.topics = (f"in-{tag}", f"out-{tag}", f"dlq-{tag}")
        self.store = workdir / f"store-{tag}"
        self.log = workdir / f"consumer-{tag}.log"
        self.metrics_port = free_port()
        super().__init__(f"consumer {tag}", [
            sys.executable, "-m", "streamdedup", "run", "--preset", preset,
            "--bootstrap-servers", bootstrap, "--store", str(self.store),
            "--input-topic", self.topics[0], "--output-topic", self.topics[1],
            "--dlq-topic", self.topics[2], "--group-id", f"g-{tag}", "--log-level", "WARNING",
            "--metrics-port", str(self.metrics_port),
            *extra,
        ], self.log, cwd=ROOT)


def _create_topics(bootstrap: str, names: Sequence[str]) -> None:
    from kafka import KafkaAdminClient

    from harness.broker import create_topics

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="sd-bench")
    try:
        create_topics(admin, dict.fromkeys(names, 1))
    finally:
        admin.close()


def _verdict_reader(bootstrap: str, topic: str) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                         enable_auto_commit=False, group_id=None, fetch_max_wait_ms=20,
                         max_poll_records=5000)


def _read_verdicts(reader: Any, want: int, timeout_s: float,
                   on_record: Callable[[float, dict[str, Any], int], None]) -> int:
    """Calls ``on_record(read time, verdict, verdict record's CreateTime ms)`` per verdict."""
    got = 0
    deadline = time.time() + timeout_s
    while got < want and time.time() < deadline:
        batches = reader.poll(timeout_ms=50)
        now = time.time()
        for recs in batches.values():
            for r in recs:
                on_record(now, json.loads(r.value), r.timestamp)
                got += 1
    return got


def _stamp(stamps: list[float], now: float, _verdict: Any, _ts: Any) -> None:
    stamps.append(now)


def _stage_histograms(port: int) -> dict[str, dict[str, float]]:
    """The consumer's per-checkpoint stage timings from its /metrics: count, mean and the
    share of checkpoints slower than 10 and 25 ms (Prometheus cumulative buckets)."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, dict[str, float]] = {}
    for m in re.finditer(r'streamdedup_stage_seconds_bucket\{le="([^"]+)",stage="(\w+)"\} (\S+)',
                         text):
        out.setdefault(m.group(2), {})[m.group(1)] = float(m.group(3))
    stats: dict[str, dict[str, float]] = {}
    for stage, buckets in out.items():
        total = buckets.get("+Inf", 0.0)
        if not total:
            continue
        s = re.search(rf'streamdedup_stage_seconds_sum\{{stage="{stage}"\}} (\S+)', text)
        stats[stage] = {
            "count": total,
            "mean_ms": 1000 * float(s.group(1)) / total if s else float("nan"),
            "over_10ms": 1 - buckets.get("0.01", 0.0) / total,
            "over_25ms": 1 - buckets.get("0.025", 0.0) / total,
        }
    return stats


def cmd_e2e(args: argparse.Namespace) -> None:
    from kafka import KafkaProducer

    from harness.broker import LocalBroker

    info = machine()
    settings = settings_for(args.preset)
    base = load_docs(args.dump, settings.text_fields)
    copies = -(-args.messages // len(base))
    stream = repeat_docs(base, copies)[: args.messages]
    payloads = [_message(d, d.id) for d in stream]
    work = Path(tempfile.mkdtemp(prefix="sd-e2e-"))
    broker = LocalBroker(work / "broker", die_with_parent=True, startup_timeout=180.0)
    results: dict[str, Any] = {"throughput": [], "latency": {}}
    try:
        bootstrap = broker.start()
        print(f"broker on {bootstrap}", file=sys.stderr)
        for run in range(args.warmup + args.repeats if args.repeats else 0):
            tag = f"tp{run}"
            cons = Consumer(bootstrap, tag, work, args.preset)
            _create_topics(bootstrap, cons.topics)
            producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20,
                                     batch_size=1 << 18, max_request_size=1 << 22)
            t0 = time.perf_counter()
            for p in payloads:
                producer.send(cons.topics[0], p)
            producer.flush()
            produce_s = time.perf_counter() - t0
            producer.close()
            reader = _verdict_reader(bootstrap, cons.topics[1])
            stamps: list[float] = []
            start = time.time()
            cons.start()
            got = _read_verdicts(reader, len(payloads), args.timeout,
                                 functools.partial(_stamp, stamps))
            rc = cons.stop()
            reader.close()
            row: dict[str, Any] = {
                "messages": len(payloads), "verdicts": got, "produce_s": produce_s,
                "produce_per_s": len(payloads) / produce_s,
                "consume_wall_s": stamps[-1] - start if stamps else None,
                "first_to_last_s": stamps[-1] - stamps[0] if stamps else None,
                "exit_code": rc,
            }
            row["docs_per_s_incl_startup"] = got / row["consume_wall_s"] if stamps else 0.0
            row["docs_per_s"] = (got - 1) / row["first_to_last_s"] if got > 1 else 0.0
            print(f"  throughput run {run}: {json.dumps(row)}", file=sys.stderr, flush=True)
            if run >= args.warmup:
                results["throughput"].append(row)
            shutil.rmtree(cons.store, ignore_errors=True)
        for rate in [float(r) for r in args.rates.split(",")]:
            # Settings compared alternate run by run, so that a broker warming up or another
            # job on the machine does not favour whichever goes last.
            for run in range(args.latency_repeats):
                for interval in args.commit_intervals.split(","):
                    key = f"{rate:g}/s, commit interval {interval}"
                    tag = f"lat{int(rate)}-{interval.replace('.', '')}-{run}"
                    row = _latency_run(bootstrap, tag, work, args, base, rate, interval)
                    results["latency"].setdefault(key, []).append(row)
                    print(f"  {key} run {run}: {json.dumps(row)}", file=sys.stderr, flush=True)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)

    tp = results["throughput"]
    parts = ["```", header(args, info), "```", ""]
    if tp:
        med = {k: statistics.median(r[k] for r in tp)
               for k in ("produce_per_s", "docs_per_s", "docs_per_s_incl_startup")}
        rows = [
            ["produce (1 producer, acks=all, linger 20 ms)", fmt_rate(med["produce_per_s"]),
             " / ".join(fmt_rate(r["produce_per_s"]) for r in tp)],
            ["consumer throughput, first to last verdict", fmt_rate(med["docs_per_s"]),
             " / ".join(fmt_rate(r["docs_per_s"]) for r in tp)],
            ["consumer throughput incl. start-up", fmt_rate(med["docs_per_s_incl_startup"]),
             " / ".join(fmt_rate(r["docs_per_s_incl_startup"]) for r in tp)],
        ]
        parts += [
            f"Local KRaft broker (Maven jars, one node, loopback), one partition; consumer = "
            f"`python -m streamdedup run --preset {args.preset}` as a subprocess with a fresh "
            f"SQLite store. Throughput: {len(payloads):,} messages ({copies} copies of the dump, "
            f"unique ids) produced first, then consumed; medians of {args.repeats} runs after "
            f"{args.warmup} warm-up.",
            "",
            md_table(["measure", "median msgs/s", "runs"], rows),
            "",
        ]
    lat_rows = []
    split_rows = []
    for key, runs in results["latency"].items():
        med = {q: statistics.median(r[q] for r in runs) for q in ("p50", "p95", "p99", "max")}
        lat_rows.append([key, f"{runs[0]['sent']:,}", f"{med['p50']:.1f}", f"{med['p95']:.1f}",
                         f"{med['p99']:.1f}", f"{med['max']:.0f}",
                         " / ".join(f"{r['p99']:.0f}" for r in runs),
                         f"{statistics.median(r['achieved_rate'] for r in runs):,.0f}"])
        for stage in ("detect", "store_commit", "produce_flush", "offset_commit"):
            st = [r["stages"].get(stage) for r in runs if r["stages"].get(stage)]
            if st:
                split_rows.append([
                    key, stage, f"{statistics.median(x['count'] for x in st):,.0f}",
                    f"{statistics.median(x['mean_ms'] for x in st):.2f}",
                    f"{100 * statistics.median(x['over_10ms'] for x in st):.1f}",
                    f"{100 * statistics.median(x['over_25ms'] for x in st):.2f}"])
        split_rows.append([
            key, "input sent -> verdict sent (p50 / p99 ms)", "",
            f"{statistics.median(r['to_verdict_sent_p50'] for r in runs):.1f} / "
            f"{statistics.median(r['to_verdict_sent_p99'] for r in runs):.1f}", "", ""])
    md = "\n".join([
        *parts,
        "Latency = time the verdict is read from the output topic - the input record's "
        "timestamp (CreateTime, set when the paced producer sends it). Paced producer in a "
        f"child process, {args.latency_seconds:g} s per run; medians over "
        f"{args.latency_repeats} runs of each percentile.",
        "",
        md_table(["offered rate, consumer commit interval", "messages", "p50 ms", "p95 ms",
                  "p99 ms", "max ms", "p99 per run", "achieved send rate"], lat_rows),
        "",
        "p99 ms of the inputs sent in each second of the run (first run of each): a start-up "
        "backlog shows as a few slow first seconds, queueing as a steady tail.",
        "",
        md_table(["offered rate, consumer commit interval", "p99 ms by second"],
                 [[key, " ".join("-" if x is None else f"{x:.0f}"
                                 for x in runs[0].get("p99_by_second", []))]
                  for key, runs in results["latency"].items()]),
        "",
        "Where the latency goes, from the consumer's own `/metrics` (per checkpoint, medians "
        "over runs) and from the verdict record's CreateTime (set when the consumer sends it, "
        "after the store commit):",
        "",
        md_table(["run", "stage", "checkpoints", "mean ms", "% > 10 ms", "% > 25 ms"],
                 split_rows),
    ])
    save(args, "e2e", {"command": args.command_line, "machine": info, **results}, md)


def _latency_run(bootstrap: str, tag: str, work: Path, args: argparse.Namespace,
                 stream: list[Document], rate: float, interval: str) -> dict[str, Any]:
    extra = [] if interval == "default" else ["--commit-interval-s", interval]
    cons = Consumer(bootstrap, tag, work, args.preset, extra)
    _create_topics(bootstrap, cons.topics)
    reader = _verdict_reader(bootstrap, cons.topics[1])
    cons.start()
    try:
        from kafka import KafkaProducer

        warm = KafkaProducer(bootstrap_servers=bootstrap)
        for i in range(20):
            warm.send(cons.topics[0], _message(stream[i], f"warm-{i}"))
        warm.flush()
        warm.close()
        if _read_verdicts(reader, 20, 120, lambda _n, _v, _t: None) < 20:
            raise RuntimeError(f"consumer {tag} did not answer; see {cons.log}")
        n = int(rate * args.latency_seconds)
        payloads = [_message(stream[(i + 20) % len(stream)], f"p-{i}") for i in range(n)]
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(1) as pool:
            start_ms = (time.time() + 2.0) * 1000
            pending = pool.apply_async(
                _pace, (bootstrap, cons.topics[0], payloads, rate, start_ms / 1000))
            lat: list[float] = []
            inside: list[float] = []  # input CreateTime -> verdict sent (after store commit)
            second: list[int] = []  # second of the run the input was sent in

            def on(now: float, v: dict[str, Any], verdict_ts: int) -> None:
                if v.get("id", "").startswith("p-"):
                    lat.append(now * 1000 - v["source"]["timestamp_ms"])
                    inside.append(verdict_ts - v["source"]["timestamp_ms"])
                    second.append(int((v["source"]["timestamp_ms"] - start_ms) // 1000))

            _read_verdicts(reader, n, args.latency_seconds + 120, on)
            t0, t1 = pending.get(timeout=60)
        stages = _stage_histograms(cons.metrics_port)
    finally:
        rc = cons.stop()
        reader.close()
        shutil.rmtree(cons.store, ignore_errors=True)
    arr = np.array(lat)
    ins = np.array(inside)
    sec = np.array(second)
    return {
        "sent": n, "received": len(lat), "achieved_rate": n / (t1 - t0), "exit_code": rc,
        "p50": float(np.percentile(arr, 50)), "p95": float(np.percentile(arr, 95)),
        "p99": float(np.percentile(arr, 99)), "max": float(arr.max()),
        "to_verdict_sent_p50": float(np.percentile(ins, 50)),
        "to_verdict_sent_p99": float(np.percentile(ins, 99)),
        # Is the tail a start-up backlog or steady queueing? p99 of each second's inputs.
        "p99_by_second": [round(float(np.percentile(arr[sec == i], 99)), 1)
                          if (sec == i).any() else None
                          for i in range(int(sec.min()), int(sec.max()) + 1)],
        "stages": stages,
    }


# --------------------------------------------------------------------------- growth
def _rss_mib() -> tuple[float, float]:
    """(current, peak) resident set size of this process, MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        import psutil

        cur = psutil.Process().memory_info().rss / 2**20
    except ImportError:
        cur = float("nan")
    return cur, peak


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _timed_batches(detector: Detector, batches: Sequence[list[Document]]) -> list[float]:
    """Seconds per document of each batch: detector + commit, as the consumer runs them."""
    out = []
    for docs in batches:
        t0 = time.perf_counter()
        detector.process_many(docs)
        detector.store.commit()
        out.append((time.perf_counter() - t0) / len(docs))
    return out


def cmd_growth(args: argparse.Namespace) -> None:
    """Index generated ads up to the largest size; at each size, time windows of batches on
    the big store alternately with windows on a copy of the store as it was at the first
    size (the baseline), so both sides of each ratio run minutes apart at most, on the same
    machine state (measured 13 minutes apart, the 10k cost alone moved 15 % between runs)."""
    from harness.generator import Generator, learn

    info = machine()
    settings = settings_for(args.preset)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    base_n, batch, window = sizes[0], BATCH, args.window
    gen = Generator(learn(args.dump), args.seed, dup_share=args.dup_share)
    core = new_core(settings, tmp_root=args.tmp)
    sketcher = core.detector.sketcher
    store_dir = Path(core.tmp.name) if core.tmp else Path(".")
    work = Path(tempfile.mkdtemp(prefix="sd-growth-", dir=args.tmp))
    snapshot = work / "baseline"
    base_batches: list[list[Document]] = []
    per_doc: list[float] = []  # seconds per document of every batch of the big store
    points: list[dict[str, Any]] = []
    flagged = {"exact": [0, 0], "edited": [0, 0]}
    started = time.perf_counter()
    done = 0
    stopped_early = None

    def next_batch() -> list[Document]:
        ads = list(gen.ads(batch))
        for a in ads:
            if a["repost_of"]:
                flagged["edited" if a["edits"] else "exact"][1] += 1
        return [Document(a["id"], a) for a in ads]

    def feed(docs: list[Document]) -> float:
        nonlocal done
        t0 = time.perf_counter()
        verdicts = core.detector.process_many(docs)
        core.store.commit()
        dt = (time.perf_counter() - t0) / len(docs)
        for d, v in zip(docs, verdicts, strict=True):
            if d.fields["repost_of"]:
                flagged["edited" if d.fields["edits"] else "exact"][0] += v.duplicate
        done += len(docs)
        per_doc.append(dt)
        return dt

    def baseline_window() -> float:
        """Median s/doc of ``window`` batches on a fresh copy of the store at ``base_n``
        (one warm-up batch first: the copy opens with cold caches)."""
        copy = work / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(snapshot, copy)
        store = open_store("sqlite", str(copy), sketcher.params())
        try:
            times = _timed_batches(Detector(settings, store, sketcher), base_batches)
        finally:
            store.close()
            shutil.rmtree(copy, ignore_errors=True)
        return statistics.median(times[1:])

    try:
        while done < sizes[-1]:
            feed(next_batch())
            if done == base_n:
                # The baseline: the store as it is now, and the stream that follows it.
                core.store.close()
                shutil.copytree(store_dir, snapshot)
                core.store = core.detector.store = open_store(
                    "sqlite", str(store_dir), sketcher.params())
                base_batches = [next_batch() for _ in range(window + 1)]
            if done in sizes:
                cur, peak = _rss_mib()
                db = _dir_bytes(store_dir)
                point: dict[str, Any] = {
                    "docs": done, "elapsed_s": time.perf_counter() - started,
                    "store_bytes": db, "store_bytes_per_doc": db / done,
                    "rss_mib": cur, "peak_rss_mib": peak,
                    "continuous_ms": 1000 * statistics.median(
                        per_doc[-max(5, min(20, done // batch // 2)):]),
                }
                rounds: list[dict[str, Any]] = []
                for _ in range(args.rounds):
                    big = 1000 * statistics.median(
                        [feed(next_batch()) for _ in range(window)]) if done > base_n else None
                    small = 1000 * baseline_window()
                    rounds.append({"big_ms": big, "baseline_ms": small})
                point["rounds"] = rounds
                smalls = [r["baseline_ms"] for r in rounds]
                point["baseline_ms"] = statistics.median(smalls)
                if rounds[0]["big_ms"] is not None:
                    bigs = [r["big_ms"] for r in rounds]
                    point["per_doc_ms"] = statistics.median(bigs)
                    point["ratio"] = statistics.median(b / s for b, s in zip(bigs, smalls,
                                                                             strict=True))
                else:
                    point["per_doc_ms"], point["ratio"] = point["baseline_ms"], 1.0
                points.append(point)
                print(f"  {json.dumps(point)}", file=sys.stderr, flush=True)
            if done == base_n:
                for docs in base_batches:  # the big store takes the same stream, as ever
                    feed(docs)
            elapsed_min = (time.perf_counter() - started) / 60
            if elapsed_min > args.max_minutes and done < sizes[-1]:
                stopped_early = f"stopped at {done:,} docs after {elapsed_min:.1f} min"
                print(f"  {stopped_early}", file=sys.stderr)
                break
        # Opening a big store rebuilds the in-memory bucket index from its log: time it.
        core.store.close()
        core.store = core.detector.store = None  # type: ignore[assignment]  # as a restart
        gc.collect()
        t0 = time.perf_counter()
        core.store = open_store("sqlite", str(store_dir), sketcher.params())
        reopen_s = time.perf_counter() - t0
        reopen_peak = _rss_mib()[1]
        print(f"  reopen {reopen_s:.1f} s, peak RSS {reopen_peak:.0f} MiB", file=sys.stderr)
    finally:
        core.close()
        shutil.rmtree(work, ignore_errors=True)
    rows = [[f"{p['docs']:,}", f"{p['per_doc_ms']:.3f}", f"{p['baseline_ms']:.3f}",
             f"**{p['ratio']:.2f}x**" if p["docs"] > base_n else "1 (baseline)",
             " / ".join(f"{r['big_ms'] / r['baseline_ms']:.2f}" for r in p["rounds"]
                        if r["big_ms"] is not None) or "-",
             f"{p['continuous_ms']:.3f}",
             f"{p['store_bytes_per_doc']:,.0f}", f"{p['peak_rss_mib']:,.0f}",
             f"{p['elapsed_s'] / 60:.1f}"] for p in points]
    share = {k: f"{v[0]:,}/{v[1]:,}" for k, v in flagged.items()}
    md = "\n".join([
        "```", header(args, info), "```", "",
        f"Generated ads (seed {args.seed}, repost share {args.dup_share}, half of reposts exact), "
        f"preset {args.preset}, one SQLite store, batches of {batch} with a commit each; "
        "cost = detector + commit seconds per document, generation outside the clock. "
        f"At each size, {args.rounds} rounds of: {window} batches on the big store (its "
        f"median), then the same {window} batches of the stream after {base_n:,} on a fresh "
        f"copy of the store as it was at {base_n:,} (the baseline; one warm-up batch "
        "first). Ratio = median over rounds of big / baseline, so both sides of each ratio "
        "ran within seconds of each other. \"Continuous\" = median of the last batches "
        "before the size was reached, as earlier versions of this benchmark reported. "
        "Store size = all files in the store directory (database + WAL). One build.",
        "",
        md_table(["indexed docs", "ms/doc", f"baseline ms/doc ({base_n:,})",
                  "ratio (median)", "ratio per round", "continuous ms/doc",
                  "store bytes/doc", "peak RSS MiB", "elapsed min"], rows),
        "",
        f"Reposts flagged as duplicates: exact {share['exact']}, edited {share['edited']}."
        + (f" {stopped_early}." if stopped_early else ""),
        "",
        f"Reopening the store at {done:,} documents (the SQLite store rebuilds its in-memory "
        f"bucket index from the log) took {reopen_s:.1f} s; peak RSS of the process after "
        f"it: {reopen_peak:,.0f} MiB.",
    ])
    save(args, "growth", {"command": args.command_line, "machine": info, "points": points,
                          "flagged": flagged, "stopped_early": stopped_early,
                          "reopen_s": reopen_s, "reopen_peak_rss_mib": reopen_peak}, md)


# --------------------------------------------------------------------------- hot bucket
def _variant_suffix(i: int) -> str:
    """A distinct short word per variant (letters only: the normalizer drops digits)."""
    letters = "bcdfglmnprstvz"
    return "rif" + letters[i // len(letters) % len(letters)] + letters[i % len(letters)] + "o"


def cmd_hotbucket(args: argparse.Namespace) -> None:
    from harness.generator import Generator, learn

    info = machine()
    settings = settings_for(args.preset)
    gen = Generator(learn(args.dump), args.seed, dup_share=0.0)
    ad = next(a for a in gen.ads(1000) if 500 <= len(a["description"]) <= 900)
    cases = {
        "one identical text": [ad["description"]],
        f"{args.variants} variants": [f"{ad['description']}\nCodice {_variant_suffix(i)}"
                                      for i in range(args.variants)],
    }
    step = 100
    results: dict[str, Any] = {}
    rows = []
    for name, texts in cases.items():
        docs = [Document(f"hot-{i}", {"title": ad["title"], "description": texts[i % len(texts)]})
                for i in range(args.arrivals)]

        def run(core: CoreRun, docs: list[Document] = docs) -> list[float]:
            per: list[float] = []
            for i in range(0, len(docs), step):
                t0 = time.perf_counter()
                core.detector.process_many(docs[i : i + step])
                core.store.commit()
                per.append(time.perf_counter() - t0)
            return per

        t = measure(run, lambda: new_core(settings), lambda c: c.close(),
                    repeats=args.repeats, warmup=args.warmup, label=name)
        k = 1000 // step
        ratios = [sum(p[-k:]) / sum(p[:k]) for p in t.results]
        firsts = [sum(p[:k]) for p in t.results]
        lasts = [sum(p[-k:]) for p in t.results]
        results[name] = {"runs_s": t.runs, "first_1000_s": firsts, "last_1000_s": lasts,
                         "ratios": ratios}
        rows.append([name, f"{args.arrivals:,}", f"{statistics.median(firsts):.3f}",
                     f"{statistics.median(lasts):.3f}",  # s per 1,000 docs = ms per doc
                     f"**{statistics.median(ratios):.2f}x**",
                     " / ".join(f"{r:.2f}" for r in ratios),
                     fmt_rate(args.arrivals / t.median)])
    md = "\n".join([
        "```", header(args, info), "```", "",
        f"Preset {args.preset}, SQLite store; a generated ad of {len(ad['description'])} "
        f"characters; variants append one distinct word. Documents in batches of {step} with "
        f"a commit each; medians of {args.repeats} runs after {args.warmup} warm-up.",
        "",
        md_table(["case", "arrivals", "first 1,000: ms/doc", "last 1,000: ms/doc",
                  "last/first", "ratio per run", "docs/s overall"], rows),
    ])
    save(args, "hotbucket", {"command": args.command_line, "machine": info, **results}, md)


# --------------------------------------------------------------------------- profile
def cmd_profile(args: argparse.Namespace) -> None:
    from pyinstrument import Profiler
    from pyinstrument.renderers import ConsoleRenderer

    info = machine()
    settings = settings_for(args.preset)
    docs = repeat_docs(load_docs(args.dump, settings.text_fields), args.copies)
    run_core(new_core(settings), docs[:2000])  # warm-up: imports, stemmer, caches of numpy
    core = new_core(settings, text_cache=0 if args.no_text_cache else None)
    profiler = Profiler(interval=0.0005)
    profiler.start()
    start = time.perf_counter()
    run_core(core, docs)
    elapsed = time.perf_counter() - start
    profiler.stop()
    core.close()
    session = profiler.last_session
    assert session is not None
    flat = _self_times(session, args.top)
    tree = ConsoleRenderer(time="percent_of_total", unicode=False, color=False,
                           show_all=False).render(session)
    top = flat
    name = "profile" + ("-nocache" if args.no_text_cache else "")
    out = Path(args.json).with_suffix(".html") if args.json else DEFAULT_OUT / f"{name}.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(profiler.output_html(), encoding="utf-8")
    (out.with_suffix(".txt")).write_text(tree, encoding="utf-8")
    md = "\n".join([
        "```", header(args, info), "```", "",
        f"pyinstrument (0.5 ms sampling) over the whole core, preset {args.preset}, SQLite, "
        f"{len(docs):,} docs ({args.copies} copies), text cache "
        f"{'off' if args.no_text_cache else 'as shipped'}: {elapsed:.2f} s under the profiler "
        f"({len(docs) / elapsed:,.0f} docs/s). Self time per function, top {args.top}:",
        "",
        "```", top, "```",
    ])
    print(f"call tree: {out.with_suffix('.txt')}; HTML: {out}", file=sys.stderr)
    save(args, name,
         {"command": args.command_line, "machine": info, "elapsed_s": elapsed,
          "flat": flat, "tree": tree}, md)


def _self_times(session: Any, top: int) -> str:
    """Self time per function (file:line), summed over every call path, as a table: the
    flat view that says which function to make faster."""
    root = session.root_frame()
    total = root.time
    acc: dict[tuple[str, str], float] = {}
    stack = [root]
    while stack:
        frame = stack.pop()
        stack.extend(frame.children)
        if frame.identifier.startswith("[self]"):
            continue
        key = (frame.function, f"{frame.file_path_short}:{frame.line_no}")
        acc[key] = acc.get(key, 0.0) + frame.total_self_time
    rows = sorted(acc.items(), key=lambda kv: -kv[1])[:top]
    lines = [f"{'self %':>7} {'self s':>7}  function  (file:line)"]
    lines += [f"{100 * t / total:6.1f}% {t:7.3f}  {fn}  ({where})" for (fn, where), t in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------- CLI
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", type=Path, default=DEFAULT_DUMP)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--json", default=None, help="results file [default: out/bench/NAME.json]")
    parser.add_argument("--update-md", action="store_true",
                        help="rewrite this benchmark's section of BENCHMARKS.md")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("stages", help="docs/s of each stage and of the whole core")
    p.add_argument("--presets", default="reference,default")
    p.add_argument("--copies", type=int, default=10)
    p.set_defaults(func=cmd_stages)

    p = sub.add_parser("compare", help="streamdedup vs datasketch (memory, Redis) vs the study")
    p.add_argument("--copies", type=int, default=10)
    p.add_argument("--redis", choices=["auto", "off"], default="auto")
    p.add_argument("--ds-limit", type=int, default=0, help="datasketch shortcut: first N docs")
    p.add_argument("--naive-limit", type=int, default=3127,
                   help="plain datasketch (quadratic on hot buckets): first N docs")
    p.add_argument("--redis-limit", type=int, default=5000)
    p.add_argument("--redis-plain-limit", type=int, default=3127)
    p.add_argument("--study-limit", type=int, default=1000)
    p.add_argument("--slow-repeats", type=int, default=5,
                   help="runs of the slow competitors (plain datasketch, Redis plain, study)")
    p.add_argument("--only", default="shortcut,plain,redis,redis-plain,study",
                   help="competitors to run (comma-separated)")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("e2e", help="through a real local broker and the consumer process")
    p.add_argument("--preset", default="reference")
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--rates", default="500,2000")
    p.add_argument("--commit-intervals", default="default",
                   help="consumer --commit-interval-s values tried for latency "
                        "('default' = the flag not given)")
    p.add_argument("--latency-seconds", type=float, default=20.0)
    p.add_argument("--latency-repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=600.0)
    p.set_defaults(func=cmd_e2e)

    p = sub.add_parser("growth", help="per-document cost and store size as the index grows")
    p.add_argument("--preset", default="default")
    p.add_argument("--sizes", default="10000,100000,1000000")
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--dup-share", type=float, default=0.3)
    p.add_argument("--max-minutes", type=float, default=45.0)
    p.add_argument("--rounds", type=int, default=5,
                   help="big-store / baseline windows alternated at each size")
    p.add_argument("--window", type=int, default=10, help="batches per timed window")
    p.add_argument("--tmp", default=None, help="parent directory of the store")
    p.set_defaults(func=cmd_growth)

    p = sub.add_parser("hotbucket", help="many arrivals of one text or of a few variants")
    p.add_argument("--preset", default="default")
    p.add_argument("--arrivals", type=int, default=20_000)
    p.add_argument("--variants", type=int, default=50)
    p.add_argument("--seed", type=int, default=5)
    p.set_defaults(func=cmd_hotbucket)

    import bench_backfill
    import bench_fresh
    import bench_group
    import bench_retention

    bench_group.add_parser(sub)
    bench_backfill.add_parser(sub)
    bench_retention.add_parser(sub)
    bench_fresh.add_parser(sub)
    bench_fresh.add_hotsoak_parser(sub)
    bench_fresh.add_reopen_parser(sub)

    p = sub.add_parser("profile", help="pyinstrument over the whole core")
    p.add_argument("--preset", default="reference")
    p.add_argument("--copies", type=int, default=10)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--no-text-cache", action="store_true")
    p.set_defaults(func=cmd_profile)

    args = parser.parse_args(argv)
    args.command_line = "scripts/bench.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
