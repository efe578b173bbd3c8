"""A dump's batch through a store that goes away (``detection/outage.py``): the rules with a
store that fails on cue. With a real redis-server behind a link cut and mended, and one
that restarts: tests/cli/test_check.py."""

from __future__ import annotations

from typing import Any

import pytest

from streamdedup.detection.outage import judged
from streamdedup.errors import StoreError, StoreRestartedError, StoreUnavailableError
from streamdedup.store.base import Evicted


class Flaky:
    """Each call named in ``fails`` raises its error once, in order; a log of the calls."""

    def __init__(self, *fails: tuple[str, Exception]) -> None:
        self.fails = list(fails)
        self.calls: list[str] = []

    def _do(self, name: str) -> Any:
        self.calls.append(name)
        if self.fails and self.fails[0][0] == name:
            raise self.fails.pop(0)[1]
        return None

    def commit(self) -> None:
        self._do("commit")

    def rollback(self) -> None:
        self._do("rollback")

    def ping(self) -> None:
        self._do("ping")

    def server_restarted(self) -> str | None:
        self._do("asked")
        return None


class Judge:
    def __init__(self, store: Flaky) -> None:
        self.store, self.evicted, self.batches = store, Evicted(), 0

    def __call__(self) -> list[Any]:
        self.batches += 1
        self.evicted += Evicted(2, 1)
        self.store.calls.append("judge")
        return [f"verdicts of attempt {self.batches}"]


def run(store: Flaky, patience_s: float = 120.0) -> tuple[list[Any], Judge, list[float], list[str]]:
    judge, slept, said = Judge(store), [], []
    found = judged(judge, judge, said.append, patience_s, slept.append)
    return found, judge, slept, said


def test_a_store_that_answers_is_asked_once_per_batch() -> None:
    store = Flaky()
    assert run(store)[0] == ["verdicts of attempt 1"]
    assert store.calls == ["judge", "commit", "asked"]


def test_a_failed_commit_is_rolled_back_waited_for_and_the_batch_judged_again() -> None:
    down = StoreUnavailableError("Redis: ConnectionError: gone")
    store = Flaky(("commit", down), ("ping", down), ("ping", down))
    found, judge, slept, said = run(store)
    assert found == ["verdicts of attempt 2"]
    assert store.calls == ["judge", "commit", "rollback", "ping", "ping", "ping", "asked",
                           "judge", "commit", "asked"]
    assert slept == [0.5, 1.0, 2.0]  # doubling, from half a second
    assert judge.evicted == Evicted(2, 1)  # the failed attempt's evictions are not counted
    assert len(said) == 3 and "ConnectionError: gone" in said[0]
    assert "judged again" in said[0]


def test_a_restart_stops_the_command_whenever_it_is_found() -> None:
    restarted = StoreRestartedError("Redis restarted without the store")
    for fails in ([("asked", restarted)],
                  [("commit", StoreUnavailableError("x")), ("asked", restarted)]):
        store = Flaky(*fails)
        with pytest.raises(StoreRestartedError):
            run(store)
        assert store.calls.count("judge") == 1


def test_it_stops_after_its_patience_saying_how_long_it_waited() -> None:
    down = StoreUnavailableError("Redis: TimeoutError")
    store = Flaky(("commit", down), *[("ping", down)] * 20)
    judge, slept = Judge(store), []
    with pytest.raises(StoreUnavailableError, match=r"TimeoutError \(waited 10 s for it\)"):
        judged(judge, judge, lambda _: None, 10.0, slept.append)
    assert slept == [0.5, 1.0, 2.0, 4.0, 2.5]  # the last wait ends at the patience
    assert store.calls.count("judge") == 1


def test_other_store_errors_are_not_waited_for() -> None:
    store = Flaky(("commit", StoreError("lost the Redis writer lock")))
    with pytest.raises(StoreError, match="writer lock"):
        run(store)
    assert "rollback" not in store.calls
