"""HTML -> visible text, and which '<' of an ad is markup at all.

Scraped ads are plain text more often than HTML, and plain text has its own '<'
(``turni <a rotazione``, ``<<commesso>>``, ``età <anni 40 -> contattare``). An HTML parser
reads each of those as a tag running to the next '>' and drops the words it holds, so two
ads that differ only there were exact copies (normalizer version 1). From version 2 on, a
'<' is markup only where a tag is: a known element's name (or a name with ':' or '-', as
``o:p`` and custom elements) followed by attributes as the tokenizer reads them (quotes
only after '=', names without ',' or ';') and '>'; or ``<!``/``<?`` (comments, doctypes,
CDATA, as before); or a tag cut off at the end of the text, as a scraper cutting at N
characters leaves it (a name alone, one with an '=' in it, or an element's name of two
letters or more: ``<div cl``; ``<a rotazione`` stays text). Every other '<' is escaped
before the parser, so it stays text. The regexes use possessive quantifiers and never
backtrack: the whole step takes 71 ms at most on the 1 MB messages a review built to
slow it (BENCHMARKS.md §9h).
"""

from __future__ import annotations

import functools
import html
import re

_MAX_PARSED_TAGS = 4096
_MAX_TAG_TOKENS = 1024  # attributes of one element: the parser is quadratic in them
_ANY_TAG = re.compile(r"<[^<>]*>")
_TAG_OR_TAIL = re.compile(r"<[^<>]*(?:>|$)")  # a tag, or an unclosed one at the end
# The same, quotes read after '=' (a '>' in a quoted value does not end the tag)
_QUOTED = r"""<(?:[^<>"'=]++|=\s*+"[^"]*+"|=\s*+'[^']*+'|[="'])*+"""
_QUOTED_TAG = re.compile(_QUOTED + ">")
_QUOTED_TAG_OR_TAIL = re.compile(_QUOTED + r"(?:>|\Z)")
_TAG_HINT = re.compile(r"<[A-Za-z!/?]|&(#\d+|#x[0-9A-Fa-f]+|[A-Za-z]+);")

# HTML's elements, the obsolete ones scraped pages still carry, and SVG's common ones
_ELEMENTS = """a abbr acronym address applet area article aside audio b base basefont
bdi bdo bgsound big blink blockquote body br button canvas caption center circle cite
clippath code col colgroup data datalist dd defs del desc details dfn dialog dir div dl
dt ellipse em embed fieldset figcaption figure font footer foreignobject form frame
frameset g h1 h2 h3 h4 h5 h6 head header hgroup hr html i iframe ilayer image img input
ins isindex kbd keygen label layer legend li line lineargradient link listing main map
mark marquee mask math menu menuitem meta meter multicol nav nobr noembed noframes
nolayer noscript object ol optgroup option output p param path pattern picture plaintext
polygon polyline pre progress q radialgradient rb rect rp rt rtc ruby s samp script
search section select slot small source spacer span stop strike strong style sub summary
sup svg symbol table tbody td template text textarea tfoot th thead time title tr track
tspan tt u ul use var video wbr xmp""".split()


def _trie(words: list[str]) -> str:
    """A regex matching exactly ``words``, branching one letter at a time: a flat
    alternation of 150 names cost 2 us at every '<' (2 s for a 1 MB text of '<')."""
    if words == [""]:
        return ""
    heads = sorted({w[0] for w in words if w})
    branches = [re.escape(h) + _trie([w[1:] for w in words if w[:1] == h]) for h in heads]
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if "" in words else body


_CUSTOM = r"[a-z][a-z0-9]*+[:-][a-z0-9:._-]*+"  # o:p, my-widget
_NAME = rf"(?:{_trie(_ELEMENTS)}|{_CUSTOM})(?![a-zA-Z0-9:._-])"
# A tag cut off before its first '=' is told from plain text by a name of two letters or
# more: "turni <a rotazione" is text, "<div cl" and "<span style" are cut tags.
_LONG_NAME = rf"(?:{_trie([e for e in _ELEMENTS if len(e) > 1])}|{_CUSTOM})(?![a-zA-Z0-9:._-])"
_ATTR_NAME = r"""[^\s"'<>/=,;]++"""
_VALUE = r"""(?:"[^"]*+"|'[^']*+'|[^\s"'<>`]++)"""
# each attribute after a space or '/', or straight after a quoted value (class="a"id="b");
# a value may be empty (alt=>), as the tokenizer reads it
_ATTRS = rf"""(?:(?:[\s/]++|(?<=["'])){_ATTR_NAME}(?:\s*+=\s*+{_VALUE}?+)?+)*+"""
_TAG = rf"/?{_NAME}{_ATTRS}[\s/]*+>"
_CUT = "|".join((
    r"/?[a-z][a-z0-9:-]*+\s*+\Z",  # a name, or the start of one
    rf"""/?{_NAME}(?=[^<>]*=){_ATTRS}(?:\s*+=?+\s*+(?:"[^"]*+|'[^']*+))?+[\s/]*+\Z""",
    rf"/?{_LONG_NAME}{_ATTRS}[\s/]*+\Z"))


@functools.cache
def _not_markup() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A '<' that starts no markup: with lower-case names only, then case-blind. Compiled
    at the first HTML text, not at import (11 ms, 1.6 % of a one-line `check`)."""
    return (re.compile(rf"<(?![!?]|{_TAG}|{_CUT})"),
            re.compile(rf"<(?![!?]|{_TAG}|{_CUT})", re.IGNORECASE))


def lone_brackets_as_text(text: str) -> str:
    """Each '<' that starts no markup, escaped: the parser then shows it as text. A '<'
    inside a quoted attribute value is escaped too, where it changes nothing.

    The lower-case search runs first: half the time of the case-blind one (5.7 against
    10 us for an ad of 64 tags), and where it finds every '<' markup, so does the other,
    since ignoring case only widens the letters a name may have."""
    lower_case, case_blind = _not_markup()
    if lower_case.search(text) is None:
        return text  # most HTML
    return case_blind.sub("&lt;", text)


def html_to_text(text: str, *, version: int) -> str:
    """Visible text of an HTML fragment; tolerant of broken markup, decodes entities.

    ``version`` is the normalizer's: from 2 on, a '<' that starts no markup is text
    (module docstring). The HTML parser's time grows with the square of the nesting depth
    (40,000 nested ``<div>`` take seconds) and of the attributes of one element (40,000
    take 2.7 s; one tag of 209,000 attributes took 13 minutes), so a text with more than
    ``_MAX_PARSED_TAGS`` tags or an element of more than ``_MAX_TAG_TOKENS`` words, which
    no real ad has, is stripped by a linear regex instead: tags removed, entities decoded.
    Version 1 measured a tag to its first '>', so one whose '>' stood in a quoted value
    (``<a b='>' w1 ... w80000>``) reached the parser: 7.5 s; version 2 reads the quotes.
    """
    if ("<" not in text and "&" not in text) or not _TAG_HINT.search(text):
        return text  # plain text: skip the parser (most scraped ads)
    tags, tails = (_ANY_TAG, _TAG_OR_TAIL) if version < 2 else (_QUOTED_TAG, _QUOTED_TAG_OR_TAIL)
    if text.count("<") > _MAX_PARSED_TAGS:
        return html.unescape(tags.sub(" ", text))
    if version >= 2:
        text = lone_brackets_as_text(text)  # 4,096 '<' at most: a few ms whatever they hold
    if any(m.end() - m.start() > _MAX_TAG_TOKENS and len(m.group().split()) > _MAX_TAG_TOKENS
           for m in tails.finditer(text)):
        return html.unescape(tags.sub(" ", text))
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(text)
    for node in tree.css("script, style, noscript"):
        node.decompose()
    root = tree.body or tree.root
    return root.text(separator=" ") if root is not None else ""
