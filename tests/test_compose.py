"""docker-compose.yml is valid and configures streamdedup with settings that exist."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from streamdedup.settings import ENV_PREFIX, Settings, build_settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"


def load() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_services_and_build() -> None:
    spec = load()
    assert set(spec["services"]) == {"kafka", "streamdedup", "redis", "streamdedup-group"}
    assert spec["services"]["kafka"]["image"].startswith("apache/kafka:")
    assert spec["services"]["streamdedup"]["build"] == "."
    assert (ROOT / "Dockerfile").is_file()
    volume = spec["services"]["streamdedup"]["volumes"][0].split(":")[0]
    assert volume in spec["volumes"]


def test_streamdedup_environment_names_real_settings() -> None:
    env = load()["services"]["streamdedup"]["environment"]
    known = {ENV_PREFIX + f.name.upper() for f in fields(Settings)} | {ENV_PREFIX + "PRESET"}
    unknown = set(env) - known
    assert not unknown, f"compose sets unknown variables: {unknown}"
    settings = build_settings(env={k: str(v) for k, v in env.items()})
    assert settings.bootstrap_servers == "kafka:9092"
    assert settings.metrics_port == 9464


def test_the_group_profile_shares_one_durable_redis() -> None:
    services = load()["services"]
    group, redis = services["streamdedup-group"], services["redis"]
    assert group["profiles"] == redis["profiles"] == ["group"]
    assert group["deploy"]["replicas"] == 2
    assert {"--appendonly", "yes", "--appendfsync", "always"} <= set(redis["command"])
    env = {k: str(v) for k, v in group["environment"].items()}
    known = {ENV_PREFIX + f.name.upper() for f in fields(Settings)} | {ENV_PREFIX + "PRESET"}
    assert set(env) <= known
    settings = build_settings(env=env)
    assert settings.store_backend == "redis" and settings.redis_url == "redis://redis:6379/0"
    single = build_settings(env={k: str(v) for k, v in
                                 services["streamdedup"]["environment"].items()})
    # its own group and outputs: the two deployments can read the same topic side by side
    assert (settings.group_id, settings.output_topic) != (single.group_id, single.output_topic)
    # both create the input topic at start; the first one's partitions stay (1 idled a replica)
    assert settings.input_topic == single.input_topic
    assert single.topic_partitions == settings.topic_partitions >= group["deploy"]["replicas"]
    assert "redis" in (ROOT / "Dockerfile").read_text()


def test_kraft_listeners_are_consistent() -> None:
    env = load()["services"]["kafka"]["environment"]
    names = {part.split(":")[0] for part in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")}
    listeners = {part.split(":")[0] for part in env["KAFKA_LISTENERS"].split(",")}
    assert listeners <= names
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] in listeners
    assert "broker" in env["KAFKA_PROCESS_ROLES"] and "controller" in env["KAFKA_PROCESS_ROLES"]


def test_docker_compose_config_where_available() -> None:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"],
                                        capture_output=True).returncode != 0:
        pytest.skip("no `docker compose` client here; the YAML checks above stand in")
    result = subprocess.run([docker, "compose", "-f", str(COMPOSE), "config", "-q"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
