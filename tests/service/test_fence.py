"""The fence watch: kafka-python's heartbeat thread only logs that this member was fenced
(the consumer's test with two real processes is in test_consumer.py)."""

from __future__ import annotations

import logging

from streamdedup.service.fence import FenceWatch
from streamdedup.service.logs import setup_logging


def test_the_fence_is_seen_at_every_log_level() -> None:
    """kafka-python's heartbeat thread only logs the fence; at --log-level critical that
    line was never made, and the watch was blind. Another instance id's line is not ours."""
    heartbeat = logging.getLogger(FenceWatch.LOGGER)
    templates = [("Heartbeat thread caught fenced group_instance_id %s error", ("{id}",)),
                 ("Heartbeat failed for group %s due to fenced id error: %s", ("g", "{id}"))]
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        for log_level in ("DEBUG", "WARNING", "CRITICAL"):
            setup_logging(log_level, False)
            for template, args in templates:
                watch = FenceWatch("vm-1")
                fenced = watch.start()
                heartbeat.error(template, *(a.format(id="vm-2") for a in args))
                assert not fenced.is_set()
                heartbeat.error(template, *(a.format(id="vm-1") for a in args))
                watch.stop()
                assert fenced.is_set(), (log_level, template)
                assert heartbeat.level == logging.NOTSET and heartbeat not in (
                    h for h in heartbeat.handlers if isinstance(h, FenceWatch))
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.getLogger("kafka").setLevel(logging.NOTSET)
