"""``streamdedup tail``: one readable line per verdict as it arrives. ``fields`` reads one
(pure), ``Columns`` lines them up; ``follow`` is the loop: records from ``observer.py``,
titles and clusters kept in ``state.py``, a verdict delivered again said once."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from streamdedup.core.verdict import match_jaccard
from streamdedup.monitor.observer import Observer, decode
from streamdedup.monitor.state import MonitorState
from streamdedup.settings import Settings
from streamdedup.terminal import cells, printable


def cluster_size(verdict: Mapping[str, Any], state: MonitorState) -> str:
    """The size of the verdict's cluster in ``state`` now: taken as the verdict is read, so a
    line says the cluster as this verdict left it (printed once its ad's title came, it said
    the size after verdicts read ahead of it: "0  new  cluster 0 (23)" from the beginning).
    "≥N" when its first document came before this reader started."""
    label = str(verdict.get("cluster_id") or verdict.get("id"))
    cluster = state.cluster_of(label)  # a chain of merges: one hop said 1 of 6
    if cluster is None:
        return "1"
    return f"≥{cluster.size + 1}" if cluster.partial else str(cluster.size)


def fields(verdict: Mapping[str, Any], state: MonitorState, width: int = 60,
           size: str | None = None) -> tuple[str, str, str, str]:
    """A verdict's columns: ``id``, ``DUPLICATE of X  J=0.923`` or ``new``, ``cluster C
    (7)``, the title (``""`` when not read), each one line whatever the ad holds
    (``terminal.printable``); ``size``: the cluster's as ``cluster_size`` took it when the
    verdict was read (default: now)."""
    doc_id = str(verdict.get("id"))
    label = str(verdict.get("cluster_id") or doc_id)
    if size is None:
        size = cluster_size(verdict, state)
    title = state.title(doc_id) or ""
    if len(title) > width:
        title = title[: width - 1] + "…"
    if verdict.get("duplicate"):
        # J of this pair: duplicate_of is the earliest match, matches[0] the best (it showed
        # 0.909 beside an X at 0.847); not shown when the cap left X out of matches
        first = verdict.get("duplicate_of")
        matches = [m for m in verdict.get("matches") or [] if isinstance(m, Mapping)]
        pair = match_jaccard(verdict, first)
        what = f"DUPLICATE of {first}" + (f"  J={pair:.3f}" if pair is not None else "")
        if verdict.get("exact"):  # the set equals an earlier one's: the best match, J = 1
            copy = matches[0].get("id") if matches else first
            what += " (exact)" if copy == first else f" (an exact copy of {copy})"
    else:
        what = "new"
    # ids and titles are the ads': printable keeps a terminal's controls out of them
    return (printable(doc_id), printable(what), printable(f"cluster {label} ({size})"),
            printable(title))


class Columns:
    """Pads each column but the last to the widest value said so far, at most ``cap``
    terminal columns (a CJK character takes two, ``terminal.cells``): a stream's ids ran
    from 1 to 4 digits on the Kijiji dump and the titles started anywhere. Widths only
    grow, so a column moves at most a few times early on; one odd 200-character id pads
    nothing past ``cap``."""

    def __init__(self, cap: int = 32) -> None:
        self.cap = cap
        self.widths: list[int] = []

    def join(self, values: tuple[str, ...]) -> str:
        padded = list(values)
        for i, value in enumerate(padded[:-1]):
            if i == len(self.widths):
                self.widths.append(0)
            self.widths[i] = max(self.widths[i], min(width := cells(value), self.cap))
            padded[i] = value + " " * (self.widths[i] - width)
        return "  ".join(padded).rstrip()


# A verdict whose ad is not read yet waits for it at most this long (then goes out untitled):
# a bound for an input topic whose position cannot be asked, not the usual wait (the input
# is caught up within a few seconds even from the beginning of a long topic).
HOLD_S = 30.0


def follow(settings: Settings, observer: Observer, count: int, stop: list[int],
           say: Callable[[str], None], warn: Callable[[str], None]) -> None:
    """Print a line per verdict (``say``) until ``count`` are printed (0: no end) or ``stop``
    holds anything (SIGTERM's handler appends); records that are no verdicts and topics not
    there yet go to ``warn``.

    A verdict waits, in order, until its ad's title is read or the input topic is read past
    the verdict's time: from the beginning the small verdicts are fetched far faster than the
    ads, and 1,234 of 2,000 lines came out without their titles. On SIGTERM or Ctrl-C what
    was read is said, titled or not."""
    state = MonitorState(keep=50_000, id_field=settings.id_field)
    columns = Columns()
    printed = 0
    said: set[str] = set()
    # verdict, its time, since, its cluster's size when read
    held: deque[tuple[dict[str, Any], int, float, str]] = deque()
    read_to: dict[tuple[str, int], int] = {}  # input partition -> its last record's time

    def ad_read(verdict: Mapping[str, Any], at: int, since: float, _size: str) -> bool:
        if state.title(str(verdict.get("id"))) or time.monotonic() - since > HOLD_S:
            return True
        return all(observer.lag.get(tp) == 0 or read_to.get((tp.topic, tp.partition), -1) >= at
                   for tp in observer.assigned if tp.topic == settings.input_topic)

    def release(everything: bool = False) -> None:
        nonlocal printed
        while held and (not count or printed < count) and (
                everything or ad_read(*held[0])):
            body, _at, _since, size = held.popleft()
            say(columns.join(fields(body, state, size=size)))
            printed += 1

    try:
        while not stop and (not count or printed < count):
            for topic, rec in observer.poll(500):
                body = decode(rec, announcement=topic == settings.input_topic)
                if body is None:
                    continue
                if topic == settings.input_topic:
                    state.add_announcement(body, rec.timestamp / 1000)
                    read_to[(topic, rec.partition)] = rec.timestamp
                    continue
                try:
                    if not state.add_verdict(body, rec.timestamp / 1000):
                        continue  # delivered again: said already
                except ValueError as exc:  # no verdict
                    warn(f"skipped a record at {topic}/{rec.partition}/{rec.offset}: {exc}")
                    continue
                if settings.only_duplicates and not body.get("duplicate"):
                    continue
                held.append((body, rec.timestamp, time.monotonic(), cluster_size(body, state)))
            release()
            for topic in sorted(set(observer.health()["waiting_for"]) - said):  # (looked in
                said.add(topic)                                   # the poll) it was silent
                warn(f"waiting for topic {topic}: not on {settings.bootstrap_servers} yet (is "
                     f"{settings.topic_flag(topic)} the detector's?)")
    except KeyboardInterrupt:
        release(everything=True)
        raise
    release(everything=bool(stop))

