#!/usr/bin/env python3
"""The benchmarks' one entry point, and what they share: the machine and commit header,
timing, Markdown tables, the core on a fresh store; ``stages`` and ``profile`` live here, the
others in ``bench_*.py`` beside it.

Why one entry point: every figure must be reproducible from the line that printed it, so each
subcommand prints (and stores in its JSON) the command line, the machine (lscpu model, cores),
the commit, and for every measurement the median of ``--repeats`` runs after ``--warmup``
runs, with the individual runs, so noise is visible. Ratios are always against a baseline
measured in the same invocation. ``--update-md`` rewrites the matching generated section of
BENCHMARKS.md (between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``); the prose around
the sections is written by hand.

The machine has two cores: run one benchmark at a time.

    scripts/bench.py stages    [--dump PATH] [--copies 10]
    scripts/bench.py compare   [--copies 10] [--redis auto|off]       (bench_compare.py)
    scripts/bench.py e2e       [--messages 100000] [--rates 500,2000] (bench_e2e.py)
    scripts/bench.py growth    [--sizes 10000,100000,1000000]         (bench_growth.py)
    scripts/bench.py hotbucket [--arrivals 20000] [--variants 50]     (bench_growth.py)
    scripts/bench.py profile   [--preset reference] [--copies 10]
    scripts/bench.py group     [--messages 20000] [--members 1,2,4]   (bench_group.py)
    scripts/bench.py backfill  [--messages 100000]                    (bench_backfill.py)
    scripts/bench.py retention [--messages 100000] [--window 7d] [--backend redis]
                                                                      (bench_retention.py)
    scripts/bench.py fresh     [--messages 50000] [--before REV]      (bench_fresh.py)
    scripts/bench.py hotsoak   [--messages 100000]                    (bench_fresh.py)
    scripts/bench.py reopen    --store DIR                            (bench_fresh.py)
    scripts/bench.py scrapy    [--items 5000] [--before REV]          (bench_scrapy.py)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import inspect
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from harness.chaos.resources import dir_bytes  # noqa: E402
from streamdedup.core.document import Document  # noqa: E402
from streamdedup.core.jaccard import jaccard_many, size_bounds  # noqa: E402
from streamdedup.core.shingles import set_fingerprint, shingle  # noqa: E402
from streamdedup.core.sketch import Sketcher  # noqa: E402
from streamdedup.core.text import compose_text  # noqa: E402
from streamdedup.detection.detector import Detector  # noqa: E402
from streamdedup.errors import MessageError  # noqa: E402
from streamdedup.replay.config import BATCH  # noqa: E402  (as check and backfill batch)
from streamdedup.replay.dump import read_dump  # noqa: E402
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
_SUMMARY = re.compile(r"(\d+) documents, (\d+) duplicates")


def timed_check(ads: Path, store: Path, extra: list[str], cwd: Path,
                redis_url: str | None = None) -> dict[str, Any]:
    """One whole `check` command into a new store: the directory ``store``, or with
    ``redis_url`` a namespace named after it on that server (its size is not measured)."""
    where = ["--store", str(store)] if redis_url is None else [
        "--store-backend", "redis", "--redis-url", redis_url, "--redis-namespace", store.name]
    argv = [sys.executable, "-m", "streamdedup", "check", str(ads), *where,
            "--out", str(store.with_suffix(".jsonl")), *extra]
    t0 = time.perf_counter()
    run = subprocess.run(argv, capture_output=True, text=True, cwd=cwd,
                         env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})
    wall = time.perf_counter() - t0
    if run.returncode != 0:
        raise RuntimeError(run.stderr[-2000:])
    found = _SUMMARY.search(run.stderr)
    assert found, run.stderr
    size = dir_bytes(store) if redis_url is None else None
    shutil.rmtree(store, ignore_errors=redis_url is not None)
    store.with_suffix(".jsonl").unlink()
    return {"s": wall, "documents": int(found[1]), "duplicates": int(found[2]),
            "store_bytes": size}


def alternated(kinds: Mapping[str, Callable[[int], dict[str, Any]]], repeats: int
               ) -> dict[str, list[dict[str, Any]]]:
    """Each kind's run ``repeats`` times, one kind after the other in turn (so that the
    machine's drift falls on all alike), every other round in reverse order (ABBA: in a fixed
    order, ``check`` at a commit that left its path unchanged measured 0.86x of its parent;
    six ABBA pairs afterwards gave medians of 7.5 against 7.3 s), each run printed as it
    ends."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in kinds}
    for i in range(repeats):
        order = list(kinds.items())
        for name, run in order if i % 2 == 0 else order[::-1]:
            r = run(i)
            print(f"  {name}: run {i + 1}/{repeats} {r['s']:.2f} s "
                  f"({r['documents'] / r['s']:.0f} docs/s)", file=sys.stderr, flush=True)
            runs[name].append(r)
    return runs


@contextlib.contextmanager
def worktree(rev: str, path: Path) -> Iterator[Path | None]:
    """A git worktree of ``rev`` at ``path`` for the block (None when no ``rev`` is given):
    the "before" of a speed-up, run from its own tree."""
    if not rev:
        yield None
        return
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT,
                   check=True, capture_output=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT,
                       capture_output=True)


def median_rates(runs: Mapping[str, list[dict[str, Any]]]) -> dict[str, float]:
    """Each kind's median documents (or items) per second over its runs."""
    return {name: statistics.median(r["documents"] / r["s"] for r in rs)
            for name, rs in runs.items()}


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
            store.add_set(_set_record(sid, i), sh)
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
            built.add_set(_set_record(sid, i), sh)
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


def _set_record(set_id: int, seq: int) -> Any:
    from streamdedup.store import base

    return base.SetRecord(set_id, seq + 1, f"s{seq}", set_id)


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

    import bench_backfill
    import bench_compare
    import bench_e2e
    import bench_fresh
    import bench_group
    import bench_growth
    import bench_retention
    import bench_scrapy

    bench_compare.add_parser(sub)
    bench_e2e.add_parser(sub)
    bench_growth.add_parser(sub)
    bench_group.add_parser(sub)
    bench_backfill.add_parser(sub)
    bench_retention.add_parser(sub)
    bench_fresh.add_parser(sub)
    bench_fresh.add_hotsoak_parser(sub)
    bench_fresh.add_reopen_parser(sub)
    bench_scrapy.add_parser(sub)

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
