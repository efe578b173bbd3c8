"""Fuzzing what a scraper can send: decoding never fails except with a MessageError, and the
text pipeline (HTML -> normalized text -> shingles) never fails on a decoded document.

Why: one exception that escapes per-message handling stops the stream (and comes back after
every restart: a poison pill). Each example's time is measured and the slowest are printed at
the end of the module; the only timing assertion is hypothesis' (generous) deadline (a tight
one for the HTML nesting bomb, which the HTML parser alone would take minutes on).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamdedup.core.document import Document
from streamdedup.core.sketch import Sketcher
from streamdedup.core.text import Normalizer
from streamdedup.errors import MessageError
from streamdedup.service.message import REASONS, decode_message
from streamdedup.settings import Settings, build_settings

MAX_BYTES = 1 << 20
FUZZ = settings(deadline=timedelta(seconds=10), max_examples=150,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
HEAVY = settings(FUZZ, max_examples=25)

_TIMES: list[tuple[float, str]] = []


@pytest.fixture(scope="module", autouse=True)
def _report_times(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if not _TIMES:
        return
    times = sorted(_TIMES, reverse=True)
    values = sorted(t for t, _ in times)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    lines = [f"fuzz: {len(values)} examples, median {np.median(values) * 1e3:.2f} ms, "
             f"p99 {p99 * 1e3:.1f} ms, max {values[-1] * 1e3:.1f} ms; slowest:"]
    lines += [f"  {t * 1e3:9.1f} ms  {what}" for t, what in times[:5]]
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in lines:
                reporter.write_line(line)


@pytest.fixture(scope="module", params=["reference", "default"])
def pipeline(request: pytest.FixtureRequest) -> tuple[Settings, Sketcher]:
    s = build_settings(request.param, env={})
    return s, Sketcher(s)


def _timed(label: str, fn: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    try:
        return fn()
    finally:
        _TIMES.append((time.perf_counter() - t0, label))


def _decode_then_shingle(payload: bytes, s: Settings, sketcher: Sketcher, label: str) -> None:
    """The property: a Document whose shingles can be computed, or a MessageError."""
    def work() -> None:
        try:
            doc = decode_message(payload, s.text_fields, MAX_BYTES)
        except MessageError as exc:
            assert exc.reason in REASONS
            return
        assert isinstance(doc, Document)
        assert isinstance(doc.id, str) and doc.id
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in doc.fields.items())
        shingled = sketcher.shingle_fields(doc.fields)
        assert shingled.shingles.dtype.kind == "u"
        assert isinstance(shingled.set_id, int)

    _timed(f"{label} ({len(payload)} bytes)", work)


# --- strategies

JSON_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
                | st.text(max_size=50))
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=10), kids,
                                                              max_size=5),
    max_leaves=30,
)
# Characters that have broken text pipelines elsewhere: controls, bidi overrides, combining
# marks, zero-width and BOM, line/paragraph separators, non-characters, wide CJK and emoji.
TRICKY = st.sampled_from(
    [chr(c) for c in range(0, 32)] + ["\x7f", "\x85", "\u00a0", "\u200b", "\u200c", "\u200d",
     "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2069",
     "\u2028", "\u2029", "\ufeff", "\ufffe", "\uffff", "\u0301", "\u0327", "\u0488", "\u20dd",
     "\u0645", "\u05d0", "\u4e00", "\U0001f600", "\U0010fffd", "ß", "ﬁ", "İ", "&", "<", ">",
     ";", "#"])
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)) | TRICKY, max_size=300)

HTML_TOKENS = st.sampled_from([
    "<div>", "</div>", "<p>", "</p>", "<b>", "<i>", "<br>", "<br/>", "<script>", "</script>",
    "<style>", "</style>", "<!--", "-->", "<![CDATA[", "]]>", "<table>", "<tr><td>",
    "<svg><foreignObject>", "<math>", "<template>", "<noscript>", "<a href='x'>", "</a>",
    "&amp;", "&#0;", "&#x110000;", "&#65;", "&nbsp;", "&unknown;", "<", ">", "\"", "'",
    "<img src=x onerror=alert(1)>", "<?xml?>", "<!DOCTYPE html>", "Cercasi ", "sviluppatore ",
])
HTML = st.lists(HTML_TOKENS | TEXT, max_size=60).map("".join)


def _object(draw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = draw(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4))
    for name in ("id", "title", "description"):
        if draw(st.booleans()):
            obj[name] = draw(JSON_VALUES | TEXT | HTML)
    return obj


ANNOUNCEMENTS = st.composite(_object)()


# --- decode + pipeline


@FUZZ
@given(payload=st.binary(max_size=4000))
def test_random_bytes(pipeline: tuple[Settings, Sketcher], payload: bytes) -> None:
    _decode_then_shingle(payload, *pipeline, "random bytes")


@FUZZ
@given(obj=ANNOUNCEMENTS)
def test_announcements_with_fields_of_any_type(pipeline: tuple[Settings, Sketcher],
                                               obj: dict[str, Any]) -> None:
    payload = json.dumps(obj, allow_nan=True).encode("utf-8", "surrogatepass")
    _decode_then_shingle(payload, *pipeline, "any-type fields")


@FUZZ
@given(text=TEXT | HTML, title=TEXT, doc_id=TEXT | st.integers())
def test_tricky_text_in_valid_announcements(pipeline: tuple[Settings, Sketcher], text: str,
                                            title: str, doc_id: str | int) -> None:
    payload = json.dumps({"id": doc_id, "title": title, "description": text},
                         ensure_ascii=False).encode("utf-8", "surrogatepass")
    _decode_then_shingle(payload, *pipeline, "tricky text")


@HEAVY
@given(depth=st.integers(1, 200_000), opener=st.sampled_from(["[", '{"a":', '{"id":[']))
def test_deeply_nested_json(pipeline: tuple[Settings, Sketcher], depth: int,
                            opener: str) -> None:
    closer = {"[": "]", '{"a":': "}", '{"id":[': "]}"}[opener]
    payload = (opener * depth + "1" + closer * depth).encode()
    _decode_then_shingle(payload[: MAX_BYTES + 10], *pipeline, f"nested {opener} x{depth}")


@HEAVY
@given(size=st.integers(100_000, MAX_BYTES - 100), char=TRICKY | st.sampled_from(
    ["a", "è", "parola ", "<b>", "\u0645 ", "\U0001f600"]), field=st.sampled_from(
    ["id", "title", "description"]))
def test_huge_strings(pipeline: tuple[Settings, Sketcher], size: int, char: str,
                      field: str) -> None:
    text = (char * (size // max(1, len(char.encode())) + 1))
    obj = {"id": "huge", "title": "t", "description": "Cercasi sviluppatore", field: text}
    payload = json.dumps(obj, ensure_ascii=False).encode("utf-8")[:MAX_BYTES + 100]
    _decode_then_shingle(payload, *pipeline, f"huge {field} of {char!r}")


@HEAVY
@given(depth=st.integers(1, 5000), tag=st.sampled_from(
    ["div", "span", "p", "li", "ul", "table", "b", "a", "svg", "template", "select", "x-y"]),
    attr=st.integers(0, 500_000))
def test_html_bombs_of_moderate_depth(pipeline: tuple[Settings, Sketcher], depth: int,
                                      tag: str, attr: int) -> None:
    html = f'<a href="{"x" * attr}">' + f"<{tag}>" * depth + "Cercasi sviluppatore"
    payload = json.dumps({"id": "bomb", "description": html}).encode()
    _decode_then_shingle(payload, *pipeline, f"<{tag}> x{depth}, attribute {attr}")


@settings(deadline=timedelta(seconds=3), max_examples=1, database=None)
@given(depth=st.just(40_000))
def test_html_nesting_bomb_is_bounded(depth: int) -> None:
    """(Its end tag makes it HTML: from normalizer version 2 on, bare start tags alone are
    plain text's, and no parser sees them.)"""
    normalize = Normalizer(build_settings("reference", env={}))
    out = _timed(f"<div> x{depth}",
                 lambda: normalize("<div>" * depth + "Cercasi sviluppatore &amp; tester</div>"))
    assert out == normalize("Cercasi sviluppatore & tester")


# --- the normalizer on its own


@FUZZ
@given(text=TEXT | HTML)
def test_normalizer_returns_text_for_any_input(pipeline: tuple[Settings, Sketcher],
                                               text: str) -> None:
    _, sketcher = pipeline
    out = _timed("normalize", lambda: sketcher.normalize(text))
    assert isinstance(out, str)
    assert out == out.strip()


@FUZZ
@given(fields=st.dictionaries(st.sampled_from(["title", "description", "location"]),
                              TEXT | HTML, max_size=3))
def test_shingle_fields_is_deterministic(pipeline: tuple[Settings, Sketcher],
                                         fields: dict[str, str]) -> None:
    """The set id is the dedup key: the same fields must always give the same one."""
    s, _ = pipeline
    first = Sketcher(s, text_cache=0).shingle_fields(fields)
    again = Sketcher(s, text_cache=0).shingle_fields(dict(fields))
    assert first.set_id == again.set_id
    assert np.array_equal(first.shingles, again.shingles)
