"""The TCP link tests cut and mend (``harness/link.py``): bytes pass, a cut closes every
connection and refuses new ones, a mend lets them through again, to a real redis-server."""

from __future__ import annotations

import pytest
import redis

from harness.link import Link


def test_a_cut_link_drops_the_client_and_a_mended_one_serves_it_again(redis_url: str) -> None:
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    with Link(port) as link:
        client = redis.Redis(port=link.port, socket_timeout=2, retry=None)
        assert client.ping() is True
        link.cut()
        for _ in range(2):  # the open connection, then a new one
            with pytest.raises(redis.ConnectionError):
                client.ping()
        link.mend()
        assert client.ping() is True
        direct = redis.Redis.from_url(redis_url)
        assert client.info("server")["run_id"] == direct.info("server")["run_id"]  # no restart
        client.close()
        direct.close()
