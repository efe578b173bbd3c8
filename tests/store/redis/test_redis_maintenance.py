"""`streamdedup store` on a real Redis (one server, and a 3-master cluster): stats, the check
of the records and the export of a store a detector wrote, and damage made on purpose."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
import redis

from streamdedup.core.shared import detector_for
from streamdedup.core.sketch import Sketcher
from streamdedup.store import open_store
from streamdedup.store.redis import maintenance
from streamdedup.store.redis.client import Keys
from tests.store.test_maintenance import SETTINGS, ads


def built(url: str, cluster: bool = False, n: int = 200) -> tuple[str, list[str]]:
    namespace = f"adm{uuid.uuid4().hex[:8]}"
    store = open_store("redis", url, Sketcher(SETTINGS).params(), namespace, cluster)
    try:
        detector = detector_for(SETTINGS, store, Sketcher(SETTINGS))  # a group's, on Redis
        verdicts = [v.to_json() for v in detector.process_many(ads(n))]
        store.commit()
    finally:
        store.close()
    return namespace, verdicts


@pytest.mark.parametrize("kind", ["server", "cluster"])
def test_stats_verify_and_export_of_a_sound_store(
        kind: str, request: pytest.FixtureRequest) -> None:
    cluster = kind == "cluster"
    url = request.getfixturevalue("redis_cluster_url" if cluster else "redis_url")
    namespace, verdicts = built(url, cluster)
    found = maintenance.stats(url, namespace, cluster)
    assert (found["documents"], found["last_seq"]) == (200, 200)
    assert found["distinct_sets"] > 0 and found["bytes"]["server_used_memory"] > 0
    assert found["params"] == Sketcher(SETTINGS).params()
    assert maintenance.verify(url, namespace, cluster) == []
    import io

    out = io.StringIO()
    assert maintenance.export(url, namespace, out, cluster) == 200
    assert out.getvalue().splitlines() == verdicts  # seq order is arrival order


def test_damage_is_found_and_named(redis_url: str) -> None:
    namespace, _ = built(redis_url)
    r = redis.Redis.from_url(redis_url)
    k = Keys(namespace)
    docs = {key.decode(): value for key, value in r.hgetall(k("docs")).items()}
    first = sorted(docs, key=lambda d: int(docs[d].split()[0]))[0]
    head, _, verdict = docs[first].decode().partition("\n")
    set_id = int(head.split()[1])
    r.hset(k("docs"), first, f"999 {set_id}\n{verdict}")  # a seq past the counter
    r.delete(k.shingles(set_id))                            # a set without its shingles
    problems = maintenance.verify(redis_url, namespace)
    assert any("seq 999 is past the counter 200" in p for p in problems), problems
    assert any("but its verdict says" in p for p in problems)
    assert any(f"set {set_id}: its shingles are missing" in p for p in problems)


def test_the_command_line_on_redis(redis_url: str) -> None:
    namespace, _ = built(redis_url, n=50)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "streamdedup", "store", *args, "--store-backend", "redis",
             "--redis-url", redis_url, "--redis-namespace", namespace],
            capture_output=True, text=True, timeout=120)

    assert "ok" in run("verify").stdout
    assert json.loads(run("stats", "--json").stdout)["documents"] == 50
    assert len(run("export").stdout.splitlines()) == 50
    compact = run("compact")
    assert compact.returncode == 2 and "nothing to compact" in compact.stderr
