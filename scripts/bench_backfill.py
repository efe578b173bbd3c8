"""``scripts/bench.py backfill``: the Spark backfill against `streamdedup check` (issue 13).

Whole commands, as a user runs them, on the same generated JSONL (``harness/generator.py``,
30 % reposts, half of them edited: fresh content), each into a fresh SQLite store: `check`,
`backfill --engine local`, `backfill --engine spark` on local[1] and local[2]. Medians of
``--repeats`` runs, alternated. The study-style baseline is Spark MLlib's MinHashLSH
``approxSimilarityJoin`` (OR-amplification only) on the first ``--mllib-limit`` ads, timed
from the dataframe to the collected pairs, with our shingles as its features.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import fmt_rate, header, machine, md_table, save

from harness.generator import write_ads

ROOT = Path(__file__).resolve().parent.parent
_SUMMARY = re.compile(r"(\d+) documents, (\d+) duplicates.*?([\d.]+) s,")
_SKETCH = re.compile(r"sketching took ([\d.]+) s")
_PLAN = re.compile(r"pair plan: (\d+) candidate pairs of (\d+) distinct sets, (\d+) verified, "
                   r"(\d+) sets over max_candidates, ([\d.]+) s")
COMMANDS = {
    "check": ["check"],
    "local": ["backfill", "--engine", "local"],
    "spark1": ["backfill", "--engine", "spark", "--master", "local[1]"],
    "spark2": ["backfill", "--engine", "spark", "--master", "local[2]"],
}
NAMES = {"check": "check", "local": "backfill --engine local",
         "spark1": "backfill --engine spark local[1]", "spark2": "backfill --engine spark local[2]"}


def timed(argv: list[str], out: Path) -> dict[str, Any]:
    """One whole command; its verdicts' digest (the backfill must give check's, byte for
    byte) and its phases as it printed them."""
    t0 = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "streamdedup", *argv, "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if run.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed:\n{run.stderr[-2000:]}")
    m = _SUMMARY.search(run.stderr)
    sketch = _SKETCH.search(run.stderr)
    plan = _PLAN.search(run.stderr)
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    out.unlink()
    return {"wall_s": wall, "documents": int(m.group(1)) if m else 0,
            "duplicates": int(m.group(2)) if m else 0,
            "sketch_s": float(sketch.group(1)) if sketch else None,
            "plan": ({"candidate_pairs": int(plan.group(1)), "distinct_sets": int(plan.group(2)),
                      "verified_pairs": int(plan.group(3)), "over_cap": int(plan.group(4)),
                      "seconds": float(plan.group(5))} if plan else None),
            "verdicts_sha256": digest}


def mllib_join(path: Path, limit: int, threshold: float, tables: int) -> dict[str, Any]:
    """MLlib MinHashLSH + approxSimilarityJoin on our shingles (hashed to 2^20 features)."""
    import numpy as np
    from pyspark.ml.feature import MinHashLSH
    from pyspark.ml.linalg import SparseVector
    from pyspark.sql import SparkSession

    from streamdedup.core.sketch import Sketcher
    from streamdedup.settings import build_settings

    sketcher = Sketcher(build_settings("default", env={}))
    rows = []
    with path.open(encoding="utf-8") as fh:
        for i, line in zip(range(limit), fh, strict=False):
            sh = sketcher.shingle_fields(json.loads(line)).shingles
            idx = np.unique((sh % (1 << 20)).astype(np.int64))
            if idx.size:
                rows.append((i, SparseVector(1 << 20, idx.tolist(), [1.0] * idx.size)))
    spark = (SparkSession.builder.master("local[2]").appName("mllib-baseline")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    try:
        t0 = time.perf_counter()
        df = spark.createDataFrame(rows, ["id", "features"])
        model = MinHashLSH(inputCol="features", outputCol="hashes", numHashTables=tables,
                           seed=1).fit(df)
        pairs = model.approxSimilarityJoin(df, df, 1.0 - threshold, distCol="d")
        found = pairs.filter("datasetA.id < datasetB.id").count()
        return {"docs": len(rows), "pairs": found, "seconds": time.perf_counter() - t0}
    finally:
        spark.stop()


def cmd_backfill(args: argparse.Namespace) -> None:
    info = machine()
    work = Path(tempfile.mkdtemp(prefix="sd-backfill-"))
    ads = work / "ads.jsonl"
    write_ads(args.dump, args.messages, args.seed, ads)
    plans = {NAMES[c]: [COMMANDS[c][0], str(ads), *COMMANDS[c][1:]] for c in args.commands}
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in plans}
    for run in range(args.repeats):
        for name, argv in plans.items():
            store = work / f"store-{run}-{len(results[name])}-{name.split()[-1]}"
            out = work / f"{store.name}.jsonl"
            row = timed([*argv, "--preset", "default", "--store", str(store)], out)
            shutil.rmtree(store, ignore_errors=True)
            results[name].append(row)
            print(f"  {name} run {run}: {json.dumps(row)}", file=sys.stderr, flush=True)
    digests = {r["verdicts_sha256"] for runs in results.values() for r in runs}
    mllib = [mllib_join(ads, args.mllib_limit, 0.8, args.mllib_tables)
             for _ in range(max(1, args.repeats // 2))] if args.mllib_limit else []
    base = statistics.median(r["wall_s"] for r in results[next(iter(results))])
    rows = []
    for name, runs in results.items():
        wall = statistics.median(r["wall_s"] for r in runs)
        sketches = [r["sketch_s"] for r in runs if r["sketch_s"] is not None]
        plans_s = [r["plan"]["seconds"] for r in runs if r["plan"]]
        rows.append([name, f"{wall:.1f}", fmt_rate(runs[0]["documents"] / wall),
                     f"{base / wall:.2f}x",
                     f"{statistics.median(sketches):.1f}" if sketches else "",
                     f"{statistics.median(plans_s):.1f}" if plans_s else "",
                     " / ".join(f"{r['wall_s']:.1f}" for r in runs)])
    plan = next((r["plan"] for runs in results.values() for r in runs if r["plan"]), None)
    lines = [
        "```", header(args, info), "```", "",
        f"{args.messages:,} generated ads (seed {args.seed}, 30 % reposts) as JSONL, preset "
        f"`default`, each command into a fresh SQLite store, whole command including start-up "
        f"(Spark's JVM: ~5-10 s). Medians of {args.repeats} run(s), alternated. Verdict files "
        f"of every run: {'identical, byte for byte' if len(digests) == 1 else 'DIFFERENT'} "
        f"({len(digests)} distinct digest(s)).", "",
        md_table(["command", "seconds", "docs/s", "vs " + next(iter(results)),
                  "sketch phase s", "pair phase s", "runs"], rows),
    ]
    if plan:
        lines += ["", f"Pair plan: {plan['candidate_pairs']:,} candidate pairs among "
                      f"{plan['distinct_sets']:,} distinct sets, {plan['verified_pairs']:,} "
                      f"verified, {plan['over_cap']} sets over max_candidates."]
    if mllib:
        m = statistics.median(x["seconds"] for x in mllib)
        mllib_runs = " / ".join(f"{x['seconds']:.1f}" for x in mllib)
        lines += ["", f"Study-style baseline: MLlib `MinHashLSH` ({args.mllib_tables} hash "
                      f"tables) + `approxSimilarityJoin` at Jaccard distance 0.2 on the first "
                      f"{mllib[0]['docs']:,} ads, local[2]: **{m:.1f} s** "
                      f"({mllib[0]['pairs']:,} pairs; {mllib[0]['docs'] / m:,.0f} docs/s, runs "
                      f"{mllib_runs}), without arrival order, clusters or verdicts."]
    md = "\n".join(lines)
    save(args, args.block, {"command": args.command_line, "machine": info,
                            "results": results, "mllib": mllib}, md)
    shutil.rmtree(work, ignore_errors=True)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("backfill", help="the Spark backfill against check (issue 13)")
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--mllib-limit", type=int, default=5_000)
    p.add_argument("--mllib-tables", type=int, default=5)
    p.add_argument("--commands", nargs="+", choices=list(COMMANDS), default=list(COMMANDS),
                   help="which commands (the first is the baseline of the ratios)")
    p.add_argument("--block", default="backfill",
                   help="the BENCHMARKS.md block to update (e.g. backfill-1m)")
    p.set_defaults(func=cmd_backfill)
