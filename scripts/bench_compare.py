"""`scripts/bench.py compare`: streamdedup against datasketch (in memory, on Redis) and the
study's baseline on the same stream, each ratio measured in the same run."""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from bench import (
    BATCH,
    Timing,
    fmt_rate,
    header,
    load_docs,
    machine,
    make_sketcher,
    md_table,
    measure,
    new_core,
    repeat_docs,
    run_core,
    save,
    settings_for,
)

from streamdedup.core.document import Document
from streamdedup.core.jaccard import jaccard
from streamdedup.core.text import compose_text
from streamdedup.settings import Settings


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


def add_parser(sub: Any) -> None:
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
