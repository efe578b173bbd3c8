"""The monitor's explain against the verdict it read (the thread and the web server are
tested with the real broker in test_monitor.py)."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

from streamdedup.core.sketch import Sketcher
from streamdedup.monitor.server import Monitor
from streamdedup.monitor.state import MonitorState
from streamdedup.settings import build_settings

A = {"title": "Sviluppatore Java", "description": "Cerchiamo sviluppatore Java con esperienza "
     "in Spring e Hibernate per progetto bancario a Milano, contratto indeterminato."}
B = {**A, "description": A["description"] + " Inviare il curriculum."}


def monitor(preset: str) -> Monitor:
    m = Monitor.__new__(Monitor)  # no observer: the state is filled by hand
    m.settings = build_settings(preset, env={})
    m.state, m.lock, m.sketcher = MonitorState(), threading.Lock(), Sketcher(m.settings)
    m.dump, m.fmt = None, None
    return m


def filled(preset: str, measured: float) -> Monitor:
    m = monitor(preset)
    m.state.add_text("a", A)
    m.state.add_text("b", B)
    m.state.add_verdict({"id": "b", "seq": 2, "duplicate": True, "duplicate_of": "a",
                         "cluster_id": "a", "matches": [{"id": "a", "jaccard": measured}]})
    return m


def test_explain_says_when_its_settings_are_not_the_detectors() -> None:
    """Another preset than the detector's explained 155 of 200 duplicates as "not a
    duplicate", silently; the verdict's own Jaccard tells the two apart."""
    measured = filled("default", 0.0).explain("b", "a")["jaccard"]  # the detector's preset
    assert isinstance(measured, float) and 0 < measured < 1
    assert "warning" not in filled("default", measured).explain("b", "a")
    other = filled("reference", measured).explain("b", "a")
    assert other["jaccard"] != measured
    assert "start the monitor with the detector's --preset" in str(other["warning"])


def test_an_id_no_ad_had_is_said_so_and_not_sent_to_an_earlier_start() -> None:
    """"start it with --from beginning" was said by a monitor that had read from there."""
    from streamdedup.monitor.app import NotFound

    m = filled("default", 0.9)
    m.start, m.texts = "beginning", True
    with pytest.raises(NotFound, match="no ad with that id was read from 'jobs', from its "
                                       "beginning"):
        m.explain("b", "nope")
    with pytest.raises(NotFound, match=re.escape(  # a backfilled original, named how to see
            "start the monitor with --dump FILE, or `streamdedup explain --dump FILE -- 'b c' "
            "-x` reads it from the dump")):
        m.explain("b c", "-x")
    m.start = "2026-12-01T08:00:00Z"
    with pytest.raises(NotFound, match=re.escape("since 2026-12-01T08:00:00Z (start it with "
                                                 "--from beginning")):
        m.explain("b", "nope")


def test_explain_reads_a_backfilled_ads_text_from_the_dump(tmp_path: Path) -> None:
    """After a backfill the original is in the dump alone, its streamed repost in the topic
    alone: the page could explain neither (it named a command to run instead)."""
    from streamdedup.monitor.app import NotFound

    dump = tmp_path / "history.jsonl"
    dump.write_text(json.dumps({"id": "old-1", "title": "Cuoco", "description": "Roma"})
                    + "\n" + json.dumps({"id": "a", **A, "link": "https://k/a"}) + "\n",
                    encoding="utf-8")
    m = monitor("default")
    m.state.add_text("b", B)
    m.start, m.texts, m.dump, m.fmt = "beginning", True, dump, None
    out = m.explain("b", "a")
    assert out["b"]["link"] == "https://k/a" and out["a"]["id"] == "b"  # sides: b, then a
    assert out["jaccard"] == filled("default", 0.9).explain("b", "a")["jaccard"]
    assert out["note"] == "the text of 'a' is from history.jsonl, row 1"  # 0-based, as --errors
    with pytest.raises(NotFound, match=re.escape(
            f"no text for 'nope': not in {dump}, and no ad with that id was read from "
            "'jobs', from its beginning")) as caught:
        m.explain("b", "nope")
    assert "--dump FILE" not in str(caught.value)  # it was given
    dump.unlink()  # rotated, or replaced by a new export: a 500 and a traceback in the log
    with pytest.raises(NotFound, match=f"the dump {dump} cannot be read now: no such file"):
        m.explain("b", "a")


def test_explain_from_the_dump_takes_an_ids_last_row_and_says_why_an_id_is_missing(
        tmp_path: Path) -> None:
    """What the dump's reading says beyond "not there" (a mutation review: nothing pinned
    it): an id on two rows is its last row's text; the dump's unreadable rows are counted; a
    monitor without texts says so; a dump turned unreadable (a directory now) is a 404
    naming it, not a 500."""
    from streamdedup.monitor.app import NotFound

    dump = tmp_path / "history.jsonl"
    dump.write_text("".join(json.dumps(row) + "\n" for row in (
        {"id": "a", "title": "Cuoco", "description": "Roma"}, {"id": "z", **B},
        {"id": "a", **A})), encoding="utf-8")
    m = monitor("default")
    m.state.add_text("b", B)
    m.start, m.texts, m.dump, m.fmt = "beginning", True, dump, None
    out = m.explain("b", "a")
    assert out["note"] == "the text of 'a' is from history.jsonl, row 2" and out["b"]["raw"] \
        == filled("default", 0.9).explain("b", "a")["b"]["raw"]
    with dump.open("a", encoding="utf-8") as more:
        more.write("{not json\n")
    with pytest.raises(NotFound, match=re.escape(
            "not in " + str(dump) + " (1 of its 4 rows could not be read: 1 malformed_json)")):
        m.explain("b", "nope")
    m.texts = False
    with pytest.raises(NotFound, match="the monitor was started with --no-texts"):
        m.explain("b", "nope")
    dump.unlink()
    dump.mkdir()
    with pytest.raises(NotFound, match=f"the dump {dump} cannot be read now"):
        m.explain("b", "a")


def test_a_dump_the_file_system_refuses_is_a_404_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An OSError in reading it (permissions root does not feel, an I/O error) was a 500."""
    from streamdedup.monitor import server
    from streamdedup.monitor.app import NotFound

    def refused(*_args: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(server, "dump_texts", refused)
    m = monitor("default")
    m.state.add_text("b", B)
    m.start, m.texts, m.dump, m.fmt = "beginning", True, tmp_path / "d.jsonl", None
    with pytest.raises(NotFound, match=r"cannot be read now: .*Permission denied"):
        m.explain("b", "a")


def test_explain_gives_each_ads_link_of_the_text_shown() -> None:
    m = monitor("default")
    m.state.add_text("a", {**A, "link": "https://www.kijiji.it/a"}, at=1.0)
    m.state.add_text("b", {**B, "link": "javascript:alert(1)"}, at=2.0)
    m.state.add_text("a", {**A, "link": "https://www.kijiji.it/a-later"}, at=3.0)
    out = m.explain("b", "a")  # a as it was when b came
    assert (out["a"]["link"], out["b"]["link"]) == (None, "https://www.kijiji.it/a")


def test_the_page_is_up_while_the_broker_cannot_be_reached() -> None:
    """The monitor reached the broker before serving: with none there, no page for 30 s,
    then a KafkaTimeoutError. Now the page is up at once and says "connecting…", then that
    the broker does not answer."""
    import json
    import time
    import urllib.error
    import urllib.request

    from streamdedup.process import free_port

    settings = build_settings("default", env={}, overrides={
        "bootstrap_servers": f"127.0.0.1:{free_port()}", "monitor_port": free_port(),
        "monitor_hosts": ("jobs.example",)})
    m = Monitor(settings)
    server = m.server()
    m.follow()
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{settings.monitor_port}"
    try:
        deadline = time.monotonic() + 60  # a bound on waiting, not a speed to reach
        while not server.started:
            assert time.monotonic() < deadline, "the page did not come up"
            time.sleep(0.05)
        with urllib.request.urlopen(base + "/", timeout=10) as page:
            assert page.status == 200 and b"streamdedup" in page.read()
        with urllib.request.urlopen(base + "/api/summary", timeout=10) as r:
            first = json.load(r)["broker"]  # was {}: the documented fields came later
        assert first["reachable"] in (None, False) and first["answered"] is None
        assert first["waiting_for"] == []  # unknown yet: the page says "connecting…"
        broker: dict[str, object] = {}
        while broker.get("reachable") is not False:
            assert time.monotonic() < deadline, f"never said the broker is away: {broker}"
            with urllib.request.urlopen(base + "/api/summary", timeout=10) as r:
                broker = json.load(r)["broker"]
            time.sleep(0.2)
        assert broker["away_since"] and broker["answered"] is None
        for host, status in (("jobs.example", 200), ("evil.example", 403)):  # --monitor-hosts
            asked = urllib.request.Request(base + "/api/summary", headers={"Host": host})
            try:
                with urllib.request.urlopen(asked, timeout=10) as r:
                    assert (host, r.status) == (host, status)
            except urllib.error.HTTPError as exc:
                assert (host, exc.code) == (host, status)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        m.stop()


def test_a_stop_does_not_wait_for_a_reader_inside_the_broker_client() -> None:
    """With the broker away the reader sits in kafka-python's first bootstrap (10 s): the
    stop waited 5 s for it, and Ctrl-C took 6. Now it waits 1 s, and the reader closes its
    observer itself once its call returns (never while a call of it is under way)."""
    m = Monitor(build_settings("default", env={}, overrides={
        "bootstrap_servers": "127.0.0.1:9"}))
    inside, leave, calls = threading.Event(), threading.Event(), []

    class Away:
        connected = False

        def poll(self, timeout_ms: int) -> list[object]:
            calls.append("poll")
            inside.set()
            leave.wait(30)
            return []

        def health(self) -> dict[str, object]:
            return {}

        def close(self) -> None:
            calls.append("close")

    m.observer = Away()  # type: ignore[assignment]
    m.follow()
    assert inside.wait(10)
    m.stop()
    assert m.thread.is_alive() and calls == ["poll"]  # not closed under the reader's call
    leave.set()
    m.thread.join(10)
    assert calls == ["poll", "close"]


def test_a_port_in_use_is_one_line_before_the_monitor_says_where_it_is() -> None:
    """It printed "monitor on http://...:8088/", then uvicorn's own "[Errno 98] error while
    attempting to bind", exit 3. A setting that cannot be used exits 2, as one refused at
    parsing."""
    import socket
    import subprocess
    import sys

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        done = subprocess.run([sys.executable, "-m", "streamdedup", "monitor", "--monitor-port",
                               str(port), "--bootstrap-servers", "127.0.0.1:9"],
                              capture_output=True, text=True, timeout=60)
    finally:
        taken.close()
    assert done.returncode == 2 and "monitor on http" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"Error: cannot serve the monitor on 127.0.0.1:{port}: Address already in use "
        "(another monitor? give it another --monitor-port)"]
    away = subprocess.run([sys.executable, "-m", "streamdedup", "monitor", "--monitor-host",
                           "192.0.2.1", "--monitor-token", "s3cret-token", "--bootstrap-servers",
                           "127.0.0.1:9"], capture_output=True, text=True, timeout=60)
    assert away.returncode == 2 and "another monitor" not in away.stderr, away.stderr
    assert "is --monitor-host an address of this machine?" in away.stderr
    # a name that resolves to nothing was told to give a token (and with one, a bind error)
    for token in ([], ["--monitor-token", "s3cret-token"]):
        nowhere = subprocess.run([sys.executable, "-m", "streamdedup", "monitor",
                                  "--monitor-host", "garbage.invalid", *token,
                                  "--bootstrap-servers", "127.0.0.1:9"],
                                 capture_output=True, text=True, timeout=60)
        assert nowhere.returncode == 2 and "--monitor-token" not in nowhere.stderr
        assert "'garbage.invalid' names no address here" in nowhere.stderr, nowhere.stderr


def test_with_log_json_every_line_of_the_monitor_is_json() -> None:
    """"monitor on http://...", a port in use and uvicorn's own warnings were plain lines
    among the JSON ones."""
    import signal
    import socket
    import subprocess
    import sys
    import time

    command = [sys.executable, "-m", "streamdedup", "monitor", "--log-json",
               "--bootstrap-servers", "127.0.0.1:9", "--monitor-port"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        busy = subprocess.run([*command, port], capture_output=True, text=True, timeout=60)
    assert busy.returncode == 2
    [error] = [json.loads(line) for line in busy.stderr.splitlines()]
    assert error["exit_code"] == 2 and "another monitor" in error["msg"]
    proc = subprocess.Popen([*command, port], stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = json.loads(proc.stderr.readline())
        assert str(first["msg"]).startswith("monitor on http://127.0.0.1:")
        deadline = time.monotonic() + 30  # bound before it is said, listening after
        while True:
            try:
                bad = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        with bad:
            bad.sendall(b"GARBAGE\r\n\r\n")  # uvicorn's own line, plain text before
            bad.recv(1024)
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[1]
    finally:
        proc.kill()
    assert proc.returncode == 0
    said = [json.loads(line) for line in rest.splitlines()]
    assert [r["logger"] for r in said if "Invalid HTTP request" in r["msg"]] == ["uvicorn.error"]


def test_an_id_sent_again_with_another_text_is_explained_as_it_was_judged() -> None:
    """A=t1, A=t2, E=t2, A=t1: E is a copy of A's text then. The page compared E with A's
    last text, and warned about the settings for a pair the detector measured 1.000."""
    m = monitor("default")
    for doc_id, fields, at in (("a", A, 1.0), ("a", B, 2.0), ("e", B, 3.0), ("a", A, 4.0)):
        m.state.add_text(doc_id, fields, at)
    m.state.add_verdict({"id": "e", "seq": 3, "duplicate": True, "duplicate_of": "a",
                         "cluster_id": "a", "matches": [{"id": "a", "jaccard": 1.0}]})
    out = m.explain("e", "a")
    assert out["jaccard"] == 1.0 and "warning" not in out, out
    assert out["note"] == ("'a' came with several texts: the last of 'e' is shown, and that "
                           "of 'a' as it was then")
    assert m.state.title("a") == A.get("title")  # the last text names it
    assert "note" not in filled("default", 0.5).explain("b", "a")


def test_a_monitor_bound_to_every_address_without_a_token_names_the_empty_host() -> None:
    """`--monitor-host ''` said "the monitor bound to  is reachable", the host left out."""
    from streamdedup.errors import ConfigError

    with pytest.raises(ConfigError, match=r"bound to '' \(every address\) is reachable"):
        Monitor(build_settings(env={}, overrides={"monitor_host": ""}))
    with pytest.raises(ConfigError, match=r"bound to 0\.0\.0\.0 is reachable"):
        Monitor(build_settings(env={}, overrides={"monitor_host": "0.0.0.0"}))


@pytest.mark.parametrize("token", [" ", "\t", "ab", "1234567", "abcd efgh"])
def test_a_blank_short_or_spaced_monitor_token_is_refused_without_showing_it(
        token: str) -> None:
    """" " passed the check for an empty token: the monitor served every address, and its
    API opened with ``?token=+``; "ab" is guessed at once. Only the monitor refuses it: in
    the settings, an environment shared with `run` and `check` stopped them too."""
    from streamdedup.errors import ConfigError

    settings = build_settings(env={}, overrides={"monitor_token": token,
                                                 "monitor_host": "0.0.0.0"})
    with pytest.raises(ConfigError, match=r"--monitor-token .* must be at least 8 "
                                          "characters") as err:
        Monitor(settings)
    assert token.strip() == "" or token not in str(err.value)
    assert build_settings(env={"STREAMDEDUP_MONITOR_TOKEN": token}).monitor_token == token
    eight = build_settings(env={}, overrides={"monitor_token": "abcdefgh",
                                              "monitor_host": "0.0.0.0"})
    assert Monitor(eight).settings.monitor_token == "abcdefgh"  # 8 characters: enough

