"""What the monitor knows, built from the records it reads: counts, rates, clusters, the latest
duplicates, and the announcements' texts. Pure (no Kafka, no web), so it is tested alone.

Everything is derived from verdict fields, so the topics alone are enough: a cluster's size
is the number of verdicts naming it as ``cluster_id``, and a verdict whose ``merged`` names
other clusters moves their counts into its own (so sizes stay exact when an ad bridges two
clusters). A verdict delivered again (the same id and ``seq``: Kafka delivers at least
once, and a consumer re-sends the stored verdict of an announcement it sees again) is
counted as ``repeated``, not again, also an old text's verdict re-sent after the id got a
new one (a detector on a fresh store, fed the same dump, gives the same pairs: its verdicts
count as repeated). Memory is bounded: the last ``keep`` verdicts, (id, seq) pairs and
texts (so a repeat older than that counts twice), per-second counts of the last ``window_s``
seconds, clusters without bound (one small record each).
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from streamdedup.core.verdict import match_jaccard
from streamdedup.service.message import announcement_id
from streamdedup.settings import Settings
from streamdedup.terminal import writable

TITLE_FIELD = "title"
# Where an ad says its own address: Kijiji's dump has "link", a Scrapy item often "url".
LINK_FIELDS = ("link", "url")


def verdict_problem(v: Mapping[str, Any]) -> str | None:
    """Why a record of the output topic is not a verdict the monitor can count, or None.
    Checked before counting: one ``"merged": 5`` once stopped the monitor's reader."""

    def is_id(x: Any) -> bool:
        return isinstance(x, str | int) and not isinstance(x, bool)

    if not is_id(v.get("id")):
        return "no id"
    if not isinstance(v.get("duplicate", False), bool):
        return "duplicate is not true or false"
    if v.get("cluster_id") is not None and not is_id(v["cluster_id"]):
        return "cluster_id is not an id"
    seq = v.get("seq")
    if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool)):
        return "seq is not a number"
    merged = v.get("merged")
    if merged is not None and not (isinstance(merged, list) and all(map(is_id, merged))):
        return "merged is not a list of ids"
    matches = v.get("matches")
    if matches is not None and not (isinstance(matches, list) and all(
            isinstance(m, dict) and is_id(m.get("id"))
            and isinstance(m.get("jaccard"), int | float) and not isinstance(m["jaccard"], bool)
            and 0 <= m["jaccard"] <= 1 for m in matches)):
        # a 401-digit integer passed as a number, and formatting it was an OverflowError
        return "matches is not a list of {id, jaccard} with 0 <= jaccard <= 1"
    if "duplicate" not in v:  # every verdict says it: {"id": 5} was counted as one
        return "no duplicate field"
    return None


TEXT_VERSIONS = 4  # texts kept per id (a scraper's id may come again, its ad edited)
V = TypeVar("V")


def link_of(fields: Mapping[str, str]) -> str | None:
    """An ad's own address (its first of LINK_FIELDS), http or https only: the page puts it
    in a link, and ``javascript:`` there would run the ad's code on a click."""
    for name in LINK_FIELDS:
        value = (fields.get(name) or "").strip()
        if value.lower().startswith(("http://", "https://")):
            return value
    return None


def as_of(versions: Sequence[tuple[float, V]], at: float | None) -> tuple[float, V]:
    """Of an id's versions (when each came, oldest first), the last that came by ``at`` (the
    last of all for None), else the first: an id sent again with another text is explained
    as it was when the other document was judged (`explain` and the monitor's page)."""
    came = [v for v in versions if at is None or v[0] <= at]
    return came[-1] if came else versions[0]


@dataclass
class Cluster:
    id: str
    size: int = 0
    first_seen: float = 0.0
    last_seen: float = 0.0
    # Its first document's verdict was not read (it came before --from): ``size`` counts
    # what was read, and the cluster holds at least one more ("cluster 300 (1)" was said of
    # a duplicate).
    partial: bool = False
    # Arrivals per second of arrival: a merge adds a few hundred counts at most, where a
    # list of times copied a big cluster's every arrival (200,000 verdicts and 5,000 merges
    # took 158 s under the state's lock).
    recent: Counter[int] = field(default_factory=Counter)

    def arrive(self, at: float, window_s: float) -> None:
        self.recent[int(at)] += 1
        if len(self.recent) > 2 * window_s + 2:  # nobody asked for a while: forget the old
            self.growth(at, window_s)

    def growth(self, now: float, window_s: float) -> int:
        """Arrivals in the last ``window_s`` seconds (to the second)."""
        start = int(now - window_s)
        for second in [s for s in self.recent if s < start]:
            del self.recent[second]
        return self.recent.total()


class MonitorState:
    def __init__(self, keep: int = 100_000, window_s: int = 600, growth_s: float = 300.0,
                 clock: Any = time.time, id_field: str = Settings.id_field) -> None:
        self.keep = keep
        self.id_field = id_field  # where announcements hold their ids, as run reads them
        self.window_s = window_s
        self.growth_s = growth_s
        self.clock = clock
        self.started = clock()
        self.verdicts = 0
        self.repeated = 0  # verdicts delivered again (same id and seq), not counted again
        self.duplicates = 0
        self.dead_letters = 0
        self.dead_by_reason: Counter[str] = Counter()
        self.bad_records: Counter[str] = Counter()  # topic -> records that were not usable
        self.clusters: dict[str, Cluster] = {}
        self.merged_into: dict[str, str] = {}
        self.per_second: OrderedDict[int, list[int]] = OrderedDict()  # second -> [n, dups]
        self.newest_second = 0
        self.log: deque[tuple[int, dict[str, Any]]] = deque(maxlen=keep)  # (index, verdict)
        self.by_id: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.seen: OrderedDict[tuple[str, int], None] = OrderedDict()  # (id, seq) counted
        # Each id's last few texts with the time each came: an id sent again with another
        # text is explained as it was when the other document was judged.
        self.texts: OrderedDict[str, list[tuple[float, dict[str, str]]]] = OrderedDict()
        self.latest_duplicates: deque[dict[str, Any]] = deque(maxlen=200)
        self.index = 0
        self.broker: dict[str, Any] = {}  # the observer's ``health()``, as of its last poll

    # --- input
    def add_verdict(self, verdict: Mapping[str, Any], at: float | None = None) -> bool:
        """Count a verdict; False for one delivered again, ValueError (``verdict_problem``'s
        words) for a record that is no verdict, before anything is counted."""
        problem = verdict_problem(verdict)
        if problem is not None:
            raise ValueError(problem)
        now = self.clock() if at is None else at
        v = dict(verdict)
        if v.get("seq") is not None:
            pair = (str(v.get("id")), int(v["seq"]))
            if pair in self.seen:
                self.repeated += 1
                return False
            _remember(self.seen, pair, None, self.keep)
        self.index += 1
        self.verdicts += 1
        dup = bool(v.get("duplicate"))
        self.duplicates += dup
        second = self.per_second.setdefault(int(now), [0, 0])
        second[0] += 1
        second[1] += dup
        self.newest_second = max(self.newest_second, int(now))
        while self.per_second and next(iter(self.per_second)) < self.newest_second \
                - self.window_s:
            self.per_second.popitem(last=False)
        self.log.append((self.index, v))
        _remember(self.by_id, str(v.get("id")), v, self.keep)
        if dup:
            self.latest_duplicates.appendleft({**v, "index": self.index})  # as since()'s
        self._cluster(v, now)
        return True

    def cluster_of(self, label: str) -> Cluster | None:
        """The cluster a verdict's label is in now (after every merge read so far)."""
        return self.clusters.get(self._where(label))

    def _where(self, label: str) -> str:
        """The cluster a label is in now: merges chain (A into B, then B into C), and a
        verdict may name A after both; the chain is shortened as it is walked."""
        path = []
        while label in self.merged_into:
            path.append(label)
            label = self.merged_into[label]
        for step in path[:-1]:
            self.merged_into[step] = label
        return label

    def _cluster(self, v: Mapping[str, Any], now: float) -> None:
        label = self._where(str(v.get("cluster_id") or v.get("id")))
        cluster = self.clusters.get(label)
        if cluster is None:
            cluster = self.clusters[label] = Cluster(label, first_seen=now,
                                                     partial=str(v.get("id")) != label)
        elif str(v.get("id")) == label:  # read after a duplicate of it (partitions' order)
            cluster.partial = False
        for other in v.get("merged") or ():
            other = self._where(str(other))
            if other == label:  # merged already (a verdict read late): no cycle
                continue
            absorbed = self.clusters.pop(other, None)
            if absorbed is not None:
                cluster.size += absorbed.size
                cluster.first_seen = min(cluster.first_seen, absorbed.first_seen)
                cluster.last_seen = max(cluster.last_seen, absorbed.last_seen)
                cluster.recent.update(absorbed.recent)
                cluster.partial = cluster.partial or absorbed.partial
            self.merged_into[other] = label
        cluster.size += 1
        # partitions are read in no common order: a verdict may be older than the last one
        cluster.first_seen = min(cluster.first_seen, now)
        cluster.last_seen = max(cluster.last_seen, now)
        cluster.arrive(now, self.growth_s)

    def add_bad(self, topic: str) -> None:
        """A record that is not a JSON object (or a verdict without an id): counted, shown,
        and otherwise ignored; the monitor goes on."""
        self.bad_records[topic] += 1

    def add_dead_letter(self, letter: Mapping[str, Any]) -> None:
        self.dead_letters += 1
        reason = letter.get("reason")  # one of ours is a short word; a record from elsewhere
        self.dead_by_reason[reason[:80] if isinstance(reason, str) and reason else "unknown"] += 1

    def add_announcement(self, body: Mapping[str, Any], at: float | None = None) -> None:
        """An input record: its string fields, for titles and explanations, under the id the
        consumer gives it (an automatic one when it has none)."""
        doc_id = announcement_id(dict(body), self.id_field)
        if doc_id is not None:  # the id as the consumer reads it; the text as UTF-8 writes it
            self.add_text(doc_id, {k: writable(v) for k, v in body.items() if isinstance(v, str)},
                          at)

    def add_text(self, doc_id: str, fields: Mapping[str, str], at: float | None = None
                 ) -> None:
        versions = self.texts.get(doc_id, [])
        if versions and versions[-1][1] == fields:  # the same text again: it came earlier
            return
        at = self.clock() if at is None else at
        _remember(self.texts, doc_id, [*versions[-(TEXT_VERSIONS - 1):], (at, dict(fields))],
                  self.keep)

    def text(self, doc_id: str, at: float | None = None) -> tuple[float, dict[str, str]] | None:
        """The id's last text, or the last one that came by ``at`` (else its first kept)."""
        versions = self.texts.get(doc_id)
        return as_of(versions, at) if versions else None

    # --- views (the JSON API)
    def summary(self) -> dict[str, Any]:
        return {
            "verdicts": self.verdicts,
            "repeated": self.repeated,
            "duplicates": self.duplicates,
            "duplicate_rate": round(self.duplicates / self.verdicts, 6) if self.verdicts else 0.0,
            "dead_letters": self.dead_letters,
            "dead_letters_by_reason": dict(self.dead_by_reason),
            # as /api/clusters counts them: one read duplicate of an ad read before --from
            # is a cluster of two or more (it said 0 while "biggest" listed it)
            "clusters": sum(1 for c in self.clusters.values() if c.size + c.partial > 1),
            "bad_records": sum(self.bad_records.values()),
            "since": self.started,
            "index": self.index,
            "broker": dict(self.broker),
        }

    def series(self) -> list[dict[str, int]]:
        """Per-second verdicts and duplicates of the ``window_s`` seconds before the newest
        record, in time order: records of several partitions arrive out of it (the list was
        in arrival order, so the chart ended at the last second added, not the newest)."""
        since = self.newest_second - self.window_s
        return [{"t": t, "verdicts": n, "duplicates": d}
                for t, (n, d) in sorted(self.per_second.items()) if t >= since]

    def top_clusters(self, limit: int = 20) -> dict[str, list[dict[str, Any]]]:
        now = self.clock()
        real = [c for c in self.clusters.values() if c.size + c.partial > 1]
        biggest = sorted(real, key=lambda c: (-c.size - c.partial, c.id))[:limit]
        growing = sorted(real, key=lambda c: (-c.growth(now, self.growth_s), -c.last_seen))
        return {"biggest": [self._cluster_view(c, now) for c in biggest],
                "fastest_growing": [self._cluster_view(c, now) for c in growing[:limit]
                                    if c.growth(now, self.growth_s)]}

    def _cluster_view(self, c: Cluster, now: float) -> dict[str, Any]:
        return {"cluster_id": c.id, "size": c.size, "partial": c.partial,
                "title": self.title(c.id),
                "first_seen": c.first_seen, "last_seen": c.last_seen,
                f"added_last_{int(self.growth_s)}s": c.growth(now, self.growth_s)}

    def title(self, doc_id: str) -> str | None:
        found = self.text(doc_id)
        return None if found is None else found[1].get(TITLE_FIELD)

    def members(self, label: str, limit: int = 100) -> dict[str, Any] | None:
        """The cluster ``label`` is in now, and its members among the verdicts kept, newest
        first, each id once, at most ``limit``: ``{cluster_id, title, size, partial, kept,
        links, members: [{id, index, duplicate_of, jaccard, title, link}]}``; ``kept``, the
        ids among the kept verdicts, is below ``size`` (which counts verdicts) once older
        verdicts were let go or an id came again with another text; ``links``, their distinct
        links: Kijiji's dump scraped one ad 150 times, under 150 ids. ``label`` is a
        cluster's id, one merged into it, or a member's own id. None for a label no verdict
        named."""
        where = self._where(label)
        cluster = self.clusters.get(where)
        if cluster is None and label in self.by_id:  # a member's id: the cluster it is in
            own = self.by_id[label]
            where = self._where(str(own.get("cluster_id") or label))
            cluster = self.clusters.get(where)
        if cluster is None:
            return None
        found: dict[str, dict[str, Any]] = {}
        for i, v in reversed(self.log):  # the whole log: 100,000 verdicts take ~30 ms
            doc_id = str(v.get("id"))
            if doc_id in found or self._where(str(v.get("cluster_id") or doc_id)) != where:
                continue
            text = self.text(doc_id)  # its last: title and link of one version
            fields = text[1] if text else {}
            found[doc_id] = {"id": doc_id, "index": i, "duplicate_of": v.get("duplicate_of"),
                             "jaccard": match_jaccard(v, v.get("duplicate_of")),
                             "title": fields.get(TITLE_FIELD), "link": link_of(fields)}
        return {"cluster_id": where, "title": self.title(where), "size": cluster.size,
                "partial": cluster.partial, "kept": len(found),
                "links": len({m["link"] for m in found.values() if m["link"]}),
                "members": list(found.values())[:limit]}

    def since(self, index: int, limit: int = 500) -> list[dict[str, Any]]:
        """Verdicts after ``index`` (each with its ``index``), oldest first, at most limit:
        ask again from the last index for the next page. An index beyond this monitor's is
        a client's of a monitor that restarted: it starts over (it got nothing until the
        new count passed its old one)."""
        if index > self.index:
            index = 0
        out = []
        for i, v in self.log:
            if i > index:
                out.append({**v, "index": i, "title": self.title(str(v.get("id")))})
                if len(out) >= limit:
                    break
        return out

    def latest(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest duplicates, newest first, each with its index and its ad's title (read
        now: a verdict is often read before its ad)."""
        return [{**v, "title": self.title(str(v.get("id")))}
                for v in list(self.latest_duplicates)[:limit]]

    def verdict(self, doc_id: str) -> dict[str, Any] | None:
        return self.by_id.get(doc_id)


def _remember(store: OrderedDict[Any, Any], key: Any, value: Any, keep: int) -> None:
    store[key] = value
    store.move_to_end(key)
    while len(store) > keep:
        store.popitem(last=False)
