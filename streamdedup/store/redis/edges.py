"""The Redis store's verified edges, the one part of a checkpoint's writes with a life of
its own: ``edges:<id>`` (other set id -> similarity), ``crowded`` (the sets past the cap,
which keep none) and ``into:<id>`` (the sets whose edges name crowded set <id>, so that its
eviction removes them without a scan of every set's edges).

Like the store's other writes, a checkpoint's edges are held here, read back from here, and
queued on the store's MULTI/EXEC through ``do``; ``reset()`` forgets them with the rest.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from streamdedup.store.redis.client import Keys
from streamdedup.store.redis.reads import Reads

Queue = Callable[..., None]  # the store's ``_do``: one write of this checkpoint


class Edges:
    def __init__(self, k: Keys, do: Queue, reads: Reads) -> None:
        self.k, self._do, self._reads = k, do, reads
        self.reset()

    def reset(self) -> None:
        self._edges: dict[int, dict[int, float]] = defaultdict(dict)
        self._crowded: set[int] = set()
        self._into: dict[int, set[int]] = defaultdict(set)  # crowded set -> sets naming it
        self._dropped: set[int] = set()  # left in this checkpoint: the server's is stale

    def add(self, set_id: int, edges: Sequence[tuple[int, float]], cap: int) -> None:
        """Both directions; a set past ``cap`` is crowded (its reposts are verified again)."""
        ends = list(dict.fromkeys([set_id, *(o for o, _ in edges)]))
        flags = self._reads.many([read for a in ends for read in (
            ("sismember", self.k("crowded"), a), ("hlen", self.k("edges", a)))])
        stored = {a: (False, 0) if a in self._dropped else (bool(flags[2 * i]),
                                                              int(flags[2 * i + 1]))
                  for i, a in enumerate(ends)}
        for a, b, sim in [(set_id, o, s) for o, s in edges] + [(o, set_id, s) for o, s in edges]:
            if stored[a][0] or a in self._crowded:
                continue
            self._edges[a][b] = sim
            self._do("hset", self.k("edges", a), b, repr(sim))
            if stored[b][0] or b in self._crowded:
                self._into[b].add(a)
                self._do("sadd", self.k("into", b), a)
            if stored[a][1] + len(self._edges[a]) > cap:  # an upper bound: re-adds count twice
                self._crowd(a)

    def _crowd(self, set_id: int) -> None:
        """Past the cap a set keeps no edges of its own, but the sets it matched keep theirs
        to it; their ids go to ``into:<id>``. One read, once per set, after 256 edges."""
        stored = [] if set_id in self._dropped else self._reads.one(
            "hkeys", self.k("edges", set_id))
        others = {int(o) for o in stored} | set(self._edges.pop(set_id, {}))
        self._crowded.add(set_id)
        self._into[set_id] |= others
        self._do("sadd", self.k("crowded"), set_id)
        self._do("delete", self.k("edges", set_id))
        if others:
            self._do("sadd", self.k("into", set_id), *sorted(others))

    def _is_crowded(self, set_id: int) -> bool:
        return set_id in self._crowded or (set_id not in self._dropped and bool(
            self._reads.one("sismember", self.k("crowded"), set_id)))

    def _listed(self, set_id: int) -> dict[int, float]:
        """An uncrowded set's edges: stored, and this checkpoint's."""
        stored = {} if set_id in self._dropped else self._reads.one(
            "hgetall", self.k("edges", set_id))
        found = {int(o): float(s) for o, s in stored.items()}
        found.update(self._edges.get(set_id, {}))
        return found

    def neighbours(self, set_id: int) -> list[tuple[int, float]] | None:
        self._reads.ahead([("sismember", self.k("crowded"), set_id),
                           ("hgetall", self.k("edges", set_id))])  # one round trip, not two
        return None if self._is_crowded(set_id) else sorted(self._listed(set_id).items())

    def drop(self, set_id: int) -> None:
        """A set leaving: its edges, and every other set's edge to it."""
        if self._is_crowded(set_id):  # asked once: a round trip per set evicted
            stored = set() if set_id in self._dropped else self._reads.one(
                "smembers", self.k("into", set_id))
            others = sorted({int(o) for o in stored} | self._into.pop(set_id, set()))
        else:
            others = sorted(self._listed(set_id))
        for other in others:
            self._edges.get(other, {}).pop(set_id, None)
            self._into.get(other, set()).discard(set_id)
            self._do("hdel", self.k("edges", other), set_id)
            self._do("srem", self.k("into", other), set_id)
        self._edges.pop(set_id, None)
        self._crowded.discard(set_id)
        self._dropped.add(set_id)
        self._do("delete", self.k("edges", set_id), self.k("into", set_id))
        self._do("srem", self.k("crowded"), set_id)
