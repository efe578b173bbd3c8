"""``harness/__init__.py``: the command line of a consumer the harness starts."""

from __future__ import annotations

import sys

from harness import run_argv, run_flags


def test_a_consumers_command_line_spells_each_setting_as_run_does() -> None:
    assert run_flags(preset="reference", store_backend="redis", metrics_port=0,
                     redis_cluster=True, sketch_ahead=False, commit_every=None,
                     text_fields=("title", "description")) == [
        "--preset", "reference", "--store-backend", "redis", "--metrics-port", "0",
        "--redis-cluster", "--no-sketch-ahead", "--text-fields", "title,description"]
    assert run_flags(redis_cluster=3) == ["--redis-cluster"]  # a switch, whatever its value
    assert run_argv("--log-json", input_topic="in") == [
        sys.executable, "-m", "streamdedup", "run", "--input-topic", "in", "--log-json"]
