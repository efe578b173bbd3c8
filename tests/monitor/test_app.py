"""The monitor's web application on a real uvicorn server (loopback, a free port): every API
route, its errors, the token, the event stream, and the static page."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from streamdedup.monitor.app import EVENT_VERDICTS, NotFound, create_app
from streamdedup.monitor.state import MonitorState
from streamdedup.process import free_port


def explainer(doc_id: str, other: str) -> dict[str, Any]:
    if other == "nobody":
        raise NotFound("no text for 'nobody'")
    return {"a": {"id": doc_id}, "b": {"id": other}, "jaccard": 0.9}


def serve(token: str | None = None, hosts: tuple[str, ...] = (),
          explain: Any = explainer) -> Iterator[tuple[str, MonitorState]]:
    state, lock = MonitorState(), threading.Lock()
    state.add_verdict({"id": "a", "duplicate": False, "cluster_id": "a"})
    state.add_verdict({"id": "b", "duplicate": True, "duplicate_of": "a", "cluster_id": "a",
                       "matches": [{"id": "a", "jaccard": 0.9}]})
    state.add_dead_letter({"reason": "not_utf8"})
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(state, lock, explain, token,
                                                      tick_s=0.05, hosts=hosts),
                                           host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}", state
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def site() -> Iterator[tuple[str, MonitorState]]:
    yield from serve()


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}),
                                    timeout=10) as r:
            body = r.read()
            kind = r.headers.get("content-type", "")
            return r.status, json.loads(body) if "json" in kind else body.decode()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@contextlib.contextmanager
def browsed(chromium_path: str, **options: Any) -> Iterator[Any]:
    """A page of a real Chromium (the machine's, not Playwright's download)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path, args=["--no-sandbox"])
        try:
            yield browser.new_page(**options)
        finally:
            browser.close()


def test_the_json_api(site: tuple[str, MonitorState]) -> None:
    base, state = site
    status, summary = get(base + "/api/summary")
    assert status == 200
    assert {k: summary[k] for k in ("verdicts", "duplicates", "duplicate_rate", "dead_letters",
                                    "dead_letters_by_reason", "clusters")} == {
        "verdicts": 2, "duplicates": 1, "duplicate_rate": 0.5, "dead_letters": 1,
        "dead_letters_by_reason": {"not_utf8": 1}, "clusters": 1}
    assert get(base + "/api/clusters")[1]["biggest"][0]["size"] == 2
    assert [v["id"] for v in get(base + "/api/verdicts?since=1")[1]["verdicts"]] == ["b"]
    assert get(base + "/api/duplicates")[1][0]["id"] == "b"
    assert get(base + "/api/verdict/b")[1]["duplicate_of"] == "a"
    assert get(base + "/api/explain/b")[1] == {"a": {"id": "b"}, "b": {"id": "a"},
                                               "jaccard": 0.9}
    assert get(base + "/api/explain/b?other=a")[0] == 200
    assert len(get(base + "/api/series")[1]) >= 1
    status, cluster = get(base + "/api/cluster/a")
    assert status == 200 and (cluster["size"], cluster["kept"]) == (2, 2)
    assert [m["id"] for m in cluster["members"]] == ["b", "a"]
    assert get(base + "/api/cluster?id=a&limit=1")[1]["members"][0]["id"] == "b"
    state.add_text("b", {"title": "Cuoco"})  # titles as they are when asked
    assert get(base + "/api/duplicates")[1][0]["title"] == "Cuoco"
    assert [v["title"] for v in get(base + "/api/verdicts")[1]["verdicts"]] == [None, "Cuoco"]


def test_bad_requests_get_clear_errors(site: tuple[str, MonitorState]) -> None:
    base, _ = site
    code, body = get(base + "/api/verdicts?since=" + "9" * 30)  # an integer, out of range
    assert code == 400 and body["error"].startswith("since must be in [0, "), body
    assert get(base + "/api/verdicts?since=x") == (400, {"error": "since must be an integer, "
                                                                  "not 'x'"})
    assert get(base + "/api/clusters?limit=0")[0] == 400
    assert get(base + "/api/verdict/zzz") == (404, {"error": "no verdict for 'zzz' since the "
                                                             "monitor started"})
    assert get(base + "/api/cluster/zzz") == (404, {"error": "no cluster 'zzz' since the "
                                                             "monitor started"})
    assert get(base + "/api/cluster?id=a&limit=1001")[0] == 400
    assert get(base + "/api/cluster")[0] == 400  # no id
    assert get(base + "/api/explain/a") == (400, {"error": "'a' is no duplicate: give "
                                                           "?other=ID"})
    code, body = get(base + "/api/explain/nope")  # it said 'nope' has no duplicate_of
    assert code == 404 and body["error"].startswith("no verdict for 'nope' since"), body
    assert get(base + "/api/explain/b?other=")[0] == 400
    assert get(base + "/api/explain/b?other=nobody") == (404, {"error": "no text for 'nobody'"})
    assert get(base + "/api/explain/b?other=b")[0] == 400  # "a duplicate of itself"
    for odd in ("%205", "5_0", "%D9%A5"):  # int() took ' 5', '5_0' and an Arabic-Indic 5
        assert get(base + f"/api/clusters?limit={odd}")[0] == 400, odd
    status, body = get(base + "/api/verdict/" + "x" * 100_000)
    assert status == 404 and len(body["error"]) < 200  # the id came back whole
    request = urllib.request.Request(base + "/api/summary", method="POST", data=b"")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 405 and "only answers GET" in json.loads(
        refused.value.read())["error"]
    import http.client

    where = urllib.parse.urlsplit(base)
    for method, target in (("OPTIONS", "*"), ("CONNECT", "evil.example:443"),
                           ("DELETE", "/api/nothing")):  # 404 "no such page", not 405
        conn = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
        conn.request(method, target)
        answer = conn.getresponse()
        assert (method, answer.status) == (method, 405), answer.read()
        assert "only answers GET" in json.loads(answer.read())["error"]
        conn.close()
    assert get(base + "/api/nothing")[0] == 404
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
    conn.request("HEAD", "/api/summary")  # HEAD is GET without the body
    assert conn.getresponse().status == 200
    conn.close()
    assert get(base + "/api/events?since=-1")[0] == 400  # refused before the stream starts
    # the last of a parameter given twice was taken, silently
    for twice in ("/api/explain?id=b&id=a", "/api/explain/b?other=a&other=c",
                  "/api/clusters?limit=1&limit=2"):
        code, body = get(base + twice)
        assert code == 400 and "given 2 times: give it once" in body["error"], (twice, body)
    assert get(base + "/static/%00") == (404, {"error": "no such page: '/static/\\x00'"})


def test_the_event_stream_sends_new_verdicts(site: tuple[str, MonitorState]) -> None:
    base, state = site
    with urllib.request.urlopen(base + "/api/events?since=1", timeout=10) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        first = json.loads(_event(r))
        assert [v["id"] for v in first["verdicts"]] == ["b"] and first["summary"]["verdicts"] == 2
        state.add_verdict({"id": "c", "duplicate": False, "cluster_id": "c"})
        later = json.loads(_event(r))
        while not later["verdicts"]:
            later = json.loads(_event(r))
        assert [v["id"] for v in later["verdicts"]] == ["c"]


def test_a_client_far_behind_gets_the_newest_verdicts(site: tuple[str, MonitorState]) -> None:
    """At 200 verdicts a tick from the oldest, a page behind a burst never caught up (45 s
    behind after 10,000 ads): it skips to the newest and is told how many it skipped."""
    base, state = site
    for i in range(500):
        state.add_verdict({"id": f"x{i}", "duplicate": False, "cluster_id": f"x{i}"})
    with urllib.request.urlopen(base + "/api/events?since=0", timeout=10) as r:
        first = json.loads(_event(r))
    assert first["skipped"] == 502 - EVENT_VERDICTS
    assert [v["id"] for v in first["verdicts"]] == [f"x{i}" for i in range(300, 500)]


def _event(stream: Any) -> str:
    data = ""
    for raw in stream:
        text = raw.decode().rstrip("\n")
        if text.startswith("data: "):
            data = text[6:]
        elif not text and data:
            return data
    raise AssertionError("the stream ended")


def test_the_page_and_its_assets_come_from_the_package(site: tuple[str, MonitorState]) -> None:
    base, _ = site
    status, page = get(base + "/")
    assert status == 200 and "<canvas id=\"chart\"" in page
    for asset in ("monitor.js", "chart.js", "monitor.css"):
        assert get(f"{base}/static/{asset}")[0] == 200
    assert "http" not in page.replace("http-equiv", "")  # nothing loaded from elsewhere


def test_an_id_with_a_newline_or_a_slash_is_found(site: tuple[str, MonitorState]) -> None:
    """The detector takes any id; the routes stopped at a newline ("no such page")."""
    base, state = site
    for doc_id in ("a\nb\tc", "https://x/ad/1"):
        state.add_verdict({"id": doc_id, "duplicate": False, "cluster_id": doc_id})
        code, body = get(base + "/api/verdict/" + urllib.parse.quote(doc_id, safe=""))
        assert code == 200 and body["id"] == doc_id, body


def test_an_id_that_is_not_utf8_once_decoded_is_a_400(site: tuple[str, MonitorState]) -> None:
    """Starlette read ``%ff`` as U+FFFD: a 404 for an id nobody gave. A real U+FFFD is found."""
    base, state = site
    state.add_verdict({"id": "\ufffd", "duplicate": True, "cluster_id": "x",
                       "duplicate_of": "x"})
    for bad, part in (("/api/verdict/%ff", "the path"), ("/api/verdict?id=%ff", "?id="),
                      ("/api/cluster/a%C3", "the path"),
                      ("/api/explain/x?other=%ff", "?other=")):
        code, body = get(base + bad)
        assert code == 400 and body["error"] == (
            f"{part} is not UTF-8 once its %XX are decoded (byte 0x{bad[-2:].lower()}): "
            "ids are UTF-8"), (bad, body)
    for good in ("/api/verdict/%EF%BF%BD", "/api/verdict?id=%EF%BF%BD",
                 "/api/verdict?id=%EF%BF%BD&cb=%ff"):  # a cache-buster is no id
        code, body = get(base + good)
        assert code == 200 and body["id"] == "\ufffd", (good, body)


def test_an_id_a_browser_reads_as_a_folder_is_found_by_query(
        site: tuple[str, MonitorState]) -> None:
    """A page asking for /api/verdict/%2E%2E asks for /api/ (browsers resolve dot segments,
    encoded or not), so the page passes ids as ?id=; the path form stays for scripts."""
    base, state = site
    for doc_id in (".", "..", "a/../b"):
        state.add_verdict({"id": doc_id, "duplicate": False, "cluster_id": doc_id})
        code, body = get(base + "/api/verdict?id=" + urllib.parse.quote(doc_id, safe=""))
        assert code == 200 and body["id"] == doc_id, body
        code, body = get(base + "/api/explain?id=" + urllib.parse.quote(doc_id, safe=""))
        assert code == 400 and "is no duplicate" in body["error"], body
    assert get(base + "/api/verdict")[0] == 400
    assert "?id=" in get(base + "/api/explain?id=")[1]["error"]
    for route in ("verdict", "explain"):  # the path's id was taken, ?id= left without a word
        code, body = get(f"{base}/api/{route}/x1?id=x2")
        assert code == 400 and body["error"] == ("the id is given twice, in the path and as "
                                                 "?id=: give it once"), body


def test_another_method_is_refused_by_the_guards_before_it_is_said_to_be_405() -> None:
    """A request without the token or from a foreign Host learns nothing more, whatever
    its method (a mutation review: the order of the middlewares was not pinned)."""
    import http.client

    for token, headers, status in (("s3cret-token", {}, 401),
                                   (None, {"Host": "evil.example"}, 403)):
        for base, _ in serve(token=token):
            where = urllib.parse.urlsplit(base)
            conn = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
            conn.request("DELETE", "/api/summary", headers=headers)
            assert conn.getresponse().status == status, (token, headers)
            conn.close()


def test_a_token_guards_the_api_only() -> None:
    for base, _ in serve(token="s3cret"):
        assert get(base + "/api/summary")[0] == 401
        assert get(base + "/api/summary?token=wrong")[0] == 401
        assert get(base + "/api/summary?token=s3cret")[0] == 200
        assert get(base + "/api/summary", {"Authorization": "Bearer s3cret"})[0] == 200
        assert get(base + "/api/summary", {"Authorization": "bearer s3cret"})[0] == 200
        assert get(base + "/")[0] == 200
        assert get(base + "/static/monitor.js")[0] == 200
        assert get(base + "/anything-else")[0] == 401  # guarded unless page or script
        assert "is needed" in get(base + "/api/summary")[1]["error"]
        assert get(base + "/api/summary?token=s3")[1] == {"error": "the token is wrong"}
    for base, _ in serve(token="s3crét"):  # a header's bytes are UTF-8 as curl sends them
        utf8 = "Bearer " + "s3crét".encode().decode("latin-1")
        assert get(base + "/api/summary", {"Authorization": utf8})[0] == 200
        latin1 = "Bearer s3crét"  # as urllib and browsers send it: still the token
        assert get(base + "/api/summary", {"Authorization": latin1})[0] == 200
        assert get(base + "/api/summary?token=s3cr%C3%A9t")[0] == 200


def test_without_a_token_only_loopback_host_names_are_answered() -> None:
    """DNS rebinding: a page at evil.example points its name at 127.0.0.1, and a visitor's
    browser asks the monitor for the ads with "Host: evil.example:8088"."""
    for base, _ in serve():
        for host in ("localhost:8088", "LOCALHOST.", "127.0.0.1:8088", "127.1.2.3",
                     "[::1]:8088", "jobs.localhost:8088"):
            assert get(base + "/api/summary", {"Host": host})[0] == 200, host
        for host, name in (("evil.example:8088", "evil.example"), ("evil.example", "evil.example"),
                           ("10.0.0.1:8088", "10.0.0.1"), ("localhost.evil", "localhost.evil"),
                           ("[::2]:8088", "::2")):
            code, body = get(base + "/api/summary", {"Host": host})
            assert code == 403, host
            assert f"not '{name}': add it to --monitor-hosts" in body["error"], body  # no port
        assert get(base + "/", {"Host": "evil.example"})[0] == 403  # the page too
    for base, _ in serve(hosts=("Jobs.Example",)):  # a proxy in front sends its own name
        assert get(base + "/api/summary", {"Host": "jobs.example:443"})[0] == 200
        assert get(base + "/api/summary", {"Host": "evil.example"})[0] == 403
    for base, _ in serve(hosts=("*",)):
        assert get(base + "/api/summary", {"Host": "evil.example"})[0] == 200
    for base, _ in serve(token="s3cret"):  # the token guards instead: a proxy's name is fine
        assert get(base + "/api/summary?token=s3cret", {"Host": "evil.example"})[0] == 200


def test_the_page_opened_without_its_token_says_so(chromium_path: str) -> None:
    """It said "reconnecting…" for ever (the page and its script need no token, the API does),
    and the browser's console had a 404 for /favicon.ico at every load."""
    for base, _ in serve(token="s3cret"):
        with browsed(chromium_path) as page:
                errors: list[str] = []
                page.on("console", lambda m, sink=errors: sink.append(m.text)
                        if m.type == "error" else None)
                page.on("request", lambda r, sink=errors: sink.append(r.url)
                        if "favicon" in r.url else None)
                page.goto(base + "/")
                page.wait_for_function("document.getElementById('status').textContent"
                                       ".includes('a token is needed')", timeout=10_000)
                assert "?token=" in (page.text_content("#status") or "")
                page.goto(base + "/?token=s3cret")
                page.wait_for_function("document.getElementById('verdicts').textContent == "
                                       "'2'", timeout=10_000)
                assert page.text_content("#reasons") == "not_utf8: 1"
                assert not [e for e in errors if "favicon" in e], errors


def test_the_page_says_live_only_when_the_broker_answered_and_nothing_is_left_to_read(
        site: tuple[str, MonitorState], chromium_path: str) -> None:
    """The status line in a real Chromium, for each of the observer's words on the broker."""
    base, state = site
    cases = [
        ({}, "connecting…"),
        ({"waiting_for": ["in", "out"], "reachable": None}, "waiting for topic in, out"),
        # reached, no topic asked about: not "live" (it said so with all three missing)
        ({"waiting_for": ["in", "out", "dlq"], "reachable": True, "behind": None},
         "connected · waiting for topic in, out, dlq"),
        ({"waiting_for": ["dlq"], "reachable": True, "behind": 0},
         "live · waiting for topic dlq"),
        ({"waiting_for": [], "reachable": True, "behind": 12_000, "catching_up": True},
         "catching up: 12,000 records to read"),
        ({"waiting_for": [], "reachable": False, "away_since": time.time(), "behind": 0},
         "broker not answering since"),
        ({"waiting_for": [], "reachable": True, "behind": 40, "catching_up": False}, "live"),
    ]  # the last: a live stream leaves a few records unread at any instant
    with browsed(chromium_path, locale="en-US") as page:
        page.goto(base + "/")
        for broker, said in cases:
            state.broker = broker
            page.wait_for_function(
                "said => document.getElementById('status').textContent.startsWith(said)",
                arg=said, timeout=10_000)
            warn = page.eval_on_selector("#status", "e => e.classList.contains('warn')")
            assert warn == (broker.get("reachable") is False), said
        assert page.text_content("#status") == "live"


def test_the_page_lists_the_latest_duplicates_on_open_once_each(chromium_path: str) -> None:
    """The table was built from the event stream only, whose first tick holds the newest 200
    verdicts: 60 duplicates followed by 250 new ads showed none of them. A page that opens
    its stream again got the 200 again and listed each duplicate twice."""
    gen = serve()
    base, state = next(gen)
    for i in range(60):
        state.add_verdict({"id": f"d{i}", "duplicate": True, "duplicate_of": "a",
                           "cluster_id": "a", "seq": 10 + i})
    for i in range(250):
        state.add_verdict({"id": f"n{i}", "duplicate": False, "cluster_id": f"n{i}",
                           "seq": 100 + i})
    try:
        with browsed(chromium_path) as page:
            page.goto(base + "/")
            rows = "document.querySelectorAll('#latest tbody tr')"
            page.wait_for_function(f"{rows}.length == 50", timeout=10_000)
            ids = page.locator("#latest tbody tr td:first-child").all_text_contents()
            assert ids == [f"d{i}" for i in range(59, 9, -1)]  # newest first
            state.add_verdict({"id": "late", "duplicate": True, "duplicate_of": "a",
                               "cluster_id": "a", "seq": 999})
            page.wait_for_function(f"{rows}[0].textContent.startsWith('late')",
                                   timeout=10_000)
            # the stream opened again (as after a restarted monitor): the same 50
            page.evaluate("window.dispatchEvent(new Event('sd-reconnect'))")
            page.wait_for_timeout(1000)
            ids = page.locator("#latest tbody tr td:first-child").all_text_contents()
            assert ids == ["late", *(f"d{i}" for i in range(59, 10, -1))]
    finally:
        next(gen, None)


def test_the_page_writes_out_bidirectional_controls_of_the_ads(chromium_path: str) -> None:
    """U+202E (right-to-left override) in an ad showed "EUR 5000" as "0005 EUR" beside its
    match, and an id holding one was listed reversed."""
    def bidi(doc_id: str, other: str) -> dict[str, Any]:
        side = {"id": "b\u202e1", "raw": "paga EUR \u202e0005", "text": "paga eur \u202e0005",
                "shared": [[0, 4]], "differs": [[5, 14]], "shingles": 3}
        return {"a": side, "b": {**side, "id": other}, "jaccard": 0.9, "minhash_estimate": 0.9,
                "bands_shared": 1, "bands": 2, "reason": "shared"}

    gen = serve(explain=bidi)
    base, state = next(gen)
    state.add_verdict({"id": "b\u202e1", "duplicate": True, "duplicate_of": "a",
                       "cluster_id": "a", "seq": 9})
    try:
        with browsed(chromium_path) as page:
            page.goto(base + "/")
            first = "#latest tbody tr td:first-child"
            page.wait_for_selector(first, timeout=10_000)
            assert page.locator(first).first.text_content() == "b\\u202e1"
            page.evaluate("window.sdExplain('b\u202e1', 'a')")
            page.wait_for_selector("#explain:not([hidden]) #a-text mark", timeout=10_000)
            assert page.text_content("#a-raw") == "paga EUR \\u202e0005"
            assert page.text_content("#a-text") == "paga eur \\u202e0005"
            assert page.text_content("#a-text mark") == "eur \\u202e0005"  # spans in place
            assert (page.text_content("#a-id") or "").startswith("b\\u202e1 (")
    finally:
        next(gen, None)


def test_a_clusters_ads_are_listed_on_a_click_each_with_its_link(chromium_path: str) -> None:
    """The page named a cluster by its first ad's title and size, and nothing more: neither
    its ads nor where they are on the site. A link that is not http(s) is no link."""
    def linked(doc_id: str, other: str) -> dict[str, Any]:
        side = {"raw": "paga", "text": "paga", "shared": [[0, 4]], "differs": [],
                "shingles": 1}
        return {"a": {**side, "id": doc_id, "link": "https://www.kijiji.it/c"},
                "b": {**side, "id": other, "link": None}, "jaccard": 1.0,
                "minhash_estimate": 1.0, "bands_shared": 2, "bands": 2, "reason": "shared"}

    gen = serve(explain=linked)
    base, state = next(gen)
    state.add_text("a", {"title": "Cuoco", "link": "javascript:alert(1)"})
    state.add_text("c", {"title": "Cuoco bis", "link": "https://www.kijiji.it/c"})
    state.add_text("b", {"title": "Cuoco ter", "link": "https://www.kijiji.it/c"})  # again
    state.add_verdict({"id": "c", "duplicate": True, "duplicate_of": "a", "cluster_id": "a",
                       "matches": [{"id": "a", "jaccard": 0.875}], "seq": 5})
    try:
        with browsed(chromium_path) as page:
            page.goto(base + "/")
            page.wait_for_selector("#biggest tbody tr", timeout=10_000)
            page.click("#biggest tbody tr")
            page.wait_for_selector("#cluster:not([hidden]) #members tbody tr", timeout=10_000)
            rows = page.locator("#members tbody tr")
            assert rows.count() == 3
            assert rows.nth(0).locator("td").all_text_contents() == [
                "c", "Cuoco bis", "a", "0.875", "open the ad"]
            assert rows.nth(0).locator("a").get_attribute("href") == "https://www.kijiji.it/c"
            assert rows.nth(0).locator("a").get_attribute("rel") == "noopener noreferrer"
            assert rows.nth(2).locator("td").first.text_content() == "a"
            assert rows.nth(2).locator("a").count() == 0  # javascript: is no link
            assert page.text_content("#cluster-note") == (
                "3 verdicts; 1 distinct ad link among them (an ad scraped again is another id)")
            rows.nth(0).locator("td").first.click()  # a duplicate: beside its match
            page.wait_for_selector("#explain:not([hidden]) #a-id a", timeout=10_000)
            assert page.locator("#a-id a").get_attribute("href") == "https://www.kijiji.it/c"
            assert page.locator("#b-id a").count() == 0
            assert page.text_content("#cluster-name") == "a · Cuoco"
            latest = page.locator("#latest tbody tr").first.locator("td")
            assert latest.all_text_contents()[:3] == ["c", "Cuoco bis", "a"]
            # a verdict read before its ad: untitled, then titled at the next refresh
            state.add_verdict({"id": "late", "duplicate": True, "duplicate_of": "a",
                               "cluster_id": "a", "seq": 6})
            page.wait_for_function("document.querySelector('#latest tbody tr td')"
                                   ".textContent == 'late'", timeout=10_000)
            state.add_text("late", {"title": "Cuoco tardi"})
            page.wait_for_function("document.querySelectorAll('#latest tbody tr td')[1]"
                                   ".textContent == 'Cuoco tardi'", timeout=15_000)
            page.click("#cluster-close")
            page.fill("#query", "a")  # no duplicate: its cluster, listed on a click
            page.click("#search button")
            page.wait_for_selector("#found-cluster:not([hidden])", timeout=10_000)
            page.click("#found-cluster")
            page.wait_for_selector("#cluster:not([hidden])", timeout=10_000)
            assert page.text_content("#cluster-name") == "a · Cuoco"
    finally:
        next(gen, None)


def test_an_old_clusters_time_has_its_date_and_no_growth_is_said(chromium_path: str) -> None:
    """A replay's clusters are days old: "last seen" said an hour with no day, and the
    fastest-growing table stood empty under its headers."""
    gen = serve()
    base, state = next(gen)
    old = time.time() - 3 * 86_400
    state.add_verdict({"id": "o1", "duplicate": False, "cluster_id": "o1", "seq": 1}, old)
    state.add_verdict({"id": "o2", "duplicate": True, "duplicate_of": "o1", "cluster_id": "o1",
                       "matches": [{"id": "o1", "jaccard": 0.9}], "seq": 2}, old)
    state.add_verdict({"id": "o3", "duplicate": True, "duplicate_of": "o1", "cluster_id": "o1",
                       "matches": [{"id": "o1", "jaccard": 0.9}], "seq": 3}, old)
    try:
        with browsed(chromium_path, locale="en-US") as page:
            page.goto(base + "/")
            page.wait_for_selector("#biggest tbody tr", timeout=10_000)
            first = page.locator("#biggest tbody tr").first.locator("td")
            assert first.nth(0).text_content() == "3"
            shown = first.nth(2).text_content() or ""
            day = time.strftime("%-m/%-d/%Y", time.localtime(old))
            assert shown.startswith(day + ","), shown  # its date, then its hour
            # a's cluster in serve() grew just now: the note stays hidden until nothing grew
            assert page.locator("#still").is_hidden()
            assert page.locator("#growing tbody tr").count() == 1
    finally:
        next(gen, None)
    gen = serve()
    base, state = next(gen)
    state.clusters.clear()  # nothing grew: serve()'s own two verdicts forgotten
    try:
        with browsed(chromium_path, locale="en-US") as page:
            page.goto(base + "/")
            page.wait_for_selector("#still:not([hidden])", timeout=10_000)
            assert page.text_content("#still") == "no cluster grew in the last 5 minutes"
    finally:
        next(gen, None)
