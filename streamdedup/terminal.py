"""What an ad may put on a terminal: ``tail`` prints ids and titles, ``explain`` texts (and
``explain --json`` them inside JSON strings).

Ads are scraped, so untrusted: a title holding ``ESC ] 0 ; … BEL`` renamed the terminal's
window, ``ESC [ 2 J`` cleared the screen, a newline broke "one line per verdict" in two, and
U+202E (right-to-left override) showed "0005 EUR" for "EUR 5000". A lone surrogate (JSON
may carry ``\\ud800``) stopped ``tail`` with a UnicodeEncodeError.
"""

from __future__ import annotations

import unicodedata

# Characters that reorder what follows them: the embeddings, overrides, isolates and marks
# of the Unicode bidirectional algorithm (UAX #9). Letters of right-to-left scripts stay.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                          "\u2066\u2067\u2068\u2069")
# Ends of lines in Python's str.splitlines(), and the tab: a space in a one-line view.
_BREAKS = frozenset("\t\n\v\f\r\x1c\x1d\x1e\x85\u2028\u2029")


def writable(text: str) -> str:
    """The text as UTF-8 can write it: a lone surrogate (JSON may carry "\\ud800") as '?'
    (one in a title made /api/clusters answer 400 and `tail` end in a traceback)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def printable(text: str) -> str:
    """``text`` with line breaks as spaces and every other control character, lone
    surrogate and bidirectional control written out as Python writes it (``\\x1b``,
    ``\\u202e``), so that it is seen and does nothing. Other text, spaces and right-to-left
    letters included, is unchanged."""
    if text.isprintable():  # the usual title: one pass in C
        return text
    return "".join(_one(ch) for ch in text)


def _acts(ch: str) -> bool:
    """A control character, a lone surrogate, a line or paragraph separator, or a
    bidirectional control: what a terminal acts on instead of showing."""
    return ch in BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")


def _one(ch: str) -> str:
    if ch in _BREAKS:
        return " "
    if _acts(ch):
        return ch.encode("unicode_escape", "backslashreplace").decode("ascii")
    return ch


def cells(text: str) -> int:
    """Terminal columns ``text`` takes: 2 for a wide (CJK) character, 0 for a combining
    mark (counted as one each, a CJK text's lines in ``explain`` were twice the column and
    its two columns drifted apart; ``tail``'s columns alike)."""
    return sum(0 if unicodedata.combining(ch) else
               2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def printable_json(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``: accents stay readable) with what
    JSON itself leaves raw escaped as ``\\uXXXX``, valid in any JSON string: DEL and the C1
    controls (``\\x9b`` is a terminal's CSI), lone surrogates, the bidirectional controls
    and U+2028/U+2029. Its own line breaks and indents stay."""
    return "".join(f"\\u{ord(ch):04x}" if _acts(ch) and ch not in "\n\t" else ch
                   for ch in text)


def counted(n: int, noun: str) -> str:
    """``1 document``, ``3 documents``: a summary of a dump of one ad said "1 documents, 1
    bad rows". Regular plurals only (every noun the commands count is one)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
