"""``core/explain.py``: the reasons, the numbers and the highlighted passages, on texts made
by hand (word 1-grams, so a shingle is a word and spans can be checked by eye)."""

from __future__ import annotations

from streamdedup.core.explain import disagreement, explain
from streamdedup.core.jaccard import jaccard
from streamdedup.core.sketch import Sketcher
from streamdedup.settings import Settings

WORDS = Settings(text_fields=("description",), shingle_kind="word", shingle_size=1,
                 stopwords="", stem_language="", strip_digits=False, threshold=0.5)


def d(text: str) -> dict[str, str]:
    return {"description": text}


def test_a_duplicate_shows_its_shared_words_and_numbers() -> None:
    sk = Sketcher(WORDS)
    e = explain(sk, "a", d("alpha beta gamma delta"), "b", d("alpha beta gamma omega"))
    assert e.duplicate and e.candidate and e.jaccard == 3 / 5
    assert e.a.text == "alpha beta gamma delta"
    assert e.a.shared == ((0, 16),) and e.b.shared == ((0, 16),)  # "alpha beta gamma"
    assert 0 < e.bands_shared <= e.bands and 0.0 <= e.estimate <= 1.0
    assert e.reason.startswith("a duplicate")
    assert e.a.differs == ((17, 22),) and e.b.differs == ((17, 22),)  # "delta", "omega"
    sets = [sk.shingle_fields(d(t)).shingles for t in ("alpha beta gamma delta",
                                                       "alpha beta gamma omega")]
    assert e.jaccard == jaccard(*sets)


def test_an_exact_copy_once_normalized_is_said_so() -> None:
    """It said "25 bands shared" of a pair the exact-set shortcut found without a band; then
    "found by the exact-set shortcut", which a shared Redis store does not take."""
    e = explain(Sketcher(WORDS), "a", d("Alpha, beta gamma!"), "b", d("alpha beta  gamma"))
    assert e.duplicate and e.jaccard == 1.0
    assert e.reason == ("an exact copy once normalized: the same 3 shingles, one set "
                        "(the later copy's verdict says `exact`)")


def test_each_reason_for_not_being_a_duplicate() -> None:
    sk = Sketcher(WORDS)
    far = explain(sk, "a", d("w1 w2"), "b", d(" ".join(f"w{i}" for i in range(1, 12))))
    assert not far.candidate and "outside" in far.reason and far.size_range == (1, 4)
    assert (far.a.shingles, far.b.shingles) == (2, 11)
    apart = explain(sk, "a", d("a1 a2 a3 a4"), "b", d("b1 b2 b3 b4"))
    assert apart.jaccard == 0 and apart.a.shared == () and not apart.duplicate
    assert not apart.candidate and apart.bands_shared == 0 and apart.estimate == 0.0
    assert apart.reason.startswith("not a candidate: no band")
    empty = explain(sk, "a", d("  "), "b", d("x y"))
    assert not empty.duplicate and "empty" in empty.reason
    below = explain(Sketcher(WORDS.replace(threshold=0.9)), "a", d("p q r s t u v w x y"),
                    "b", d("p q r s t u v w x z"))
    assert below.candidate and not below.duplicate and "below the threshold" in below.reason


def test_char_shingles_mark_the_covered_characters() -> None:
    sk = Sketcher(Settings(text_fields=("description",), stopwords="", stem_language="",
                           shingle_size=5))
    e = explain(sk, "a", d("cercasi cameriere milano"), "b", d("cercasi cameriere roma"))
    shared = "".join(e.a.text[x:y] for x, y in e.a.shared)
    assert shared.startswith("cercasi cameriere")
    assert e.to_dict()["a"]["shared"] == [list(span) for span in e.a.shared]


def test_a_verdicts_own_jaccard_is_compared_whatever_its_matches_hold() -> None:
    """A verdict read from a topic may hold anything: a match that is no object was an
    AttributeError in `explain`."""
    sk = Sketcher(WORDS)
    half = explain(sk, "a", d("w1 w2"), "b", d("w1 w2 w3 w4"))  # J = 0.5
    verdict = {"matches": ["b", None, {"id": "b", "jaccard": 0.9}]}
    assert "measured Jaccard 0.900 for this pair, these settings 0.500" in str(
        disagreement(verdict, "b", half))
    assert disagreement({"matches": [{"id": "b", "jaccard": 0.5}]}, "b", half) is None
    assert disagreement({"matches": 5}, "b", half) is None


def test_a_duplicate_of_left_out_of_its_matches_is_still_compared() -> None:
    """``--max-matches`` lists the best matches and ``duplicate_of`` is the earliest: with
    it left out, explain said nothing of a pair these settings call no duplicate."""
    sk = Sketcher(WORDS)
    capped = {"duplicate": True, "duplicate_of": "b", "matches": [{"id": "c", "jaccard": 1}]}
    apart = explain(sk, "a", d("w1 w2"), "b", d("w1 w3 w4 w5"))  # J = 0.2 < 0.5
    assert "called this pair a duplicate" in str(disagreement(capped, "b", apart))
    assert disagreement(capped, "b", explain(sk, "a", d("w1 w2"), "b", d("w1 w2"))) is None
    assert disagreement(capped, "x", apart) is None  # not the pair the verdict names


def test_the_raw_text_is_shown_beside_the_normalized_one_and_the_edges_count() -> None:
    """Each side shows what came in and what was compared; a set at the edge of the size
    range, and a Jaccard at the threshold itself, are a candidate and a duplicate."""
    sk = Sketcher(WORDS)
    e = explain(sk, "a", d("Alpha, BETA gamma"), "b", d("alpha beta gamma"))
    assert (e.a.raw.strip(), e.a.text) == ("Alpha, BETA gamma", "alpha beta gamma")
    assert e.jaccard == 1.0 and e.estimate == 1.0
    for pair in (("w1 w2", "w1 w2 w3 w4"), ("w1 w2", "w1")):
        edge = explain(sk, "a", d(pair[0]), "b", d(pair[1]))
        assert edge.size_range == (1, 4) and edge.jaccard == 0.5, pair
        assert edge.candidate and edge.duplicate, edge.reason


def test_what_differs_is_the_rest_without_its_outer_white_space() -> None:
    from streamdedup.core.explain import Side

    def differs(text: str, *shared: tuple[int, int]) -> tuple[tuple[int, int], ...]:
        return Side("i", "", text, tuple(shared), 0).differs

    assert differs("  x alpha  ", (4, 9)) == ((2, 3),)
    assert differs("a b c d", (2, 3)) == ((0, 1), (4, 7))
    assert differs("abc") == ((0, 3),) and differs("abc", (0, 3)) == ()
    assert differs("ab   cd", (0, 2), (5, 7)) == ()  # white space alone is no difference
    assert differs("") == ()
