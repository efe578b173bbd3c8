"""What `replay` and `backfill` are asked to do: ``ReplayConfig`` and ``BackfillConfig``.

Kept apart from the work (``runner.py``, ``backfill.py``) so that the CLI can take its flags'
defaults and choices from here: importing this costs nothing, where importing the work
pulls numpy and the detector (~300 ms, which every command's start-up would pay).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamdedup.errors import ConfigError
from streamdedup.settings import env_name

ENGINES = ("spark", "local")
ORDERS = ("file", "timestamp")

_N = r"0*[1-9]\d*"  # a count or a size of 0 started a JVM that failed with its stack
_MEMORY = re.compile(rf"^{_N}[kmgt]?$", re.I)
_MASTER = re.compile(rf"^(local(\[({_N}|\*)(,{_N})?\])?|local-cluster\[{_N},{_N},{_N}\]"
                     r"|yarn|(spark|k8s|mesos)://\S+)$")


def check_spark_flags(driver_memory: str, master: str = "local") -> None:
    """Checked when a backfill is asked for, before its store is made and its dump read (a
    bad --driver-memory was refused once the whole dump had been; a master of no known form
    started a JVM that printed its stack)."""
    if not _MEMORY.match(driver_memory):
        raise ConfigError(f"--driver-memory must be like 3g or 512m (more than 0), not "
                          f"{driver_memory!r}")
    if not _MASTER.match(master):
        raise ConfigError(f"--master must be local, local[N], local[*], local[N,F] (N, F at "
                          f"least 1), yarn or spark://, k8s://, mesos:// and an address, not "
                          f"{master!r}")


# Settings a replay cannot use, and why: its report needs a verdict for every document, and
# counts as a miss every earlier near-duplicate a retention window forgets on purpose.
NOT_FOR_A_REPLAY = {
    "only_duplicates": "a replay needs a verdict for every document",
    "retention": "a replay's report measures recall against every earlier ad, which "
                 "--retention forgets on purpose (`check --retention` judges a dump through "
                 "the window)",
}


def replay_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment less the variables of ``NOT_FOR_A_REPLAY``, which a replay leaves
    out, so it does not read them either (``STREAMDEDUP_RETENTION=garbage`` was refused by
    the replay that would have left it out)."""
    dropped = {env_name(name) for name in NOT_FOR_A_REPLAY}
    return {k: v for k, v in env.items() if k not in dropped}


MIN_RATE = 1 / 3600  # one message an hour: 1e-9 was taken (one message in 31 years), and
# 1e-300 asked time.sleep for more than it takes (OverflowError, a traceback)


def rate_error(rate: float) -> str | None:
    """What is wrong with a ``--rate`` of ``produce`` or ``replay`` (None: nothing). NaN
    compares false with everything: it was taken as "no limit"."""
    if rate == 0 or rate >= MIN_RATE:
        return None
    return f"must be 0 (no limit) or at least 1/3600 (one message an hour), not {rate}"


@dataclass(frozen=True)
class ReplayConfig:
    """What to replay and where; ``overrides`` are Settings fields given explicitly."""

    dump: Path
    report_dir: Path
    bootstrap_servers: str  # a running broker: `scripts/kafka-local start` prints one
    preset: str | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    fmt: str | None = None
    store: Path | None = None  # None: a fresh temporary store, removed afterwards
    run_consumer: bool = True
    rate: float = 0.0  # messages per second; 0 = as fast as possible
    timeout_s: float = 60.0  # give up after this long without a new verdict
    topic_prefix: str | None = None  # None: unique per replay when the consumer is ours
    progress: bool = True
    band_table: bool = True
    cache_dir: Path | None = None  # ground-truth cache; None: truth.default_cache_dir()

    def __post_init__(self) -> None:
        """NaN passed click's ranges (every comparison with it is false): ``--timeout nan``
        replayed the whole dump and reported 500 ids "missing within nan s"."""
        if said := rate_error(self.rate):
            raise ConfigError(f"--rate {said}")
        if not 0 < self.timeout_s < float("inf"):
            raise ConfigError(f"--timeout must be a number of seconds > 0, not {self.timeout_s}")
        if self.topic_prefix == "" and self.run_consumer:
            raise ConfigError("--topic-prefix '' runs the replay's consumer on the settings' "
                              "own topics and group (a production run would judge the dump "
                              "into its store): give a prefix, or --no-consumer to replay "
                              "through a consumer already running")
        if self.topic_prefix and not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", self.topic_prefix):
            # It said "input_topic must be ..., not 'bad prefixjobs'", naming neither
            raise ConfigError(f"--topic-prefix must be letters, digits, '.', '_' or '-' (it "
                              f"starts the replay's topic and group names), not "
                              f"{self.topic_prefix!r}")


STDOUT = Path("-")  # an output named "-" is standard output (it wrote a file named "-")
BATCH = 500  # documents per detector call and store commit (check, backfill)


@dataclass(frozen=True)
class BackfillConfig:
    dump: Path
    out: Path  # STDOUT: standard output
    errors: Path | None = None  # default: <out>.errors.jsonl; among the verdicts on STDOUT
    fmt: str | None = None
    engine: str = "spark"  # one of ENGINES
    master: str = "local[*]"
    driver_memory: str = "3g"  # the Spark driver's JVM (in local mode, the executors' too)
    order_by: str = "file"  # one of ORDERS
    partitions: int = 0  # 0: 4 per core, or ~2,000 ads each
    pairs: bool = True  # the engine finds candidate pairs and verifies them (empty store)
    report_dir: Path | None = None  # the quality report against brute force, as replay's

    def __post_init__(self) -> None:
        if self.engine == "spark":
            check_spark_flags(self.driver_memory, self.master)

    @property
    def errors_place(self) -> str:
        """Where the bad rows go, as the command says it."""
        path = self.errors_path
        if path == STDOUT:  # "among the verdicts" was said of verdicts written to a file
            return "among the verdicts" if self.out == STDOUT else "on standard output"
        return f"in {path}"

    @property
    def errors_path(self) -> Path:
        if self.errors is not None:
            return self.errors
        return STDOUT if self.out == STDOUT else self.out.with_suffix(".errors.jsonl")
