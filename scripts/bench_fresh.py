"""``scripts/bench.py fresh``: `streamdedup check` on fresh content (issue 15).

A stream of generated ads (``harness/generator.py``: new texts recombined from the dump's
sentences, 30 % reposts and edited copies) costs what a copy-heavy stream hides: most ads
are new sets to normalize, shingle, sign, probe and store. Measured here, alternated, each
run into a fresh SQLite store:

- ``check``: the whole command as a user runs it (start-up, reading, writing verdicts);
- ``check --no-sketch-ahead``: the same in one process (``--one-process``);
- ``check --minhash multiply-shift``: the same with the signature scheme of older stores;
- ``check @REV`` (``--before REV``): the same command at an older commit, from a git worktree
  (the "before" of a speed-up);
- datasketch 2.x ``MinHashLSH`` in memory, query then insert with exact verification, plain
  and with our exact-set shortcut (``DatasketchRun``), in process on the same documents,
  normalized and shingled by our code (so reading and writing are not in its time).

Reported: medians of ``--repeats`` runs, docs/s, ratios against ``check`` of this commit,
duplicates found, and the store's bytes per ad.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import (
    BATCH,
    ROOT,
    alternated,
    fmt_rate,
    header,
    machine,
    md_table,
    median_rates,
    save,
    settings_for,
    timed_check,
    worktree,
)
from bench_compare import DatasketchRun

from harness.generator import write_ads
from streamdedup.core.document import Document
from streamdedup.core.sketch import Sketcher
from streamdedup.replay.dump import read_dump

_SUMMARY = re.compile(r"(\d+) documents, (\d+) duplicates")


def timed_datasketch(ads: Path, limit: int, exact_first: bool) -> dict[str, Any]:
    settings = settings_for("default")
    docs = [d for _, d in read_dump(ads, None, settings.text_fields)
            if isinstance(d, Document)][:limit]
    ds = DatasketchRun(settings, 25, 5, None, exact_first)  # our chosen 25 x 5 at 128
    t0 = time.perf_counter()
    dups = ds.run(docs)
    return {"s": time.perf_counter() - t0, "documents": len(docs), "duplicates": dups}


def cmd_fresh(args: argparse.Namespace) -> None:
    info = machine()
    work = Path(tempfile.mkdtemp(prefix="bench-fresh-"))
    try:
        ads = work / "ads.jsonl"
        write_ads(args.dump, args.messages, args.seed, ads)
        with worktree(args.before, work / "before") as before:
            kinds: dict[str, Callable[[int], dict[str, Any]]] = {
                "check": lambda i: timed_check(ads, work / f"s-new-{i}", [], ROOT)}
            if args.one_process:
                kinds["check --no-sketch-ahead"] = lambda i: timed_check(
                    ads, work / f"s-one-{i}", ["--no-sketch-ahead"], ROOT)
            if args.old_scheme:
                kinds["check --minhash multiply-shift"] = lambda i: timed_check(
                    ads, work / f"s-ms-{i}", ["--minhash", "multiply-shift"], ROOT)
            if before is not None:
                tree = before
                kinds[f"check @{args.before}"] = lambda i: timed_check(
                    ads, work / f"s-old-{i}", [], tree)
            n_ds = min(args.messages, args.ds_limit)
            if n_ds:
                kinds["datasketch, exact-set shortcut"] = lambda i: timed_datasketch(
                    ads, n_ds, True)
                kinds["datasketch, plain"] = lambda i: timed_datasketch(ads, n_ds, False)
            runs = alternated(kinds, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rates = median_rates(runs)
    rows = []
    for name, rs in runs.items():
        size = rs[-1].get("store_bytes")
        rows.append([name, f"{rs[-1]['documents']:,}", fmt_rate(rates[name]),
                     f"{rates['check'] / rates[name]:.2f}x", rs[-1]["duplicates"],
                     f"{size / rs[-1]['documents']:,.0f}" if size else "",
                     ", ".join(f"{r['s']:.1f}" for r in rs)])
    md = (f"```\n{header(args, info)}\n```\n\n{args.messages:,} generated ads (seed "
          f"{args.seed}, default preset, 30 % reposts), SQLite store, medians of "
          f"{args.repeats} alternated runs. `check` rows: the whole command (start-up, "
          f"reading, verdicts written). datasketch rows: in process, first {n_ds:,} ads, our "
          f"normalization and shingles, no reading or writing in their time.\n\n" + md_table(
              ["what", "ads", "docs/s", "check is faster by", "duplicates",
               "store bytes/ad", "runs (s)"], rows))
    save(args, "fresh", {"machine": info, "runs": runs}, md)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("fresh", help="check on fresh generated ads vs before and datasketch "
                                     "(issue 15)")
    p.add_argument("--messages", type=int, default=50_000)
    p.add_argument("--seed", type=int, default=15)
    p.add_argument("--before", default="", help="also time check at this commit (worktree)")
    p.add_argument("--old-scheme", action="store_true",
                   help="also time --minhash multiply-shift")
    p.add_argument("--one-process", action="store_true",
                   help="also time check --no-sketch-ahead")
    p.add_argument("--ds-limit", type=int, default=50_000,
                   help="datasketch rows: first N ads (0 = none)")
    p.set_defaults(func=cmd_fresh)


def hot_run(docs: list[Any], preset: str, batch: int = BATCH) -> dict[str, Any]:
    """The core over ``docs`` into a fresh SQLite store, timed batch by batch, with the
    garbage collector settled as ``run`` and ``check`` settle it (otherwise every full
    collection also walks the 100,000 documents held here: 26 of ~256 ms each)."""
    from streamdedup import garbage
    from streamdedup.detection.detector import Detector
    from streamdedup.settings import build_settings
    from streamdedup.store import open_store

    settings = build_settings(preset, env={})
    work = Path(tempfile.mkdtemp(prefix="bench-hot-"))
    try:
        detector = Detector(settings, open_store("sqlite", str(work / "s"), Sketcher(
            settings).params()))
        times, dups = [], 0
        garbage.settle()
        for i in range(0, len(docs), batch):
            t0 = time.perf_counter()
            dups += sum(v.duplicate for v in detector.process_many(docs[i:i + batch]))
            detector.store.commit()
            times.append(time.perf_counter() - t0)
        detector.store.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    tenth = max(1, len(times) // 10)
    first = tenth * batch / sum(times[:tenth])
    last = tenth * batch / sum(times[-tenth:])
    return {"s": sum(times), "documents": len(docs), "duplicates": dups,
            "first_tenth_per_s": first, "last_tenth_per_s": last, "decay": first / last}


def hot_stream(dump: Path, messages: int, seed: int) -> list[Any]:
    """The chaos soak's worst-case stream as Documents (its 1 % bad messages left out)."""
    from harness.chaos.stream import build_stream, read_rows
    from streamdedup.errors import MessageError
    from streamdedup.service.message import decode_message
    from streamdedup.settings import Settings

    docs = []
    for a in build_stream(read_rows(dump), messages, seed, variant_share=0.4,
                          repost_edit_share=0.8):
        try:
            docs.append(decode_message(a.value, Settings.text_fields, Settings.max_message_bytes))
        except MessageError:
            continue
    return docs


def cmd_hotsoak(args: argparse.Namespace) -> None:
    """The soak's worst case (RELIABILITY.md): the chaos stream with 40 % new variants of
    earlier ads, every repost edited, through the core in process."""
    info = machine()
    docs = hot_stream(args.dump, args.messages, args.seed)
    runs = []
    for i in range(args.repeats):
        r = hot_run(docs, args.preset)
        print(f"  run {i + 1}/{args.repeats} {r['s']:.1f} s, first tenth "
              f"{r['first_tenth_per_s']:.0f}/s, last {r['last_tenth_per_s']:.0f}/s",
              file=sys.stderr, flush=True)
        runs.append(r)

    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    md = (f"```\n{header(args, info)}\n```\n\nThe chaos soak's worst-case stream (seed "
          f"{args.seed}: 40 % new variants of earlier ads, reposts edited, 1 % bad messages "
          f"left out), preset {args.preset}, SQLite store, the core in process in batches "
          f"of 500, medians of {args.repeats} runs. Decay: messages/s over the first tenth "
          f"of the stream / over the last tenth.\n\n" + md_table(
              ["messages", "msgs/s", "first tenth", "last tenth", "decay", "duplicates",
               "runs (s)"],
              [[f"{len(docs):,}", fmt_rate(len(docs) / med("s")),
                fmt_rate(med("first_tenth_per_s")), fmt_rate(med("last_tenth_per_s")),
                f"{med('decay'):.2f}x", runs[-1]["duplicates"],
                ", ".join(f"{r['s']:.1f}" for r in runs)]]))
    save(args, "hotsoak", {"machine": info, "runs": runs}, md)


def add_hotsoak_parser(sub: Any) -> None:
    p = sub.add_parser("hotsoak", help="the soak's worst case through the core (issue 15)")
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=8)
    p.add_argument("--preset", default="reference")
    p.set_defaults(func=cmd_hotsoak)


def cmd_reopen(args: argparse.Namespace) -> None:
    """Opening a big SQLite store (``--store``, e.g. built by ``check`` of a million generated
    ads), alternated: from the snapshot of its last clean close, and rebuilt from its tables
    (the snapshot moved aside for that open, and none written at its close)."""
    from streamdedup.settings import Settings
    from streamdedup.store import open_store
    from streamdedup.store.sqlite import snapshot

    info = machine()
    params = Sketcher(Settings()).params()
    saved = args.store / snapshot.SNAPSHOT_NAME
    aside = saved.with_name(saved.name + ".aside")
    open_store("sqlite", str(args.store), params).close()  # writes one if there is none

    def timed_open(from_tables: bool) -> dict[str, Any]:
        if from_tables:
            saved.rename(aside)
        floor = snapshot.MIN_ENTRIES
        snapshot.MIN_ENTRIES = 1 << 62 if from_tables else floor  # close writes none
        try:
            t0 = time.perf_counter()
            store = open_store("sqlite", str(args.store), params)
            took = time.perf_counter() - t0
            source = getattr(store, "opened_from", "?")
            store.close()
        finally:
            snapshot.MIN_ENTRIES = floor
            if from_tables:
                aside.rename(saved)
        return {"s": took, "documents": 1, "opened_from": source}

    runs = alternated({"from the snapshot": lambda i: timed_open(False),
                       "rebuilt from the tables": lambda i: timed_open(True)}, args.repeats)
    files = {p.name: p.stat().st_size for p in args.store.iterdir() if p.is_file()}
    rows = [[name, rs[-1]["opened_from"], f"{statistics.median(r['s'] for r in rs):.2f}",
             ", ".join(f"{r['s']:.2f}" for r in rs)] for name, rs in runs.items()]
    md = (f"```\n{header(args, info)}\n```\n\nOpening {args.store} (files: "
          + ", ".join(f"{k} {v:,} B" for k, v in sorted(files.items()))
          + f"), medians of {args.repeats} alternated opens, file in the page cache.\n\n"
          + md_table(["open", "maps from", "median s", "runs (s)"], rows))
    save(args, "reopen", {"machine": info, "runs": runs, "files": files}, md)


def add_reopen_parser(sub: Any) -> None:
    p = sub.add_parser("reopen", help="open a big SQLite store: snapshot vs tables (issue 15)")
    p.add_argument("--store", type=Path, required=True, help="a store directory")
    p.set_defaults(func=cmd_reopen)
