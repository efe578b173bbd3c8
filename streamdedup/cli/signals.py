"""SIGTERM taken as Ctrl-C by every command (``main.py`` sets it around each; `run` and
`monitor` put in handlers of their own): what was not committed is rolled back, temporary
files are removed, and the command says how far it got (exit 130). Python's default ended
them at once, without a word (`backfill` on Spark left its staging directory, a copy of the
texts, behind)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def sigterm_as_interrupt() -> Callable[[], None]:
    """From now on SIGTERM raises KeyboardInterrupt in the main thread; returns what puts
    the earlier handler back (call it in a ``finally``)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGTERM, _interrupt)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore
