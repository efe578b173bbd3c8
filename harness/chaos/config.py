"""``ChaosConfig``, the settings of one run, and ``FAULTS``, the fault kinds it may pick."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.chaos.store import CORRUPTIONS

FAULTS = ("kill", "broker", "sigterm", "disk_full", "write_error", "corrupt", "second_writer",
          "rebalance")


@dataclass
class ChaosConfig:
    """One chaos run. ``faults`` picks the kinds; ``kills`` counts SIGKILLs (about half at
    random moments under load, half at trip-wire stages). Consumer settings left at None keep
    the product's defaults."""

    bootstrap: str
    dump: Path
    workdir: Path
    messages: int = 3000
    kills: int = 12
    faults: tuple[str, ...] = FAULTS
    corruptions: tuple[str, ...] = CORRUPTIONS
    seed: int = 7
    broker: Any = None  # a LocalBroker that may be stopped and started (else no broker fault)
    preset: str = "reference"
    session_timeout_ms: int = 6000
    group_instance_id: str = ""  # phase A's consumers as one static member (restart at once)
    commit_every: int | None = None
    commit_interval_s: float | None = None
    poll_max_records: int | None = None
    tmpfs_mb: int = 256
    rebalance_partitions: int = 4
    rebalance_messages: int = 0  # 0 = half of ``messages``
    step_timeout_s: float = 180.0
    survey_trials: int = 0  # corruption survey on the final store (0 = none)
    say: Callable[[str], None] = lambda _msg: None
