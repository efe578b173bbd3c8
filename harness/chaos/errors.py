"""The harness's own exceptions: ``ChaosError`` when a run cannot go on (a consumer died
unexpectedly, a wait timed out), ``ConsumerDied`` when a consumer exits while it should be
running (``faults.ChaosRun.survive`` records that as a failed event and restarts it).
"""

from __future__ import annotations

from streamdedup.process import ChildProcess


class ChaosError(RuntimeError):
    """The harness itself could not go on (a consumer died unexpectedly, a wait timed out)."""


class ConsumerDied(ChaosError):
    """A consumer exited while it should have been running."""

    def __init__(self, proc: ChildProcess) -> None:
        super().__init__(f"consumer {proc.name} exited ({proc.returncode}) while it should "
                         f"run:\n{proc.tail()}")
        self.proc = proc
