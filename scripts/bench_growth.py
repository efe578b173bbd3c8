"""`scripts/bench.py growth` and `hotbucket`: the per-document cost and the store's size as
the index grows, and many arrivals of one text or of a few variants."""

from __future__ import annotations

import argparse
import gc
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import (
    BATCH,
    CoreRun,
    fmt_rate,
    header,
    machine,
    md_table,
    measure,
    new_core,
    save,
    settings_for,
)

from harness.chaos.resources import dir_bytes
from streamdedup.core.document import Document
from streamdedup.detection.detector import Detector
from streamdedup.store import open_store


def _rss_mib() -> tuple[float, float]:
    """(current, peak) resident set size of this process, MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        import psutil

        cur = psutil.Process().memory_info().rss / 2**20
    except ImportError:
        cur = float("nan")
    return cur, peak


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
                core.store = open_store("sqlite", str(store_dir), sketcher.params())
                core.detector = Detector(settings, core.store, sketcher)  # as a restart does
                base_batches = [next_batch() for _ in range(window + 1)]
            if done in sizes:
                cur, peak = _rss_mib()
                db = dir_bytes(store_dir)
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


def add_parser(sub: Any) -> None:
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
