"""The stop rules with a fake clock: one flag for any number of signals at once, and an
exit at once only for a signal a second or more after the first."""

from __future__ import annotations

import signal

import pytest

from streamdedup.service import stop
from streamdedup.service.stop import SECOND_SIGNAL_AFTER_S, Stoppable, StoppedWhileConnecting


class Exited(Exception):
    pass


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(stop.time, "monotonic", lambda: now[0])
    return now


@pytest.fixture
def stoppable(monkeypatch: pytest.MonkeyPatch) -> Stoppable:
    def exit_now(self: Stoppable, signum: int) -> None:
        raise Exited(signal.Signals(signum).name)

    monkeypatch.setattr(Stoppable, "_exit_now", exit_now)
    return Stoppable()


def test_two_signals_at_once_are_one_stop(stoppable: Stoppable, clock: list[float]) -> None:
    """GNU ``timeout`` signals the process and then its group: microseconds apart."""
    stoppable.request_stop(signal.SIGTERM)
    clock[0] += 0.001
    stoppable.request_stop(signal.SIGTERM)
    clock[0] += SECOND_SIGNAL_AFTER_S - 0.002
    stoppable.request_stop(signal.SIGINT)
    assert stoppable.stopping.is_set()
    clock[0] += 0.001  # a second after the first
    with pytest.raises(Exited, match="SIGINT"):
        stoppable.request_stop(signal.SIGINT)


def test_a_stop_called_from_code_is_no_first_signal(stoppable: Stoppable,
                                                     clock: list[float]) -> None:
    stoppable.request_stop()
    clock[0] += 5.0
    stoppable.request_stop(signal.SIGTERM)  # the first signal: finish the batch
    assert stoppable.stopping.is_set()
    clock[0] += 5.0
    with pytest.raises(Exited):
        stoppable.request_stop(signal.SIGTERM)


def test_a_signal_while_connecting_ends_the_wait_and_a_later_one_exits(
        stoppable: Stoppable, clock: list[float]) -> None:
    with pytest.raises(StoppedWhileConnecting), stoppable._interruptible():
        stoppable.request_stop(signal.SIGTERM)
    assert stoppable.stopping.is_set()
    clock[0] += 0.5
    stoppable.request_stop(signal.SIGTERM)  # the cleanup is not interrupted
    clock[0] += 1.0
    with pytest.raises(Exited):
        stoppable.request_stop(signal.SIGTERM)
