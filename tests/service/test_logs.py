"""Log lines carry their numbers in both formats."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from streamdedup.service.logs import JsonFormatter, PlainFormatter, holding, setup_logging


def record() -> logging.LogRecord:
    rec = logging.makeLogRecord({"name": "streamdedup.consumer", "levelno": logging.INFO,
                                 "levelname": "INFO", "msg": "throughput"})
    rec.documents = 1200
    rec.docs_per_s = 410.5
    return rec


def test_plain_lines_show_extra_fields() -> None:
    line = PlainFormatter().format(record())
    assert line.endswith("throughput documents=1200 docs_per_s=410.5")


def test_json_lines_are_objects_with_extra_fields() -> None:
    out = json.loads(JsonFormatter().format(record()))
    assert out["msg"] == "throughput" and out["level"] == "info"
    assert out["documents"] == 1200 and out["docs_per_s"] == 410.5


def _transport_error(exc: BaseException) -> logging.LogRecord:
    try:
        raise exc
    except BaseException:
        info = sys.exc_info()
    return logging.makeLogRecord({
        "name": "kafka.net.transport", "levelno": logging.ERROR, "levelname": "ERROR",
        "msg": "%s: Error receiving network data closing socket", "args": ("<conn>",),
        "exc_info": info})


def test_the_close_race_in_kafka_python_is_demoted_without_its_traceback() -> None:
    """The read on a socket another thread just set to None (kafka-python 3.0.12) is not an
    error of ours: no traceback, not shown at WARNING; other errors keep theirs."""
    from streamdedup.service.logs import ClosedSocketRace

    logging.getLogger("kafka.net.transport").setLevel(logging.WARNING)
    race = _transport_error(AttributeError("'NoneType' object has no attribute 'recv'"))
    assert ClosedSocketRace().filter(race) is False
    assert race.exc_info is None and race.levelno == logging.DEBUG
    other = _transport_error(ConnectionResetError("reset by peer"))
    assert ClosedSocketRace().filter(other) is True
    assert other.exc_info is not None and other.levelno == logging.ERROR
    assert "Traceback" in PlainFormatter().format(other)


def test_a_metadata_request_cancelled_by_a_close_is_no_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`monitor` and `tail` said "ERROR kafka.cluster: Metadata refresh: failed Cancelled" at
    about one stop in two."""
    from kafka.errors import Cancelled, KafkaConnectionError

    from streamdedup.service.logs import CancelledAtClose

    cluster = logging.getLogger("kafka.cluster")
    monkeypatch.setattr(cluster, "level", cluster.level)  # set back after the test
    cluster.setLevel(logging.WARNING)  # (setLevel also clears the loggers' level cache)

    def refresh_failed(exc: Exception) -> logging.LogRecord:
        return logging.makeLogRecord({"name": "kafka.cluster", "levelno": logging.ERROR,
                                      "levelname": "ERROR", "args": (exc,),
                                      "msg": "Metadata refresh: failed %s"})

    cancelled = refresh_failed(Cancelled())
    assert CancelledAtClose().filter(cancelled) is False
    assert cancelled.levelno == logging.DEBUG
    away = refresh_failed(KafkaConnectionError("refused"))  # a broker away is still said
    assert CancelledAtClose().filter(away) is True and away.levelno == logging.ERROR


def _kafka_line(msg: str, at: float, name: str = "kafka.net.manager") -> logging.LogRecord:
    return logging.makeLogRecord({"name": name, "levelno": logging.WARNING,
                                  "levelname": "WARNING", "msg": msg, "created": at})


def test_kafka_pythons_reconnect_lines_show_once_a_minute_whatever_their_numbers() -> None:
    """A broker that is down cost four lines at each reconnect attempt, forever."""
    from streamdedup.service.logs import KafkaRepeats

    repeats = KafkaRepeats(every_s=60)
    shown = [repeats.filter(_kafka_line(f"Bootstrap connection failed (backoff {b} secs)", t))
             for t, b in ((0, 0.08), (1, 0.46), (30, 25.11), (61, 0.1), (62, 7))]
    assert shown == [True, False, False, True, False]
    assert repeats.filter(_kafka_line("Bootstrap failed: Unable to bootstrap", 62))
    ours = logging.makeLogRecord({"name": "streamdedup.consumer", "msg": "same", "created": 0})
    assert repeats.filter(ours) and repeats.filter(ours)  # only kafka-python's are thinned
    assert repeats.filter(_kafka_line("Bootstrap connection failed (backoff 1 secs)", 63,
                                      name="kafka.conn"))  # another logger, its own line
    traced = _transport_error(ConnectionResetError("reset"))
    assert repeats.filter(traced) and repeats.filter(traced)  # a traceback always shows


def test_a_broker_away_is_one_warning_a_cause_a_minute_without_tracebacks() -> None:
    """Killing the broker made kafka-python log ~15 ERROR lines at once, two with a
    traceback, then five more at each reconnect attempt; they say a few things. A refused
    certificate is reported as a connection error too, and is no outage: it passes."""
    import ssl

    from kafka.errors import KafkaConnectionError, UnknownTopicOrPartitionError

    from streamdedup.service.logs import BrokerAway

    def kafka_error(name: str, msg: str, *args: object, at: float = 0.0) -> logging.LogRecord:
        return logging.makeLogRecord({"name": name, "levelno": logging.ERROR, "args": args,
                                      "levelname": "ERROR", "msg": msg, "created": at})

    def refused(at: float, name: str = "kafka.net.connection") -> logging.LogRecord:
        return kafka_error(name, "%s: Connection lost: %s", "<conn>",
                           KafkaConnectionError("111 ECONNREFUSED"), at=at)

    away = BrokerAway(every_s=60)
    reset = _transport_error(ConnectionResetError("[Errno 104] Connection reset by peer"))
    reset.created = 0.0
    assert away.filter(reset)
    assert reset.levelno == logging.WARNING and reset.exc_info is None
    line = PlainFormatter().format(reset)
    assert "Traceback" not in line and "Connection reset by peer" in line
    assert "broker unreachable" in line
    first = refused(0.1)  # another cause: its own line
    assert away.filter(first) and first.levelno == logging.WARNING
    burst = [refused(0.2, "kafka.cluster"), refused(0.3, "kafka.net.manager"),
             kafka_error("kafka.net.transport", "%s: socket disconnected", "<conn>", at=0.4)]
    assert [away.filter(r) for r in burst] == [False, False, True]  # one line a cause
    assert all(r.levelno == logging.WARNING for r in burst)
    assert not away.filter(refused(30)) and away.filter(refused(61))  # still away: again
    other = kafka_error("kafka.producer.sender", "Error sending produce request: %s",
                        UnknownTopicOrPartitionError(), at=62)
    assert away.filter(other) and other.levelno == logging.ERROR  # not the broker's absence
    try:
        raise KafkaConnectionError(ssl.SSLCertVerificationError(
            1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"))
    except KafkaConnectionError:
        tls = logging.makeLogRecord({"name": "kafka.net.transport", "levelno": logging.ERROR,
                                     "levelname": "ERROR", "msg": "Handshake failed",
                                     "created": 62, "exc_info": sys.exc_info()})
    assert away.filter(tls) and tls.levelno == logging.ERROR and tls.exc_info is not None
    ours = logging.makeLogRecord({"name": "streamdedup.consumer", "levelno": logging.WARNING,
                                  "msg": "poll failed: KafkaConnectionError", "created": 62})
    assert away.filter(ours) and away.filter(ours)


def test_kafka_pythons_slow_step_notice_is_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its IO thread shares the GIL with judging: "blocking the event loop" every few minutes
    on 2 cores is nothing an operator can act on; its other warnings still show."""
    from streamdedup.service.logs import SlowTask

    selector = logging.getLogger("kafka.net.selector")
    monkeypatch.setattr(selector, "level", selector.level)
    selector.setLevel(logging.WARNING)
    slow = _kafka_line("Task <t> ran for 0.136s (>0.100s threshold). It is blocking the event"
                       " loop -- likely a tight sync loop inside a coroutine", 0,
                       name="kafka.net.selector")
    assert SlowTask().filter(slow) is False and slow.levelno == logging.DEBUG
    wakeup = _kafka_line("Wakeup socket returned empty. Rebuilding.", 0, name="kafka.net.selector")
    assert SlowTask().filter(wakeup) and wakeup.levelno == logging.WARNING


def test_kafka_pythons_warnings_at_a_healthy_group_start_are_debug() -> None:
    """Every healthy start said "WARNING ... No partition metadata for topic jobs", and the
    first one "Marking the coordinator dead ... NotCoordinatorError"; a coordinator lost to
    a broker that went away still says so."""
    from streamdedup.service.logs import GroupStart

    start = GroupStart()
    metadata = _kafka_line("No partition metadata for topic %s", 0,
                           name="kafka.coordinator.assignors.range")
    metadata.args = ("jobs",)
    moved = _kafka_line("Marking the coordinator dead (node %s) for group %s: %s.", 0,
                        name="kafka.coordinator")
    moved.args = ("coordinator-1", "streamdedup", "[Error 16] NotCoordinatorError")
    gone = _kafka_line("Marking the coordinator dead (node %s) for group %s: %s.", 0,
                       name="kafka.coordinator")
    gone.args = ("coordinator-1", "streamdedup", "KafkaConnectionError: socket disconnected")
    assert start.filter(metadata) is False and metadata.levelno == logging.DEBUG
    assert start.filter(moved) is False and moved.levelno == logging.DEBUG
    assert start.filter(gone) and gone.levelno == logging.WARNING


def test_what_the_settings_said_before_logging_was_set_comes_out_in_its_format(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`run --log-json` began with the settings' warning (a variable that is no setting) as a
    plain line, before the JSON ones; and when the settings then fail, it still shows."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        with holding() as early:
            logging.getLogger("streamdedup.settings").warning("STREAMDEDUP_X is not a setting")
        assert capsys.readouterr().err == ""  # held
        setup_logging("INFO", True, early)
        line = json.loads(capsys.readouterr().err)
        assert (line["level"], line["msg"]) == ("warning", "STREAMDEDUP_X is not a setting")

        root.handlers[:] = []
        with pytest.raises(ValueError), holding():
            logging.getLogger("streamdedup.settings").warning("STREAMDEDUP_Y is not a setting")
            raise ValueError("a setting refused")
        assert capsys.readouterr().err == "STREAMDEDUP_Y is not a setting\n"
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
