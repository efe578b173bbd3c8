"""The Redis store's reads of the server, kept until the commit by the single writer.

The single writer holds the namespace's lock, so nobody else writes it, and its own writes
wait in the checkpoint until ``commit()``: until then the server answers every read the same
way. So each answer is kept (``keep``), and reads known in advance go in one pipelined round
trip. With retention a document cost ~12 round trips, mostly the same questions asked again
(a new set's record twice, its versions, then at eviction its members, band keys and edges).
A group's members (the shared protocol) share the namespace: they keep nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from streamdedup.store.redis.client import call

Read = tuple[Any, ...]  # a redis-py method's name and its arguments: ("hget", key, field)


class Reads:
    def __init__(self, r: Any, keep: bool) -> None:
        self.r, self.keep = r, keep
        self.reset()

    def reset(self) -> None:
        """At each commit and rollback: the server may answer otherwise from then on."""
        self._kept: dict[Read, Any] = {}

    def one(self, method: str, *args: Any) -> Any:
        read = (method, *args)
        if read in self._kept:
            return self._kept[read]
        answer = call(getattr(self.r, method), *args)
        if self.keep:
            self._kept[read] = answer
        return answer

    def many(self, reads: Sequence[Read]) -> list[Any]:
        """The answers to ``reads``, those not kept in one pipeline (on a cluster, one per
        node: redis-py splits it)."""
        todo = [read for read in dict.fromkeys(reads) if read not in self._kept]
        if todo:
            pipe = self.r.pipeline(transaction=False)
            for method, *args in todo:
                getattr(pipe, method)(*args)
            answers = dict(zip(todo, call(pipe.execute), strict=True))
        else:
            answers = {}
        if self.keep:
            self._kept.update(answers)
        return [self._kept[read] if read in self._kept else answers[read] for read in reads]

    def ahead(self, reads: Iterable[Read]) -> None:
        """Ask now, in one round trip, what the writer will ask one by one (kept only)."""
        if self.keep:
            self.many(list(reads))
