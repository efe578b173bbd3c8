"""HTML -> visible text, and which '<' of an ad is markup at all.

Scraped ads are plain text more often than HTML, and plain text has its own '<'
(``turni <a rotazione``, ``<<commesso>>``, ``Contratto <a tempo determinato>``,
``<Sede: Milano>``). An HTML parser reads each as a tag running to the next '>' and drops
the words it holds, so two ads that differ only there were exact copies (normalizer
version 1). From version 2 on, a '<' is markup only where a tag stands:

- an element's name (HTML's, or with ':' or '-' inside: ``o:p``, ``my-widget``), then
  attributes as the tokenizer reads them (quotes only after '='), then '>'; without any
  ``name=value`` among them, a bare attribute must be a boolean one (``nowrap``) or a
  framework's (``data-v-1a2b``), so "<a tempo determinato>" is text;
- an end tag of any name; ``<!`` and ``<?`` (comments, doctypes, CDATA), as before;
- a tag cut off at the end of the text, as a scraper cutting at N characters leaves it;
- ``<script>``, ``<style>`` and the other elements whose content is not markup, and
  custom ones without ``name=value``, only where their end tag follows.

Every other '<' is escaped before the parser, so it stays text. The regexes use
possessive quantifiers, so they backtrack a bounded amount at most: the whole step takes
under 0.1 s on every 1 MB message two reviews built to slow it (BENCHMARKS.md §9h).
"""

from __future__ import annotations

import functools
import html
import re
import string

_MAX_PARSED_TAGS = 4096
_MAX_TAG_TOKENS = 1024  # attributes of one element: the parser is quadratic in them
_ANY_TAG = re.compile(r"<[^<>]*>")
_TAG_OR_TAIL = re.compile(r"<[^<>]*(?:>|$)")  # a tag, or an unclosed one at the end
# The same, quotes read after '=' (a '>' in a quoted value does not end the tag)
_QUOTED = r"""<(?:[^<>"'=]++|=\s*+"[^"]*+"|=\s*+'[^']*+'|[="'])*+"""
_QUOTED_TAG = re.compile(_QUOTED + ">")
_QUOTED_TAG_OR_TAIL = re.compile(_QUOTED + r"(?:>|\Z)")
# The parser clones each formatting element left open (b, font, ...) at every piece of
# text after it, attributes and all: 16 of 1,000 attributes each before 8,000 pieces took
# 25 s, 700 of 120 took 13-37 s. A text with more than 64 open at once, or one of 17
# attributes or more, is stripped by the regex (64 of 15 before 1,990 pieces: 0.1 s).
# Version 1 counts only attributes with '=': plain text ("<a rotazione ... 20 words ...
# ->") must keep the answer its stores gave.
_FORMATTING = "a|b|big|code|em|font|i|nobr|s|small|strike|strong|tt|u"
_FORMATTING_TAG = re.compile(rf"<(/?)(?:{_FORMATTING})(?=[\s/>])", re.IGNORECASE)
_QUOTED_VALUE = r"""(?:"[^"]*+"|'[^']*+'|[^\s"'<>]*+)"""
_CROWDED_FORMATTING_TAG = (  # by normalizer version
    re.compile(rf"""<(?:{_FORMATTING})(?:\s++[^\s"'<>=]*+(?:\s*+=\s*+{_QUOTED_VALUE})?+[^\s<>]*+)"""
               r"{17}[^<>]*+>", re.IGNORECASE),
    re.compile(rf"""<(?:{_FORMATTING})(?:\s++[^\s"'<>=]++\s*+=\s*+{_QUOTED_VALUE}[^\s<>]*+)"""
               r"{17}[^<>]*+>", re.IGNORECASE))
_MAX_OPEN_FORMATTING = 64
# Below this size no markup is slow enough to need those guards (400 formatting elements
# open before 400 pieces of text: 0.1 s), so the usual ad does not pay for them; version
# 1's own guard needs a tag of 1,025 words, so 2,049 characters.
_GUARDS_FROM = (2048, 8192)
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


def _trie(words: list[str], either_case: bool = False) -> str:
    """A regex matching exactly ``words``, branching one letter at a time: a flat
    alternation of 150 names cost 2 us at every '<' (2 s for a 1 MB text of '<')."""
    if words == [""]:
        return ""
    heads = sorted({w[0] for w in words if w})
    branches = [(f"[{h}{h.upper()}]" if either_case and h.isalpha() else re.escape(h))
                + _trie([w[1:] for w in words if w[:1] == h], either_case) for h in heads]
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if "" in words else body


# Words a plain-text ad puts after '<' ("<a tempo determinato>", "<i candidati ...>",
# "<Sede: Milano>", "<part-time>") must not read as a tag. So in a tag without any
# attribute that has '=', a bare attribute is one HTML defines as boolean, or one a
# framework writes (data-v-1a2b, ng-cloak, :class, @click, [x], (y)); a custom name has no
# trailing ':'; and an element whose content is not markup (script, style, ...) or a custom
# one without attributes is a tag only where its end tag follows (``_unclosed_as_text``).
# An end tag of any name is one ("</spam>": plain text does not write those).
_CUSTOM = r"[a-z][a-z0-9]*+(?:[:-][a-z0-9._]++)++"  # o:p, st1:place, my-widget
_NAME = rf"(?:{_trie(_ELEMENTS)}|{_CUSTOM})(?![a-zA-Z0-9:._-])"
# A tag cut off before its first '=' is told from plain text by a name of two letters or
# more ("<div cl", "<span style"), or by the start of a common attribute's name after a
# one-letter one ("<p cl", "<a hr"): "turni <a rotazione" is text.
_LONG_NAME = rf"(?:{_trie([e for e in _ELEMENTS if len(e) > 1])}|{_CUSTOM})(?![a-zA-Z0-9:._-])"
_COMMON_ATTRIBUTES = ("align class color dir face height href id lang name rel size src "
                      "style target title type width").split()
_ATTRIBUTE_START = _trie(sorted({a[:i] for a in _COMMON_ATTRIBUTES for i in range(1, len(a) + 1)}))
_BOOLEANS = """allowfullscreen async autofocus autoplay border checked compact contenteditable
controls crossorigin declare default defer disabled download formnovalidate hidden inert ismap
itemscope loop multiple muted nohref nomodule noresize noshade novalidate nowrap open
playsinline readonly required reversed scoped seamless selected truespeed""".split()
_CHAR = r"""[^\s"'<>/=,;]"""  # of an attribute's name
_SPECIAL = r"\-:@#*\[("
_BARE = (rf"""(?:{_trie(_BOOLEANS)}(?!{_CHAR})"""
         rf"""|(?=[^\s"'<>/=,;{_SPECIAL}]*+[{_SPECIAL}]){_CHAR}++)""")
_VALUE = r"""(?:"[^"]*+"|'[^']*+'|[^\s"'<>`]++|(?=[\s/>]))"""  # empty only before its end
_ATTR = rf"(?:{_CHAR}++\s*+=\s*+{_VALUE}|{_BARE})"
# each attribute after a space or '/', or straight after a quoted value (class="a"id="b")
_ATTRS = rf"""(?:(?:[\s/]++|(?<=["'])){_ATTR})*+"""
_ANY_ATTRS = rf"""(?:(?:[\s/]++|(?<=["'])){_CHAR}++(?:\s*+=\s*+{_VALUE})?+)*+"""
_TAG = (rf"/?{_NAME}{_ATTRS}[\s/]*+>|{_NAME}(?=[^<>=]*+=){_ANY_ATTRS}[\s/]*+>"
        r"|/[a-z][a-z0-9]*+\s*+>")
_PARTIAL_VALUE = r"""\s*+=\s*+(?:"[^"]*+|'[^']*+|[^\s"'<>`]*+)"""
_CUT = "(?=[^<>]*+\\Z)(?:" + "|".join((  # at the end of the text: no '<' or '>' after
    r"/?(?:[a-z][a-z0-9:-]*+)?+\s*+\Z",  # a name, or the start of one
    rf"/?{_NAME}{_ATTRS}(?:[\s/]++{_CHAR}++)?+{_PARTIAL_VALUE}[\s/]*+\Z",  # in a value
    rf"/?{_NAME}(?=[^<>=]*+=){_ATTRS}[\s/]*+\Z",  # after a value
    rf"/?{_LONG_NAME}{_ATTRS}(?:[\s/]++{_CHAR}*+)?+[\s/]*+\Z",  # in an attribute's name
    rf"/?{_NAME}{_ATTRS}[\s/]++{_ATTRIBUTE_START}[\s/]*+\Z")) + ")"
# Elements whose content is not markup: an unclosed one in plain text ("HTML (<div>,
# <script>) e CSS") would take the rest of the ad with it.
_RAW_TEXT = frozenset(
    "iframe noembed noframes noscript plaintext script style textarea title xmp".split())
_NEEDS_END_TAG = re.compile(  # case-blind by its letters: 3.3 us for an ad, 5.8 with the flag
    rf"<({_trie(sorted(_RAW_TEXT), either_case=True)}|{_CUSTOM.replace('a-z', 'a-zA-Z')})"
    r"(?=[\s/>]|\Z)[^<>]*+>?")


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
    if lower_case.search(text) is not None:
        text = case_blind.sub("&lt;", text)
    return _unclosed_as_text(text) if _NEEDS_END_TAG.search(text) else text


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _unclosed_as_text(text: str) -> str:
    """A raw-text element, or a custom one without an '=' in its tag or a '/>', escaped
    where no end tag follows: it is text. Unless it ends the text, as a scraper's cut
    leaves it (``<o:p>``, ``<o:p></o``); and a raw-text one written ``<iframe ... />``
    gets its end tag, so that it does not take the rest of the ad. Each name's last end
    tag is looked up once, so this is linear."""
    lower = text.translate(_ASCII_LOWER)  # str.lower() may lengthen: 'İ' -> 'i̇'
    last_end: dict[str, int] = {}

    def escape(m: re.Match[str]) -> str:
        tag, name = m.group(), m.group(1).translate(_ASCII_LOWER)
        end = last_end.get(name)
        if end is None:
            end = last_end[name] = lower.rfind("</" + name)
        cut = len(text) - m.end() <= len(name) + 16 and (  # near the end: no copy of the
            "</" + name).startswith(lower[m.end():].strip())  # rest at every match
        if end > m.start() or not tag.endswith(">") or cut:
            return tag  # its end tag follows, or it is cut off: in it, after it, in its end
        if tag.endswith("/>"):  # <iframe ... />: not empty to a browser, which takes the
            return tag + f"</{name}>" if name in _RAW_TEXT else tag  # rest of the page
        if name not in _RAW_TEXT and "=" in tag:
            return tag
        return "&lt;" + tag[1:]

    return _NEEDS_END_TAG.sub(escape, text)


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
    tags = _ANY_TAG if version < 2 else _QUOTED_TAG
    if text.count("<") > _MAX_PARSED_TAGS:
        return html.unescape(tags.sub(" ", text))
    if version >= 2:
        text = lone_brackets_as_text(text)  # 4,096 '<' at most: a few ms whatever they hold
    if _slow_to_parse(text, version):
        return html.unescape(tags.sub(" ", text))
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(text)
    for node in tree.css("script, style, noscript"):
        node.decompose()
    root = tree.body or tree.root
    return root.text(separator=" ") if root is not None else ""


def _slow_to_parse(text: str, version: int) -> bool:
    """Markup the parser would take seconds or more on: one tag of more than 1,024 words
    (as version 1 measured it: to the first '>'; from version 2, quotes read), or too
    many formatting elements open at once, or one with too many attributes."""
    if version < 2 and len(text) > _GUARDS_FROM[0] and _crowded_tag(text, _TAG_OR_TAIL):
        return True
    return len(text) > _GUARDS_FROM[1] and (
        _crowded_tag(text, _QUOTED_TAG_OR_TAIL) or _crowded_formatting(text, version))


def _crowded_tag(text: str, tags: re.Pattern[str]) -> bool:
    return any(m.end() - m.start() > _MAX_TAG_TOKENS and len(m.group().split()) > _MAX_TAG_TOKENS
               for m in tags.finditer(text))


def _crowded_formatting(text: str, version: int) -> bool:
    tags = _FORMATTING_TAG.findall(text)
    if len(tags) > _MAX_OPEN_FORMATTING:
        depth = 0
        for closing in tags:
            depth = max(depth - 1, 0) if closing else depth + 1
            if depth > _MAX_OPEN_FORMATTING:
                return True
    return _CROWDED_FORMATTING_TAG[version < 2].search(text) is not None
