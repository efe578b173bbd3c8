"""A verdict's JSON: written directly for speed, byte for byte what json's encoder writes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamdedup.core.verdict import _ENCODER, Match, Verdict

texts = st.text(max_size=12)  # any code point: quotes, backslashes, controls, surrogates
matches = st.builds(Match, texts, st.floats(0, 1) | st.just(1.0) | st.just(1e-7))
verdicts = st.builds(
    Verdict, id=texts, duplicate=st.booleans(), duplicate_of=st.none() | texts,
    matches=st.tuples() | st.lists(matches, max_size=4).map(tuple), cluster_id=texts,
    candidates=st.integers(0, 2**40), exact=st.booleans(), shingles=st.integers(0, 10**6),
    skipped=st.integers(0, 10), merged=st.lists(texts, max_size=3).map(tuple),
    seq=st.none() | st.integers(-(2**63), 2**63))


@settings(max_examples=500, deadline=None)
@given(verdicts)
def test_written_as_the_encoder_writes_it(verdict: Verdict) -> None:
    text = verdict.to_json()
    assert text == _ENCODER.encode(verdict.to_dict())
    assert Verdict.from_json(text) == verdict


@pytest.mark.parametrize("odd", [
    {"candidates": True},  # a bool is an int to Python, not to JSON
    {"shingles": np.int64(640)},  # not JSON at all: the encoder's error, not "np.int64(640)"
    {"matches": (Match("a", float("nan")),)},
    {"matches": (Match("a", np.float32(0.5)),)},  # type: ignore[arg-type]
    {"extra": {"partition": 3}},
])
def test_values_of_other_types_are_left_to_the_encoder(odd: dict[str, object]) -> None:
    verdict = Verdict(**{**dict(id="x", duplicate=False, duplicate_of=None, matches=(),
                                cluster_id="x", candidates=0), **odd})  # type: ignore[arg-type]
    try:
        expected = _ENCODER.encode(verdict.to_dict())
    except TypeError:
        with pytest.raises(TypeError):
            verdict.to_json()
    else:
        assert verdict.to_json() == expected
        assert json.loads(expected)  # and it is JSON
