"""``scripts/bench.py group``: a consumer group sharing one Redis index (issue 12).

Measured in one invocation, on one machine, against baselines of the same run:

1. the core in-process (no Kafka): the single-writer detector on SQLite, the shared-store
   detector on one redis-server and on a 3-master Redis Cluster, and datasketch's own Redis
   storage doing the same work (MinHashLSH query, exact check, insert; first N documents);
2. throughput of 1, 2 and 4 members of one group on a 4-partition topic (a backlog produced
   first; first to last verdict), over one server and over the cluster;
3. latency (input CreateTime -> verdict read) at a paced 500/s for each of those.

The stream is generated ads (``harness/generator.py``, 30 % reposts, half of them edited):
fresh content, not copies of a small dump. Servers are started here with the durable
settings the README recommends (AOF, ``appendfsync always``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from bench import (
    CoreRun,
    fmt_rate,
    header,
    machine,
    md_table,
    run_core,
    save,
    settings_for,
)
from bench_compare import DatasketchRun
from bench_e2e import message, pace, read_verdicts, stage_histograms, verdict_reader

from harness import run_argv
from harness.broker import LocalBroker, create_topics
from harness.chaos.harness import wait_assigned
from harness.generator import Generator, learn
from harness.redis import RedisServer
from streamdedup.core.document import Document
from streamdedup.core.sketch import Sketcher
from streamdedup.detection.detector import Detector
from streamdedup.detection.shared_detector import SharedDetector
from streamdedup.process import ChildProcess, free_port
from streamdedup.store.redis import SharedRedisStore
from streamdedup.store.sqlite import SqliteStore

PARTITIONS = 4


def generated(dump: Path, n: int, seed: int) -> list[Document]:
    gen = Generator(learn(dump), seed, dup_share=0.3)
    return [Document(ad["id"], {k: v for k, v in ad.items() if k != "id"})
            for ad in gen.ads(n)]


def _core_rate(detector: Any, store: Any, docs: list[Document]) -> float:
    t0 = time.perf_counter()
    run_core(CoreRun(detector, store, None), docs)
    return len(docs) / (time.perf_counter() - t0)


def core_rates(settings: Any, docs: list[Document], servers: dict[str, RedisServer],
               work: Path, ds_docs: list[Document]) -> dict[str, float]:
    out = {}
    sqlite = SqliteStore(work / f"core-{uuid.uuid4().hex[:6]}")
    out["single writer, SQLite"] = _core_rate(Detector(settings, sqlite), sqlite, docs)
    sqlite.close()
    for kind, server in servers.items():
        store = SharedRedisStore(server.url, f"core-{uuid.uuid4().hex[:8]}",
                                 cluster=bool(server.cluster))
        out[f"shared, Redis {kind}"] = _core_rate(SharedDetector(settings, store), store, docs)
        store.close()
    port = servers["server"].ports[0]
    sk = Sketcher(settings)
    ds = DatasketchRun(settings, sk.bands, sk.rows,
                       {"type": "redis", "basename": uuid.uuid4().hex[:8].encode(),
                        "redis": {"host": "127.0.0.1", "port": port}}, exact_first=False)
    t0 = time.perf_counter()
    ds.run(ds_docs)
    out[f"datasketch MinHashLSH on Redis (first {len(ds_docs):,})"] = (
        len(ds_docs) / (time.perf_counter() - t0))
    return out


class Member(ChildProcess):
    """One ``streamdedup run`` of the group; ``server`` None: the single-writer baseline on a
    fresh SQLite store."""

    def __init__(self, bootstrap: str, server: RedisServer | None, namespace: str, topic: str,
                 group: str, preset: str, log: Path) -> None:
        self.port = free_port()
        store = ({"store": log.with_suffix(".store")} if server is None else
                 {"store_backend": "redis", "redis_url": server.url,
                  "redis_namespace": namespace, "redis_cluster": bool(server.cluster) or None})
        argv = run_argv(preset=preset, bootstrap_servers=bootstrap, group_id=group,
                        input_topic=topic, output_topic=f"{topic}-out",
                        dlq_topic=f"{topic}-dlq", topic_partitions=PARTITIONS,
                        metrics_port=self.port, log_level="INFO", session_timeout_ms=6000,
                        **store)
        super().__init__(f"member {log.stem}", argv, log)


def _start_members(n: int, bootstrap: str, server: RedisServer | None, topic: str, preset: str,
                   work: Path) -> list[Member]:
    ns, group = f"g{uuid.uuid4().hex[:8]}", f"{topic}-group"
    members = [Member(bootstrap, server, ns, topic, group, preset, work / f"{topic}-{k}.log")
               for k in range(n)]
    for m in members:
        m.start()
    deadline = time.monotonic() + 120
    for m in members:  # each inside its loop, or said why not (one that exited: its log)
        wait_assigned(m, max(deadline - time.monotonic(), 0.0))
    time.sleep(2.0)  # the last join's rebalance settles
    return members


def _group(kind: str, bootstrap: str, server: RedisServer | None, n: int, preset: str,
           work: Path
           ) -> tuple[str, list[Member], Any]:
    """A fresh topic, ``n`` members assigned on it, and a reader of its verdicts."""
    topic = f"{kind}-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, {topic: PARTITIONS, f"{topic}-out": 1, f"{topic}-dlq": 1})
    members = _start_members(n, bootstrap, server, topic, preset, work)
    return topic, members, verdict_reader(bootstrap, f"{topic}-out")


def burst(bootstrap: str, server: RedisServer | None, n: int, docs: list[Document], preset: str,
          work: Path) -> dict[str, Any]:
    from kafka import KafkaProducer

    topic, members, reader = _group("burst", bootstrap, server, n, preset, work)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20,
                             batch_size=1 << 18)
    start = time.time()  # the members are assigned and waiting: they start as this does
    for d in docs:
        producer.send(topic, message(d, d.id), key=d.id.encode())
    producer.flush()
    producer.close()
    stamps: list[float] = []
    got = read_verdicts(reader, len(docs), 600, lambda now, _v, _t: stamps.append(now))
    codes = [m.stop() for m in members]
    reader.close()
    return {"members": n, "verdicts": got, "exit_codes": codes,
            "docs_per_s": got / (stamps[-1] - start) if stamps else 0.0}


def paced(bootstrap: str, server: RedisServer | None, n: int, docs: list[Document], preset: str,
          work: Path, rate: float, seconds: float) -> dict[str, Any]:
    topic, members, reader = _group("lat", bootstrap, server, n, preset, work)
    count = int(rate * seconds)
    payloads = [message(docs[i % len(docs)], f"p{i}") for i in range(count)]
    lat: list[float] = []
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pending = pool.apply_async(pace, (bootstrap, topic, payloads, rate, time.time() + 1.0))
        read_verdicts(reader, count, seconds + 120,
                       lambda now, v, _t: lat.append(now * 1000 - v["source"]["timestamp_ms"]))
        t0, t1 = pending.get(timeout=60)
    stages = [stage_histograms(m.port) for m in members]
    codes = [m.stop() for m in members]
    reader.close()
    arr = np.array(lat) if lat else np.array([float("nan")])
    return {"members": n, "sent": count, "received": len(lat), "exit_codes": codes,
            "achieved_rate": count / (t1 - t0), "p50": float(np.percentile(arr, 50)),
            "p99": float(np.percentile(arr, 99)),
            "stage_mean_ms": {stage: statistics.mean(st[stage]["mean_ms"] for st in stages
                                                     if stage in st)
                              for stage in ("detect", "store_commit", "produce_flush",
                                            "offset_commit") if any(stage in st for st in stages)},
            "checkpoints": sum(st.get("store_commit", {}).get("count", 0) for st in stages)}


def cmd_group(args: argparse.Namespace) -> None:
    info = machine()
    settings = settings_for(args.preset)
    docs = generated(args.dump, args.messages, args.seed)
    work = Path(tempfile.mkdtemp(prefix="sd-group-"))
    servers = {"server": RedisServer(work / "redis"),
               "cluster": RedisServer(work / "redis-cluster", cluster=3)}
    broker = LocalBroker(work / "broker", die_with_parent=True, startup_timeout=180.0)
    results: dict[str, Any] = {"core": [], "burst": {}, "latency": {}}
    try:
        for server in servers.values():
            server.run()
        bootstrap = broker.start()
        core_docs = docs[: args.core_messages]
        for run in range(args.repeats):
            results["core"].append(core_rates(settings, core_docs, servers, work,
                                              docs[: args.ds_limit]))
            print(f"  core run {run}: {json.dumps(results['core'][-1])}", file=sys.stderr,
                  flush=True)
        # The baseline first in each round: one single-writer consumer on SQLite.
        plans: list[tuple[str, RedisServer | None, int]] = [("sqlite", None, 1)]
        plans += [(kind, server, int(n)) for kind, server in servers.items()
                  for n in args.members.split(",")]
        for run in range(args.repeats):
            for kind, where, n in plans:
                row = burst(bootstrap, where, n, docs, args.preset, work)
                results["burst"].setdefault(f"{kind}/{n}", []).append(row)
                print(f"  burst {kind} {n} run {run}: {json.dumps(row)}", file=sys.stderr,
                      flush=True)
        for run in range(args.latency_repeats):
            for kind, where, n in plans:
                row = paced(bootstrap, where, n, docs, args.preset, work, args.rate,
                            args.latency_seconds)
                results["latency"].setdefault(f"{kind}/{n}", []).append(row)
                print(f"  latency {kind} {n} run {run}: {json.dumps(row)}", file=sys.stderr,
                      flush=True)
    finally:
        broker.stop()
        for server in servers.values():
            server.stop()
    save(args, "group", {"command": args.command_line, "machine": info, **results},
         _markdown(args, info, results))


def _markdown(args: argparse.Namespace, info: dict[str, Any], results: dict[str, Any]) -> str:
    core = results["core"]
    base = statistics.median(r["single writer, SQLite"] for r in core)
    core_rows = [[name, fmt_rate(statistics.median(r[name] for r in core)),
                  f"{statistics.median(r[name] for r in core) / base:.2f}x",
                  " / ".join(fmt_rate(r[name]) for r in core)] for name in core[0]]
    rows = []
    for key, runs in results["burst"].items():
        kind, n = key.split("/")
        lat = results["latency"].get(key, [])
        rows.append([kind, n, fmt_rate(statistics.median(r["docs_per_s"] for r in runs)),
                     " / ".join(fmt_rate(r["docs_per_s"]) for r in runs),
                     f"{statistics.median(r['p50'] for r in lat):.0f}" if lat else "",
                     f"{statistics.median(r['p99'] for r in lat):.0f}" if lat else "",
                     " / ".join(f"{r['p99']:.0f}" for r in lat)])
    return "\n".join([
        "```", header(args, info), "```", "",
        f"Generated ads (seed {args.seed}, 30 % reposts), preset `{args.preset}`. The core "
        f"in-process on the first {args.core_messages:,} (batches of 500, medians of "
        f"{args.repeats} runs; ratio to the single writer on SQLite of the same run):", "",
        md_table(["detector and store", "median docs/s", "vs SQLite", "runs"], core_rows), "",
        f"A group on a {PARTITIONS}-partition topic (keys = ids, so near-duplicates cross "
        f"partitions): {args.messages:,} messages produced to members already assigned and "
        f"waiting (first message sent to last verdict read, medians of {args.repeats} runs); "
        f"latency = verdict read - input CreateTime "
        f"at a paced {args.rate:g}/s for {args.latency_seconds:g} s (medians of "
        f"{args.latency_repeats} runs). Every member is a `streamdedup run` process; the "
        "machine has 2 cores, shared by the members, Redis and the broker. `sqlite` is the "
        "baseline of the same rounds: one single-writer consumer with its own SQLite store.",
        "",
        md_table(["store", "members", "burst docs/s", "runs", "p50 ms at rate",
                  "p99 ms at rate", "p99 runs"], rows),
    ])


def add_parser(sub: Any) -> None:
    p = sub.add_parser("group", help="a consumer group sharing Redis (server and cluster)")
    p.add_argument("--preset", default="default")
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument("--core-messages", type=int, default=10_000)
    p.add_argument("--ds-limit", type=int, default=2_000)
    p.add_argument("--members", default="1,2,4")
    p.add_argument("--rate", type=float, default=500.0)
    p.add_argument("--latency-seconds", type=float, default=20.0)
    p.add_argument("--latency-repeats", type=int, default=2)
    p.add_argument("--seed", type=int, default=5)
    p.set_defaults(func=cmd_group)
