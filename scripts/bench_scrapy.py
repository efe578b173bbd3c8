"""``scripts/bench.py scrapy``: items/s through the Scrapy pipeline into a real broker.

The pipeline (``streamdedup/integrations/scrapy.py``) hands each item on once the broker has
acknowledged it. Here it is given generated ads as Scrapy gives a response's items: up to
``--concurrent`` (Scrapy's ``CONCURRENT_ITEMS``, 100) in flight when ``process_item`` is a
coroutine, one after the other when it is a plain method (the pipeline before the
acknowledgement was awaited). Each run is a child process with the tree under test on its
``PYTHONPATH``, on a local KRaft broker started for the benchmark, into a topic of its own;
``--before REV`` times the pipeline of an older commit from a git worktree, alternated.
Scrapy's own downloading and parsing are not in the time: this is the pipeline's share.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import (
    ROOT,
    alternated,
    fmt_rate,
    header,
    machine,
    md_table,
    median_rates,
    save,
    worktree,
)

from harness.generator import write_ads

# The child: the pipeline of the tree on PYTHONPATH, over the ads, timed; one JSON line out.
_CHILD = """
import asyncio, inspect, json, sys, time
from streamdedup.integrations.scrapy import AnnouncementPipeline
from streamdedup.settings import build_settings
bootstrap, topic, path, concurrent = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with open(path, encoding="utf-8") as fh:
    ads = [json.loads(line) for line in fh]
pipe = AnnouncementPipeline(build_settings(env={}, overrides={
    "bootstrap_servers": bootstrap, "input_topic": topic}))
pipe.open_spider()
t0 = time.perf_counter()
if inspect.iscoroutinefunction(pipe.process_item):
    async def crawl():
        for i in range(0, len(ads), concurrent):
            await asyncio.gather(*map(pipe.process_item, ads[i:i + concurrent]))
    asyncio.run(crawl())
else:
    for ad in ads:
        pipe.process_item(ad)
seconds = time.perf_counter() - t0
pipe.close_spider()
print(json.dumps({"s": seconds, "documents": len(ads), "sent": pipe.sent}))
"""


def timed_pipeline(tree: Path, bootstrap: str, topic: str, ads: Path,
                   concurrent: int) -> dict[str, Any]:
    from harness.broker import create_topics

    create_topics(bootstrap, {topic: 1})
    run = subprocess.run([sys.executable, "-c", _CHILD, bootstrap, topic, str(ads),
                          str(concurrent)], capture_output=True, text=True, cwd=tree,
                         env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})
    if run.returncode != 0:
        raise RuntimeError(run.stderr[-2000:])
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    if result["sent"] != result["documents"]:
        raise RuntimeError(f"{result['documents'] - result['sent']} items not sent: {result}")
    return result


def cmd_scrapy(args: argparse.Namespace) -> None:
    from harness.broker import LocalBroker

    info = machine()
    work = Path(tempfile.mkdtemp(prefix="bench-scrapy-"))
    broker = LocalBroker(work / "broker", die_with_parent=True, startup_timeout=180.0)
    try:
        ads = work / "ads.jsonl"
        write_ads(args.dump, args.items, args.seed, ads)
        bootstrap = broker.start()
        with worktree(args.before, work / "before") as before:
            kinds = {"pipeline": lambda i: timed_pipeline(ROOT, bootstrap, f"new-{i}", ads,
                                                          args.concurrent)}
            if before is not None:
                tree = before
                kinds[f"pipeline @{args.before}"] = lambda i: timed_pipeline(
                    tree, bootstrap, f"old-{i}", ads, args.concurrent)
            runs = alternated(kinds, args.repeats)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    rates = median_rates(runs)
    rows = [[name, f"{rs[-1]['documents']:,}", fmt_rate(rates[name]),
             f"{rates['pipeline'] / rates[name]:.2f}x", ", ".join(f"{r['s']:.2f}" for r in rs)]
            for name, rs in runs.items()]
    md = (f"```\n{header(args, info)}\n```\n\n{args.items:,} generated ads (seed {args.seed}) "
          f"through `AnnouncementPipeline` into a local broker (acks=all), up to "
          f"{args.concurrent} in flight where `process_item` is a coroutine, one by one "
          f"where it is not; medians of {args.repeats} alternated runs.\n\n" + md_table(
              ["what", "items", "items/s", "this commit is faster by", "runs (s)"], rows))
    save(args, "scrapy", {"machine": info, "runs": runs}, md)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("scrapy", help="items/s through the Scrapy pipeline into a broker")
    p.add_argument("--items", type=int, default=5_000)
    p.add_argument("--seed", type=int, default=15)
    p.add_argument("--concurrent", type=int, default=100,
                   help="items in flight at once (Scrapy's CONCURRENT_ITEMS)")
    p.add_argument("--before", default="", help="also time the pipeline at this commit")
    p.set_defaults(func=cmd_scrapy)
