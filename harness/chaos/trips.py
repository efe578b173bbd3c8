"""The child side: ``python -m harness.chaos consumer [--trip STAGE] -- run ...``.

``child_main`` runs the unchanged CLI after ``install_trip`` has wrapped the method (or
methods) of one stage so that the process SIGKILLs itself at that stage of the commit order
(e.g. after the producer flush and before the offset commit), writing ``TRIP_MARK`` and the
stage to stderr first. Nothing in the product code knows about the harness.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

TRIP_STAGES = ("store_commit", "after_flush", "after_store_commit", "before_flush",
               "after_offset_commit")
TRIP_MARK = "CHAOS-TRIP"


def _die(stage: str, note: str) -> None:
    os.write(2, f"{TRIP_MARK} {stage} {note}\n".encode())
    os.kill(os.getpid(), signal.SIGKILL)


def install_trip(stage: str, seed: int | None = None) -> None:
    """Make this process SIGKILL itself at ``stage`` of the first checkpoint that reaches it.

    ``store_commit`` fires from another thread a few microseconds into the SQLite commit (the
    sqlite3 module releases the GIL there), so the kill lands inside or just after it; the
    note says which."""
    from kafka import KafkaConsumer, KafkaProducer

    from streamdedup.store.sqlite import SqliteStore

    rng = random.Random(seed)
    # The loop commits offsets with commit_async, the final and pre-rebalance commits with
    # commit: a stage may hook several methods; whichever runs first trips.
    where: dict[str, tuple[list[tuple[type, str]], str]] = {
        "store_commit": ([(SqliteStore, "commit")], "during"),
        "after_store_commit": ([(SqliteStore, "commit")], "after"),
        "before_flush": ([(KafkaProducer, "flush")], "before"),
        "after_flush": ([(KafkaProducer, "flush")], "after"),
        "after_offset_commit": ([(KafkaConsumer, "commit"), (KafkaConsumer, "commit_async")],
                                "after"),
    }
    if stage not in where:
        raise SystemExit(f"unknown trip stage {stage!r}; known: {', '.join(where)}")
    methods, when = where[stage]
    for cls, name in methods:
        setattr(cls, name, _tripping(getattr(cls, name), stage, when, rng))


def _tripping(original: Callable[..., Any], stage: str, when: str,
              rng: random.Random) -> Callable[..., Any]:
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if when == "before":
            _die(stage, "before")
        if when == "during":
            done = threading.Event()
            go = threading.Event()
            delay = rng.uniform(0.0, 0.0005)

            def fire() -> None:
                go.wait()
                end = time.perf_counter() + delay
                while time.perf_counter() < end:
                    pass
                _die(stage, "after_commit_returned" if done.is_set() else "in_commit")

            threading.Thread(target=fire, daemon=True).start()
            go.set()
            result = original(self, *args, **kwargs)
            done.set()
            time.sleep(5)  # the killer fires meanwhile
            return result
        result = original(self, *args, **kwargs)
        _die(stage, "after")
        return result

    return wrapper


def child_main(argv: Sequence[str]) -> int:
    """``consumer [--trip STAGE] -- run <streamdedup run flags>``."""
    parser = argparse.ArgumentParser(prog="python -m harness.chaos")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("consumer", help="run the streamdedup CLI with trip wires")
    p.add_argument("--trip", choices=TRIP_STAGES, default=None)
    p.add_argument("--trip-seed", type=int, default=None)
    p.add_argument("cli", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    cli_args = args.cli[1:] if args.cli[:1] == ["--"] else args.cli
    if args.trip:
        install_trip(args.trip, args.trip_seed)
    from streamdedup.cli.main import main as cli_main

    cli_main(args=cli_args, prog_name="streamdedup")
    return 0
