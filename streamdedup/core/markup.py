"""HTML -> visible text, and whether an ad is HTML at all.

Scraped ads are plain text more often than HTML, and plain text has its own '<'
(``turni <a rotazione``, ``Contratto <a tempo determinato>``, ``<Sede: Milano>``,
``<<commesso>>``). An HTML parser reads each as a tag running to the next '>' and drops the
words it holds, so two ads that differ only there were exact copies (normalizer version 1).
Telling such a '<' from a tag by its shape took three rules and three reviews, each of
which found plain text read as a tag or real markup read as text. Version 2 asks instead
whether the text is HTML: an editor or a CMS writes a '<' of the text as ``&lt;``, and
writes what plain text does not: end tags, comments, attributes with values.

- Plain text (no such sign): every '<' is text, a bare ``<br>`` a line break; entities
  are decoded, as before.
- HTML: the parser reads it, as in version 1, with two exceptions: a '<' that runs into
  the next '<', or to the end through a ',' or '.', without an '=' on the way (``turni <a
  rotazione, 9-18<br>``) is text, and an element whose content is not markup
  (``<script>``, ``<style>``, ...) counts only where its end tag follows or nothing but
  its content does, so that one named in passing does not take the rest of the ad.
"""

from __future__ import annotations

import html
import re

_MAX_PARSED_TAGS = 4096
_MAX_TAG_TOKENS = 1024  # attributes of one element: the parser is quadratic in them
_ANY_TAG = re.compile(r"<[^<>]*>")
_TAG_OR_TAIL = re.compile(r"<[^<>]*(?:>|$)")  # a tag, or an unclosed one at the end
_TAG_HINT = re.compile(r"<[A-Za-z!/?]|&(#\d+|#x[0-9A-Fa-f]+|[A-Za-z]+);")

# What plain text does not write: an end tag, a comment or a doctype, or a start tag of a
# common element (or <br>) with a first attribute 'name=value'. A bare start tag is no sign:
# "<Meta>", "<link>", "<HR>", "<TD>" (tempo determinato), "<B>" (patente B) are plain
# text's, and so are tags named in a web developer's ad.
_COMMON = ("a|b|big|blockquote|body|center|code|dd|div|dl|dt|em|font|h[1-6]|head|html|i|img|"
           "input|li|link|meta|ol|p|pre|small|span|strike|strong|sub|sup|table|tbody|td|th|"
           "thead|tr|tt|u|ul")
_HTML_SIGN = re.compile(  # searched in the text in lower case: 2x faster than ignoring it
    r"<(?:/(?!br\s*+>)[a-z][a-z0-9:-]*+\s*+>|!--|!doctype"
    rf"""|(?:br|{_COMMON})\s++[a-z-]++\s*+=\s*+(?:["']|[^\s"'<>=`]++[\s/>]))""")
# A bare <br> is no sign either: scrapers and APIs write it into plain text for a line
# break ("Cameriere/a<br>Contratto <a tempo determinato><br>Milano"). There it is one.
_LINE_BREAK = re.compile(r"<\s*+/?\s*+br\s*+/?\s*+>", re.IGNORECASE)
# In HTML, a '<' and a letter that runs into the next '<' without an '=' on the way is not
# a tag ("turni <a rotazione, 9-18<br>"), nor one that runs to the end of the text holding
# a ',' or '.' but no '=' ("Paga <a ore, 8 euro"). One with an '=' is a tag that lost its
# '>' (<span style="x"<b>), and one to the end without is a tag a scraper cut off (<div
# cl): the parser reads both, as before. Each scan stops at the next '<', '>' or '=':
# linear (a lookahead that read quoted values took 33 s for 1 MB of them holding '<').
_RUNS_INTO_NEXT = re.compile(r"<(?=[A-Za-z][^<>=]*+<|[A-Za-z][^<>=,.]*+[,.][^<>=]*+\Z)")
# Elements whose content is not markup: one named in passing (an ad asking for "HTML
# (<div>, <script>)") would take the rest of the ad with it.
_RAW_TEXT = "iframe|noembed|noframes|noscript|script|style|template|textarea|title|xmp"
_RAW_OPEN = re.compile(rf"<({_RAW_TEXT})(?=[\s/>])[^<>]*+>?", re.IGNORECASE)
_RAW_END = re.compile(rf"</({_RAW_TEXT})(?=[\s/>]|\Z)", re.IGNORECASE)

# Above this size the parser can be made slow (below, nothing measured was): a tag of
# many attributes (quadratic in them: 136,000 written a0/a1/... took 25 s, which words
# did not count), or formatting elements left open (b, font, ...), each cloned, attributes
# and values, at every piece of text after it: 1,300 of 120 attributes took over 600 s,
# one of a 950 KB value before 3,000 pieces 6.4 s and 2.7 GB. So the bytes of the tags
# open at once times the pieces after them (at most the text's '<') are held to 8 MB
# (64 open of 16 attributes before 4,000 pieces, 26 MB, took 0.24 s; 12 MB, 0.2 s).
_GUARDS_FROM = 8192
_MAX_ATTRIBUTES = 256  # of one tag: 1 MB of tags of 250 took 65 ms
_MAX_OPEN_FORMATTING = 64
_MAX_CLONED_BYTES = 8 << 20
_TAG_BODY = r"""(?:[^>"'=]++|=\s*+"[^"]*+"|=\s*+'[^']*+'|[="'])*+(?:>|\Z)"""
# A '>' in a quoted value does not end a tag, nor a '<' (as the parser reads it): every
# match runs to a '>' or the end, so finditer is linear.
_QUOTED_TAG_OR_TAIL = re.compile("<" + _TAG_BODY)
_FORMATTING_TAG = re.compile(
    rf"<(/?)(?:a|b|big|code|em|font|i|nobr|s|small|strike|strong|tt|u)(?=[\s/>]){_TAG_BODY}",
    re.IGNORECASE)
_QUOTED_VALUE = re.compile(r"""=\s*+(?:"[^"]*+"|'[^']*+')""")
_ATTRIBUTE_START = re.compile(r"""[\s/"'][^\s/"'=<>]""")  # once quoted values are out


def _attributes(tag: str) -> int:
    """About how many attributes a tag has: 'a0/a1' and 'a0="1"a1="1"' count two each,
    which its words did not; a quoted value's words are not counted."""
    return len(_ATTRIBUTE_START.findall(_QUOTED_VALUE.sub('=""', tag)))


def is_html(text: str) -> bool:
    """Whether the text shows a sign of HTML that plain text does not write (a bare
    ``<br>`` is none)."""
    return _HTML_SIGN.search(text.lower()) is not None


def html_to_text(text: str, *, version: int) -> str:
    """Visible text of an ad: HTML's, or, from normalizer version 2 on, plain text as it
    is (module docstring); entities decoded either way.

    The HTML parser's time grows with the square of the nesting depth (40,000 nested
    ``<div>`` take seconds) and of the attributes of one element, so a text with more than
    ``_MAX_PARSED_TAGS`` tags is stripped by a linear regex instead, as is one the parser
    would be slow on (``_slow_to_parse``).
    """
    if ("<" not in text and "&" not in text) or not _TAG_HINT.search(text):
        return text  # plain text without markup or entities: nothing to do (most ads)
    if version >= 2 and not is_html(text):
        return html.unescape(_LINE_BREAK.sub("\n", text))
    if text.count("<") > _MAX_PARSED_TAGS:
        return html.unescape(_ANY_TAG.sub(" ", text))
    if version >= 2:
        text = _close_raw_text(_RUNS_INTO_NEXT.sub("&lt;", text))
    if _slow_to_parse(text, version):
        return html.unescape(_ANY_TAG.sub(" ", text))
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(text)
    for node in tree.css("script, style, noscript"):
        node.decompose()
    root = tree.body or tree.root
    return root.text(separator=" ") if root is not None else ""


def _close_raw_text(text: str) -> str:
    """A ``<script>``-like element with no end tag after it but more markup, escaped: it
    is text. With nothing but its content after it, it is one a scraper cut off (a
    ``<style>`` of Word's, JSON-LD), as the parser reads it. One written ``<iframe ... />``
    (not empty to a browser, which takes the rest of the page as its content) gets its end
    tag. The end tags and the last markup are found in one pass each: linear."""
    if _RAW_OPEN.search(text) is None:
        return text
    last_end = {m.group(1).lower(): m.start() for m in _RAW_END.finditer(text)}
    last_markup = _last_markup(text)

    def close(m: re.Match[str]) -> str:
        tag, name = m.group(), m.group(1).lower()
        if last_end.get(name, -1) > m.start() or last_markup < m.end():
            return tag  # its end tag follows, or nothing but its content (a cut)
        return tag + f"</{name}>" if tag.endswith("/>") else "&lt;" + tag[1:]

    return _RAW_OPEN.sub(close, text)


def _last_markup(text: str) -> int:
    """Where the last '<' followed by a letter or '/' is, or -1."""
    i = len(text)
    while (i := text.rfind("<", 0, i)) >= 0:
        after = text[i + 1:i + 2]
        if after == "/" or (after.isascii() and after.isalpha()):
            return i
    return -1


def _slow_to_parse(text: str, version: int) -> bool:
    """Markup the parser would take seconds or more on. Version 1 measured a tag by its
    words to the first '>'; it keeps that measure (its stores pin what it returns). The
    others, for texts over 8 KB, both versions share: no real ad comes near them."""
    if version < 2 and len(text) > 2 * _MAX_TAG_TOKENS and any(
            m.end() - m.start() > _MAX_TAG_TOKENS and len(m.group().split()) > _MAX_TAG_TOKENS
            for m in _TAG_OR_TAIL.finditer(text)):
        return True
    if len(text) <= _GUARDS_FROM:
        return False
    tags = [m.group() for m in _QUOTED_TAG_OR_TAIL.finditer(text)]
    if any(_attributes(tag) > _MAX_ATTRIBUTES for tag in tags
           if len(tag) > 2 * _MAX_ATTRIBUTES and (version >= 2 or "=" in tag)):
        return True  # version 1 reads '<a rotazione ... 900 words ... ->' as it did
    pieces = text.count("<")
    open_tags: list[int] = []  # their lengths
    open_bytes = 0
    for m in _FORMATTING_TAG.finditer(text):
        if m.group(1):
            open_bytes -= open_tags.pop() if open_tags else 0
            continue
        open_tags.append(m.end() - m.start())
        open_bytes += open_tags[-1]
        if len(open_tags) > _MAX_OPEN_FORMATTING or open_bytes * pieces > _MAX_CLONED_BYTES:
            return True
    return False
