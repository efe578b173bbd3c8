"""Noticing that this consumer was fenced: another joined the group with its
``--group-instance-id``, and the partitions are that one's now."""

from __future__ import annotations

import logging
import threading


class FenceWatch(logging.Handler):
    """Set when kafka-python's heartbeat thread finds this member fenced: another consumer
    joined with the same --group-instance-id. The thread only logs it (at ERROR, naming the
    instance id) and stops beating, so the loop went on judging what it had fetched and
    published those verdicts until the offset commit was refused (two different verdicts per
    message on the topic, measured with two stores). The loop checks this after each poll
    and before each checkpoint; its held work is then dropped, not published."""

    LOGGER = "kafka.coordinator.heartbeat"

    def __init__(self, instance_id: str) -> None:
        super().__init__(logging.ERROR)
        self.instance_id = instance_id
        self.fenced = threading.Event()
        self.logger = logging.getLogger(self.LOGGER)
        self.level_before = self.logger.level

    def emit(self, record: logging.LogRecord) -> None:
        if "fenced" in str(record.msg) and self.instance_id in map(str, record.args or ()):
            self.fenced.set()

    def start(self) -> threading.Event:
        if self.logger.getEffectiveLevel() > logging.ERROR:  # --log-level critical: the
            self.logger.setLevel(logging.ERROR)  # record was never made, the watch blind
        self.logger.addHandler(self)
        return self.fenced

    def stop(self) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level_before)
