"""Retention: which announcements are still in the window, from their announcement times.

Job ads expire in weeks; a deployment runs for years. With ``--retention 60d`` a document
whose announcement time is more than 60 days before the *clock* leaves the index, and no
later document is a duplicate of it. The clock is the newest announcement time seen so far
(a watermark, kept in the store), never the wall clock: a replay of last year's dump expires
ads as they expired then, and a stream that pauses for a week expires nothing meanwhile.

Times are integer milliseconds since the Unix epoch (exact in a Redis score, a double).
Out of order: an ad older than the newest one does not move the clock back; an ad that is
already older than the window when it arrives is judged against the window and then leaves
it at once. Missing: the caller falls back to the Kafka record time; the detector then to
the clock when a time field is read (as new as the newest ad seen: one untimed row of last
year's dump must not move the clock to today and empty the window; on a fresh store, the
first time of its batch), else, and before any time, to the wall clock.

Logical and physical expiry are apart on purpose: the detector never matches an expired
document (``Window.live``), whether or not the store has removed it yet, so a verdict does
not depend on how far eviction, which does a bounded amount of work per checkpoint, has got.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

# Epoch numbers above this are taken as milliseconds (10^11 s is the year 5138; 10^11 ms is
# March 1973): scrapers write either.
_MS_ABOVE = 10**11
_YEAR_1_MS = -62_135_596_800_000
_YEAR_9999_MS = 253_402_300_799_999
# An announcement dated more than a year after this machine's clock is a typo (3024) or a
# placeholder (31/12/2099): taken, it would move the clock so far that the window empties for
# good (the clock never goes back), so it is refused as unreadable.
AHEAD_AT_MOST_MS = 366 * 86_400_000


def parse_time(value: object) -> int:
    """An announcement time (ISO 8601 text, or epoch seconds or milliseconds as a number or a
    numeric string) -> milliseconds since the epoch. A time without a zone is UTC. Raises
    ValueError saying what was expected, also for a time more than a year ahead."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a time")
    if isinstance(value, int | float | Decimal):
        return _epoch_ms(float(value), str(value))
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected ISO 8601 text or epoch seconds, got {type(value).__name__}")
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        return _epoch_ms(number, text)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text[:40]!r} is neither ISO 8601 (2024-01-31T08:00:00Z) nor "
                         f"epoch seconds") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return _not_ahead(round(parsed.timestamp() * 1000), text)


def _epoch_ms(number: float, text: str) -> int:
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:40]} is not a time")
    ms = round(number if abs(number) >= _MS_ABOVE else number * 1000)
    if not _YEAR_1_MS <= ms <= _YEAR_9999_MS:
        raise ValueError(f"{text[:40]} is outside the years 1-9999")
    return _not_ahead(ms, text)


def _not_ahead(ms: int, text: str) -> int:
    if ms > now_ms() + AHEAD_AT_MOST_MS:
        raise ValueError(f"{text[:40]!r} is more than a year after this machine's clock "
                         f"({datetime.now(UTC):%Y-%m-%d})")
    return ms


def now_ms() -> int:
    return round(datetime.now(UTC).timestamp() * 1000)


class Window:
    """The clock and the cutoff of a retention window of ``length_ms`` (None: keep all)."""

    def __init__(self, length_ms: int | None, clock_ms: int | None = None) -> None:
        self.length_ms = length_ms
        self.clock_ms = clock_ms

    def see(self, time_ms: int) -> None:
        """Move the clock to ``time_ms`` if it is newer (the clock never goes back)."""
        if self.clock_ms is None or time_ms > self.clock_ms:
            self.clock_ms = time_ms

    @property
    def cutoff_ms(self) -> int | None:
        """Documents with a time before this have left the window; None: nothing has."""
        if self.length_ms is None or self.clock_ms is None:
            return None
        return self.clock_ms - self.length_ms

    def live(self, time_ms: int | None) -> bool:
        """Whether a document (or a set, by its newest document's time) is in the window."""
        cutoff = self.cutoff_ms
        return cutoff is None or time_ms is None or time_ms >= cutoff
