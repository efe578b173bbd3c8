"""Retention's times and window (``core/retention.py``): durations, reading a time, the
clock as a watermark. The detector forgetting what left the window, on every store backend:
tests/detection/test_detector_retention.py.
"""

from __future__ import annotations

import pytest

from streamdedup.core import retention as retention_module
from streamdedup.core.retention import AHEAD_AT_MOST_MS, Window, now_ms, parse_time
from streamdedup.errors import ConfigError
from streamdedup.settings import build_settings, parse_duration

DAY = 86_400_000


# --- reading times and windows
def test_durations() -> None:
    assert parse_duration("60d") == 60 * DAY
    assert parse_duration("12h") == 12 * 3_600_000
    assert parse_duration("1d12h") == 36 * 3_600_000
    assert parse_duration("1.5h") == 5_400_000
    assert parse_duration("") is None
    for bad in ("60", "d", "-1d", "0d", "60 days", "1d x"):
        with pytest.raises(ConfigError, match="retention must be"):
            parse_duration(bad)
    with pytest.raises(ConfigError, match="retention must be"):
        build_settings(overrides={"retention": "sixty days"})
    assert parse_duration("36500d") == 36_500 * DAY
    with pytest.raises(ConfigError, match="at most 100 years"):  # was an OverflowError at
        parse_duration("999999999999d")                           # a SQLite eviction
    assert build_settings(env={"STREAMDEDUP_RETENTION": "12h"}).retention_ms == 43_200_000


def test_a_redis_cluster_refuses_retention_with_one_line() -> None:
    with pytest.raises(ConfigError, match="shared protocol"):
        build_settings(overrides={"retention": "60d", "store_backend": "redis",
                                  "redis_url": "redis://127.0.0.1:1/0", "redis_cluster": True})


def test_times() -> None:
    assert parse_time("2024-01-01T00:00:00Z") == 1_704_067_200_000
    assert parse_time("2024-01-01") == 1_704_067_200_000
    assert parse_time(1_704_067_200) == parse_time(1_704_067_200_000) == 1_704_067_200_000
    assert parse_time(" 1704067200 ") == 1_704_067_200_000
    for bad in ("yesterday", "", True, None, float("nan"), 1e300, [1]):
        with pytest.raises(ValueError):
            parse_time(bad)


def test_a_time_without_a_zone_is_utc_whatever_the_machines_zone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Read in the machine's zone, the same dump would get other times (and, with
    retention, other verdicts) on a machine set to Toronto."""
    import time

    monkeypatch.setenv("TZ", "America/Toronto")
    time.tzset()
    try:
        assert parse_time("2024-01-01T08:00:00") == parse_time("2024-01-01T08:00:00Z")
        assert parse_time("2024-07-01") == 1_719_792_000_000
    finally:
        monkeypatch.undo()
        time.tzset()


def test_the_edges_of_what_a_time_may_be() -> None:
    """10^11 is where a number stops being seconds (the year 5138) and starts being
    milliseconds (March 1973); the years 1 to 9999 are what ISO 8601 text can say."""
    assert parse_time(10**11) == 10**11  # milliseconds
    with pytest.raises(ValueError, match="more than a year after"):
        parse_time(10**11 - 1)  # seconds: the year 5138
    assert parse_time(-62_135_596_800_000) == -62_135_596_800_000  # 0001-01-01
    with pytest.raises(ValueError, match="outside the years 1-9999"):
        parse_time(-62_135_596_800_001)
    assert parse_time("0001-01-01T00:00:00Z") == -62_135_596_800_000


def test_a_time_exactly_a_year_ahead_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    now = 1_704_067_200_000  # 2024-01-01
    monkeypatch.setattr(retention_module, "now_ms", lambda: now)
    assert parse_time(now + AHEAD_AT_MOST_MS) == now + AHEAD_AT_MOST_MS
    with pytest.raises(ValueError, match="more than a year after"):
        parse_time(now + AHEAD_AT_MOST_MS + 1)


def test_now_is_the_wall_clock_in_milliseconds() -> None:
    """The arrival time of an untimed document, before any clock."""
    import time

    assert abs(now_ms() - time.time() * 1000) < 1000


def test_a_time_more_than_a_year_ahead_is_refused() -> None:
    """A typo (3024) or a placeholder (2099) would move the clock past every ad for good."""
    soon = now_ms() + 300 * DAY
    assert parse_time(soon) == soon
    assert parse_time(soon // 1000) == soon // 1000 * 1000
    for bad in ("3024-01-31", "2099-12-31T00:00:00Z", now_ms() + 400 * DAY,
                str((now_ms() + 400 * DAY) // 1000)):
        with pytest.raises(ValueError, match="more than a year after this machine's clock"):
            parse_time(bad)


def test_the_clock_is_a_watermark() -> None:
    w = Window(10)
    assert w.cutoff_ms is None and w.live(0)
    w.see(100)
    w.see(50)  # out of order: the clock does not go back
    assert w.clock_ms == 100 and w.cutoff_ms == 90
    assert w.live(90) and not w.live(89) and w.live(None)
    assert Window(None, 100).cutoff_ms is None
