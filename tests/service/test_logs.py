"""Log lines carry their numbers in both formats."""

from __future__ import annotations

import json
import logging

from streamdedup.service.logs import JsonFormatter, PlainFormatter


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
