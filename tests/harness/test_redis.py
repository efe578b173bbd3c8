"""scripts/redis-local: start, status, stop of a real redis-server on loopback."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_redis_local_start_status_stop(tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server (scripts/setup installs it as root)")
    script = [str(ROOT / "scripts" / "redis-local"), "--state-dir", str(tmp_path)]

    def run(cmd: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*script, cmd], capture_output=True, text=True, timeout=60,
                              check=False)

    started = run("start")
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip().splitlines()[-1]
    assert url.startswith("REDIS_URL=redis://127.0.0.1:") and url.endswith("/0")
    assert run("start").stdout.strip().splitlines()[-1] == url  # found running, same port
    assert run("status").returncode == 0
    assert run("stop").returncode == 0
    assert run("status").returncode == 3


@pytest.mark.parametrize("durable", [True, False])
def test_a_server_is_durable_unless_it_serves_a_baseline(tmp_path: Path, durable: bool) -> None:
    """The store's servers write every command to the AOF; a benchmark's baseline server
    (datasketch on Redis, as its users run it) keeps none."""
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server (scripts/setup installs it as root)")
    import redis

    from harness.redis import RedisServer

    server = RedisServer(tmp_path, durable=durable)
    try:
        client = redis.Redis.from_url(server.run())
        assert client.config_get("appendonly") == {"appendonly": "yes" if durable else "no"}
    finally:
        server.stop()
