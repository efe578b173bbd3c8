"""A verdict's JSON: written directly for speed, byte for byte what json's encoder writes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from verdict_strategy import verdicts

from streamdedup.core.verdict import _ENCODER, Match, Verdict


@settings(max_examples=500, deadline=None)
@given(verdicts())
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


def test_a_verdict_read_back_keeps_fields_it_does_not_know_and_fills_old_ones() -> None:
    """A verdict written by an older release (no ``exact``, ``shingles``, ``skipped``,
    ``merged`` or ``seq``) or carrying a field of a newer one reads back whole."""
    old = {"id": "b", "duplicate": True, "duplicate_of": "a",
           "matches": [{"id": "a", "jaccard": 0.9}], "cluster_id": "a", "candidates": 1,
           "partition": 3}
    verdict = Verdict.from_dict(old)
    assert verdict.extra == {"partition": 3}
    assert (verdict.exact, verdict.shingles, verdict.skipped, verdict.merged, verdict.seq) == (
        False, 0, 0, (), None)
    assert json.loads(verdict.to_json())["partition"] == 3


def test_a_matchs_jaccard_is_read_whatever_the_verdict_holds() -> None:
    from streamdedup.core.verdict import match_jaccard

    v = {"matches": [{"id": "b", "jaccard": 1}, "junk", {"id": "a", "jaccard": "x"},
                     {"id": "a", "jaccard": 0.85}]}
    assert match_jaccard(v, "a") == 0.85 and match_jaccard(v, "b") == 1.0
    assert match_jaccard(v, "c") is None and match_jaccard({"matches": 5}, "a") is None
