"""scripts/redis-local: start, status, stop of a real redis-server on loopback."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Every test here runs real servers (scripts/setup installs Debian's as root).
pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="no redis-server (scripts/setup installs it as root)")


def test_redis_local_start_status_stop(tmp_path: Path) -> None:
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
    import redis

    from harness.redis import RedisServer

    server = RedisServer(tmp_path, durable=durable)
    try:
        client = redis.Redis.from_url(server.run())
        assert client.config_get("appendonly") == {"appendonly": "yes" if durable else "no"}
    finally:
        server.stop()


def test_a_cluster_with_a_node_down_gets_that_node_back_at_start(tmp_path: Path) -> None:
    """`start --cluster 3` with one node killed took the ports as gone: new ports, every
    node's files deleted (the running ones' too), the survivors left orphaned."""
    import os
    import signal
    import time

    import redis

    from harness.redis import RedisServer, _ping

    server = RedisServer(tmp_path, cluster=3)
    try:
        url = server.start()
        redis.RedisCluster.from_url(url).set("kept", "yes")
        pid = int((tmp_path / "node1" / "redis.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _ping(server.ports[1]):
            assert time.monotonic() < deadline, "the killed node still answers"
            time.sleep(0.05)
        assert RedisServer(tmp_path, cluster=3).start() == url  # the same ports
        assert redis.RedisCluster.from_url(url).get("kept") == b"yes"
        assert len({int((tmp_path / f"node{n}" / "redis.pid").read_text())
                    for n in range(3)} - {pid}) == 3
    finally:
        server.stop()


def test_a_stopped_cluster_is_not_started_as_one_server_nor_wiped(tmp_path: Path) -> None:
    """`start` without --cluster on a stopped cluster's state directory wrote over its record,
    and the next `start --cluster 3` took new ports and deleted every node's files."""
    import redis

    from harness.redis import RedisError, RedisServer

    cluster = RedisServer(tmp_path, cluster=3)
    try:
        url = cluster.start()
        redis.RedisCluster.from_url(url).set("kept", "yes")
    finally:
        cluster.stop()
    try:
        with pytest.raises(RedisError, match=r"holds a Redis Cluster of 3 masters, not one "
                                             r"redis-server: start it --cluster 3"):
            RedisServer(tmp_path).start()
        with pytest.raises(RedisError, match="start it --cluster 3"):
            RedisServer(tmp_path, cluster=4).start()
    finally:  # (without the refusal, a server started: stopped by its pid file)
        RedisServer(tmp_path).stop()
    try:
        assert cluster.start() == url
        assert redis.RedisCluster.from_url(url).get("kept") == b"yes"
    finally:
        cluster.stop()
    (tmp_path / "redis.json").write_text("")  # a record a crash emptied: the nodes' files say
    try:
        with pytest.raises(RedisError, match="holds a Redis Cluster of 3 masters"):
            RedisServer(tmp_path).start()
    finally:
        RedisServer(tmp_path).stop()


def test_a_stopped_server_is_not_started_as_a_cluster_even_without_its_record(
        tmp_path: Path) -> None:
    import redis

    from harness.redis import RedisError, RedisServer

    server = RedisServer(tmp_path)
    try:
        redis.Redis.from_url(server.start()).set("keep", "me")
    finally:
        server.stop()
    (tmp_path / "redis.json").write_text("")
    try:
        with pytest.raises(RedisError, match="holds one redis-server, not a Redis Cluster"):
            RedisServer(tmp_path, cluster=3).start()
    finally:
        RedisServer(tmp_path).stop()
    assert any((tmp_path / "node0").iterdir())  # its files are still there
