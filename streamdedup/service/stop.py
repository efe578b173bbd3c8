"""How the consumer stops: SIGINT and SIGTERM set a flag, and the loop finishes its batch;
before a broker or store first answers there is nothing to finish, so the signal ends the
wait where it is; a second signal, a second or more after the first, exits at once.

Why the second signal: a stop during a broker outage waited up to 60 s (now 30) for its
final checkpoint's acknowledgements, and a second Ctrl-C did nothing. Exiting then is a
crash, and a crash loses nothing: what was not checkpointed is delivered again at the next
start and answered from the store (the chaos runs kill -9 the consumer at any point; the
sketch worker sees its parent gone and exits). Why "a second or more": GNU ``timeout``
signals a process and then its group, two SIGTERMs microseconds apart, which made a clean
stop a crash.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing.util
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

log = logging.getLogger(__name__)

EXIT_INTERRUPTED = 130
SECOND_SIGNAL_AFTER_S = 1.0


class StoppedWhileConnecting(BaseException):
    """SIGTERM arrived while the broker or the store was still unreachable: a clean exit,
    not an error. A BaseException, as KeyboardInterrupt is: the signal handler raises it
    wherever the main thread is, and code there that catches Exception (logging's ``emit``,
    when the signal came while a line was written) swallowed it, so the stop waited for the
    next bootstrap try again (1 run in 4 of the test)."""


class Stoppable:
    """The consumer's stop flag and signal handlers (``Service`` is one)."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self._signalled: float | None = None  # when the first stop signal came
        self._connecting = False  # inside ``_interruptible()``

    @contextmanager
    def _interruptible(self) -> Iterator[None]:
        """While waiting for the store or the first broker: a signal ends the wait where it
        is (a client's bootstrap wait doubles up to 30 s, so SIGTERM took 13 s, up to 30)."""
        self._connecting = True
        try:
            yield
        finally:
            self._connecting = False

    def request_stop(self, signum: int | None = None, frame: FrameType | None = None) -> None:
        """The signal handler (``signum`` given; it runs in the main thread, where ``run()``
        does) or a call from elsewhere, which only sets the flag."""
        connecting = self._connecting and signum is not None
        if signum is not None:
            first, self._signalled = self._signalled, self._signalled or time.monotonic()
            if first is not None and time.monotonic() - first >= SECOND_SIGNAL_AFTER_S:
                self._exit_now(signum)
        if not self.stopping.is_set():
            log.info("stop requested (%s): %s",
                     signal.Signals(signum).name if signum else "call",
                     "nothing consumed yet, stopping" if connecting
                     else "finishing the batch (a second signal exits at once)")
        self.stopping.set()
        if connecting:
            self._connecting = False  # a second signal must not interrupt the cleanup
            raise StoppedWhileConnecting

    def _exit_now(self, signum: int) -> None:
        log.warning("second %s while stopping: exiting now, without the final checkpoint; "
                    "any message not checkpointed yet is judged again at the next start",
                    signal.Signals(signum).name)
        logging.shutdown()  # the line above reaches its handlers before the exit
        with contextlib.suppress(Exception):  # unlinks the sketch worker's semaphores, else
            # its resource tracker warns of 5 "leaked" ones
            multiprocessing.util._run_finalizers(0)  # type: ignore[attr-defined]
        os._exit(EXIT_INTERRUPTED)

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
