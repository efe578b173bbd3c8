"""`scripts/bench.py e2e`: through a real local broker and the consumer process: burst
throughput, then latency at paced rates (the helpers here are bench_group's too)."""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from bench import (
    ROOT,
    fmt_rate,
    header,
    load_docs,
    machine,
    md_table,
    repeat_docs,
    save,
    settings_for,
)

from harness import run_argv
from streamdedup.core.document import Document
from streamdedup.process import ChildProcess, free_port
from streamdedup.service.consumer import CONSUMER_RETRY_BACKOFF_MS as READER_BACKOFF_MS


def message(doc: Document, doc_id: str) -> bytes:
    body = {"id": doc_id, **{k: v for k, v in doc.fields.items() if k != "id"}}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def pace(bootstrap: str, topic: str, payloads: list[bytes], rate: float, start_at: float
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
        super().__init__(f"consumer {tag}", run_argv(
            *extra, preset=preset, bootstrap_servers=bootstrap, store=self.store,
            input_topic=self.topics[0], output_topic=self.topics[1],
            dlq_topic=self.topics[2], group_id=f"g-{tag}", log_level="WARNING",
            metrics_port=self.metrics_port), self.log, cwd=ROOT)


def verdict_reader(bootstrap: str, topic: str, retry_backoff_ms: int = READER_BACKOFF_MS
                   ) -> Any:
    """The instrument that reads the verdicts. kafka-python sleeps ``retry_backoff_ms`` when a
    poll finds no fetch in flight (100 ms by default): about one verdict in a hundred was
    read 100 ms late, the p99 itself, so the reader uses the consumer's 10 ms."""
    from kafka import KafkaConsumer

    return KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                         enable_auto_commit=False, group_id=None, fetch_max_wait_ms=20,
                         max_poll_records=5000, retry_backoff_ms=retry_backoff_ms)


def read_verdicts(reader: Any, want: int, timeout_s: float,
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


def stage_histograms(port: int) -> dict[str, dict[str, float]]:
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

    from harness.broker import LocalBroker, create_topics

    info = machine()
    settings = settings_for(args.preset)
    base = load_docs(args.dump, settings.text_fields)
    copies = -(-args.messages // len(base))
    stream = repeat_docs(base, copies)[: args.messages]
    payloads = [message(d, d.id) for d in stream]
    work = Path(tempfile.mkdtemp(prefix="sd-e2e-"))
    broker = LocalBroker(work / "broker", die_with_parent=True, startup_timeout=180.0)
    results: dict[str, Any] = {"throughput": [], "latency": {}}
    try:
        bootstrap = broker.start()
        print(f"broker on {bootstrap}", file=sys.stderr)
        for run in range(args.warmup + args.repeats if args.repeats else 0):
            tag = f"tp{run}"
            cons = Consumer(bootstrap, tag, work, args.preset)
            create_topics(bootstrap, dict.fromkeys(cons.topics, 1))
            producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20,
                                     batch_size=1 << 18, max_request_size=1 << 22)
            t0 = time.perf_counter()
            for p in payloads:
                producer.send(cons.topics[0], p)
            producer.flush()
            produce_s = time.perf_counter() - t0
            producer.close()
            reader = verdict_reader(bootstrap, cons.topics[1])
            stamps: list[float] = []
            start = time.time()
            cons.start()
            got = read_verdicts(reader, len(payloads), args.timeout,
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
            row["docs_per_s"] = ((got - 1) / row["first_to_last_s"]
                                 if got > 1 and row["first_to_last_s"] else 0.0)  # one poll
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
    from harness.broker import create_topics

    cons = Consumer(bootstrap, tag, work, args.preset, extra)
    create_topics(bootstrap, dict.fromkeys(cons.topics, 1))
    reader = verdict_reader(bootstrap, cons.topics[1], args.reader_backoff_ms)
    cons.start()
    try:
        from kafka import KafkaProducer

        warm = KafkaProducer(bootstrap_servers=bootstrap)
        for i in range(20):
            warm.send(cons.topics[0], message(stream[i], f"warm-{i}"))
        warm.flush()
        warm.close()
        if read_verdicts(reader, 20, 120, lambda _n, _v, _t: None) < 20:
            raise RuntimeError(f"consumer {tag} did not answer; see {cons.log}")
        n = int(rate * args.latency_seconds)
        payloads = [message(stream[(i + 20) % len(stream)], f"p-{i}") for i in range(n)]
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(1) as pool:
            start_ms = (time.time() + 2.0) * 1000
            pending = pool.apply_async(
                pace, (bootstrap, cons.topics[0], payloads, rate, start_ms / 1000))
            lat: list[float] = []
            inside: list[float] = []  # input CreateTime -> verdict sent (after store commit)
            second: list[int] = []  # second of the run the input was sent in

            def on(now: float, v: dict[str, Any], verdict_ts: int) -> None:
                if v.get("id", "").startswith("p-"):
                    lat.append(now * 1000 - v["source"]["timestamp_ms"])
                    inside.append(verdict_ts - v["source"]["timestamp_ms"])
                    second.append(int((v["source"]["timestamp_ms"] - start_ms) // 1000))

            read_verdicts(reader, n, args.latency_seconds + 120, on)
            t0, t1 = pending.get(timeout=60)
        stages = stage_histograms(cons.metrics_port)
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


def add_parser(sub: Any) -> None:
    p = sub.add_parser("e2e", help="through a real local broker and the consumer process")
    p.add_argument("--preset", default="reference")
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--rates", default="500,2000")
    p.add_argument("--commit-intervals", default="default",
                   help="consumer --commit-interval-s values tried for latency "
                        "('default' = the flag not given)")
    p.add_argument("--reader-backoff-ms", type=int, default=READER_BACKOFF_MS,
                   help="the verdict reader's retry_backoff_ms (kafka-python's default: 100)")
    p.add_argument("--latency-seconds", type=float, default=20.0)
    p.add_argument("--latency-repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=600.0)
    p.set_defaults(func=cmd_e2e)
