"""Hypothesis verdicts of any shape (the verdict JSON and the verdict record are tested on
them)."""

from __future__ import annotations

from hypothesis import strategies as st

from streamdedup.core.verdict import Match, Verdict

ANY_TEXT = st.text(max_size=12)


def verdicts(texts: st.SearchStrategy[str] = ANY_TEXT) -> st.SearchStrategy[Verdict]:
    """Ids and labels drawn from ``texts`` (by default any code point: quotes, backslashes,
    controls, surrogates)."""
    matches = st.builds(Match, texts, st.floats(0, 1) | st.just(1.0) | st.just(1e-7))
    return st.builds(
        Verdict, id=texts, duplicate=st.booleans(), duplicate_of=st.none() | texts,
        matches=st.lists(matches, max_size=4).map(tuple), cluster_id=texts,
        candidates=st.integers(0, 2**40), exact=st.booleans(),
        shingles=st.integers(0, 10**6), skipped=st.integers(0, 10),
        merged=st.lists(texts, max_size=3).map(tuple),
        seq=st.none() | st.integers(-(2**63), 2**63))
