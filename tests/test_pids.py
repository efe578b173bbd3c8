"""A pid is gone only when it is of this PID space and no process has it."""

from __future__ import annotations

import os
import subprocess
import sys

from streamdedup.pids import PID_SPACE, gone


def test_a_finished_process_is_gone_a_live_one_and_another_space_are_not() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert PID_SPACE != "?"  # Linux tells it
    assert gone(child.pid, PID_SPACE)
    assert not gone(child.pid, "0badc0de.1")  # another namespace's pid: not ours to judge
    assert not gone(os.getpid(), PID_SPACE) and not gone(os.getppid(), PID_SPACE)
