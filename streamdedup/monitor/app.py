"""The monitor's web application (Starlette): the page, its static files, the JSON API and a
server-sent event stream. Everything it shows comes from a ``MonitorState`` that the
observer thread fills; every handler reads it under ``lock``.

API (documented in the README):

    GET /api/summary                 counts since --from: verdicts, duplicates, duplicate_rate,
                                     dead_letters, dead_letters_by_reason, clusters,
                                     broker (the observer's health(): reachable, behind)
    GET /api/series                  per-second verdicts and duplicates (last 10 minutes)
    GET /api/clusters?limit=20       the biggest and the fastest-growing clusters
    GET /api/verdicts?since=N        verdicts after index N (each carries its index)
    GET /api/duplicates?limit=50     the latest duplicates
    GET /api/cluster/<id>?limit=100  a cluster's members among the kept verdicts, newest
                                     first, with titles and links (also ?id=ID)
    GET /api/verdict/<id>            one document's verdict (also /api/verdict?id=ID)
    GET /api/explain/<id>?other=ID   the document beside its match (default: duplicate_of;
                                     also /api/explain?id=ID: the page's form, since a
                                     browser reads an id "." or ".." in a path as a folder)
    GET /api/events?since=N          server-sent events, a "tick" each second: the summary,
                                     the series, and the verdicts since the last tick; a
                                     client more than 200 behind skips to the newest 200
                                     ("skipped": how many), as a live page wants (at 200 a
                                     second, the page fell behind for good); /api/verdicts
                                     pages through all of them

With a token, every request but the page and its scripts (which hold no data) needs
``Authorization: Bearer <token>`` or ``?token=<token>`` (the page passes on the one in its
own URL). Without one, a request must name a loopback host (or one of --monitor-hosts) in its
Host header: 403 otherwise.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import unquote_to_bytes

from streamdedup.errors import shown
from streamdedup.extras import require

require("starlette", "the monitor")

from starlette.applications import Starlette  # noqa: E402
from starlette.convertors import PathConvertor, register_url_convertor  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402
from starlette.middleware.base import BaseHTTPMiddleware  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse  # noqa: E402
from starlette.routing import Mount, Route  # noqa: E402
from starlette.staticfiles import StaticFiles  # noqa: E402

from streamdedup.monitor.state import MonitorState  # noqa: E402
from streamdedup.service.metrics import is_loopback  # noqa: E402

Explainer = Callable[[str, str], dict[str, Any]]  # (id, other id) -> explanation (or raises)
STATIC = resources.files("streamdedup.monitor") / "static"
EVENT_VERDICTS = 200  # verdicts a tick carries at most: the newest, for a client behind


class _Static(StaticFiles):
    def lookup_path(self, path: str) -> tuple[str, Any]:
        """No such file for a name the file system cannot hold: ``/static/%00`` answered 400
        "embedded null byte", Python's words."""
        try:
            return super().lookup_path(path)
        except ValueError:
            return "", None


class NotFound(Exception):
    """An id the monitor knows nothing about; the message says what is missing."""


class _AnyId(PathConvertor):
    """An id, whatever it holds: "path" (``.*``) stopped at a newline, and the detector takes
    ids with newlines (``/api/verdict/a%0Ab`` was "no such page")."""

    regex = "(?s:.*)"


register_url_convertor("any_id", _AnyId())


def _param(request: Request, name: str) -> str | None:
    """``?name=`` given at most once: of ``?id=0&id=33`` the last was taken, silently."""
    given = request.query_params.getlist(name)
    if len(given) > 1:
        raise ValueError(f"?{name}= is given {len(given)} times: give it once")
    return given[0] if given else None


def _utf8(request: Request) -> None:
    """Raises ValueError (a 400) if the path, or ``?id=`` or ``?other=``, is not UTF-8 once
    its ``%XX`` are decoded: Starlette puts U+FFFD for such bytes, so ``/api/verdict/%ff``
    asked for an id "\ufffd" and answered 404 for an id nobody gave. Other parameters (a
    page's cache-buster) are not ids and are not checked."""
    pairs = [("the path", request.scope.get("raw_path") or b"")]
    for pair in (request.scope.get("query_string") or b"").split(b"&"):
        name, _, value = pair.partition(b"=")
        if unquote_to_bytes(name.replace(b"+", b" ")) in (b"id", b"other"):
            pairs.append((f"?{name.decode('ascii', 'replace')}=", value))
    for part, raw in pairs:
        try:
            unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{part} is not UTF-8 once its %XX are decoded (byte "
                             f"0x{exc.object[exc.start]:02x}): ids are UTF-8") from None


def _doc_id(request: Request) -> str:
    """The id in the path, or in ``?id=`` (raises ValueError, a 400, when neither has one, or
    both do: ``/api/verdict/x1?id=x2`` answered for x1 without a word)."""
    _utf8(request)
    in_query = _param(request, "id")
    doc_id = request.path_params.get("doc_id", in_query)
    if in_query is not None and "doc_id" in request.path_params:
        raise ValueError("the id is given twice, in the path and as ?id=: give it once")
    if not doc_id:
        raise ValueError("no id: give it in the path or as ?id=ID")
    return str(doc_id)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _int(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = _param(request, name)
    if raw is None:
        return default
    if not re.fullmatch(r"-?[0-9]+", raw):  # int() also takes ' 5', '5_0', '٥'
        raise ValueError(f"{name} must be an integer, not {shown(raw)}")
    if len(raw.lstrip("-0")) > 19:
        raise ValueError(f"{name} must be in [{lo}, {hi}], not {shown(raw)}")
    value = int(raw)
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], not {value}")
    return value


class _Token(BaseHTTPMiddleware):
    def __init__(self, app: Any, token: str) -> None:
        super().__init__(app)
        self.token = token

    async def dispatch(self, request: Request,
                       call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        path = request.scope.get("path", "")
        root = request.scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]  # behind a proxy prefix, the route's own path
        if path == "/" or path.startswith("/static/"):
            return await call_next(request)  # the page and its scripts hold no data
        given = [request.query_params.get("token", "")]
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":  # the scheme is case-insensitive (RFC 7235)
            # Starlette reads a header as latin-1: curl sends a token's UTF-8 bytes, Python's
            # clients and browsers latin-1 where they can; either reading may be the token.
            raw = auth[7:]
            given = [raw, raw.encode("latin-1", "replace").decode("utf-8", "replace")]
        if not any([hmac.compare_digest(g.encode(), self.token.encode()) for g in given]):
            return _error(401, "the token is wrong" if given[0] else
                          "a token is needed: Authorization: Bearer <token> or ?token=")
        return await call_next(request)


def host_name(header: str) -> str:
    """The name in a Host header, without port, brackets or a final dot, in lower case:
    ``LocalHost.:8088`` -> ``localhost``, ``[::1]:8088`` -> ``::1``."""
    name = header.strip().lower()
    if name.startswith("["):
        return name[1:name.find("]")] if "]" in name else name
    return name.rsplit(":", 1)[0].rstrip(".") if name.count(":") == 1 else name.rstrip(".")


class _Hosts(BaseHTTPMiddleware):
    """Without a token, only requests to a loopback name, or one of ``hosts``: a page
    elsewhere could point its own name at 127.0.0.1 (DNS rebinding), and a visitor's browser
    would then read the ads for it, its Host header still naming that page's name."""

    def __init__(self, app: Any, hosts: tuple[str, ...]) -> None:
        super().__init__(app)
        self.hosts = {host_name(h) for h in hosts}

    def answers(self, header: str | None) -> bool:
        if header is None or "*" in self.hosts:  # no browser leaves Host out
            return True
        name = host_name(header)
        return (name in self.hosts or is_loopback(name) or name.endswith(".localhost"))

    async def dispatch(self, request: Request,
                       call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        header = request.headers.get("host")
        if self.answers(header):
            return await call_next(request)
        return _error(403, f"the monitor without a token answers loopback names only, not "
                           f"{shown(host_name(header or ''))}: add it to --monitor-hosts (or "
                           "STREAMDEDUP_MONITOR_HOSTS), or give --monitor-token")


class _GetOnly(BaseHTTPMiddleware):
    """Another method than GET (or HEAD) is 405 on any path: on a path no route has
    (``CONNECT host:443``, ``OPTIONS *``) it was 404 "no such page"."""

    async def dispatch(self, request: Request,
                       call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if request.method in ("GET", "HEAD"):
            return await call_next(request)
        return _error(405, f"{request.method} is not allowed: the monitor only answers GET")


def create_app(state: MonitorState, lock: threading.Lock, explainer: Explainer,
               token: str | None = None, tick_s: float = 1.0,
               closing: threading.Event | None = None,
               hosts: tuple[str, ...] = ()) -> Starlette:
    """``closing``, once set, ends every event stream: the web server waits for its open
    connections when it stops, and an open page kept Ctrl-C from stopping the monitor.
    ``hosts``: the Host names a monitor without ``token`` answers besides loopback ones."""
    closing = closing or threading.Event()

    def read(fn: Callable[[], Any]) -> Any:
        with lock:
            return fn()

    async def index(request: Request) -> Response:
        return FileResponse(str(STATIC / "index.html"))

    async def summary(request: Request) -> Response:
        return JSONResponse(read(state.summary))

    async def series(request: Request) -> Response:
        return JSONResponse(read(state.series))

    async def clusters(request: Request) -> Response:
        limit = _int(request, "limit", 20, 1, 1000)
        return JSONResponse(read(lambda: state.top_clusters(limit)))

    async def verdicts(request: Request) -> Response:
        since = _int(request, "since", 0, 0, 1 << 62)
        limit = _int(request, "limit", 500, 1, 10_000)
        return JSONResponse(read(lambda: {"index": state.index,
                                          "verdicts": state.since(since, limit)}))

    async def duplicates(request: Request) -> Response:
        limit = _int(request, "limit", 50, 1, 200)
        return JSONResponse(read(lambda: state.latest(limit)))

    async def cluster(request: Request) -> Response:
        label = _doc_id(request)
        limit = _int(request, "limit", 100, 1, 1000)
        found = read(lambda: state.members(label, limit))
        if found is None:
            return _error(404, f"no cluster {shown(label)} since the monitor started")
        return JSONResponse(found)

    async def verdict(request: Request) -> Response:
        doc_id = _doc_id(request)
        found = read(lambda: state.verdict(doc_id))
        if found is None:
            return _error(404, f"no verdict for {shown(doc_id)} since the monitor started")
        return JSONResponse(found)

    async def explain(request: Request) -> Response:
        doc_id = _doc_id(request)
        other = _param(request, "other")
        if other == "":
            return _error(400, "?other= is empty: give the id to compare with, or leave it out")
        if other is None:
            found = read(lambda: state.verdict(doc_id))
            if found is None:  # "has no duplicate_of" it said, of an id it never saw
                return _error(404, f"no verdict for {shown(doc_id)} since the monitor "
                                   "started: give ?other=ID to compare two texts")
            if not found.get("duplicate_of"):
                # known, so no 404: what is missing is the parameter saying which other
                return _error(400, f"{shown(doc_id)} is no duplicate: give ?other=ID")
            other = str(found["duplicate_of"])
        if other == doc_id:
            return _error(400, "?other= must name another document than the one explained")
        try:
            return JSONResponse(await asyncio.to_thread(explainer, doc_id, other))
        except NotFound as exc:
            return _error(404, str(exc))

    async def events(request: Request) -> Response:
        start = _int(request, "since", read(lambda: state.index), 0, 1 << 62)  # 400 if bad
        if start > read(lambda: state.index):  # a client of a monitor that restarted
            start = 0

        async def stream() -> AsyncIterator[str]:
            sent = start
            while not closing.is_set() and not await request.is_disconnected():
                with lock:
                    skipped = max(0, state.index - sent - EVENT_VERDICTS)
                    sent += skipped
                    body: dict[str, Any] = {"summary": state.summary(),
                                            "series": state.series()[-120:],
                                            "verdicts": state.since(sent, EVENT_VERDICTS),
                                            "skipped": skipped}
                if body["verdicts"]:
                    sent = body["verdicts"][-1]["index"]
                yield f"event: tick\ndata: {json.dumps(body)}\n\n"
                await asyncio.sleep(tick_s)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})

    async def bad_request(request: Request, exc: Exception) -> Response:
        return _error(400, str(exc))

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(404, f"no such page: {shown(request.url.path)}")

    routes = [
        Route("/", index),
        Route("/api/summary", summary),
        Route("/api/series", series),
        Route("/api/clusters", clusters),
        Route("/api/verdicts", verdicts),
        Route("/api/duplicates", duplicates),
        Route("/api/cluster", cluster),
        Route("/api/cluster/{doc_id:any_id}", cluster),
        Route("/api/verdict", verdict),
        Route("/api/verdict/{doc_id:any_id}", verdict),
        Route("/api/explain", explain),
        Route("/api/explain/{doc_id:any_id}", explain),
        Route("/api/events", events),
        Mount("/static", _Static(directory=str(STATIC)), name="static"),
    ]
    middleware = [Middleware(_Token, token=token) if token else Middleware(_Hosts, hosts=hosts),
                  Middleware(_GetOnly)]  # after the token and the Host: asked first
    return Starlette(routes=routes, middleware=middleware,
                     exception_handlers={ValueError: bad_request, 404: not_found})
