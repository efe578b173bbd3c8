"""``streamdedup monitor``: the observer thread, the state it fills, and the web server.

The observer reads the verdict and dead-letter topics, and the input topic for the ads'
texts (a store keeps normalized texts or shingle hashes, never the ads), from ``--from``
on, without a consumer group.
The web server (uvicorn) binds to loopback by default; bound elsewhere it needs a token.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import shlex
import socket
import threading
from pathlib import Path
from typing import Any, cast

from kafka.errors import KafkaError

from streamdedup.core.explain import disagreement, explain
from streamdedup.core.sketch import Sketcher
from streamdedup.errors import ConfigError, StreamdedupError
from streamdedup.extras import require
from streamdedup.monitor.app import NotFound, create_app
from streamdedup.monitor.observer import BEGINNING, Observer, decode
from streamdedup.monitor.state import MonitorState, link_of
from streamdedup.replay.dump_texts import DumpTexts, dump_texts
from streamdedup.service.metrics import cannot_serve, is_loopback
from streamdedup.settings import Settings, setting_named

log = logging.getLogger(__name__)
STOP_WAIT_S = 1.0  # the wait for the topic reader at a stop
CLOSE_WAIT_S = 3  # a stopping server's wait for open connections (a page's streams end at once)


class Monitor:
    """State + observer thread; ``serve()`` runs the web server until interrupted."""

    def __init__(self, settings: Settings, start: str = BEGINNING, texts: bool = True,
                 dump: Path | None = None, fmt: str | None = None) -> None:
        """``texts``: also read the input topic, for titles and side-by-side texts.
        ``dump`` (in ``fmt``): where an ad the topic lacks is looked for when explained,
        a backfilled one (read through at each such explanation: 0.03 s for the
        Kijiji dump)."""
        _check_token(settings.monitor_token)
        _check_resolves(settings.monitor_host)
        if not is_loopback(settings.monitor_host) and not settings.monitor_token:
            host = settings.monitor_host or "'' (every address)"
            raise ConfigError(f"the monitor bound to {host} is reachable from "
                              "other hosts: give --monitor-token (or STREAMDEDUP_MONITOR_TOKEN)")
        self.settings = settings
        self.start = start
        self.texts = texts
        self.dump, self.fmt = dump, fmt
        self.state = MonitorState(id_field=settings.id_field)
        self.lock = threading.Lock()
        self.sketcher = Sketcher(settings)
        self.stopping = threading.Event()  # the topic reader's
        self.closing = threading.Event()  # the pages' event streams'
        topics = [settings.output_topic, settings.dlq_topic]
        if texts:
            topics.append(settings.input_topic)
        self.observer = Observer(settings, topics, start, connect=False)  # in the thread
        self.state.broker = self.observer.health()  # "connecting…" until the first answer
        self.thread = threading.Thread(target=self._follow, name="observer", daemon=True)

    def _follow(self) -> None:
        try:
            self._read()
        finally:  # here, not in stop(): the reader may be inside a call of the observer then
            self.observer.close()

    def _read(self) -> None:
        s = self.settings
        while not self.stopping.is_set():
            try:
                records = list(self.observer.poll(500))
            except Exception as exc:  # the broker may be away: keep trying, the page says so
                if self.observer.connected or not isinstance(exc, KafkaError):
                    log.exception("reading the topics failed; retrying")
                # else: not reached yet; the observer said so once, the page says so
                with self.lock:
                    self.state.broker = self.observer.health()
                self.stopping.wait(1.0)
                continue
            health = self.observer.health()
            with self.lock:
                self.state.broker = health
                for topic, rec in records:
                    body = decode(rec, announcement=topic == s.input_topic)
                    if topic == s.input_topic:  # (settings keep the three topics apart)
                        if body is not None:
                            self.state.add_announcement(body, rec.timestamp / 1000)
                        continue
                    if body is None:  # decode logged why
                        self.state.add_bad(topic)
                        continue
                    try:
                        if topic == s.output_topic:
                            self.state.add_verdict(body, rec.timestamp / 1000)  # or ValueError
                        else:
                            self.state.add_dead_letter(body)
                    except Exception as exc:  # never the end of the reader thread
                        log.warning("skipping a record at %s/%s/%s: %s", topic, rec.partition,
                                    rec.offset, exc)
                        self.state.add_bad(topic)

    def explain(self, doc_id: str, other: str) -> dict[str, Any]:
        with self.lock:  # DOC_ID's last text, OTHER's as it was when that one came
            mine = self.state.text(doc_id)
            texts = {doc_id: mine, other: self.state.text(other, mine and mine[0])}
            several = [i for i in (doc_id, other) if len(self.state.texts.get(i, ())) > 1]
            verdict = self.state.verdict(doc_id) or {}
        missing = [i for i, t in texts.items() if t is None]
        read, notes = None, []
        if missing and self.dump is not None:  # outside the lock: the topics are read on
            try:
                read = dump_texts(self.dump, self.fmt, self.settings, missing)
            except (StreamdedupError, OSError) as exc:  # moved, rotated, cut: was a 500
                raise NotFound(f"no text for {', '.join(map(repr, missing))} in the topic, "
                               f"and the dump {self.dump} cannot be read now: {exc}") from None
            for i in missing:
                if i in read.found:  # its last; older than anything streamed
                    row, fields = read.found[i][-1]
                    texts[i] = (0.0, fields)
                    notes.append(f"the text of {i!r} is from {self.dump.name}, row {row:,}")
            missing = [i for i, t in texts.items() if t is None]
        if missing:
            raise NotFound(self._not_found(missing, doc_id, other, read))
        a, b = texts[doc_id], texts[other]
        assert a is not None and b is not None
        found = explain(self.sketcher, doc_id, a[1], other, b[1])
        out = found.to_dict()
        for side, shown in (("a", a), ("b", b)):  # each ad's own address, of the text shown
            out[side] = {**cast(dict[str, Any], out[side]), "link": link_of(shown[1])}
        if several:
            notes.append(f"{' and '.join(map(repr, several))} came with several texts: "
                         f"the last of {doc_id!r} is shown, and that of {other!r} as it was "
                         "then")
        if notes:
            out["note"] = "; ".join(notes)
        apart = disagreement(verdict, other, found)
        if apart:  # the monitor explains with its own settings
            out["warning"] = (f"{apart}: start the monitor with the detector's --preset, "
                              "shingle settings and --normalizer-version")
        return out

    def _not_found(self, missing: list[str], doc_id: str, other: str,
                   read: DumpTexts | None) -> str:
        """Why the ids have no text here, and where they could be found."""
        said = f"no text for {', '.join(map(repr, missing))}: "
        if read is not None:
            said += f"not in {self.dump}{read.unread()}, and "
        topic = self.settings.input_topic
        if not self.texts:
            return (f"{said}the monitor was started with --no-texts, so it does not read the "
                    f"input topic {topic!r} (start it without that flag)")
        if self.start != BEGINNING:  # "start it with --from beginning", it said at the start
            return (f"{said}the monitor has not read it from {topic!r} since {self.start} "
                    "(start it with --from beginning, or an earlier time)")
        said += (f"no ad with that id was read from {topic!r}, from its beginning (the "
                 f"monitor keeps the last {self.state.keep:,} ads' texts)")
        if read is None:
            said += ("; an ad backfilled from a dump is not there: start the monitor with "
                     "--dump FILE, or `streamdedup explain --dump FILE -- "
                     f"{shlex.quote(doc_id)} {shlex.quote(other)}` reads it from the dump")
        return said

    def app(self) -> Any:
        return create_app(self.state, self.lock, self.explain,
                          self.settings.monitor_token or None, closing=self.closing,
                          hosts=self.settings.monitor_hosts)

    def server(self) -> Any:
        """The web server (not started); ``serve`` runs it, tests run it in a thread. Its
        signal handler first ends the pages' event streams, which it would otherwise wait
        for; a client that still holds on is cut after CLOSE_WAIT_S. Its lines go through
        the process's handler (``log_config=None``): its own wrote plain text under
        ``--log-json``."""
        uvicorn = require("uvicorn", "the monitor")
        server = uvicorn.Server(uvicorn.Config(self.app(), host=self.settings.monitor_host,
                                               port=self.settings.monitor_port,
                                               log_level="warning", log_config=None,
                                               timeout_graceful_shutdown=CLOSE_WAIT_S))
        exit_on_signal = server.handle_exit

        def handle_exit(sig: int, frame: Any) -> None:
            self.closing.set()
            exit_on_signal(sig, frame)

        server.handle_exit = handle_exit
        return server

    def follow(self) -> None:
        """Start reading the topics (in a daemon thread)."""
        self.thread.start()

    def stop(self) -> None:
        """The reader is waited for 1 s at most: with the broker away it may be inside
        kafka-python's first bootstrap (10 s; Ctrl-C took 6 s). It closes its observer
        itself, and a daemon thread ends with the process."""
        self.stopping.set()
        if self.thread.ident is None:  # never started
            self.observer.close()
        elif self.thread.is_alive():
            self.thread.join(timeout=STOP_WAIT_S)

    def bind(self) -> socket.socket:
        """The listening socket, bound before the monitor says where it is: a port in use
        was found by uvicorn after "monitor on ..." had been printed, in its own words."""
        host, port = self.settings.monitor_host, self.settings.monitor_port
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise cannot_serve("the monitor", host, port, exc,
                               "another monitor? give it another --monitor-port",
                               "is --monitor-host an address of this machine?") from None
        return sock

    def serve(self, sock: socket.socket | None = None) -> None:
        """Until SIGINT/SIGTERM (uvicorn stops on both; the command turns SIGTERM into exit 0)."""
        server = self.server()
        self.follow()
        try:
            server.run(sockets=[sock] if sock is not None else None)
        finally:
            self.stop()


MIN_TOKEN_CHARS = 8  # "t" or "ab" is guessed at once


def _check_token(token: str) -> None:
    """A token the monitor can be guarded with: " " passed the check for none, and the
    monitor served every address with its API open to ``?token=+``. Checked here, not with
    the settings: an environment shared with `run` and `check` stopped them too."""
    if token and (len(token) < MIN_TOKEN_CHARS or re.search(r"\s", token)):
        spaces = ", with spaces" if re.search(r"\s", token) else ""
        raise ConfigError(f"--monitor-token (STREAMDEDUP_MONITOR_TOKEN) must be at least "
                          f"{MIN_TOKEN_CHARS} characters, "
                          "without spaces (e.g. `openssl rand -hex 16`); the one given "
                          f"(not shown) has {len(token)}{spaces}")


def _check_resolves(host: str) -> None:
    """A host name that names no address is said as such (it was "reachable from other
    hosts: give --monitor-token", and with a token a bind error later)."""
    if not host or is_loopback(host):
        return
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    try:
        socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"{setting_named('monitor_host')} {host!r} names no address here "
                          f"({exc})") from None
