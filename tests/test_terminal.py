"""What an ad may put on a terminal: controls written out, line breaks as spaces."""

from __future__ import annotations

import json

import pytest

from streamdedup.terminal import BIDI_CONTROLS, printable, printable_json


@pytest.mark.parametrize(("text", "shown"), [
    ("Cuoco a Milano", "Cuoco a Milano"),
    ("a\x1b]0;pwned\x07b", "a\\x1b]0;pwned\\x07b"),  # renamed the terminal's window
    ("\x1b[2Jclear", "\\x1b[2Jclear"),
    ("two\nlines\r\nthree\u2028four\tfive", "two lines  three four five"),
    ("EUR \u202e0005", "EUR \\u202e0005"),  # was seen as "EUR 5000"
    ("lone \ud800 half", "lone \\ud800 half"),  # stopped tail: UnicodeEncodeError
    ("\x00\x7f\x9b", "\\x00\\x7f\\x9b"),  # C1's CSI too
])
def test_controls_are_written_out_and_breaks_are_spaces(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert printable(text).encode("utf-8")  # no lone surrogate left


@pytest.mark.parametrize("text", [
    "caffè\u00a0bar", "עבודה במילאנו", "وظيفة", "x\u200dy", "招聘厨师", "e\u0301",
])
def test_other_text_is_left_alone(text: str) -> None:
    """No-break spaces, right-to-left letters, joiners, CJK and combining marks."""
    assert printable(text) == text


def test_every_bidirectional_control_is_written_out() -> None:
    for ch in sorted(BIDI_CONTROLS):
        assert printable(ch) == f"\\u{ord(ch):04x}"


def test_json_keeps_accents_and_escapes_what_json_leaves_raw() -> None:
    """``explain --json`` (``ensure_ascii=False``, for readable accents) let U+202E and the
    C1 controls (``\\x9b``, a terminal's CSI) through raw."""
    value = {"raw": "caffè \u202eEUR\x9b[2J \x7f\u2028 \ud800", "n": [1, 2]}
    out = printable_json(json.dumps(value, ensure_ascii=False, indent=2))
    assert json.loads(out) == value  # the same JSON
    assert "caffè" in out and "\\u202e" in out and "\\u009b" in out and "\\u007f" in out
    assert "\\u2028" in out and "\\ud800" in out
    assert not any(ch in out for ch in "\u202e\x9b\x7f\u2028\ud800")
    assert out.count("\n") == json.dumps(value, indent=2).count("\n")  # its lines kept


def test_counted_says_one_in_the_singular() -> None:
    from streamdedup.terminal import counted

    assert [counted(n, "bad row") for n in (0, 1, 2)] == ["0 bad rows", "1 bad row", "2 bad rows"]


def test_writable_makes_each_lone_surrogate_a_question_mark() -> None:
    from streamdedup.terminal import writable

    assert writable("t \ud800 x") == "t ? x"
    text = "Cuoco \U0001f600 è"  # a pair is one character: kept, the same object
    assert writable(text) is text
