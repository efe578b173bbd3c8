"""``scripts/bench.py retention``: what ``--retention`` costs `streamdedup check` (issue 16).

Whole commands on the same generated JSONL (``harness/generator.py``: fresh content, 30 %
reposts, an ad every 60 s on average, so a window of ``--window`` holds a known number of
ads), each into a fresh SQLite store, alternated: `check` without retention (the baseline),
then with ``--retention WINDOW``. Reported: medians of ``--repeats`` runs, the ratio, the
store's size at the end, and the duplicates each found (the window makes some reposts of
older ads not duplicates). The soak (millions of ads, flat size and memory) is
``python -m harness.soak``; its figures are in BENCHMARKS.md and RELIABILITY.md.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import ROOT, alternated, fmt_rate, header, machine, md_table, save, timed_check

from harness.generator import write_ads


def cmd_retention(args: argparse.Namespace) -> None:
    info = machine()
    work = Path(tempfile.mkdtemp(prefix="bench-retention-"))
    try:
        ads = work / "ads.jsonl"
        write_ads(args.dump, args.messages, args.seed, ads)

        def kind(name: str) -> Callable[[int], dict[str, Any]]:
            extra = [] if name == "off" else ["--retention", name]
            return lambda i: timed_check(ads, work / f"store-{name}-{i}", extra, ROOT)

        runs = alternated({name: kind(name) for name in ("off", args.window)}, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = statistics.median(r["s"] for r in runs["off"])
    rows = []
    for name, rs in runs.items():
        med = statistics.median(r["s"] for r in rs)
        rows.append([f"check{'' if name == 'off' else ' --retention ' + name}",
                     f"{med:.1f}", fmt_rate(args.messages / med), f"{base / med:.2f}x",
                     f"{rs[-1]['store_bytes'] / 2**20:.0f}", rs[-1]["duplicates"],
                     ", ".join(f"{r['s']:.1f}" for r in rs)])
    md = (f"```\n{header(args, info)}\n```\n\n{args.messages:,} generated ads (seed "
          f"{args.seed}, an ad every 60 s on average: a window of {args.window} holds about "
          f"{_window_ads(args.window):,}), whole `check` commands, medians of {args.repeats}, "
          f"alternated.\n\n" + md_table(
              ["command", "median s", "docs/s", "vs no retention", "store MB at the end",
               "duplicates", "runs (s)"], rows))
    save(args, "retention", {"machine": info, "runs": runs}, md)


def _window_ads(window: str) -> int:
    from streamdedup.settings import parse_duration

    return (parse_duration(window) or 0) // 60_500


def add_parser(sub: Any) -> None:
    p = sub.add_parser("retention", help="check with and without --retention (issue 16)")
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--window", default="7d", help="the retention compared with none")
    p.set_defaults(func=cmd_retention)
