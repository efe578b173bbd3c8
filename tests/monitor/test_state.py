"""The monitor's state from verdict fields alone: counts, clusters (merges included), the
verdict log and the per-second series."""

from __future__ import annotations

from typing import Any

import pytest

from streamdedup.monitor.state import MonitorState, link_of
from streamdedup.monitor.tail import fields


def v(doc_id: str, dup_of: str | None = None, cluster: str | None = None,
      merged: tuple[str, ...] = (), jaccard: float = 1.0) -> dict[str, Any]:
    return {"id": doc_id, "duplicate": dup_of is not None, "duplicate_of": dup_of,
            "matches": [{"id": dup_of, "jaccard": jaccard}] if dup_of else [],
            "cluster_id": cluster or dup_of or doc_id, "merged": list(merged)}


def line(verdict: dict[str, Any], st: MonitorState) -> str:
    """``tail``'s columns for a verdict, unpadded."""
    return "  ".join(f for f in fields(verdict, st) if f)


def test_counts_clusters_and_merges() -> None:
    st = MonitorState(clock=lambda: 1000.0)
    for verdict in (v("a"), v("b", "a"), v("c"), v("d", "c"), v("e", "c")):
        st.add_verdict(verdict, at=1000.0)
    assert {k: c.size for k, c in st.clusters.items()} == {"a": 2, "c": 3}
    st.add_verdict(v("f", "a", cluster="a", merged=("c",)), at=1001.0)  # bridges the two
    assert {k: c.size for k, c in st.clusters.items()} == {"a": 6}
    st.add_verdict(v("g", "e", cluster="c"), at=1002.0)  # a late label of the merged cluster
    assert st.clusters["a"].size == 7
    st.add_dead_letter({"reason": "malformed_json"})
    s = st.summary()
    assert (s["verdicts"], s["duplicates"], s["dead_letters"], s["clusters"]) == (7, 5, 1, 1)
    assert s["duplicate_rate"] == round(5 / 7, 6)
    assert s["dead_letters_by_reason"] == {"malformed_json": 1}
    st.add_dead_letter({"reason": "x" * 100_000})  # a record from elsewhere: a key of 80
    st.add_dead_letter({"reason": {"nested": 1}})
    assert st.summary()["dead_letters_by_reason"] == {"malformed_json": 1, "x" * 80: 1,
                                                      "unknown": 1}
    assert [p["verdicts"] for p in st.series()] == [5, 1, 1]


def test_a_label_merged_twice_still_finds_its_cluster_and_growth_moves_with_merges() -> None:
    """B1 merged into A1, then A1 into C1; B2, read last (partitions interleave), still names
    B1: it landed in a new cluster "A1" of one (C1 said 5, not 6). A merge also dropped the
    absorbed cluster's recent arrivals from "fastest growing" (37 ads, 23 recent), and then
    copied a big cluster's every arrival at each merge (158 s for 5,000 merges)."""
    st = MonitorState(clock=lambda: 1010.0, growth_s=300)
    for i, verdict in enumerate((v("C1"), v("A1"), v("B1"),
                                 v("M1", "A1", cluster="A1", merged=("B1",)),
                                 v("M2", "C1", cluster="C1", merged=("A1",)),
                                 v("B2", "B1", cluster="B1"))):
        st.add_verdict(verdict, at=1000.0 + i)
    assert {k: c.size for k, c in st.clusters.items()} == {"C1": 6}
    (top,) = st.top_clusters()["fastest_growing"]
    assert (top["cluster_id"], top["size"], top["added_last_300s"]) == ("C1", 6, 6)
    st.add_verdict(v("M3", "B2", cluster="C1", merged=("B1", "A1")), at=1007.0)  # no cycle
    assert {k: c.size for k, c in st.clusters.items()} == {"C1": 7}
    for i in range(20_000):  # a big cluster, quiet for longer than the window, then merges
        st.add_verdict(v(f"h{i}", "C1", cluster="C1"), at=1000.0 + i / 10)
    for i in range(500):
        st.add_verdict(v(f"s{i}"), at=3000.0)
        st.add_verdict(v(f"t{i}", f"s{i}", cluster="C1", merged=(f"s{i}",)), at=3000.0)
    assert len(st.clusters["C1"].recent) <= 2 * 300 + 3  # seconds, not arrivals
    assert st.clusters["C1"].size == 7 + 20_000 + 1000
    assert st.clusters["C1"].growth(3000.0, 300) == 1000 + 10 * 300  # the last 300 s only


def test_the_log_the_latest_and_the_clusters_views() -> None:
    now = [2000.0]
    st = MonitorState(keep=3, clock=lambda: now[0], growth_s=60)
    st.add_text("a", {"title": "Cameriere a Milano", "description": "..."})
    for i, verdict in enumerate((v("a"), v("b", "a"), v("c", "a"), v("d"))):
        st.add_verdict(verdict, at=2000.0 + i)
    assert [x["id"] for x in st.since(0)] == ["b", "c", "d"]  # only the last 3 are kept
    assert [x["index"] for x in st.since(3)] == [4]
    assert [x["id"] for x in st.since(0, limit=2)] == ["b", "c"]  # pages: oldest first
    # a client of a monitor that restarted asks beyond its index: from the start, not nothing
    assert [x["id"] for x in st.since(100)] == ["b", "c", "d"]
    assert [x["id"] for x in st.latest_duplicates] == ["c", "b"]
    top = st.top_clusters()
    assert top["biggest"][0]["cluster_id"] == "a" and top["biggest"][0]["size"] == 3
    assert top["biggest"][0]["title"] == "Cameriere a Milano"
    now[0] = 2500.0  # past the growth window: nothing grows any more
    assert st.top_clusters()["fastest_growing"] == []
    assert st.verdict("d") is not None and st.verdict("a") is None  # forgotten (keep=3)


def test_a_tail_line_says_what_happened() -> None:
    st = MonitorState()
    st.add_text("b", {"title": "Magazziniere"})
    st.add_verdict(v("a"))
    st.add_verdict(v("b", "a", jaccard=0.9234))
    assert line(v("b", "a", jaccard=0.9234), st) == (
        "b  DUPLICATE of a  J=0.923  cluster a (2)  Magazziniere")
    assert line(v("a"), st) == "a  new  cluster a (2)"
    later = {"id": "c", "duplicate": True, "duplicate_of": "a", "cluster_id": "a",
             "exact": True, "matches": [{"id": "b", "jaccard": 1.0},
                                        {"id": "a", "jaccard": 0.847}]}
    # the best match (b) beside the earliest (a) was shown as a's J, and "(exact)" as a's
    assert line(later, st) == "c  DUPLICATE of a  J=0.847 (an exact copy of b)  cluster a (2)"
    later["matches"] = later["matches"][:1]  # a capped out of the list: no J for the pair
    assert line(later, st).startswith("c  DUPLICATE of a (an exact copy of b)  cluster")


def test_a_cluster_whose_first_document_was_not_read_is_said_as_at_least() -> None:
    """A reader started after an ad said its duplicate's cluster was "(1)". Its first
    document read late (partitions read in no common order) makes the count whole again;
    a merge with a cluster read in part leaves it in part."""
    st = MonitorState(clock=lambda: 1000.0)
    st.add_verdict(v("c", "a"), at=1000.0)
    assert line(v("c", "a"), st) == "c  DUPLICATE of a  J=1.000  cluster a (≥2)"
    assert st.top_clusters(5)["biggest"][0]["partial"] is True
    assert st.summary()["clusters"] == 1  # as /api/clusters lists it
    st.add_verdict(v("a"), at=1000.0)
    assert line(v("a"), st) == "a  new  cluster a (2)" and not st.clusters["a"].partial
    st.add_verdict(v("y", "x"), at=1001.0)
    st.add_verdict(v("z", "a", cluster="a", merged=("x",)), at=1002.0)
    assert line(v("z", "a"), st).endswith("cluster a (≥5)")  # a, c, y, z read; x not


def test_records_that_are_no_verdicts_are_named_and_repeats_not_counted() -> None:
    from streamdedup.monitor.state import verdict_problem

    assert verdict_problem({"id": "a", "duplicate": False, "cluster_id": "a", "seq": 1,
                            "merged": [], "matches": []}) is None
    for bad, why in [({"merged": []}, "no id"), ({"id": "a", "merged": 5}, "merged"),
                     ({"id": "a", "duplicate": "yes"}, "duplicate"),
                     ({"id": "a", "cluster_id": [1]}, "cluster_id"),
                     ({"id": "a", "seq": "x"}, "seq"),
                     ({"id": "a", "matches": [{"id": "b"}]}, "matches"),
                     # 401 digits: formatting it for tail and /api/explain overflowed
                     ({"id": "a", "matches": [{"id": "b", "jaccard": 10 ** 400}]}, "jaccard"),
                     ({"id": "a", "matches": [{"id": "b", "jaccard": -0.5}]}, "jaccard"),
                     ({"id": True}, "no id"), ({"id": 5}, "no duplicate field")]:
        assert why in (verdict_problem(bad) or ""), bad
    state = MonitorState(clock=lambda: 100.0)
    with pytest.raises(ValueError, match="merged is not a list"):
        state.add_verdict({"id": "a", "merged": 5})  # refused before anything is counted
    assert state.verdicts == 0
    first = {"id": "b", "seq": 2, "duplicate": True, "cluster_id": "a", "merged": []}
    assert state.add_verdict({"id": "a", "seq": 1, "duplicate": False, "cluster_id": "a"})
    assert state.add_verdict(first)
    assert not state.add_verdict(dict(first))  # delivered again
    assert state.add_verdict({**first, "seq": 3})  # the same id judged again: a new verdict
    assert not state.add_verdict(dict(first))  # its old verdict re-sent: still a repeat
    summary = state.summary()
    assert (summary["verdicts"], summary["repeated"], summary["duplicates"]) == (3, 2, 2)
    assert state.clusters["a"].size == 3


def test_an_announcement_without_an_id_is_kept_under_the_consumers_automatic_id() -> None:
    """The monitor kept texts by the ``id`` key only: an id-less feed (the consumer gives
    ``auto-`` + a hash) had no titles, no explanations and no `explain` from the topic."""
    import json

    from streamdedup.service.message import decode_message

    st = MonitorState()
    raw = b'{"title": "Cuoco a Milano", "description": "ristorante cerca cuoco", "n": 1.10}'
    st.add_announcement(json.loads(raw))
    doc = decode_message(raw, ("title", "description"), 1 << 20)
    assert doc.id.startswith("auto-") and st.title(doc.id) == "Cuoco a Milano"
    st.add_announcement({"id": 7, "title": "Saldatore"})
    st.add_announcement({"id": True, "title": "not an id"})  # a dead letter: no text kept
    assert st.title("7") == "Saldatore" and st.title("True") is None
    # another ad's automatic id, and a blank one: the consumer refuses both, and an
    # impostor's text must not stand for the real document
    st.add_announcement({"id": doc.id, "title": "SCAM"})
    st.add_announcement({"id": "  ", "title": "blank"})
    assert st.title(doc.id) == "Cuoco a Milano" and st.title("  ") is None


def test_announcements_are_kept_under_the_id_run_reads_with_the_id_field() -> None:
    """With ``--id-field link`` (run reads it since the thirtieth session) the page, ``tail``
    and ``explain`` still read ``id``: every title missing, and "no ad with that id"."""
    import json

    from streamdedup.service.message import decode_message

    st = MonitorState(id_field="link")
    sent = [{"link": "https://x/1", "title": "Cuoco"},
            {"id": "y", "link": " ", "title": "Sarto"},
            {"id": "x", "link": "https://x/3", "title": "Fabbro"}]
    for body in sent:
        st.add_announcement(body)
    ids = [decode_message(json.dumps(b).encode(), ("title",), 1 << 20, id_field="link").id
           for b in sent]
    assert ids == ["https://x/1", "y", "https://x/3"]
    assert [st.title(i) for i in ids] == ["Cuoco", "Sarto", "Fabbro"] and st.title("x") is None


def test_the_series_is_in_time_order_whatever_order_the_partitions_gave() -> None:
    """Seconds were listed in arrival order: with 3 verdict partitions the chart's axis ended
    at the last second added, and the newest second was not drawn."""
    st = MonitorState(window_s=10)
    for at in (100, 101, 105, 102, 103, 104, 90, 101):
        st.add_verdict(v(f"d{at}-{len(st.log)}"), at=float(at))
    assert [p["t"] for p in st.series()] == [100, 101, 102, 103, 104, 105]
    assert [p["verdicts"] for p in st.series()] == [1, 2, 1, 1, 1, 1]


def test_a_tail_line_follows_a_chain_of_merges_and_a_cluster_keeps_its_first_and_last() -> None:
    """tail looked a label up one merge deep: after a0 -> b0 -> c0 a verdict in a0 said
    "cluster a0 (1)" of 6. Partitions are read in no common order, and a cluster's
    last_seen was the last verdict read, first_seen could pass it."""
    st = MonitorState()
    for at, verdict in enumerate((v("c0"), v("b0"), v("a0"), v("a1", "a0"),
                                  v("x4", "b0", merged=("a0",)),
                                  v("x5", "c0", merged=("b0",)))):
        st.add_verdict(verdict, at=1000.0 + at)
    assert line(v("a1", "a0"), st) == "a1  DUPLICATE of a0  J=1.000  cluster a0 (6)"
    st = MonitorState()
    for at in (1600.0, 900.0, 1300.0):
        st.add_verdict(v(f"z{at}", cluster="z"), at=at)
    assert (st.clusters["z"].first_seen, st.clusters["z"].last_seen) == (900.0, 1600.0)
    st.add_verdict(v("y"), at=1700.0)
    st.add_verdict(v("w", "z", cluster="z", merged=("y",)), at=1650.0)  # y merged, read late
    assert (st.clusters["z"].first_seen, st.clusters["z"].last_seen) == (900.0, 1700.0)


def test_the_series_counts_duplicates_and_forgets_seconds_past_its_window() -> None:
    st = MonitorState(clock=lambda: 200.0, window_s=10)
    for doc_id, dup_of, at in (("a", None, 100.0), ("b", "a", 100.5), ("c", None, 101.0)):
        st.add_verdict(v(doc_id, dup_of), at=at)
    assert st.series() == [{"t": 100, "verdicts": 2, "duplicates": 1},
                           {"t": 101, "verdicts": 1, "duplicates": 0}]
    st.add_verdict(v("d"), at=110.0)  # 100 is still within 10 s of the newest
    assert [p["t"] for p in st.series()] == [100, 101, 110]
    st.add_verdict(v("e"), at=120.0)  # after a gap: the old seconds go, the new one stays
    assert st.series() == [{"t": 110, "verdicts": 1, "duplicates": 0},
                           {"t": 120, "verdicts": 1, "duplicates": 0}]
    assert list(st.per_second) == [110, 120]  # forgotten, not only hidden


def test_biggest_clusters_come_first_and_a_client_up_to_date_gets_nothing_new() -> None:
    st = MonitorState(clock=lambda: 1000.0)
    for verdict in (v("a"), v("b", "a"), v("c"), v("d", "c"), v("e", "c"), v("lone")):
        st.add_verdict(verdict, at=1000.0)
    assert [(c["cluster_id"], c["size"]) for c in st.top_clusters()["biggest"]] == [
        ("c", 3), ("a", 2)]
    assert [c["cluster_id"] for c in st.top_clusters(limit=1)["biggest"]] == ["c"]
    assert st.summary()["clusters"] == 2
    assert st.since(st.index) == [] and len(st.since(st.index - 2)) == 2


def test_the_id_map_keeps_the_most_recently_seen_ids() -> None:
    st = MonitorState(clock=lambda: 1000.0, keep=2)
    for verdict in (v("a"), v("b"), {**v("a"), "seq": 9}, v("c")):
        st.add_verdict(verdict, at=1000.0)
    assert list(st.by_id) == ["a", "c"]  # a was seen again after b


def test_an_id_keeps_its_last_four_texts_each_read_as_of_a_time() -> None:
    """A scraper's id may come again with its ad edited: the monitor keeps the last
    ``TEXT_VERSIONS`` (4) texts, each with when it came, so a duplicate is explained with the
    text its original had then; the same text again keeps its first time."""
    st = MonitorState()
    for k in range(6):
        st.add_text("a", {"title": f"version {k}"}, at=100.0 + k)
    st.add_text("a", {"title": "version 5"}, at=200.0)  # the last text again: not a version
    assert [t for t, _ in st.texts["a"]] == [102.0, 103.0, 104.0, 105.0]
    assert st.text("a") == (105.0, {"title": "version 5"})
    assert st.text("a", at=103.5) == (103.0, {"title": "version 3"})
    assert st.text("a", at=103.0) == (103.0, {"title": "version 3"})  # came by then
    assert st.text("a", at=50.0) == (102.0, {"title": "version 2"})  # the oldest kept
    st.add_text("a", {"title": "version 2"}, at=300.0)  # an older text back: a new version
    assert st.text("a") == (300.0, {"title": "version 2"}) and len(st.texts["a"]) == 4
    assert st.text("nobody") is None


def test_a_clusters_members_follow_merges_newest_first_each_id_once() -> None:
    st = MonitorState()
    st.add_text("a", {"title": "Cuoco", "link": "https://www.kijiji.it/annunci/1"})
    st.add_text("c", {"title": "Cameriere", "url": "HTTP://example.org/c"})
    st.add_verdict(v("a"))
    st.add_verdict(v("b", "a", jaccard=0.91))
    st.add_verdict(v("c"))
    st.add_verdict(v("d", "c", jaccard=0.85))
    st.add_verdict(v("e", "a", cluster="a", merged=("c",)))  # bridges the two clusters
    st.add_verdict(v("z"))  # another cluster
    st.add_verdict({**v("b", "a", jaccard=0.95), "seq": 7})  # b again, another text
    found = st.members("c")  # a label merged away names the cluster it went into
    assert found is not None
    assert (found["cluster_id"], found["size"], found["kept"]) == ("a", 6, 5)  # b twice
    assert found["links"] == 2  # a's and c's
    assert [m["id"] for m in found["members"]] == ["b", "e", "d", "c", "a"]
    assert found["members"][0] == {"id": "b", "index": 7, "duplicate_of": "a", "jaccard": 0.95,
                                   "title": None, "link": None}
    by_id = {m["id"]: m for m in found["members"]}
    assert by_id["a"]["link"] == "https://www.kijiji.it/annunci/1"
    assert (by_id["c"]["title"], by_id["c"]["link"]) == ("Cameriere", "HTTP://example.org/c")
    assert by_id["a"]["duplicate_of"] is None and by_id["a"]["jaccard"] is None
    assert [m["id"] for m in st.members("a", limit=2)["members"]] == ["b", "e"]  # type: ignore[index]
    assert st.members("nobody") is None
    assert st.members("d")["cluster_id"] == "a"  # type: ignore[index]  # a member's own id


def test_members_older_than_the_kept_verdicts_are_counted_not_listed() -> None:
    st = MonitorState(keep=3)
    for i in range(6):
        st.add_verdict(v(f"d{i}", "a" if i else None, cluster="a"))
    found = st.members("a")
    assert found is not None and (found["size"], found["kept"]) == (6, 3)


@pytest.mark.parametrize(("fields", "link"), [
    ({"link": "https://www.kijiji.it/x"}, "https://www.kijiji.it/x"),
    ({"link": " http://a.example/ "}, "http://a.example/"),
    ({"link": "javascript:alert(1)", "url": "https://b.example"}, "https://b.example"),
    ({"link": "javascript:alert(1)"}, None),  # would run on a click
    ({"url": "data:text/html,<script>"}, None),
    ({"link": "//evil.example"}, None),
    ({"title": "no link"}, None),
])
def test_an_ads_link_is_http_or_https_only(fields: dict[str, str], link: str | None) -> None:
    assert link_of(fields) == link
