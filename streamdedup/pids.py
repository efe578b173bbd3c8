"""Whether a pid names a process that is gone: for the leftovers of a process killed with
SIGKILL (a Redis writer's lock, a backfill's staging directory), which its successor may
then take over or remove instead of waiting or leaving them for good."""

from __future__ import annotations

import os
from pathlib import Path


def _pid_space() -> str:
    """Where a pid means one process: this boot of this kernel and this PID namespace. A
    hostname does not say it: containers with the host's network, or machines left with a
    default name, share one while their pids are each their own (a live holder in another
    namespace was taken for dead). '?' where /proc does not tell (then no pid is gone)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
        space = os.readlink("/proc/self/ns/pid").removeprefix("pid:[").rstrip("]")
    except OSError:
        return "?"
    return f"{boot}.{space}"


PID_SPACE = _pid_space()


def gone(pid: int, space: str) -> bool:
    """Whether ``pid``, named in ``space``, is a process of this PID space that no longer
    runs (never for another space, an unknown one, or this process)."""
    if space != PID_SPACE or PID_SPACE == "?" or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False
