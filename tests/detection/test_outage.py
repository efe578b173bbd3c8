"""A dump's batch through a store that goes away (``detection/outage.py``): the rules with a
store that fails on cue and a clock of its own. With a real redis-server behind a link cut
and mended, one that restarts, and a reply lost: tests/cli/test_check.py."""

from __future__ import annotations

from typing import Any

import pytest

from streamdedup.detection import outage
from streamdedup.detection.outage import judged
from streamdedup.errors import StoreError, StoreRestartedError, StoreUnavailableError
from streamdedup.store.base import Evicted

DOWN = StoreUnavailableError("Redis: ConnectionError: gone")


class Flaky:
    """Each call named in ``fails`` raises its error once, in order; a log of the calls.
    ``landed``: what ``commit_landed`` answers."""

    def __init__(self, *fails: tuple[str, Exception], landed: bool = False) -> None:
        self.fails = list(fails)
        self.calls: list[str] = []
        self.landed = landed

    def _do(self, name: str) -> None:
        self.calls.append(name)
        if self.fails and self.fails[0][0] == name:
            raise self.fails.pop(0)[1]

    def commit(self) -> None:
        self._do("commit")

    def commit_landed(self) -> bool:
        self._do("landed?")
        return self.landed

    def rollback(self) -> None:
        self._do("rollback")

    def ping(self) -> None:
        self._do("ping")

    def server_restarted(self) -> str | None:
        self._do("restarted?")
        return None


class Judge:
    """The detector (its store and eviction count) and its ``process_many`` of a batch."""

    def __init__(self, store: Flaky) -> None:
        self.store, self.evicted, self.batches = store, Evicted(), 0

    def __call__(self) -> list[Any]:
        self.store._do("judge")
        self.batches += 1
        self.evicted += Evicted(2, 1)
        return [f"verdicts of attempt {self.batches}"]


class Clock:
    """Time that passes only by the waits (and ``ping_s`` a ping)."""

    def __init__(self, store: Flaky, ping_s: float = 0.0) -> None:
        self.now, self.slept = 0.0, []
        real_ping = store.ping

        def ping() -> None:
            self.now += ping_s
            real_ping()
        store.ping = ping  # type: ignore[method-assign]

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def run(store: Flaky, patience_s: float = 120.0, ping_s: float = 0.0
        ) -> tuple[list[Any], Judge, Clock, list[str]]:
    judge, clock, said = Judge(store), Clock(store, ping_s), []
    found = judged(judge, judge, said.append, patience_s, clock.sleep, lambda: clock.now)
    return found, judge, clock, said


def test_a_store_that_answers_is_asked_once_per_batch() -> None:
    store = Flaky()
    assert run(store)[0] == ["verdicts of attempt 1"]
    assert store.calls == ["judge", "commit", "restarted?"]


def test_a_commit_that_did_not_land_is_rolled_back_waited_for_and_the_batch_judged_again(
        ) -> None:
    store = Flaky(("commit", DOWN), ("ping", DOWN), ("ping", DOWN))
    found, judge, clock, said = run(store)
    assert found == ["verdicts of attempt 2"]
    assert store.calls == ["judge", "commit", "ping", "ping", "ping", "restarted?", "landed?",
                           "rollback", "judge", "commit", "restarted?"]
    assert clock.slept == [0.5, 1.0, 2.0]  # doubling, from half a second
    assert judge.evicted == Evicted(2, 1)  # the failed attempt's evictions are not counted
    assert len(said) == 3 and "ConnectionError: gone" in said[0] and "judged again" in said[0]


def test_a_commit_that_landed_stands_with_the_verdicts_judged() -> None:
    """Judged again, a batch would meet a clock its own commit moved (with retention)."""
    store = Flaky(("commit", DOWN), landed=True)
    found, judge, _, _ = run(store)
    assert found == ["verdicts of attempt 1"] and "rollback" not in store.calls
    assert judge.evicted == Evicted(2, 1)  # committed: counted
    assert store.calls == ["judge", "commit", "ping", "restarted?", "landed?", "restarted?"]


def test_an_outage_after_the_commit_is_waited_out_and_nothing_judged_again() -> None:
    store = Flaky(("restarted?", DOWN), ("ping", DOWN))
    found, _, _, said = run(store)
    assert found == ["verdicts of attempt 1"] and store.calls.count("judge") == 1
    assert "rollback" not in store.calls and "committed" in said[0]


def test_a_judging_that_failed_is_judged_again() -> None:
    store = Flaky(("judge", DOWN))
    found, _, _, _ = run(store)
    assert found == ["verdicts of attempt 1"]  # (the Judge counts only what returned)
    assert store.calls[:5] == ["judge", "ping", "restarted?", "landed?", "rollback"]


def test_a_restart_stops_the_command_whenever_it_is_found() -> None:
    restarted = StoreRestartedError("Redis restarted without the store")
    for fails in ([("restarted?", restarted)],
                  [("commit", DOWN), ("restarted?", restarted)],
                  [("restarted?", DOWN), ("restarted?", restarted)]):
        store = Flaky(*fails)
        with pytest.raises(StoreRestartedError):
            run(store)
        assert store.calls.count("judge") == 1


def test_the_patience_is_two_minutes_on_the_clock_with_waits_of_8_s_at_most() -> None:
    """Counted on the clock: a ping to a stalled server takes its socket timeout (30 s),
    which a sum of the sleeps left out (about ten minutes for "two")."""
    assert (outage.PATIENCE_S, outage.FIRST_WAIT_S, outage.LONGEST_WAIT_S) == (120, 0.5, 8)
    store = Flaky(("commit", DOWN), *[("ping", DOWN)] * 100)
    with pytest.raises(StoreUnavailableError, match=r"ConnectionError: gone \(waited 120 s"):
        run(store)
    store = Flaky(("commit", DOWN), *[("ping", DOWN)] * 100)
    judge, clock = Judge(store), Clock(store)
    with pytest.raises(StoreUnavailableError):
        judged(judge, judge, lambda _: None, sleep=clock.sleep, clock=lambda: clock.now)
    assert clock.slept[:6] == [0.5, 1, 2, 4, 8, 8] and sum(clock.slept) == 120
    store = Flaky(("commit", DOWN), *[("ping", DOWN)] * 100)
    judge, clock = Judge(store), Clock(store, ping_s=30.0)
    with pytest.raises(StoreUnavailableError, match=r"waited 1[2-5]\d s"):
        judged(judge, judge, lambda _: None, sleep=clock.sleep, clock=lambda: clock.now)
    assert len(clock.slept) == 4  # 0.5 + 30, 1 + 30, 2 + 30, 4 + 30: past 120 s


def test_a_store_that_answers_but_fails_every_batch_stops_at_the_patience() -> None:
    """The patience is the batch's, not each attempt's: a store that answers its ping and
    fails every commit was otherwise retried for ever."""
    store = Flaky(*[("commit", DOWN)] * 1000)
    with pytest.raises(StoreUnavailableError, match="waited 120 s"):
        run(store)
    assert 5 < store.calls.count("judge") < 40


def test_other_store_errors_are_not_waited_for() -> None:
    store = Flaky(("commit", StoreError("lost the Redis writer lock")))
    with pytest.raises(StoreError, match="writer lock"):
        run(store)
    assert "rollback" not in store.calls and "ping" not in store.calls
