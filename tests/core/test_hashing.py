"""Hashing helpers (``core/hashing.py``): the signed form the stores keep."""

from __future__ import annotations

from streamdedup.core.hashing import signed64


def test_signed64_is_twos_complement_at_both_edges() -> None:
    """A digest becomes a signed 64-bit integer (SQLite's INTEGER, a Redis score's key) and
    must stay one-to-one: the edge is 2**63, the first digest that turns negative."""
    assert signed64(0) == 0
    assert signed64((1 << 63) - 1) == (1 << 63) - 1
    assert signed64(1 << 63) == -(1 << 63)
    assert signed64((1 << 64) - 1) == -1
