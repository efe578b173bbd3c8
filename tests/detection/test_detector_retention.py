"""Retention in the detector: forgetting what left the window, on every store backend
(memory, SQLite, and the single-writer Redis store on a real redis-server).

The issue's case is here as it reads: originals on day 0, exact reposts of some on day 30 and
of others on day 90; ``--retention 60d`` flags the day-30 ones and none of the day-90 ones.
The rest checks the rules of ``detection/detector.py`` against a brute force restricted to
the window, and that a verdict does not depend on how far the bounded eviction has got, on a
reopen, or on a rollback. Reading times and the window itself: tests/core/test_retention.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from detector_oracle import WORDS, run

from streamdedup.core.document import Document
from streamdedup.core.retention import Window, parse_time
from streamdedup.core.sketch import Sketcher
from streamdedup.core.verdict import Verdict
from streamdedup.detection import detector as detector_module
from streamdedup.detection.detector import Detector
from streamdedup.settings import Settings
from streamdedup.store.base import Store

DAY = 86_400_000
RETAIN = WORDS.replace(retention="60d")


def ad(doc_id: str, text: str, day: float) -> Document:
    return Document(doc_id, {"description": text}, round(day * DAY))


# --- the "done when"
def day_0_30_90() -> list[Document]:
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(3000)]
    originals = [" ".join(rng.sample(vocab, 25)) for _ in range(20)]
    stream = [ad(f"orig-{i}", t, i / 100) for i, t in enumerate(originals)]
    stream += [ad(f"day30-{i}", originals[i], 30 + i / 100) for i in range(10)]
    stream += [ad(f"day90-{i}", originals[i], 90 + i / 100) for i in range(10, 20)]
    return stream


@pytest.mark.parametrize("retention", ["60d", ""])
def test_reposts_on_day_30_are_duplicates_and_on_day_90_are_not(
        store: Store, retention: str) -> None:
    verdicts = {v.id: v for v in run(Detector(WORDS.replace(retention=retention), store),
                                     day_0_30_90(), batch=4)}
    day30 = [verdicts[f"day30-{i}"] for i in range(10)]
    day90 = [verdicts[f"day90-{i}"] for i in range(10, 20)]
    assert all(v.duplicate and v.duplicate_of == f"orig-{i}" for i, v in enumerate(day30))
    if retention:
        assert not any(v.duplicate for v in day90)
        assert all(v.cluster_id == v.id and not v.exact for v in day90)
        # What is left: the day-90 reposts only (day 30 + 0.09 is before day 90 - 60 d).
        assert store.stats()["documents"] == 10
    else:
        assert all(v.duplicate and v.duplicate_of == f"orig-{i + 10}"
                   for i, v in enumerate(day90))


# --- against a brute force restricted to the window
class WindowOracle:
    """Verdicts by brute force over the documents in the window (no LSH, no store)."""

    def __init__(self, settings: Settings) -> None:
        self.sketcher = Sketcher(settings, text_cache=0)
        self.t = settings.threshold
        self.cap = settings.max_matches
        self.window = Window(settings.retention_ms)
        self.seq = 0
        self.current: dict[str, tuple[int, int, frozenset[int], int]] = {}  # seq, set, shingles, t
        self.verdicts: dict[str, dict[str, Any]] = {}
        self.versions: dict[tuple[str, int], dict[str, Any]] = {}

    def process(self, d: Document) -> dict[str, Any]:
        assert d.time is not None
        self.window.see(d.time)  # (a no-op without retention: nothing ever leaves)
        for doc_id, (_, _, _, t) in list(self.current.items()):
            if not self.window.live(t):  # the id leaves with every version of it
                del self.current[doc_id]
                self.versions = {k: v for k, v in self.versions.items() if k[0] != doc_id}
        sh = self.sketcher.shingle_fields(d.fields)
        key, s = sh.set_id, frozenset(sh.shingles.tolist())
        cur = self.current.get(d.id)
        if cur is not None and cur[1] == key:
            return self.verdicts[d.id]
        if (d.id, key) in self.versions:
            return self.versions[(d.id, key)]
        self.current.pop(d.id, None)
        self.seq += 1
        found = sorted((-len(s & o) / len(s | o), seq, i)
                       for i, (seq, _, o, _) in self.current.items()
                       if s and o and len(s & o) / len(s | o) >= self.t)
        v = {"seq": self.seq, "duplicate": bool(found),
             "duplicate_of": min(found, key=lambda f: f[1])[2] if found else None,
             "matches": [{"id": i, "jaccard": round(-n, 6)} for n, _, i in found[: self.cap]],
             "exact": bool(s) and any(k == key for _, k, _, _ in self.current.values())}
        self.current[d.id] = (self.seq, key, s, d.time)
        self.verdicts[d.id] = self.versions[(d.id, key)] = v
        return v


def windowed_stream(seed: int, n: int = 160) -> list[Document]:
    """Near-duplicates over ~40 days with a 10-day window: reposts inside and outside it,
    times out of order, texts coming back after their set expired, redeliveries of
    expired documents, and ids given new texts."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(80)]
    bases = [rng.sample(vocab, 12) for _ in range(4)]
    out: list[Document] = []
    day = 0.0
    for i in range(n):
        day += rng.random() * 0.5
        when = day - (rng.random() * 3 if rng.random() < 0.1 else 0)  # late arrivals
        roll = rng.random()
        if roll < 0.12 and out:
            old = rng.choice(out)  # a redelivery (its document may have expired)
            out.append(old)
            continue
        # Each text family is posted for 4 days in 16: it comes back after the window.
        words = list(bases[int(day / 4 + rng.random() * 0.3) % 4])
        for _ in range(rng.choice([0, 0, 0, 1, 1, 2, 3, 6])):
            words[rng.randrange(len(words))] = rng.choice(vocab)
        rng.shuffle(words)
        doc_id = f"d{i}" if roll < 0.9 or not out else rng.choice(out).id
        out.append(ad(doc_id, " ".join(words), when))
    return out


def observable(v: Verdict) -> dict[str, Any]:
    d = v.to_dict()
    return {k: d[k] for k in ("seq", "duplicate", "duplicate_of", "matches", "exact")}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_stream_matches_the_windowed_oracle(store: Store, seed: int) -> None:
    settings = WORDS.replace(retention="10d")
    det, oracle = Detector(settings, store), WindowOracle(settings)
    stream = windowed_stream(seed)
    got = run(det, stream, batch=7)
    want = [oracle.process(d) for d in stream]
    for d, g, w in zip(stream, got, want, strict=True):
        assert observable(g) == w, d.id
    forever = WindowOracle(WORDS.replace(retention=""))
    unlimited = [forever.process(d) for d in stream]
    dups = sum(w["duplicate"] for w in want)
    assert dups > 20  # the stream has duplicates, and the window matters:
    pairs = zip(want, unlimited, strict=True)
    assert sum(u["duplicate"] and not w["duplicate"] for w, u in pairs) > 5


def test_verdicts_do_not_depend_on_how_far_eviction_has_got(
        make_store: Callable[..., Store], monkeypatch: pytest.MonkeyPatch) -> None:
    """One batch at a time and at most 2 removals per batch (eviction lags far behind) gives
    the verdicts, cluster ids included, of a store that evicts everything at once."""
    settings = WORDS.replace(retention="10d")
    stream = windowed_stream(5, 300)
    eager = run(Detector(settings, make_store("sqlite")), stream, batch=50)
    assert eager != run(Detector(settings.replace(retention=""), make_store("memory")), stream)
    monkeypatch.setattr(detector_module, "EVICT_AT_LEAST", 0)
    lagging = run(Detector(settings, make_store("memory")), stream, batch=1)
    assert [v.to_json() for v in lagging] == [v.to_json() for v in eager]


def test_a_reopened_sqlite_store_goes_on_as_if_never_closed(
        make_store: Callable[..., Store], tmp_path: Any) -> None:
    settings = WORDS.replace(retention="10d")
    stream = windowed_stream(6, 300)
    whole = run(Detector(settings, make_store("sqlite", tmp_path / "a")), stream, batch=10)
    got: list[Verdict] = []
    for part in (stream[:97], stream[97:211], stream[211:]):
        store = make_store("sqlite", tmp_path / "b")
        got += run(Detector(settings, store), part, batch=10)
        store.close()
    assert [v.to_json() for v in got] == [v.to_json() for v in whole]


def test_a_rolled_back_batch_is_judged_again_the_same_way(
        make_store: Callable[..., Store], tmp_path: Any) -> None:
    settings = WORDS.replace(retention="10d")
    stream = windowed_stream(7, 240)
    want = run(Detector(settings, make_store("sqlite", tmp_path / "a")), stream, batch=20)
    store = make_store("sqlite", tmp_path / "b")
    det = Detector(settings, store)
    got: list[Verdict] = []
    for start in range(0, len(stream), 20):
        batch = stream[start:start + 20]
        det.process_many(batch)  # evicts, judges, then a fault: nothing of it stays
        store.rollback()
        got += det.process_many(batch)
        store.commit()
    assert [v.to_json() for v in got] == [v.to_json() for v in want]


def test_a_cluster_keeps_its_id_after_its_first_document_left(store: Store) -> None:
    base = [f"w{i}" for i in range(12)]

    def variant(k: int) -> str:
        words = list(base)
        words[k % 12] = f"x{k}"
        return " ".join(words)

    det = Detector(RETAIN, store)
    first = run(det, [ad("first", variant(0), 0), ad("second", variant(1), 20)])
    assert first[1].duplicate and first[1].cluster_id == "first"
    # Day 70: "first" left (before day 10), "second" is in the window.
    later = run(det, [ad("third", variant(2), 70)])[0]
    assert later.duplicate_of == "second" and [m.id for m in later.matches] == ["second"]
    assert later.cluster_id == "first"
    # Day 85: "second" left too; the cluster has no live set: a new cluster.
    last = run(det, [ad("fourth", variant(3), 140)])[0]
    assert not last.duplicate and last.cluster_id == "fourth"


def test_the_text_of_an_expired_root_comes_back_into_its_cluster(store: Store) -> None:
    """An exact repost of a cluster's expired first document, while a later member lives:
    it matches the member and keeps the cluster's id (its set was a tombstone)."""
    words = [f"w{i}" for i in range(12)]
    det = Detector(RETAIN, store)
    run(det, [ad("a", " ".join(words), 0), ad("b", " ".join([*words[:11], "z"]), 40)])
    again = run(det, [ad("a2", " ".join(words), 80)])[0]
    assert again.duplicate_of == "b" and again.cluster_id == "a" and not again.exact
    assert not run(det, [ad("a3", " ".join(words), 80.5)])[0].merged


def test_an_old_text_of_a_live_id_sent_again_after_its_set_left_gets_its_first_verdict(
        store: Store) -> None:
    """A's first text X leaves the window while A, replaced by Y, lives: X sent again (a
    redelivery) gets A's first verdict back and A stays Y, whether or not another ad brought
    X back meanwhile. SQLite forgot the version with its set's number: X was judged anew
    (a second answer for one (id, text) pair) and A went back to X."""
    x, y, z = (" ".join(f"{w}{i}" for i in range(12)) for w in "xyz")
    det = Detector(WORDS.replace(retention="10d"), store)
    first = run(det, [ad("A", x, 0), ad("A", y, 5), ad("B", z, 12)])
    again = run(det, [ad("A", x, 0), ad("C", x, 13), ad("A", x, 0), ad("A", y, 5)])
    assert [v.seq for v in again] == [first[0].seq, first[2].seq + 1, first[0].seq,
                                      first[1].seq]
    assert again[0].to_json() == again[2].to_json() == first[0].to_json()
    assert again[3].to_json() == first[1].to_json()
    doc = store.get_doc("A")
    assert doc is not None and doc.seq == first[1].seq  # still its second text


def test_a_set_number_a_version_names_is_not_given_to_a_new_set(store: Store) -> None:
    """SQLite numbered a new set past the highest number left: once retention deleted the
    newest set, its number came again, and a version still naming it (A's first text S)
    answered for the new set's text U: A:U got A's verdict for S, not a duplicate of D."""
    s, t, u = (" ".join(f"{w}{i}" for i in range(12)) for w in "stu")
    det = Detector(WORDS.replace(retention="10d"), store)
    run(det, [ad("Z", t, 5), ad("A", s, 1), ad("A", t, 6), ad("Z2", t, 12), ad("Z3", t, 12.1),
              ad("D", u, 12.5)])
    last = run(det, [ad("A", u, 13)])[0]
    assert last.duplicate and last.duplicate_of == "D" and last.exact


def test_documents_without_a_time_arrive_now(store: Store) -> None:
    det = Detector(RETAIN, store)
    v = run(det, [Document("a", {"description": "w1 w2 w3"}),
                  Document("b", {"description": "w1 w2 w3"})])
    assert v[1].duplicate and store.get_clock() is not None
    assert abs(store.get_clock() - parse_time("2026-01-01")) < 10 * 365 * DAY  # type: ignore


def test_a_document_without_a_time_takes_the_clocks_not_todays(store: Store) -> None:
    """One untimed row in a 2024 dump took today's time: the clock jumped and every ad
    before it left the window (its repost was 'new')."""
    det = Detector(RETAIN, store)
    start = parse_time("2024-03-01") / DAY
    words = " ".join(f"w{i}" for i in range(30))
    v = run(det, [ad("old", words, start), ad("other", "x1 x2 x3 x4", start + 1),
                  Document("untimed", {"description": "y1 y2 y3 y4"}),
                  ad("repost", words, start + 2)])
    assert store.get_clock() == round((start + 2) * DAY)
    assert v[3].duplicate and v[3].duplicate_of == "old"
    assert store.get_doc("untimed").time == round((start + 1) * DAY)  # type: ignore[union-attr]


def test_an_untimed_first_row_takes_its_batchs_first_time_not_todays(store: Store) -> None:
    """A 2024 dump whose first row had no time: today's time moved a fresh store's clock,
    and every later ad was outside the window (its exact reposts came out new)."""
    det = Detector(RETAIN, store)
    start = parse_time("2024-03-01") / DAY
    words = " ".join(f"w{i}" for i in range(30))
    v = run(det, [Document("untimed", {"description": "y1 y2 y3 y4"}),
                  ad("old", words, start), ad("repost", words, start + 1)], batch=3)
    assert v[2].duplicate and v[2].duplicate_of == "old"
    assert store.get_clock() == round((start + 1) * DAY)
    assert store.get_doc("untimed").time == round(start * DAY)  # type: ignore[union-attr]


def test_eviction_leaves_nothing_behind(make_store: Callable[..., Store]) -> None:
    """Once the window has passed a stream, the store holds its last window only: no
    document, set, bucket entry, version, edge or log row of what went before."""
    settings = WORDS.replace(retention="5d")
    store = make_store("sqlite")
    stream = windowed_stream(8, 300)
    run(Detector(settings, store), stream, batch=10)
    tail = run(Detector(settings, store), [ad(f"late-{i}", f"fresh{i} new{i} text{i}", 1000 + i)
                                           for i in range(3)], batch=1)
    assert not any(v.duplicate for v in tail)
    conn = store._conn  # type: ignore[attr-defined]
    count = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
             for t in ("docs", "versions", "verdicts", "shingles", "edges", "crowded")}
    assert count == {"docs": 3, "versions": 0, "verdicts": 3, "shingles": 3, "edges": 0,
                     "crowded": 0}
    assert conn.execute("SELECT count(*) FROM sets WHERE first_seq IS NOT NULL").fetchone()[0] \
        == 3
    assert store.stats()["bucket_entries"] == sum(
        len(set(Sketcher(settings).band_keys(s).tolist()))
        for s in [Sketcher(settings).shingle_fields({"description": f"fresh{i} new{i} text{i}"})
                  .shingles for i in range(3)])
    assert conn.execute("SELECT count(*) FROM bucket_log").fetchone()[0] <= 3
    sketcher = Sketcher(settings)
    gone = {sketcher.shingle_fields(d.fields).set_id for d in stream}
    assert gone and store.get_shingles(gone) == {}  # nor from the store's cache



def test_a_redis_store_after_eviction_verifies_clean(make_store: Callable[..., Store],
                                                     redis_url: str) -> None:
    """Redis's ``store verify`` (documents, sets, first documents) on a store that evicted
    much of a stream, tombstones included: sets whose first document left are not damage."""
    from streamdedup.store.redis import maintenance

    store = make_store("redis")
    store.put_params(Sketcher(WORDS).params())  # as every command's opening does
    # After the stream, a set whose first document leaves while a copy of it stays.
    stream = [*windowed_stream(9, 400), ad("first", "one text posted twice", 200),
              ad("copy", "one text posted twice", 208),
              *(ad(f"later{i}", f"something else {i}", 215) for i in range(20))]
    run(Detector(WORDS.replace(retention="10d"), store), stream, batch=10)
    assert store.stats()["documents"] < len({d.id for d in stream}) / 2  # most have left
    assert store.get_doc("first") is None and store.get_doc("copy") is not None
    namespace = store.namespace  # type: ignore[attr-defined]
    assert maintenance.verify(redis_url, namespace) == []


def test_a_store_after_eviction_verifies_clean(make_store: Callable[..., Store],
                                               tmp_path: Any) -> None:
    """``store verify`` checks the retention bookkeeping (child counts, tombstones, times);
    a store that evicted much of a stream, tombstones included, passes it."""
    from streamdedup.store.sqlite.maintenance import verify

    store = make_store("sqlite", tmp_path / "s")
    store.put_params(Sketcher(WORDS).params())  # as every command's opening does
    run(Detector(WORDS.replace(retention="10d"), store), windowed_stream(9, 400), batch=10)
    conn = store._conn  # type: ignore[attr-defined]
    assert conn.execute("SELECT count(*) FROM sets WHERE evicted = 1").fetchone()[0] > 0
    store.close()
    assert verify(tmp_path / "s") == []
    import sqlite3
    raw = sqlite3.connect(tmp_path / "s" / "index.sqlite")
    raw.execute("UPDATE sets SET children = children + 1 WHERE evicted = 1")
    raw.commit()
    raw.close()
    assert any("children" in p for p in verify(tmp_path / "s"))


@pytest.mark.slow
def test_a_sigkill_during_eviction_leaves_a_sound_store_that_goes_on_the_same(
        tmp_path: Any, kijiji_path: Any) -> None:
    """``check --retention 6h`` on 6,000 generated ads (a window of ~360 ads, so every batch
    evicts) is SIGKILLed at three moments. Each time the store verifies clean, and checking
    the rest of the dump from what the store says it committed gives the verdicts of a run
    that was never killed."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from harness.generator import Generator, learn
    from streamdedup.store.sqlite.maintenance import verify

    ads = list(Generator(learn(kijiji_path), 21).ads(6000))
    dump = tmp_path / "ads.jsonl"
    dump.write_text("".join(json.dumps(a) + "\n" for a in ads), encoding="utf-8")

    def check(path: Any, store: Any, out: Any) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMDEDUP_")}
        return subprocess.Popen([sys.executable, "-m", "streamdedup", "check", str(path),
                                 "--store", str(store), "--out", str(out),
                                 "--retention", "6h"], env=env, stderr=subprocess.DEVNULL)

    whole = check(dump, tmp_path / "whole", tmp_path / "whole.jsonl")
    assert whole.wait(timeout=600) == 0
    want = (tmp_path / "whole.jsonl").read_text().splitlines()
    for n, delay in enumerate((2.5, 4.0, 5.5)):
        store = tmp_path / f"killed{n}"
        proc = check(dump, store, tmp_path / "ignored.jsonl")
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert verify(store) == []
        import sqlite3
        conn = sqlite3.connect(store / "index.sqlite")
        done = (conn.execute("SELECT value FROM counters WHERE name = 'seq'").fetchone()
                or (0,))[0]
        evicted = conn.execute("SELECT count(*) FROM docs").fetchone()[0] < done
        conn.close()
        assert done % 500 == 0 and (done == 0 or evicted), done  # whole batches committed
        rest = tmp_path / f"rest{n}.jsonl"
        rest.write_text("".join(json.dumps(a) + "\n" for a in ads[done:]), encoding="utf-8")
        proc = check(rest, store, tmp_path / f"rest{n}.out")
        assert proc.wait(timeout=600) == 0
        assert (tmp_path / f"rest{n}.out").read_text().splitlines() == want[done:]


def test_a_store_that_evicted_can_be_used_without_retention(store: Store) -> None:
    """Retention turned off later: nothing leaves any more, and a tombstone's text that
    comes back simply fills its set again, in its old cluster."""
    words = [f"w{i}" for i in range(12)]
    run(Detector(RETAIN, store), [ad("a", " ".join(words), 0),
                                  ad("b", " ".join([*words[:11], "z"]), 40),
                                  ad("c", "other words entirely here", 80),
                                  ad("d", "more words elsewhere now", 81)])  # evicts "a"
    assert store.get_sets([Sketcher(RETAIN).shingle_fields(
        {"description": " ".join(words)}).set_id]).popitem()[1].evicted
    again = run(Detector(WORDS, store), [ad("a2", " ".join(words), 200)])[0]
    assert again.duplicate_of == "b" and again.cluster_id == "a"


def test_without_a_time_field_the_wall_clock_moves_the_clock(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """`check --time-field ''` run day after day: each batch at its arrival, so the window
    moves (taking the clock's time instead froze it at the first run's)."""
    det = Detector(RETAIN.replace(time_field=""), store)
    day = 1_800_000_000_000
    monkeypatch.setattr(detector_module, "now_ms", lambda: day)
    run(det, [Document("a", {"description": "w1 w2 w3 w4"})])
    monkeypatch.setattr(detector_module, "now_ms", lambda: day + 90 * DAY)
    v = run(det, [Document("b", {"description": "w1 w2 w3 w4"})])
    assert store.get_clock() == day + 90 * DAY and not v[0].duplicate


def test_the_single_writer_asks_redis_about_once_a_document(
        make_store: Callable[..., Store], monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock's holder keeps what the server answered until its commit (nobody else
    writes, its own writes wait). With retention on Redis a document took ~12 round trips:
    a new set's record asked twice, its versions, then at eviction its members, band keys and
    edges one by one. The verdicts are those of memory."""
    import redis

    settings = WORDS.replace(retention="10d")
    stream = windowed_stream(4, 400)
    store = make_store("redis")
    trips = {"n": 0}

    def counted(method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            trips["n"] += 1
            return method(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(redis.client.Redis, "execute_command",
                        counted(redis.client.Redis.execute_command))
    monkeypatch.setattr(redis.client.Pipeline, "execute", counted(redis.client.Pipeline.execute))
    got = run(Detector(settings, store), stream, batch=50)
    monkeypatch.undo()
    assert [v.to_json() for v in got] == [
        v.to_json() for v in run(Detector(settings, make_store("memory")), stream, batch=50)]
    assert store.stats()["documents"] < len({d.id for d in stream}) / 2  # eviction ran
    assert trips["n"] < 2 * len(stream), trips  # 758 (4,774 before: 12 a document)
