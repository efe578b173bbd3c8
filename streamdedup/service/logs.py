"""Logging set-up: plain lines for people, one JSON object per line for log pipelines."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

_RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def utc_ms(seconds: float) -> str:
    """Seconds since the epoch as ISO 8601 UTC to the millisecond: JSON log lines' ``ts``,
    and the ``processed_at`` of verdicts and dead letters."""
    return (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
            + f".{int(seconds % 1 * 1000):03d}Z")


class JsonFormatter(logging.Formatter):
    """Message, level, logger, time, plus any ``extra={...}`` fields as top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": utc_ms(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update({k: v for k, v in vars(record).items() if k not in _RESERVED})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class PlainFormatter(logging.Formatter):
    """One line for people: the message, then any ``extra={...}`` fields as key=value."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = {k: v for k, v in vars(record).items() if k not in _RESERVED}
        if extras:
            line += " " + " ".join(f"{k}={v}" for k, v in extras.items())
        return line


def _to_debug(record: logging.LogRecord) -> bool:
    """Demote a record of kafka-python's that says nothing wrong to DEBUG; whether it is
    still shown (only when its logger is at DEBUG)."""
    record.levelno, record.levelname = logging.DEBUG, "DEBUG"
    return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


class Throttle:
    """Whether a line of a kind is due: at most one a kind every ``every_s`` seconds (its
    memory of kinds is cleared past ``kinds``: they are few; never a leak)."""

    def __init__(self, every_s: float, kinds: int) -> None:
        self.every_s, self.kinds = every_s, kinds
        self.shown: dict[Any, float] = {}

    def due(self, kind: Any, at: float) -> bool:
        if at - self.shown.get(kind, float("-inf")) < self.every_s:
            return False
        if len(self.shown) > self.kinds:
            self.shown.clear()
        self.shown[kind] = at
        return True


class ClosedSocketRace(logging.Filter):
    """kafka-python 3.0.12 closes a connection's socket from the caller's thread while its IO
    thread may be between "still open?" and ``recv``; the read then fails on ``None`` and is
    logged as an error with a traceback, though nothing was lost (the consumer was closing).
    That one record is demoted to DEBUG without its traceback; every other one passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, AttributeError) and "'NoneType' object has no attribute" in str(exc):
            record.exc_info, record.exc_text = None, None
            record.msg = f"{record.msg} (socket closed by a concurrent close: {exc})"
            return _to_debug(record)
        return True


class CancelledAtClose(logging.Filter):
    """Closing a client cancels its metadata request in flight, and kafka-python logs that as
    "ERROR kafka.cluster: Metadata refresh: failed Cancelled": a stopped monitor or tail said
    ERROR at about one stop in two, with nothing wrong. That record is demoted to DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        from kafka.errors import Cancelled

        args = record.args if isinstance(record.args, tuple) else ()
        if args and isinstance(args[0], Cancelled):
            return _to_debug(record)
        return True


class KafkaRepeats(logging.Filter):
    """kafka-python logs four lines at each reconnect attempt (about 20 a minute while a
    broker is down, forever): a line that differs from one let through in the last
    ``every_s`` seconds only by its numbers (backoffs, times) is dropped, whatever its level.
    Records with a traceback, and other loggers' records, all pass."""

    def __init__(self, every_s: float = 60.0) -> None:
        super().__init__()
        self.throttle = Throttle(every_s, kinds=1000)

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("kafka") or record.exc_info:  # a traceback is news
            return True
        key = (record.name, record.levelno, re.sub(r"[\d.]+", "#", record.getMessage()))
        return self.throttle.due(key, record.created)


class BrokerAway(logging.Filter):
    """A broker that goes away made kafka-python log about 15 ERROR lines at once, two with a
    traceback, then five more at each reconnect attempt: its own retries, with nothing lost
    (the consumer rewinds what was not acknowledged). Each such record of a ``kafka`` logger
    (a connection error in its traceback, its arguments or its text) becomes a WARNING line
    without the traceback, each cause (refused, reset, disconnected...) at most once every
    ``every_s`` seconds. A TLS or SASL failure is no outage: it passes as it came (kafka-python
    reports a certificate refused as a connection error too)."""

    TEXTS = ("KafkaConnectionError", "socket disconnected", "No node available")
    NOT_AWAY = re.compile(r"certificate|handshake|ssl\w*error|\[ssl|sasl|authenticat",
                          re.IGNORECASE)  # not "ssl": an SSL transport's name has it

    def __init__(self, every_s: float = 60.0) -> None:
        super().__init__()
        self.throttle = Throttle(every_s, kinds=100)

    @staticmethod
    def _connection_error(exc: object) -> bool:
        from kafka.errors import KafkaConnectionError

        return isinstance(exc, (ConnectionError, KafkaConnectionError))

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("kafka") or record.levelno < logging.WARNING:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        args = record.args if isinstance(record.args, tuple) else ()
        cause = exc if self._connection_error(exc) else next(
            (a for a in args if self._connection_error(a)), None)
        text = record.getMessage()
        marker = next((t for t in self.TEXTS if t in text), None)
        if cause is None and marker is None:
            return True
        said = text + (f" ({type(exc).__name__}: {exc})" if exc else "")
        if self.NOT_AWAY.search(said):
            return True
        record.msg = f"broker unreachable, kafka-python retries (each cause once a minute): {said}"
        record.args, record.exc_info, record.exc_text = None, None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        key = re.sub(r"[\d.]+", "#", f"{type(cause).__name__}: {cause}" if cause else marker or "")
        return self.throttle.due(key, record.created)


class SlowTask(logging.Filter):
    """kafka-python's IO thread warns when one of its steps ran over 0.1 s ("It is blocking
    the event loop"): it shares the GIL with judging, so on 2 cores that happens every few
    minutes and tells an operator nothing to do. Demoted to DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "blocking the event loop" in str(record.msg):
            return _to_debug(record)
        return True


class GroupStart(logging.Filter):
    """Two WARNINGs of kafka-python's at a healthy start of a group (the topic's metadata not
    there at the first assignment, then "assigned []" and the partitions; the coordinator
    moved while the offsets topic was made): nothing to act on, so DEBUG. Not ready while
    nothing is assigned says the rest (/readyz)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = str(record.msg)
        if text.startswith("No partition metadata for topic") or (
                text.startswith("Marking the coordinator dead")
                and "NotCoordinator" in record.getMessage()):
            return _to_debug(record)
        return True


class _Held(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def holding() -> Iterator[list[logging.LogRecord]]:
    """Hold what is logged before ``setup_logging`` (the settings' own warnings, such as a
    variable that is no setting), so that it comes out in the format the settings choose:
    `run --log-json` began with a plain line among the JSON ones. If the block fails, they
    are shown at once, plainly, before its error."""
    held = _Held()
    root = logging.getLogger()
    root.addHandler(held)
    try:
        yield held.records
    except BaseException:
        for record in held.records:
            logging.lastResort.handle(record)  # type: ignore[union-attr]
        raise
    finally:
        root.removeHandler(held)


def setup_logging(level: str, json_lines: bool, held: Iterable[logging.LogRecord] = ()) -> None:
    """The process's log lines: plain or JSON, at ``level``, kafka-python's quieted; then
    the records ``holding`` kept, in that format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else PlainFormatter())
    # On the handler: a logger's filter skips its children. The broker's absence first.
    handler.addFilter(BrokerAway())
    handler.addFilter(KafkaRepeats())
    handler.addFilter(GroupStart())  # on the handler: kafka.coordinator's children log them
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # kafka-python is chatty at INFO during reconnects; its warnings still show.
    logging.getLogger("kafka").setLevel(max(logging.WARNING, root.level))
    for name, kind in (("kafka.net.transport", ClosedSocketRace),
                       ("kafka.cluster", CancelledAtClose),
                       ("kafka.net.selector", SlowTask)):
        logger = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(kind())
    for record in held:
        logging.getLogger(record.name).handle(record)
