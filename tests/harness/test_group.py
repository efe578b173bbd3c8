"""The consumer-group chaos run (``harness.group``), CI-sized, on a real broker and a real
redis-server, then on a real 3-master Redis Cluster: three ``streamdedup run`` processes
share one index while members and Redis are SIGKILLed and a fourth member joins and leaves.
This is issue 12's acceptance: every id answered, unique seqs, duplicate flags equal to
exact Jaccard in seq order, no match of itself or of a later seq, the clusters a reader
makes of the verdicts equal to the components at the threshold, exit 0 on SIGTERM."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.chaos.config import ChaosConfig
from harness.chaos.stream import build_stream, read_rows
from harness.group import GroupRun, ok
from harness.redis import RedisError, RedisServer

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.dump]


@pytest.mark.parametrize("cluster", [0, 3], ids=["server", "cluster"])
def test_a_group_sharing_redis_survives_kills_and_follows_seq_order(
        cluster: int, kafka_bootstrap: str, kijiji_path: Path, tmp_path: Path) -> None:
    redis = RedisServer(tmp_path / "redis", cluster=cluster)
    try:
        redis.run()
    except RedisError as exc:
        pytest.fail(f"no local Redis for the group run: {exc}")
    config = ChaosConfig(bootstrap=kafka_bootstrap, dump=kijiji_path, workdir=tmp_path / "run",
                         seed=5, step_timeout_s=120.0,
                         say=lambda message: print(message, file=sys.stderr))
    run = GroupRun(config, redis)
    try:
        result = run.run(build_stream(read_rows(kijiji_path), 900, config.seed))
    finally:
        run.close()
        redis.stop()
    seq = result["seq_order"]
    assert result["lost"] == 0 and result["conflicts"] == 0 and result["self_duplicates"] == 0
    assert (seq["false_positives"], seq["false_negatives"], seq["self_or_later_matches"],
            seq["repeated_seqs"], seq["bad_seq"], seq["clusters_unlike_the_truth"]
            ) == (0, 0, 0, 0, 0, 0), seq["examples"]
    assert seq["true_duplicates"] > 300 and result["verdicts"] > 850
    kinds = [e["kind"] for e in run.events]
    assert kinds.count("kill_member") == 2 and "kill_redis" in kinds
    assert ok(result, run.events), run.events
