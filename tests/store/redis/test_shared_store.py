"""The shared protocol on a real redis-server and a real 3-master Redis Cluster: each step's
contract, then the detector on it: the single writer's verdicts, documents judged at the same
moment by several consumers, and a consumer that dies between claim and verdict."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED_STORES
from shingle_sets import u64

from harness.seq_truth import check_seq_order, reader_clusters
from streamdedup.core.document import Document
from streamdedup.core.sketch import Sketcher
from streamdedup.detection.detector import Detector
from streamdedup.detection.shared_detector import SharedDetector, detector_for
from streamdedup.replay.dump import read_dump
from streamdedup.settings import Settings, build_settings
from streamdedup.store.memory import MemoryStore
from streamdedup.store.shared_store import Claim

pytestmark = pytest.mark.parametrize("kind", SHARED_STORES)
Make = Callable[..., Any]


def kijiji_docs(path: Path, settings: Settings, n: int) -> list[Document]:
    return [d for _, d in read_dump(path, None, settings.text_fields)
            if isinstance(d, Document)][:n]


# --- the protocol, step by step
def test_claim_gives_seqs_in_order_and_the_same_seq_until_finished(kind: str,
                                                                    make_shared: Make) -> None:
    st = make_shared(kind)
    a, b, again = st.claim([("a", 7, True), ("b", 7, True), ("a", 7, True)])
    assert (a.seq, b.seq) == (1, 2) and again == Claim(1, None)
    assert st.firsts([7, 8]) == {7: 1}
    assert st.members_before([(7, 2), (7, 3), (7, 1)], 10) == [[(1, "a")], [(1, "a"), (2, "b")],
                                                              []]
    assert st.finish([("a", 1, 7, '{"v":"a"}'), ("a", 1, 7, '{"v":"late"}')]) == [
        '{"v":"a"}', '{"v":"a"}']  # first writer wins
    assert st.claim([("a", 7, True)]) == [Claim(0, '{"v":"a"}')]


def test_a_member_keeps_none_of_the_servers_answers(kind: str, make_shared: Make) -> None:
    """The single writer keeps what the server answered until its commit (nobody else
    writes its namespace); a group's members share theirs, so another member's set is
    seen at once, within the same checkpoint."""
    st = make_shared(kind)
    other = make_shared(kind, st.namespace)
    assert st.get_sets([5]) == {} and st.get_docs(["a"]) == {}
    other.r.hset(other.k("set", 5), mapping={"first_seq": 1, "first_id": "a", "parent": 5})
    other.r.hset(other.k("docs"), "a", "1 5\n{}")
    assert st.get_sets([5])[5].first_id == "a" and st.get_docs(["a"])["a"].set_id == 5


def test_every_ledger_step_refuses_a_namespace_that_lost_its_store_id(
        kind: str, make_shared: Make) -> None:
    """The fence: a server restarted without its data has no store id, and a step that
    wrote into it anyway put a batch into the empty namespace out of order. Each step is
    refused as an unavailable store, and the seq counter does not move."""
    from streamdedup.errors import StoreUnavailableError

    st = make_shared(kind)
    (a,) = st.claim([("a", 7, True)])
    st.r.delete(st.k("meta"))
    for step in (lambda: st.claim([("b", 7, True)]), lambda: st.members_before([(7, 5)], 10),
                 lambda: st.join([("a", a.seq, 7, [])]),
                 lambda: st.finish([("a", a.seq, 7, '{"v":"a"}')])):
        with pytest.raises(StoreUnavailableError, match="STOREGONE"):
            step()
    assert int(st.r.get(st.k("seq"))) == a.seq


def test_members_before_lists_at_most_limit_past_a_member_that_left(
        kind: str, make_shared: Make) -> None:
    st = make_shared(kind)
    claims = st.claim([(d, 7, True) for d in "abcd"])
    st.finish([(d, c.seq, 7, "{}") for d, c in zip("abcd", claims, strict=True)])
    st.claim([("a", 8, True)])  # a's new text: a leaves set 7
    assert st.members_before([(7, 99)], 2) == [[(claims[1].seq, "b"), (claims[2].seq, "c")]]


def test_a_new_text_for_an_id_is_a_new_arrival_and_the_old_one_keeps_its_verdict(
        kind: str, make_shared: Make) -> None:
    st = make_shared(kind)
    st.claim([("x", 1, True), ("y", 5, True)])
    st.finish([("x", 1, 1, '{"old":1}')])
    (new,) = st.claim([("x", 2, True)])
    assert new.seq == 3
    # x left its old set at seq 3: it still counts for y (seq 2), for nothing after
    assert st.members_before([(1, 2), (1, 3), (1, 9)], 10) == [[(1, "x")], [], []]
    assert st.members_before([(2, 9)], 10) == [[(3, "x")]]
    assert st.claim([("x", 1, True)]) == [Claim(0, '{"old":1}')]
    (empty,) = st.claim([("e", 3, False)])  # no shingles: a seq, no set
    assert empty.seq == 4 and st.firsts([3]) == {}


def test_a_claim_never_finished_keeps_its_seq_after_the_id_got_another_text(
        kind: str, make_shared: Make) -> None:
    """X:A claimed and its consumer died; X:B claimed; then both redelivered (after a crash,
    in their partition's order): each pair keeps its seq, and X is a member of B from then
    on, of A only before B arrived."""
    st = make_shared(kind)
    (a, _, b) = st.claim([("x", 1, True), ("y", 9, True), ("x", 2, True)])
    assert st.claim([("x", 1, True), ("x", 2, True)]) == [Claim(a.seq, None),
                                                          Claim(b.seq, None)]
    assert st.members_before([(1, b.seq - 1), (1, b.seq), (1, b.seq + 5), (2, b.seq + 5)],
                             10) == [[(a.seq, "x")], [], [], [(b.seq, "x")]]
    st.finish([("x", a.seq, 1, '{"a":1}'), ("x", b.seq, 2, '{"b":1}')])
    assert st.claim([("x", 1, True), ("x", 2, True)]) == [Claim(0, '{"a":1}'),
                                                          Claim(0, '{"b":1}')]


def test_publish_and_probe_see_only_sets_of_possible_sizes(kind: str, make_shared: Make
                                                           ) -> None:
    st = make_shared(kind)
    st.publish([(11, u64(1, 2, 3), [100, 101]), (12, u64(*range(50)), [100])])
    assert st.probe_many([[100, 101, 102], [100]], [(1, 10), (40, 60)]) == [{11: 2}, {12: 1}]
    assert st.get_shingles([11, 99]) == {11: pytest.approx(u64(1, 2, 3))}
    assert st.known([11, 12]) == set()  # published, not claimed
    st.claim([("d", 11, True)])
    assert st.known([11, 12]) == {11}


def test_join_merges_under_the_earliest_root_without_cycles(kind: str, make_shared: Make
                                                            ) -> None:
    st = make_shared(kind)
    st.claim([("a", 1, True), ("b", 2, True), ("c", 3, True), ("d", 4, True)])
    assert st.join([("a", 1, 1, [])]) == [("a", ())]
    assert st.join([("c", 3, 3, [2])]) == [("b", ())]  # c's new singleton is not named
    assert st.join([("d", 4, 4, [3, 1])]) == [("a", ("b",))]
    # b's first join; d's again, not yet finished (a redo): the answer it got, not a new one
    assert st.join([("b", 2, 2, [1]), ("d", 4, 4, [2, 3])]) == [("a", ()), ("a", ("b",))]
    roots = {s: st.get_sets([s])[s].parent for s in (1, 2, 3, 4)}
    assert roots[1] == 1 and all(p != s for s, p in roots.items() if s != 1)


def test_a_new_set_a_later_document_named_as_its_cluster_is_named_when_it_merges(
        kind: str, make_shared: Make) -> None:
    """b claims seq 2; c (seq 3, on another consumer) matches b's new set and joins first,
    so c's verdict names cluster "b". When b then joins a's cluster, its verdict must say
    that cluster "b" merged into "a": it said nothing, and c stayed in a cluster of one."""
    st = make_shared(kind)
    st.claim([("a", 1, True), ("b", 2, True), ("c", 3, True)])
    assert st.join([("a", 1, 1, [])]) == [("a", ())]
    assert st.join([("c", 3, 3, [2])]) == [("b", ())]
    assert st.join([("b", 2, 2, [1])]) == [("a", ("b",))]
    st.claim([("d", 4, True)])  # no later document named d's set: not named, as before
    assert st.join([("d", 4, 4, [1])]) == [("a", ())]


# --- the detector on it
@pytest.mark.dump
def test_one_consumer_gets_the_single_writers_verdicts(kind: str, make_shared: Make,
                                                        kijiji_path: Path) -> None:
    """1,500 Kijiji rows in batches of 97: every field equal to the SQLite-free single writer
    (memory store) except candidates and skipped, which count differently (the shared
    detector probes exact copies too)."""
    settings = build_settings("reference", env={})
    docs = kijiji_docs(kijiji_path, settings, 1500)
    single, shared = Detector(settings, MemoryStore()), detector_for(settings, make_shared(kind))
    assert isinstance(shared, SharedDetector)
    want, got = [], []
    for start in range(0, len(docs), 97):
        want += [v.to_dict() for v in single.process_many(docs[start:start + 97])]
        got += [v.to_dict() for v in shared.process_many(docs[start:start + 97])]
    for v in want + got:
        del v["candidates"], v["skipped"]
    assert got == want
    assert sum(v["duplicate"] for v in got) > 900
    assert [v["seq"] for v in got] == list(range(1, len(docs) + 1))


@pytest.mark.dump
def test_three_consumers_at_once_follow_the_seq_definition(kind: str, make_shared: Make,
                                                          kijiji_path: Path) -> None:
    """Three threads, each its own connection and detector, judge interleaved thirds of 900
    Kijiji rows in batches of 7 at the same time: every verdict agrees with exact Jaccard
    in seq order, matches name only earlier seqs, never the document itself."""
    settings = build_settings("reference", env={})
    docs = kijiji_docs(kijiji_path, settings, 900)
    namespace = f"group-{kind}-{id(docs)}"
    results: list[list[Any]] = [[], [], []]
    errors: list[BaseException] = []
    detectors = [SharedDetector(settings, make_shared(kind, namespace)) for _ in range(3)]

    def member(k: int) -> None:
        mine = docs[k::3]
        try:
            for start in range(0, len(mine), 7):
                results[k] += detectors[k].process_many(mine[start:start + 7])
        except BaseException as exc:  # surfaced below: a thread's error is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=member, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    verdicts = {v.id: v.to_dict() for part in results for v in part}
    assert len(verdicts) == len(docs)
    assert sorted(v["seq"] for v in verdicts.values()) == list(range(1, len(docs) + 1))
    sk = Sketcher(settings)
    report = check_seq_order(verdicts, {d.id: sk.shingle_fields(d.fields).shingles
                                        for d in docs}, settings.threshold)
    assert (report["false_positives"], report["false_negatives"],
            report["self_or_later_matches"], report["repeated_seqs"],
            report["clusters_unlike_the_truth"]) == (0, 0, 0, 0, 0), report
    assert report["true_duplicates"] > 400 and report["clusters"] < 600


def test_two_near_duplicates_judged_at_the_same_moment_see_each_other(kind: str,
                                                                     make_shared: Make) -> None:
    """A claims first, B judges completely before A judges: B (later seq) is the duplicate,
    A is not, although A's probe sees B's set."""
    settings = Settings()
    ns = f"pair-{kind}"
    a = SharedDetector(settings, make_shared(kind, ns))
    b = SharedDetector(settings, make_shared(kind, ns))
    text = "Cercasi cameriere esperto per ristorante in centro a Milano, turni serali e weekend"
    one = Document("one", {"title": "Cameriere", "description": text})
    two = Document("two", {"title": "Cameriere", "description": text + " subito"})
    sh = [a.sketcher.shingle_fields(one.fields)]
    a.publish(sh)
    claim = a.store.claim([("one", sh[0].set_id, True)])
    (vb,) = b.process_many([two])
    (va,) = a.judge([one], sh, claim)
    assert (va.seq, vb.seq) == (1, 2)
    assert not va.duplicate and va.cluster_id == "one"
    assert vb.duplicate and vb.duplicate_of == "one" and vb.cluster_id == "one"


def test_a_cluster_started_on_one_consumer_and_joined_on_another_is_merged(
        kind: str, make_shared: Make) -> None:
    """Y claims its seq on consumer 1; Z (a near copy of Y, not of X) is judged whole on
    consumer 2 and names cluster "Y"; then Y joins X's cluster. Y's verdict said "cluster X,
    merged []": Z stayed in a cluster of one for every reader (found by an operator's review
    with kill -9 in a Redis Cluster group; 2 of 3,127 verdicts)."""
    settings = Settings()
    ns = f"named-{kind}"
    one = SharedDetector(settings, make_shared(kind, ns))
    two = SharedDetector(settings, make_shared(kind, ns))
    words = [f"{c}{v}{c}{v}" for c in "bcdfglmnprstvz" for v in "aeiou"][:60]
    x, y, z = (Document(i, {"title": "", "description": " ".join(words[k:k + 40])})
               for i, k in (("X", 0), ("Y", 4), ("Z", 8)))
    sh = {d.id: one.sketcher.shingle_fields(d.fields) for d in (x, y, z)}
    from streamdedup.core.jaccard import jaccard_many
    j = {p: float(jaccard_many(sh[p[0]].shingles, [sh[p[1]].shingles])[0])
         for p in ("XY", "YZ", "XZ")}
    assert j["XY"] >= 0.8 and j["YZ"] >= 0.8 and j["XZ"] < 0.8, j  # one cluster, by Y
    (vx,) = one.process_many([x])
    one.publish([sh["Y"]])
    claim = one.store.claim([("Y", sh["Y"].set_id, True)])
    (vz,) = two.process_many([z])
    (vy,) = one.judge([y], [sh["Y"]], claim)
    assert (vx.seq, vy.seq, vz.seq) == (1, 2, 3)
    assert (vz.cluster_id, vy.cluster_id, vy.merged) == ("Y", "X", ("Y",))
    assert reader_clusters({v.id: v.to_dict() for v in (vx, vy, vz)}) == [{"X", "Y", "Z"}]


def test_a_consumer_that_dies_after_claiming_leaves_nothing_wrong(kind: str,
                                                                 make_shared: Make) -> None:
    """Claimed, never finished (the process died): the redelivered message, on another
    consumer, is judged with the same seq; a later copy matches it, and it matches nothing
    of its own."""
    settings = Settings()
    ns = f"crash-{kind}"
    dead = SharedDetector(settings, make_shared(kind, ns))
    text = "Offriamo lavoro come magazziniere con patente del muletto, zona Torino nord"
    doc = Document("d1", {"title": "Magazziniere", "description": text})
    sh = [dead.sketcher.shingle_fields(doc.fields)]
    dead.publish(sh)
    (claim,) = dead.store.claim([("d1", sh[0].set_id, True)])
    alive = SharedDetector(settings, make_shared(kind, ns))
    copy = Document("d2", doc.fields)
    v_copy, v_again = alive.process_many([copy, doc])
    assert (v_again.seq, v_again.duplicate, v_again.matches) == (claim.seq, False, ())
    assert v_copy.duplicate_of == "d1" and v_copy.exact and v_copy.seq == claim.seq + 1
    assert alive.process(doc) == v_again  # and now it is stored



def test_a_batch_redone_after_a_crash_between_join_and_finish_gets_the_same_verdicts(
        kind: str, make_shared: Make) -> None:
    """The join links a batch's clusters before its verdicts are stored. A consumer that died
    in between left them linked, and the batch judged again found the roots moved: b, which
    matches nothing, was said to be in cluster "a" (c, later in its batch, joined b's to
    a's), and c lost its merged "b" (a review's kill of Redis: 13 of 3,127 Kijiji verdicts).
    A seq joined and not finished now gets the first answer; finish forgets it and the
    claim."""
    settings = Settings(text_fields=("description",), shingle_kind="word", shingle_size=1,
                        stopwords="", stem_language="", strip_digits=False, threshold=0.5)
    common = [f"s{n}" for n in range(6)]
    xs, ys = [f"x{n}" for n in range(4)], [f"y{n}" for n in range(4)]
    docs = [Document(i, {"description": " ".join(words)})
            for i, words in (("a", common + xs), ("b", common + ys), ("c", common + xs + ys))]
    clean = SharedDetector(settings, make_shared(kind))
    want = clean.process_many(docs[:1]) + clean.process_many(docs[1:])
    assert (want[1].cluster_id, want[2].cluster_id, want[2].merged) == ("b", "a", ("b",))

    ns = f"redo-{kind}"
    dead = SharedDetector(settings, make_shared(kind, ns))
    dead.process_many(docs[:1])

    def crash(verdicts: object) -> list[str]:
        raise ConnectionError("the consumer died here")

    dead.store.finish = crash
    with pytest.raises(ConnectionError):
        dead.process_many(docs[1:])
    alive = SharedDetector(settings, make_shared(kind, ns))
    assert alive.process_many(docs[1:]) == want[1:]
    store = alive.store
    assert store.r.hlen(store.k("claimed")) == 0 and store.r.hlen(store.k("joined")) == 0
