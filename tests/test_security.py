"""Security properties that are easy to lose in a later edit, checked on the code itself.

- message data is never executed: no pickle/marshal/eval/exec anywhere in ``streamdedup/``
  (a scan of the source, so a new module is covered without a new test);
- store files are private to the service's user;
- the metrics endpoint listens on loopback unless told otherwise;
- SASL/SSL settings reach kafka-python, and secrets never reach the logs.
"""

from __future__ import annotations

import ast
import ipaddress
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import streamdedup
from streamdedup.service.kafka import kafka_security
from streamdedup.service.metrics import HealthServer, Metrics
from streamdedup.settings import PRESETS, Settings, build_settings

PACKAGE = Path(streamdedup.__file__).resolve().parent

# Modules whose loaders run code found in the data they read.
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle",
                  "jsonpickle", "joblib"}
UNSAFE_BUILTINS = {"eval", "exec", "compile", "__import__"}


def _sources() -> Iterator[tuple[Path, ast.AST]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', '?')}"


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def test_the_scan_sees_the_package() -> None:
    names = {p.name for p, _ in _sources()}
    assert {"message.py", "consumer.py", "detector.py", "snapshot.py"} <= names


def test_no_unsafe_deserialisation_or_dynamic_code() -> None:
    """Why a scan: one ``pickle.loads`` on a message or a store value would turn data into
    code; reviewing every new module by eye does not scale."""
    found: list[str] = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [f"{_where(path, node)} import {a.name}" for a in node.names
                          if a.name.split(".")[0] in UNSAFE_MODULES]
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[0] in UNSAFE_MODULES:
                    found.append(f"{_where(path, node)} from {node.module} import ...")
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Name) and func.id in UNSAFE_BUILTINS:
                    found.append(f"{_where(path, node)} {func.id}(...)")
                elif isinstance(func, ast.Attribute):
                    if func.attr in ("load", "unsafe_load", "full_load") and isinstance(
                            func.value, ast.Name) and func.value.id == "yaml":
                        loader = _keyword(node, "Loader")
                        if func.attr != "load" or loader is None or "Safe" not in ast.unparse(
                                loader):
                            found.append(f"{_where(path, node)} yaml.{func.attr} without "
                                         "SafeLoader")
                    allow = _keyword(node, "allow_pickle")
                    if allow is not None and ast.unparse(allow) != "False":
                        found.append(f"{_where(path, node)} {func.attr}(allow_pickle=...)")
                    if func.attr in ("Popen", "run", "call", "check_output", "check_call"):
                        shell = _keyword(node, "shell")
                        if shell is not None and ast.unparse(shell) != "False":
                            found.append(f"{_where(path, node)} subprocess shell=True")
    assert not found, "code execution on data is not allowed:\n" + "\n".join(found)


def test_sqlitedict_never_pickles() -> None:
    """sqlitedict pickles by default; every use must pass its own encode and decode."""
    uses: list[str] = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("SqliteDict"):
                encode, decode = _keyword(node, "encode"), _keyword(node, "decode")
                if encode is None or decode is None or "pickle" in ast.unparse(node):
                    uses.append(_where(path, node))
    assert not uses, f"SqliteDict without explicit non-pickle encode/decode at {uses}"


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The permissions must not depend on the operator's umask."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_store_files_are_private(tmp_path: Path, loose_umask: None) -> None:
    from streamdedup.core.document import Document
    from streamdedup.core.sketch import Sketcher
    from streamdedup.detection.detector import Detector
    from streamdedup.store import open_store

    settings = build_settings("reference", env={})
    sketcher = Sketcher(settings)
    directory = tmp_path / "store"
    store = open_store("sqlite", str(directory), sketcher.params())
    try:
        Detector(settings, store, sketcher).process(
            Document("1", {"description": "Cercasi sviluppatore Python a Roma, full time"}))
        store.commit()
        entries = [directory, *directory.iterdir()]
        assert {p.name for p in entries} >= {"store", "index.sqlite", "store.lock"}
        loose = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in entries
                 if stat.S_IMODE(p.stat().st_mode) & 0o077}
        assert not loose, f"store entries readable by others: {loose}"
    finally:
        store.close()
    # The parameters are stored as JSON text, not as a pickle.
    conn = sqlite3.connect(directory / "index.sqlite")
    try:
        values = [row[0] for row in conn.execute("SELECT value FROM meta")]
    finally:
        conn.close()
    assert values
    for value in values:
        text = value.decode() if isinstance(value, bytes) else value
        assert isinstance(json.loads(text), dict)


def test_metrics_listen_on_loopback_by_default() -> None:
    defaults = build_settings(env={})
    assert ipaddress.ip_address(defaults.metrics_host).is_loopback
    for name in PRESETS:
        assert ipaddress.ip_address(build_settings(name, env={}).metrics_host).is_loopback
    server = HealthServer(Metrics(), defaults.metrics_host, 0).start()
    try:
        host = server.server.server_address[0]
        assert ipaddress.ip_address(host).is_loopback
    finally:
        server.stop()


SECRET_SETTINGS = {
    "security_protocol": "SASL_SSL",
    "sasl_mechanism": "SCRAM-SHA-256",
    "sasl_username": "svc-dedup-user",
    "sasl_password": "pw-0f9c-S3cr3t",
    "ssl_cafile": "/etc/ssl/ca.pem",
    "ssl_certfile": "/etc/ssl/client.pem",
    "ssl_keyfile": "/etc/ssl/client.key",
}


def test_kafka_security_passes_every_option_kafka_python_knows() -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    opts = kafka_security(Settings(**SECRET_SETTINGS))
    assert opts == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "svc-dedup-user",
        "sasl_plain_password": "pw-0f9c-S3cr3t",
        "ssl_cafile": "/etc/ssl/ca.pem",
        "ssl_certfile": "/etc/ssl/client.pem",
        "ssl_keyfile": "/etc/ssl/client.key",
    }
    for client in (KafkaConsumer, KafkaProducer, KafkaAdminClient):
        unknown = set(opts) - set(client.DEFAULT_CONFIG)
        assert not unknown, f"{client.__name__} does not know {unknown}"
    assert kafka_security(Settings()) == {"security_protocol": "PLAINTEXT"}


@pytest.mark.parametrize(("protocol", "mechanism"), [
    ("sasl_ssl", "plain"), ("Sasl_Ssl", "Plain"), ("SASL_SSL", "PLAIN")])
def test_a_protocol_taken_in_lower_case_reaches_the_client_as_kafka_python_reads_it(
        protocol: str, mechanism: str) -> None:
    """Settings take the protocol and mechanism in any case; kafka-python compares them
    with "SASL_SSL" and its mechanisms' names as written, so ``sasl_ssl`` connected in plain
    text, without SASL, and ``plain`` failed every handshake."""
    settings = build_settings(env={"STREAMDEDUP_SECURITY_PROTOCOL": protocol,
                                   "STREAMDEDUP_SASL_MECHANISM": mechanism,
                                   "STREAMDEDUP_SASL_USERNAME": "u",
                                   "STREAMDEDUP_SASL_PASSWORD": "p"})
    opts = kafka_security(settings)
    assert opts["security_protocol"] == "SASL_SSL"
    assert opts["sasl_mechanism"] == "PLAIN"


def test_public_settings_mask_every_secret() -> None:
    settings = Settings(**SECRET_SETTINGS)
    public = settings.public()
    text = json.dumps(public)
    for name in ("sasl_username", "sasl_password", "ssl_keyfile"):
        assert public[name] == "***"
        assert SECRET_SETTINGS[name] not in text
    assert Settings().public()["sasl_password"] == ""  # nothing to mask, nothing invented


def _pump(proc: subprocess.Popen[bytes], lines: list[str]) -> None:
    assert proc.stdout is not None
    lines.extend(raw.decode("utf-8", "replace") for raw in proc.stdout)


@pytest.mark.broker
def test_service_start_logs_no_secret_and_uses_sasl(kafka_bootstrap: str,
                                                    tmp_path: Path) -> None:
    """A consumer configured for SASL against the test broker's PLAINTEXT listener: its
    handshake fails (so the options did reach kafka-python), and neither the password nor the
    user name appears in what it logs, in either log format."""
    for log_json in (True, False):
        env = {**os.environ, "STREAMDEDUP_SASL_USERNAME": SECRET_SETTINGS["sasl_username"],
               "STREAMDEDUP_SASL_PASSWORD": SECRET_SETTINGS["sasl_password"],
               "PYTHONUNBUFFERED": "1"}
        argv = [sys.executable, "-m", "streamdedup", "run", "--bootstrap-servers",
                kafka_bootstrap, "--store", str(tmp_path / f"store-{log_json}"),
                "--metrics-port", "0", "--security-protocol", "SASL_PLAINTEXT",
                "--sasl-mechanism", "PLAIN", "--log-level", "DEBUG",
                "--log-json" if log_json else "--no-log-json",
                "--group-id", "sd-security", "--input-topic", "sd-security"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        lines: list[str] = []
        reader = threading.Thread(target=_pump, args=(proc, lines), daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        try:  # until the SASL handshake has been tried (and failed) a few times
            while sum("Sasl" in line for line in list(lines)) < 3 and proc.poll() is None:
                assert time.monotonic() < deadline, "".join(lines)[-2000:]
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:  # (it may sit in kafka-python's bootstrap retry for 30 s before it stops)
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            reader.join(timeout=10)
        text = "".join(lines)
        assert "starting" in text, text[-2000:]
        assert "Sasl" in text or "SASL" in text, text[-2000:]
        for name in ("sasl_username", "sasl_password"):
            assert SECRET_SETTINGS[name] not in text, f"{name} leaked into the logs"
