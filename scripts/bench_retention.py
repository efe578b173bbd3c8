"""``scripts/bench.py retention``: what ``--retention`` costs `streamdedup check` (issue 16).

Whole commands on the same generated JSONL (``harness/generator.py``: fresh content, 30 %
reposts, an ad every 60 s on average, so a window of ``--window`` holds a known number of
ads), each into a fresh SQLite store (``--backend redis``: a new namespace of a durable
redis-server started here, AOF ``appendfsync always``, as the README asks), alternated:
`check` without retention (the baseline), then with ``--retention WINDOW``. Reported:
medians of ``--repeats`` runs, the ratio, the store's size at the end (SQLite), and the
duplicates each found (the window makes some reposts of older ads not duplicates). The
soak (millions of ads, flat size and memory) is ``python -m harness.soak``; its figures are
in BENCHMARKS.md and RELIABILITY.md.
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
    from harness.redis import RedisServer

    info = machine()
    work = Path(tempfile.mkdtemp(prefix="bench-retention-"))
    server = RedisServer(work / "redis") if args.backend == "redis" else None
    try:
        url = server.run() if server is not None else None
        ads = work / "ads.jsonl"
        write_ads(args.dump, args.messages, args.seed, ads)

        def kind(name: str) -> Callable[[int], dict[str, Any]]:
            extra = [] if name == "off" else ["--retention", name]
            return lambda i: timed_check(ads, work / f"store-{name}-{i}", extra, ROOT, url)

        runs = alternated({name: kind(name) for name in ("off", args.window)}, args.repeats)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    base = statistics.median(r["s"] for r in runs["off"])
    rows = []
    for name, rs in runs.items():
        med = statistics.median(r["s"] for r in rs)
        size = rs[-1]["store_bytes"]
        rows.append([f"check{'' if name == 'off' else ' --retention ' + name}",
                     f"{med:.1f}", fmt_rate(args.messages / med), f"{base / med:.2f}x",
                     "-" if size is None else f"{size / 2**20:.0f}", rs[-1]["duplicates"],
                     ", ".join(f"{r['s']:.1f}" for r in rs)])
    store = ("a new SQLite store each" if args.backend == "sqlite" else
             "a new namespace each of one redis-server (AOF, appendfsync always)")
    md = (f"```\n{header(args, info)}\n```\n\n{args.messages:,} generated ads (seed "
          f"{args.seed}, an ad every 60 s on average: a window of {args.window} holds about "
          f"{_window_ads(args.window):,}), whole `check` commands into {store}, medians of "
          f"{args.repeats}, alternated.\n\n" + md_table(
              ["command", "median s", "docs/s", "vs no retention", "store MB at the end",
               "duplicates", "runs (s)"], rows))
    name = "retention" if args.backend == "sqlite" else f"retention-{args.backend}"
    save(args, name, {"command": args.command_line, "machine": info, "backend": args.backend,
                      "runs": runs}, md)


def _window_ads(window: str) -> int:
    from streamdedup.settings import parse_duration

    return (parse_duration(window) or 0) // 60_500


def add_parser(sub: Any) -> None:
    p = sub.add_parser("retention", help="check with and without --retention (issue 16)")
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--window", default="7d", help="the retention compared with none")
    p.add_argument("--backend", choices=("sqlite", "redis"), default="sqlite",
                   help="redis: a durable redis-server started for the run")
    p.set_defaults(func=cmd_retention)
