"""`tail`'s loop with a scripted observer: a verdict waits for its ad's title."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from kafka import TopicPartition

from streamdedup.monitor.state import MonitorState
from streamdedup.monitor.tail import Columns, fields, follow
from streamdedup.settings import build_settings

SETTINGS = build_settings("default", env={})
IN, OUT = SETTINGS.input_topic, SETTINGS.output_topic


def raw(topic: str, value: bytes, at: int) -> tuple[str, Any]:
    return topic, SimpleNamespace(value=value, topic=topic, partition=0, offset=at, timestamp=at)


def record(topic: str, body: dict[str, Any], at: int) -> tuple[str, Any]:
    return raw(topic, json.dumps(body).encode(), at)


class Scripted:
    """Polls hand out ``rounds`` in turn; the input's lag is what each round says."""

    def __init__(self, rounds: list[tuple[list[tuple[str, Any]], int]]) -> None:
        self.rounds = rounds
        self.assigned = {TopicPartition(IN, 0), TopicPartition(OUT, 0)}
        self.lag: dict[TopicPartition, int] = {}

    def poll(self, timeout_ms: int) -> list[tuple[str, Any]]:
        records, input_lag = self.rounds.pop(0) if self.rounds else ([], 0)
        self.lag = {TopicPartition(IN, 0): input_lag}
        return records

    def health(self) -> dict[str, Any]:
        return {"waiting_for": []}


def verdict(doc_id: str) -> dict[str, Any]:
    return {"id": doc_id, "duplicate": False, "cluster_id": doc_id, "seq": int(doc_id[1:])}


def test_a_verdict_read_before_its_ad_waits_for_its_title() -> None:
    """From the beginning, verdicts (small) are fetched far ahead of the ads (large): half of
    2,200 lines had no title. A verdict now waits until its ad is read, or the input topic is
    read past the verdict's time, or holds nothing more to read."""
    rounds = [
        ([record(OUT, verdict("a1"), 10), record(OUT, verdict("a2"), 20),
          record(OUT, verdict("a3"), 30)], 3),
        ([record(IN, {"id": "a1", "title": "Cuoco"}, 5)], 2),
        ([record(IN, {"id": "a2", "title": "Saldatore"}, 15),
          record(IN, {"id": "x", "title": "another"}, 31)], 4),  # a3 has no title: read past
                                                                  # its time, more to read
    ]
    lines: list[str] = []
    follow(SETTINGS, Scripted(rounds), 3, [], lines.append, lambda _: None)
    assert lines == ["a1  new  cluster a1 (1)  Cuoco", "a2  new  cluster a2 (1)  Saldatore",
                     "a3  new  cluster a3 (1)"]


def test_a_stop_says_what_was_held() -> None:
    stop: list[int] = []
    rounds = [([record(OUT, verdict("b1"), 10)], 5)]

    class Stopping(Scripted):
        def poll(self, timeout_ms: int) -> list[tuple[str, Any]]:
            out = super().poll(timeout_ms)
            stop.append(1)  # SIGTERM arrives while the ad is still unread
            return out

    lines: list[str] = []
    follow(SETTINGS, Stopping(rounds), 0, stop, lines.append, lambda _: None)
    assert lines == ["b1  new  cluster b1 (1)"]


def test_ctrl_c_says_what_was_held() -> None:
    """Ctrl-C (a KeyboardInterrupt out of the poll) lost up to 30 s of verdicts read."""
    import pytest

    class Interrupted(Scripted):
        def poll(self, timeout_ms: int) -> list[tuple[str, Any]]:
            if not self.rounds:
                raise KeyboardInterrupt
            return super().poll(timeout_ms)

    lines: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        follow(SETTINGS, Interrupted([([record(OUT, verdict("c1"), 10)], 5)]), 0, [],
               lines.append, lambda _: None)
    assert lines == ["c1  new  cluster c1 (1)"]


def test_a_line_says_the_cluster_as_its_verdict_left_it_not_as_verdicts_read_ahead_did() -> None:
    """From the beginning a verdict waits for its ad while later verdicts are read: the
    first ad of a cluster was said "new  cluster 0 (23)" (the 23 read by then), though it
    was one alone when judged, and differently from one run to the next."""
    dup = {"id": "a2", "duplicate": True, "duplicate_of": "a1", "cluster_id": "a1", "seq": 2,
           "matches": [{"id": "a1", "jaccard": 0.9}]}
    rounds = [
        ([record(OUT, verdict("a1"), 10), record(OUT, dup, 20)], 2),
        ([record(IN, {"id": "a1", "title": "Cuoco"}, 5),
          record(IN, {"id": "a2", "title": "Cuoco!"}, 15)], 0),
    ]
    lines: list[str] = []
    follow(SETTINGS, Scripted(rounds), 2, [], lines.append, lambda _: None)
    assert lines == ["a1  new  cluster a1 (1)  Cuoco",
                     "a2  DUPLICATE of a1  J=0.900  cluster a1 (2)  Cuoco!"]


def test_a_count_a_filter_a_repeat_and_a_record_that_is_no_json() -> None:
    """``--count N`` prints N lines; ``--only-duplicates`` leaves the new ads out; a
    verdict delivered again is said once; a record that is not JSON is passed over."""
    dup = {**verdict("a2"), "duplicate": True, "duplicate_of": "a1", "cluster_id": "a1",
           "matches": [{"id": "a1", "jaccard": 1.0}]}
    rounds = [([record(IN, {"id": "a1", "title": "Cuoco"}, 1),
                record(IN, {"id": "a2", "title": "Cuoco"}, 2),
                record(IN, {"id": "a3", "title": "Fabbro"}, 3),
                record(OUT, verdict("a1"), 10), raw(OUT, b"\xff not json", 11),
                record(OUT, dup, 20), record(OUT, dup, 21), record(OUT, verdict("a3"), 30)],
               0)]
    lines: list[str] = []
    follow(SETTINGS, Scripted(list(rounds)), 1, [], lines.append, lambda _: None)
    assert lines == ["a1  new  cluster a1 (1)  Cuoco"]
    lines.clear()
    only = SETTINGS.replace(only_duplicates=True)
    follow(only, Scripted(list(rounds)), 1, [], lines.append, lambda _: None)
    assert len(lines) == 1 and lines[0].startswith("a2  DUPLICATE of a1"), lines
    lines.clear()
    follow(SETTINGS, Scripted(list(rounds)), 3, [], lines.append, lambda _: None)
    assert [x.split()[0] for x in lines] == ["a1", "a2", "a3"]  # a2 once


class Watched(Scripted):
    """Also notes how many lines were out when each poll began (what the last poll let go)."""

    def __init__(self, rounds: list[tuple[list[tuple[str, Any]], int]],
                 lines: list[str]) -> None:
        super().__init__(rounds)
        self.lines = lines
        self.out_at_poll: list[int] = []

    def poll(self, timeout_ms: int) -> list[tuple[str, Any]]:
        self.out_at_poll.append(len(self.lines))
        return super().poll(timeout_ms)


def test_verdicts_go_out_in_order_once_the_input_holds_nothing_more() -> None:
    """A verdict whose ad is read still waits behind an earlier one that has none yet; both
    go when the input is read to its end (lag 0), the first untitled, not before."""
    rounds = [
        ([record(OUT, verdict("b1"), 10), record(OUT, verdict("b2"), 20)], 3),
        ([record(IN, {"id": "b2", "title": "Sarto"}, 6)], 1),  # b2's ad, not past b1's time
        ([], 0),
    ]
    lines: list[str] = []
    observer = Watched(rounds, lines)
    follow(SETTINGS, observer, 2, [], lines.append, lambda _: None)
    assert lines == ["b1  new  cluster b1 (1)", "b2  new  cluster b2 (1)  Sarto"]
    assert observer.out_at_poll == [0, 0, 0]  # both let go by the third poll, not earlier


def test_a_verdict_waits_for_its_ad_thirty_seconds_at_most(monkeypatch: Any) -> None:
    """An input topic that never says where it ends (its lag unknown) and never brings the
    ad: the verdict goes out untitled after ``HOLD_S``, not never."""
    from streamdedup.monitor import tail

    now = [1000.0]
    monkeypatch.setattr(tail.time, "monotonic", lambda: now[0])

    class Unknown(Watched):
        def poll(self, timeout_ms: int) -> list[tuple[str, Any]]:
            out = super().poll(timeout_ms)
            self.lag = {}  # the input's position cannot be asked
            now[0] += 10.0
            return out

    lines: list[str] = []
    observer = Unknown([([record(OUT, verdict("c1"), 10)], 0)] + [([], 0)] * 5, lines)
    follow(SETTINGS, observer, 1, [], lines.append, lambda _: None)
    assert lines == ["c1  new  cluster c1 (1)"]
    # read at 1010; still held at 1020, 1030, 1040 (30 s, not over); out after the poll at 1050
    assert observer.out_at_poll == [0, 0, 0, 0, 0]


def test_a_line_holds_no_control_of_the_ads_and_stays_one_line() -> None:
    """A title holding ESC ] 0 ; ... BEL renamed the terminal's window, a newline made two
    lines of one verdict, U+202E turned what followed around."""
    state = MonitorState()
    state.add_text("b\x1b[2J", {"title": "Cuoco\nurgente \x1b]0;pwned\x07 \u202eEUR"})
    body = {"id": "b\x1b[2J", "duplicate": True, "duplicate_of": "a\u202e", "cluster_id": "a",
            "matches": [{"id": "a\u202e", "jaccard": 0.9}]}
    assert fields(body, state) == ("b\\x1b[2J", "DUPLICATE of a\\u202e  J=0.900", "cluster a (1)",
                                   "Cuoco urgente \\x1b]0;pwned\\x07 \\u202eEUR")


def test_columns_line_up_as_ids_and_verdicts_widen() -> None:
    """The Kijiji dump's ids run from 1 to 4 digits: each line's cluster and title started
    where its id and verdict happened to end. Columns now pad to the widest said so far."""
    dup = {"id": "1234", "duplicate": True, "duplicate_of": "7", "cluster_id": "7",
           "seq": 2, "matches": [{"id": "7", "jaccard": 0.9}]}
    rounds = [([record(IN, {"id": "7", "title": "Cuoco"}, 1),
                record(IN, {"id": "1234", "title": "Cuoco!"}, 2),
                record(IN, {"id": "88", "title": "Sarto"}, 3),
                record(OUT, verdict("a7") | {"id": "7", "cluster_id": "7"}, 10),
                record(OUT, dup, 20),
                record(OUT, verdict("a88") | {"id": "88", "cluster_id": "88"}, 30)], 0)]
    lines: list[str] = []
    follow(SETTINGS, Scripted(rounds), 3, [], lines.append, lambda _: None)
    assert lines == ["7  new  cluster 7 (1)  Cuoco",
                     "1234  DUPLICATE of 7  J=0.900  cluster 7 (2)  Cuoco!",
                     "88    " + "new".ljust(len("DUPLICATE of 7  J=0.900")) +
                     "  cluster 88 (1)  Sarto"]


def test_a_column_is_padded_to_its_cap_at_most_and_a_line_ends_without_spaces() -> None:
    columns = Columns(cap=8)
    assert columns.join(("x" * 40, "new", "")) == "x" * 40 + "  new"
    assert columns.join(("y", "new", "")) == "y" + " " * 7 + "  new"


def test_a_wide_character_takes_two_columns() -> None:
    """An id of CJK characters (two terminal columns each) was padded by its length."""
    columns = Columns()
    columns.join(("求人", "new", ""))  # 4 columns wide
    assert columns.join(("ab", "new", "")) == "ab    new"
