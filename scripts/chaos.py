#!/usr/bin/env python3
"""Chaos run: the real broker and consumer processes, faults injected, every verdict checked.

    python scripts/chaos.py [--messages M] [--kills N] [--faults LIST] [--dump PATH]
                            [--soak N] [--bootstrap HOST:PORT] --report FILE.json
    python scripts/chaos.py --group [--redis-cluster N] [--messages M] --report FILE.json

Without ``--bootstrap`` a LocalBroker is started in a temporary state dir (and can then be
stopped and started as a fault). ``--group`` runs the consumer-group mode instead: three
members sharing a Redis index (a redis-server, or a cluster of N masters, started here),
``harness/group.py``. See ``harness/chaos/__init__.py`` for what is checked and
RELIABILITY.md for the figures of a full run. Exit status 0 only if nothing was lost,
duplicated onto itself, contradicted or different from the uninterrupted reference run, and
every fault behaved as expected.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the harness is not installed: it lives in the checkout

from harness.chaos import (  # noqa: E402
    CORRUPTIONS,
    FAULTS,
    SOAK_VARIANT_SHARE,
    ChaosConfig,
    local_broker,
    run,
    table,
)

DEFAULT_DUMP = ROOT.parent / "shared" / "data" / "kijiji_jobs.tsv"


def _list(text: str, known: tuple[str, ...], what: str) -> tuple[str, ...]:
    items = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [x for x in items if x not in known]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown {what}: {', '.join(unknown)}; known: {', '.join(known)}")
    return items


# A full run's sizes, larger than ChaosConfig's (what the tests run): the numbers in
# RELIABILITY.md are of these. Every other default is ChaosConfig's own.
FULL_RUN_MESSAGES = 5000
FULL_RUN_SURVEY_TRIALS = 40


def _default(name: str) -> Any:
    return ChaosConfig.__dataclass_fields__[name].default


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=FULL_RUN_MESSAGES,
                   help=f"input messages (default {FULL_RUN_MESSAGES})")
    p.add_argument("--kills", type=int, default=_default("kills"),
                   help="SIGKILLs of the consumer, about half at trip-wire stages (default "
                        f"{_default('kills')})")
    p.add_argument("--faults", default=",".join(FAULTS),
                   type=lambda t: _list(t, FAULTS, "fault"),
                   help=f"comma-separated fault kinds (default all: {','.join(FAULTS)})")
    p.add_argument("--corruptions", default=",".join(CORRUPTIONS),
                   type=lambda t: _list(t, CORRUPTIONS, "corruption"),
                   help="store damages tried at start (default all)")
    p.add_argument("--dump", type=Path, default=DEFAULT_DUMP,
                   help=f"Kijiji TSV the stream is made from (default {DEFAULT_DUMP})")
    p.add_argument("--report", type=Path, required=True, help="write the JSON report here")
    p.add_argument("--soak", type=int, default=0,
                   help="also run a soak of this many messages at the highest rate (0 = no)")
    p.add_argument("--soak-variant-share", type=float, default=SOAK_VARIANT_SHARE,
                   help="share of new near-duplicate texts in the soak stream (default "
                        f"{SOAK_VARIANT_SHARE}; "
                        "0.4 is the chaos stream's, a worst case for hot buckets)")
    p.add_argument("--bootstrap", default=None,
                   help="use this broker (no broker fault) instead of a local one")
    p.add_argument("--seed", type=int, default=_default("seed"))
    p.add_argument("--preset", default=_default("preset"))
    p.add_argument("--commit-every", type=int, default=None,
                   help="consumer setting (default: the product's)")
    p.add_argument("--commit-interval-s", type=float, default=None,
                   help="consumer setting (default: the product's)")
    p.add_argument("--survey-trials", type=int, default=FULL_RUN_SURVEY_TRIALS,
                   help="damaged copies of the final store opened per corruption kind")
    p.add_argument("--session-timeout-ms", type=int, default=_default("session_timeout_ms"),
                   help="consumers' --session-timeout-ms; 0 = the product's default")
    p.add_argument("--group-instance-id", default="",
                   help="run phase A's consumers as one static group member with this id "
                   "(a restart after a SIGKILL takes the partition back at once)")
    p.add_argument("--tmpfs-mb", type=int, default=_default("tmpfs_mb"),
                   help="size of the tmpfs holding the store for disk-full (root only)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="keep stores and consumer logs here (default: a temporary dir)")
    p.add_argument("--group", action="store_true",
                   help="the consumer-group mode: 3 members sharing one Redis index")
    p.add_argument("--redis-cluster", type=int, default=0, metavar="N",
                   help="with --group: a Redis Cluster of N masters (N >= 3) instead of one "
                   "server")
    args = p.parse_args(argv)
    if args.redis_cluster and (args.redis_cluster < 3 or not args.group):
        p.error("--redis-cluster N needs --group and N >= 3")
    if not args.dump.is_file():
        p.error(f"no dump at {args.dump}; pass --dump PATH")

    def say(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    with contextlib.ExitStack() as stack:
        if args.workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chaos-")))
        else:
            workdir = args.workdir
            workdir.mkdir(parents=True, exist_ok=True)
        broker = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            broker = stack.enter_context(local_broker(workdir / "broker", say))
            bootstrap = broker.bootstrap
        config = ChaosConfig(
            bootstrap=bootstrap, dump=args.dump, workdir=workdir / "run",
            messages=args.messages, kills=args.kills, faults=args.faults,
            corruptions=args.corruptions, seed=args.seed, broker=broker, preset=args.preset,
            session_timeout_ms=args.session_timeout_ms, commit_every=args.commit_every,
            group_instance_id=args.group_instance_id,
            survey_trials=args.survey_trials,
            commit_interval_s=args.commit_interval_s, tmpfs_mb=args.tmpfs_mb, say=say,
        )
        if args.group:
            report, text = _group(config, workdir, args.redis_cluster)
        else:
            report = run(config, soak=args.soak, soak_variant_share=args.soak_variant_share)
            text = table(report)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(text)
    print(f"\nreport: {args.report}")
    return 0 if report["ok"] else 1


def _group(config: ChaosConfig, workdir: Path, cluster: int) -> tuple[dict[str, Any], str]:
    from harness import group
    from harness.chaos.stream import build_stream, read_rows
    from harness.redis import RedisServer

    redis = RedisServer(workdir / "redis", cluster=cluster)
    redis.run()
    run_ = group.GroupRun(config, redis)
    started = time.monotonic()
    try:
        result = run_.run(build_stream(read_rows(config.dump), config.messages, config.seed))
    finally:
        run_.close()
        redis.stop()
    report = {**result, "events": run_.events, "elapsed_s": round(time.monotonic() - started, 1),
              "ok": group.ok(result, run_.events)}
    return report, (group.table(result) + f"\nelapsed (s)  {report['elapsed_s']}\n\n"
                    + ("OK" if report["ok"] else "PROBLEMS FOUND"))


if __name__ == "__main__":
    sys.exit(main())
