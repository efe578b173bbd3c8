"""Chaos harness: the real broker and real consumer processes, with faults injected on purpose.

Why: the checkpoint's commit order (``checkpoint.py``) promises that no crash point loses or
contradicts a verdict. That promise is only worth something if it is exercised against the
real thing: a Kafka broker, ``python -m streamdedup run`` as a separate process, an SQLite
store on a real file system. A run (``run``, below) produces a stream of announcements (Kijiji
rows and near-duplicates made by small edits), injects faults while the consumer works, then
reads every output record back and checks:

- every input id has a verdict or a dead letter (``lost``);
- no document is its own duplicate (``self_duplicates``);
- no id got two different answers (``conflicts``);
- verdicts equal those of an uninterrupted run over the same input topic (``mismatches``;
  the ``source`` provenance object is ignored).

Faults: SIGKILL at random moments and at chosen points of the commit order (trip wires),
broker stop/start, SIGTERM in a busy batch, disk full and write errors, damaged store files at
start, a second writer on the same store, a consumer group rebalance with separate stores.
Nothing in the product code knows about the harness.

The modules, one concept each, listed so that each imports only modules above it:

    stream.py     the input: Announcement, read_rows, build_stream (and its bad payloads)
    errors.py     ChaosError, ConsumerDied
    store.py      StoreDir (tmpfs for disk full), corrupt_store, CORRUPTIONS, survey_corruption
    config.py     ChaosConfig, the settings of a run, and FAULTS, the fault kinds
    cluster.py    Cluster: the harness's own Kafka clients (produce, read back, offsets)
    outcome.py    Outcome, collect, check: every answer read back and the invariants counted
    resources.py  rss_mb, open_fds, Sampler (the consumers' RSS and fds over time)
    harness.py    Harness, Lane, Tally: what every phase shares (topics, consumers, waits)
    trips.py      the child side: ``python -m harness.chaos consumer [--trip STAGE] -- run ...``
    faults.py     ChaosRun: phase A (the faults, one by one) and B (the reference run)
    rebalance.py  RebalanceRun: phase C, a consumer joins the group and leaves
    soak_run.py   run_soak: one consumer against a large backlog (rate, RSS, fds)

This module holds ``run`` (phases A+B, C and the soak, into one report), ``table`` (the
report as text) and ``local_broker``, and re-exports what a caller of ``run`` needs.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from harness.chaos.config import FAULTS, ChaosConfig
from harness.chaos.faults import ChaosRun
from harness.chaos.rebalance import RebalanceRun
from harness.chaos.soak_run import SOAK_VARIANT_SHARE, run_soak
from harness.chaos.store import CORRUPTIONS, SURVEY_KINDS, survey_corruption
from harness.chaos.stream import build_stream, read_rows

__all__ = ["CORRUPTIONS", "FAULTS", "SOAK_VARIANT_SHARE", "ChaosConfig", "local_broker", "run",
           "table"]


def run(config: ChaosConfig, soak: int = 0, soak_variant_share: float = SOAK_VARIANT_SHARE
        ) -> dict[str, Any]:
    """Phases A+B (faults, reference), C (rebalance) if asked, and the soak if ``soak``."""
    rows = read_rows(config.dump)
    stream = build_stream(rows, config.messages, config.seed)
    report: dict[str, Any] = {"config": {
        "messages": config.messages, "kills": config.kills, "faults": list(config.faults),
        "corruptions": list(config.corruptions), "seed": config.seed, "preset": config.preset,
        "commit_every": config.commit_every, "commit_interval_s": config.commit_interval_s,
        "session_timeout_ms": config.session_timeout_ms,
        "group_instance_id": config.group_instance_id, "bootstrap": config.bootstrap,
    }}
    started = time.monotonic()
    events: list[dict[str, Any]] = []
    peak = 0.0
    chaos = ChaosRun(config)
    try:
        report["chaos"] = chaos.run(stream)
        if config.survey_trials:
            config.say(f"corruption survey: {config.survey_trials} damaged copies per kind")
            report["corruption_survey"] = survey_corruption(
                chaos.store.path, config.preset, SURVEY_KINDS, config.survey_trials,
                config.workdir, config.seed)
    finally:
        chaos.close()
        events += chaos.events
        peak = max(peak, chaos.sampler.peak_mb)
    if "rebalance" in config.faults:
        rb = RebalanceRun(config)
        try:
            n = config.rebalance_messages or max(300, config.messages // 2)
            report["rebalance"] = rb.run(build_stream(rows, n, config.seed + 2))
        finally:
            rb.close()
            events += rb.events
            peak = max(peak, rb.sampler.peak_mb)
    if soak:
        report["soak"] = run_soak(config, soak, soak_variant_share)
    a = report["chaos"]
    report.update(
        messages=a["messages"], verdicts=a["verdicts"], dead_letters=a["dead_letters"],
        lost=a["lost"], self_duplicates=a["self_duplicates"], conflicts=a["conflicts"],
        mismatches=a["mismatches"],
        faults=dict(Counter(e["kind"] for e in events)),
        faults_failed=[e for e in events if not e["ok"]],
        kills=sum(1 for e in events if e["kind"].startswith("kill_")),
        peak_rss_mb=round(peak, 1), events=events,
        elapsed_s=round(time.monotonic() - started, 1),
    )
    report["ok"] = (a["lost"] == 0 and a["self_duplicates"] == 0 and a["conflicts"] == 0
                    and a["mismatches"] == 0 and not report["faults_failed"])
    return report


def table(report: Mapping[str, Any]) -> str:
    """A plain-text summary of a report."""
    a = report["chaos"]
    rows: list[tuple[str, Any]] = [
        ("messages", a["messages"]), ("distinct ids", a["ids"]),
        ("ids with a verdict", a["verdicts"]), ("ids with a dead letter", a["dead_letters"]),
        ("output records", a["output_records"]), ("repeated records", a["repeated_records"]),
        ("lost", a["lost"]), ("self duplicates", a["self_duplicates"]),
        ("conflicting answers", a["conflicts"]), ("mismatches vs reference", a["mismatches"]),
        ("SIGKILLs", report["kills"]), ("peak consumer RSS (MB)", report["peak_rss_mb"]),
        ("elapsed (s)", report["elapsed_s"]),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines += ["", f"{'fault':<28}{'count':>6}{'failed':>8}"]
    failed = Counter(e["kind"] for e in report["faults_failed"])
    for kind, n in sorted(report["faults"].items()):
        lines.append(f"{kind:<28}{n:>6}{failed.get(kind, 0):>8}")
    for e in report["events"]:
        if e["kind"].startswith("corrupt_"):
            lines.append(f"  {e['kind']}: {'refused' if e['refused'] else 'NOT refused'}"
                         f" ({e['damage']}) {e['message'][-90:]}")
    if "corruption_survey" in report:
        lines += ["", "corruption survey (damaged copies of the final store, opened as the "
                  "consumer would):"]
        for how, counts in report["corruption_survey"].items():
            lines.append(f"  {how:<16} " + ", ".join(f"{k} {v}" for k, v in
                                                     sorted(counts.items())))
    if "rebalance" in report:
        r = report["rebalance"]
        lines += ["", f"rebalance ({r['partitions']} partitions, separate stores): lost "
                  f"{r['lost']}, self-dups {r['self_duplicates']}, conflicts {r['conflicts']},"
                  f" docs in both stores {r['docs_in_both_stores']}, duplicates "
                  f"{r['duplicates_split_stores']} vs {r['duplicates_one_store']} with one "
                  f"store (missed {r['missed_duplicates']})"]
    if "soak" in report:
        s = report["soak"]
        lines += ["", f"soak: {s['messages']} messages, {s['rate_overall']} msg/s overall "
                  f"(10 s windows: median {s['rate_10s_median']}, min {s['rate_10s_min']}), "
                  f"lost {s['lost']}, {s['distinct_sets']} distinct sets, RSS MB {s['rss_mb']},"
                  f" fds {s['fds']}"]
    lines += ["", "OK" if report["ok"] else "PROBLEMS FOUND"]
    return "\n".join(lines)


@contextlib.contextmanager
def local_broker(state_dir: Path, say: Callable[[str], None]) -> Iterator[Any]:
    """A LocalBroker of our own in ``state_dir``, always stopped (and its data removed)."""
    from harness.broker import LocalBroker

    broker = LocalBroker(state_dir, die_with_parent=True, startup_timeout=120.0)
    say(f"starting a local broker in {state_dir}")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
