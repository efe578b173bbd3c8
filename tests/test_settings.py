"""Settings: defaults < preset < STREAMDEDUP_* environment < overrides; parsing; validation."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from streamdedup.errors import ConfigError
from streamdedup.settings import (
    ENV_PREFIX,
    PRESETS,
    Settings,
    build_settings,
    env_name,
    preset_summary,
)


def test_no_preset_no_env_gives_the_field_defaults() -> None:
    assert build_settings(None, env={}) == Settings()
    assert build_settings("default", env={}) == Settings()


def test_reference_preset_is_the_studys_setup() -> None:
    s = build_settings("reference", env={})
    assert (s.text_fields, s.shingle_kind, s.shingle_size) == (("description",), "char", 10)
    assert (s.num_perm, s.bands, s.rows, s.threshold) == (100, 20, 5, 0.8)
    assert (s.stopwords, s.stem_language) == ("it", "italian")


def test_a_presets_summary_for_the_help_is_written_from_its_values(monkeypatch: Any) -> None:
    assert preset_summary("reference") == ("description only, char 10-grams, it stopwords, "
                                           "italian stems, 100 permutations, 20x5 bands, "
                                           "threshold 0.8")
    monkeypatch.setitem(PRESETS, "words-en", {**PRESETS["words-en"], "shingle_size": 4})
    assert preset_summary("words-en") == "word 4-grams, en stopwords, english stems"
    assert preset_summary("default") == "the defaults"


def test_every_preset_builds_and_names_only_real_fields() -> None:
    names = {f.name for f in dataclasses.fields(Settings)}
    for name, values in PRESETS.items():
        assert set(values) <= names, name
        s = build_settings(name, env={})
        for key, value in values.items():
            assert getattr(s, key) == value


@pytest.mark.parametrize("raw", ["1", "true", "TRUE", " yes ", "On"])
def test_env_true_spellings(raw: str) -> None:
    assert build_settings(env={"STREAMDEDUP_STRIP_HTML": "0", "STREAMDEDUP_LOG_JSON": raw}).log_json


@pytest.mark.parametrize("raw", ["0", "false", "No", " off"])
def test_env_false_spellings(raw: str) -> None:
    assert not build_settings(env={"STREAMDEDUP_STRIP_HTML": raw}).strip_html


@pytest.mark.parametrize(
    ("var", "raw"),
    [
        ("STRIP_HTML", "maybe"),
        ("NUM_PERM", "lots"),
        ("NUM_PERM", "1.5"),
        ("THRESHOLD", "high"),
        ("METRICS_PORT", "9464/tcp"),
    ],
)
def test_env_values_that_do_not_parse_are_config_errors_naming_the_variable(
    var: str, raw: str
) -> None:
    with pytest.raises(ConfigError, match=ENV_PREFIX + var):
        build_settings(env={ENV_PREFIX + var: raw})


def test_env_ints_floats_strings_and_tuples() -> None:
    s = build_settings(
        env={
            "STREAMDEDUP_NUM_PERM": "64",
            "STREAMDEDUP_THRESHOLD": "0.65",
            "STREAMDEDUP_GROUP_ID": "dedup-it",
            "STREAMDEDUP_TEXT_FIELDS": " title, description ,, location ,",
        }
    )
    assert s.num_perm == 64 and isinstance(s.num_perm, int)
    assert s.threshold == 0.65
    assert s.group_id == "dedup-it"
    assert s.text_fields == ("title", "description", "location")


def test_env_tuple_with_no_names_is_refused() -> None:
    with pytest.raises(ConfigError, match="text_fields"):
        build_settings(env={"STREAMDEDUP_TEXT_FIELDS": " , ,"})


def test_precedence_defaults_then_preset_then_env_then_overrides() -> None:
    assert Settings().shingle_size == 10
    assert build_settings("words-en", env={}).shingle_size == 3
    env = {"STREAMDEDUP_SHINGLE_SIZE": "4"}
    assert build_settings("words-en", env=env).shingle_size == 4
    assert build_settings("words-en", env=env, overrides={"shingle_size": 5}).shingle_size == 5
    # Each layer changes only what it names.
    s = build_settings("words-en", env=env, overrides={"shingle_size": 5})
    assert (s.shingle_kind, s.stopwords, s.num_perm) == ("word", "en", Settings().num_perm)


def test_override_none_means_not_given() -> None:
    env = {"STREAMDEDUP_SHINGLE_SIZE": "4"}
    assert build_settings(env=env, overrides={"shingle_size": None}).shingle_size == 4


def test_preset_from_env_and_argument_beats_env() -> None:
    env = {"STREAMDEDUP_PRESET": "reference"}
    assert build_settings(env=env).num_perm == 100
    assert build_settings("words-en", env=env).shingle_kind == "word"


def test_env_none_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMDEDUP_MAX_MATCHES", "3")
    monkeypatch.delenv("STREAMDEDUP_PRESET", raising=False)
    assert build_settings().max_matches == 3


def test_unknown_preset_and_unknown_override_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown preset 'fast'"):
        build_settings("fast", env={})
    with pytest.raises(ConfigError, match="unknown settings: num_perms"):
        build_settings(env={}, overrides={"num_perms": 64})


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"shingle_kind": "byte"}, "shingle_kind"),
        ({"shingle_size": 0}, "shingle_size"),
        ({"num_perm": 0}, "num_perm"),
        ({"num_perm": 100_000_000}, "num_perm must be <= 1024"),  # was a 24 GiB allocation
        ({"commit_interval_s": -1.0}, "commit_interval_s must be >= 0, not -1.0"),
        ({"log_every_s": 0.0}, "log_every_s must be > 0"),
        ({"threshold": 0.0}, "threshold"),
        ({"threshold": 1.01}, "threshold"),
        ({"threshold": float("nan")}, "threshold"),
        ({"bands": 4}, "bands and rows"),
        ({"bands": 20, "rows": 7}, "exceeds num_perm"),
        ({"store_backend": "redis"}, "store_backend"),
        ({"text_fields": ()}, "text_fields"),
        ({"max_matches": 0}, "max_matches"),
        ({"max_candidates": 0}, "max_candidates"),
        # issue 17: operator mistakes that were accepted, retried forever or a traceback
        ({"bands": -1, "rows": -1}, "bands and rows must be >= 0"),
        ({"max_message_bytes": 0}, "max_message_bytes must be >= 1"),
        ({"session_timeout_ms": 100}, "session_timeout_ms must be in"),
        ({"topic_partitions": 0}, "topic_partitions must be >= 1"),
        ({"poll_max_records": 0}, "poll_max_records must be >= 1"),
        ({"commit_every": 0}, "commit_every must be >= 1"),
        ({"log_level": "LOUD"}, "log_level must be one of"),
        ({"metrics_port": 70000}, "metrics_port must be in"),
        ({"metrics_port": -1}, "metrics_port must be in"),
        ({"security_protocol": "TLS"}, "security_protocol must be one of"),
        # kafka-python took each of these and failed (or skipped SASL) only at each connection
        ({"security_protocol": "SASL_SSL"}, "SASL_SSL needs a sasl_mechanism"),
        ({"sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "p"},
         "needs security_protocol SASL_PLAINTEXT or SASL_SSL, not PLAINTEXT"),
        ({"security_protocol": "SSL", "sasl_mechanism": "PLAIN", "sasl_username": "u",
          "sasl_password": "p"}, "needs security_protocol SASL_PLAINTEXT or SASL_SSL, not SSL"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"},
         "sasl_mechanism must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-1"},
         "sasl_mechanism must be one of"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_username": "u"},
         "PLAIN needs sasl_username and sasl_password"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_password": "p"},
         "PLAIN needs sasl_username and sasl_password"),
        ({"commit_interval_s": -1.0}, "commit_interval_s"),
        ({"group_instance_id": "pod 1"}, "group_instance_id must be"),
        ({"group_instance_id": ".."}, "group_instance_id must be"),
        ({"group_instance_id": "x" * 250}, "group_instance_id must be"),
        # a dead letter read again and dead-lettered again: ~25 MB/s until the disk was full
        ({"dlq_topic": "jobs"}, "input_topic 'jobs' must differ"),
        ({"output_topic": "jobs"}, "input_topic 'jobs' must differ"),
        ({"output_topic": "x", "dlq_topic": "x"}, "output_topic and dlq_topic must differ"),
        ({"input_topic": "bad/topic"}, "input_topic must be 1-249"),
        ({"output_topic": ""}, "output_topic must be 1-249"),
        ({"bootstrap_servers": "127.0.0.1:99999"}, "bootstrap_servers must be host"),
        ({"bootstrap_servers": ",,,"}, "bootstrap_servers must be host"),
        ({"bootstrap_servers": "kafka:abc"}, "bootstrap_servers must be host"),
        ({"bootstrap_servers": "[::1]:0"}, "bootstrap_servers must be host"),
        # nan passed ">= 0" and held verdicts back until 2,000 messages or a stop; inf too
        ({"commit_interval_s": float("nan")}, "commit_interval_s must be a finite number"),
        ({"commit_interval_s": float("inf")}, "commit_interval_s must be a finite number"),
        ({"log_every_s": float("nan")}, "log_every_s must be a finite number"),
        ({"group_id": ""}, "group_id must not be empty"),  # refused by the broker, forever
        ({"group_id": "  "}, "group_id must not be empty"),
        # just past each edge (a mutation sweep found the edges themselves unpinned)
        ({"bands": -1, "rows": 5}, "bands and rows must be >= 0"),
        ({"monitor_port": 0}, "monitor_port must be in"),
        ({"monitor_port": 65536}, "monitor_port must be in"),
        ({"metrics_port": 65536}, "metrics_port must be in"),
        ({"bootstrap_servers": "kafka:65536"}, "bootstrap_servers must be host"),
        ({"session_timeout_ms": 999}, "session_timeout_ms must be in"),
        ({"session_timeout_ms": 1_800_001}, "session_timeout_ms must be in"),
        ({"num_perm": 1025}, "num_perm must be <= 1024"),
        ({"max_output_bytes": 65535}, "max_output_bytes must be >= 65536"),
        ({"monitor_hosts": ("jobs.example:8088",)}, "monitor_hosts must be host names"),
        ({"monitor_hosts": ("10.0.0.1:80",)}, "monitor_hosts must be host names"),
        ({"monitor_hosts": ("http://jobs.example",)}, "monitor_hosts must be host names"),
    ],
)
def test_invalid_combinations_are_config_errors(changes: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        build_settings(env={}, overrides=changes)
    with pytest.raises(ConfigError, match=words):
        Settings().replace(**changes)


@pytest.mark.parametrize("changes", [
    {"threshold": 1.0}, {"num_perm": 1024}, {"monitor_port": 1},
    {"monitor_port": 65535}, {"metrics_port": 0}, {"metrics_port": 65535},
    {"bootstrap_servers": "kafka:65535"}, {"session_timeout_ms": 1000},
    {"session_timeout_ms": 1_800_000}, {"commit_interval_s": 0.0},
    {"max_output_bytes": 65536}, {"log_level": "info"},
    {"security_protocol": "sasl_ssl", "sasl_mechanism": "scram-sha-512", "sasl_username": "u",
     "sasl_password": "p"},
    {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_username": "u",
     "sasl_password": "p"},
    {"monitor_hosts": ("jobs.example", "10.0.0.1", "[::1]", "fe80::1", "*")},
])
def test_values_at_each_edge_are_taken(changes: dict) -> None:
    built = build_settings(env={}, overrides=changes)  # a refusal raises ConfigError
    for name, value in changes.items():
        assert getattr(built, name) == value


def test_bad_env_value_in_valid_syntax_is_still_validated() -> None:
    with pytest.raises(ConfigError, match="exceeds num_perm"):
        build_settings(env={"STREAMDEDUP_NUM_PERM": "64", "STREAMDEDUP_BANDS": "20",
                            "STREAMDEDUP_ROWS": "5"})


def test_settings_are_frozen_and_replace_makes_a_new_object() -> None:
    s = Settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.num_perm = 3  # type: ignore[misc]
    t = s.replace(num_perm=64)
    assert (s.num_perm, t.num_perm) == (128, 64)


def test_public_masks_set_secrets_only() -> None:
    s = build_settings(
        env={
            "STREAMDEDUP_SASL_USERNAME": "alice",
            "STREAMDEDUP_SASL_PASSWORD": "hunter2-secret",
            "STREAMDEDUP_SASL_MECHANISM": "PLAIN",
            "STREAMDEDUP_SECURITY_PROTOCOL": "SASL_SSL",
        }
    )
    out = s.public()
    assert set(out) == {f.name for f in dataclasses.fields(Settings)}
    assert out["sasl_username"] == "***" and out["sasl_password"] == "***"
    assert out["ssl_keyfile"] == ""  # an unset secret shows that it is unset
    assert out["sasl_mechanism"] == "PLAIN"  # not a secret
    assert "hunter2-secret" not in repr(out) and "alice" not in repr(out)
    assert out["num_perm"] == s.num_perm


def test_a_group_instance_id_is_a_kafka_name_or_empty() -> None:
    assert Settings().group_instance_id == ""
    for name in ("streamdedup-0", "host.example_1", "x" * 249):
        assert build_settings(env={"STREAMDEDUP_GROUP_INSTANCE_ID": name}) \
            .group_instance_id == name


def test_a_misspelled_variable_is_named_with_the_setting_it_was_meant_to_be(
        caplog: pytest.LogCaptureFixture) -> None:
    """STREAMDEDUP_TRESHOLD=0.5 used to be silently ignored: the default threshold ran."""
    env = {"STREAMDEDUP_TRESHOLD": "0.5", "STREAMDEDUP_BATCH_SIZE": "5",
           "STREAMDEDUP_NUM_PERM": "64", "STREAMDEDUP_PRESET": "default",
           "STREAMDEDUP_CACHE": "/tmp/c", "STREAMDEDUP_TEST_BOOTSTRAP": "x:1", "HOME": "/root"}
    with caplog.at_level(logging.WARNING, logger="streamdedup.settings"):
        s = build_settings(env=env)
    assert s.num_perm == 64 and s.threshold == Settings().threshold
    assert caplog.messages == [
        "STREAMDEDUP_BATCH_SIZE is not a setting and is ignored",
        "STREAMDEDUP_TRESHOLD is not a setting and is ignored (did you mean "
        "STREAMDEDUP_THRESHOLD?)"]


def test_every_setting_is_in_the_readmes_configuration_table() -> None:
    """The table is written by hand: a new setting must get its row (``sasl_*`` names a
    family)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    table = text[text.index("## Configuration"):text.index("## Accuracy")]
    named = set(re.findall(r"`([a-z_]+\*?)`", "\n".join(
        line.split("|")[1] for line in table.splitlines() if line.startswith("| `"))))
    missing = [f.name for f in dataclasses.fields(Settings)
               if f.name not in named and not any(n.endswith("*") and f.name.startswith(n[:-1])
                                                  for n in named)]
    assert missing == []


def test_the_readmes_configuration_table_gives_each_settings_default() -> None:
    """The table repeats every default by hand; one that drifted from ``settings.py`` would
    send a reader to the wrong value."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    table = text[text.index("## Configuration"):text.index("## Accuracy")]
    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}

    def shown(value: object) -> str:
        if isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(value, tuple):
            value = ",".join(value)  # as the environment spells it; () is '' there
        if isinstance(value, str):
            return f"`{value}`" if value else "`''`"
        return f"{value:g}" if isinstance(value, float) else str(value)

    compared = 0
    for line in table.splitlines():
        if not line.startswith("| `"):
            continue
        names = re.findall(r"`([a-z_]+\*?)`", line.split("|")[1])
        given = [v.strip() for v in line.split("|")[2].split(", ")]
        if any(n.endswith("*") for n in names) or names == ["preset"]:
            given, names = given[:1], names[:1]  # a family shares its first default
        if len(given) == 1 and len(names) > 1:
            given *= len(names)  # "on" for four switches
        assert len(given) == len(names), line
        for name, value in zip(names, given, strict=True):
            if name in defaults:
                assert value == shown(defaults[name]), (name, value, defaults[name])
                compared += 1
    assert compared == len(defaults) - 6  # not the three sasl_* and three ssl_* settings


def test_kafka_addresses_kafka_python_takes_are_taken() -> None:
    for servers in ("kafka:9092", "[::1]:9092,kafka", "a:1, b:65535", "PLAINTEXT://host",
                    "SSL://[::1]", "[::1]", "2001:db8::", "fe80::1%eth0", "a:9092,",
                    "SASL_SSL://b:9093"):
        assert build_settings(env={}, overrides={"bootstrap_servers": servers})


def test_a_presets_bands_follow_a_threshold_or_permutations_given_apart_from_them() -> None:
    """reference's 20x5 bands were chosen for 0.8 and 100 permutations; kept at --threshold
    0.5 they made P(candidate | s=0.5) 0.47, silently."""
    from streamdedup.core.sketch import Sketcher

    def layout(**given: Any) -> tuple[int, int]:
        sketcher = Sketcher(build_settings("reference", env={}, overrides=given))
        return sketcher.bands, sketcher.rows

    assert layout() == layout(threshold=0.8) == (20, 5)  # the preset's own values: its bands
    assert layout(threshold=0.5) != (20, 5)
    assert Sketcher(build_settings("reference", env={}, overrides={"threshold": 0.5})
                    ).recall_at_threshold() > 0.999
    assert layout(threshold=0.5, bands=20, rows=5) == (20, 5)  # bands given: kept
    assert layout(num_perm=128) != (20, 5)
    env = {"STREAMDEDUP_THRESHOLD": "0.5"}
    assert Sketcher(build_settings("reference", env=env)).bands != 20


def test_broker_addresses_are_read_as_the_settings_accept_them() -> None:
    """`replay` split them on its own: 'localhost' (no port) and a scheme were "no Kafka
    broker answers" though kafka-python connects to both."""
    from streamdedup.settings import broker_addresses

    assert broker_addresses("localhost, PLAINTEXT://10.0.0.1:9093,[::1]:9094,::1,h:1") == [
        ("localhost", 9092), ("10.0.0.1", 9093), ("::1", 9094), ("::1", 9092), ("h", 1)]


def test_topic_flag_names_the_flag_of_each_topic() -> None:
    s = Settings(input_topic="in", output_topic="out", dlq_topic="dead")
    assert [s.topic_flag(t) for t in ("in", "out", "dead", "other")] == [
        "--input-topic", "--output-topic", "--dlq-topic", "--output-topic"]


def test_every_settings_flag_names_its_field_back() -> None:
    """One rule from a setting to its flag (it was written out by hand in six places)."""
    from streamdedup.settings import field_name, flag_name

    assert flag_name("max_message_bytes") == "--max-message-bytes"
    assert all(field_name(flag_name(f.name)) == f.name for f in dataclasses.fields(Settings))


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_to_env_builds_the_same_settings_again(preset: str) -> None:
    """What a replay starts its consumer with: every field, floats and tuples included."""
    s = build_settings(preset, env={}, overrides={"threshold": 0.7 + 1e-12, "retention": "3d",
                                                  "text_fields": ("a", "b"), "log_json": True})
    env = s.to_env()
    assert set(env) == {env_name(f.name) for f in dataclasses.fields(Settings)}
    assert build_settings(env=env) == s


@pytest.mark.parametrize("name,value", [("max_matches", 2**31), ("max_message_bytes", 10**20),
                                        ("commit_every", 2**40), ("seed", 2**63)])
def test_counts_beyond_what_kafka_and_sqlite_hold_are_refused(name: str, value: int) -> None:
    """--max-matches 99999999999999999999 ended in a traceback of SQLite's or islice's."""
    with pytest.raises(ConfigError, match=f"{name} must be <= "):
        Settings(**{name: value})
    Settings(**{name: value - 1 if name == "seed" else 2**31 - 1})  # the largest taken


def test_a_blank_retention_is_off_everywhere() -> None:
    """``--retention ' '`` was read as off by the window but was true where times are read:
    all 300 rows of a dump became bad_time dead letters."""
    settings = build_settings(None, env={"STREAMDEDUP_RETENTION": "  "})
    assert settings.retention == "" and settings.retention_ms is None
    assert settings.read_time_field == ""


def test_an_empty_number_or_switch_variable_is_not_set_and_says_so(
        caplog: pytest.LogCaptureFixture) -> None:
    """`STREAMDEDUP_NUM_PERM=` and `STREAMDEDUP_ONLY_DUPLICATES=`, as an .env file leaves
    them, were refused ("expected int, got ''"); a text setting takes the empty text."""
    with caplog.at_level(logging.WARNING, logger="streamdedup.settings"):
        s = build_settings(env={"STREAMDEDUP_NUM_PERM": "", "STREAMDEDUP_ONLY_DUPLICATES": " ",
                                "STREAMDEDUP_THRESHOLD": "", "STREAMDEDUP_RETENTION": ""})
    default = Settings()
    assert (s.num_perm, s.only_duplicates, s.threshold, s.retention) == (
        default.num_perm, default.only_duplicates, default.threshold, "")
    said = caplog.text
    assert "STREAMDEDUP_NUM_PERM is empty: its default is used" in said
    assert "STREAMDEDUP_ONLY_DUPLICATES is empty" in said
    with pytest.raises(ConfigError, match="STREAMDEDUP_NUM_PERM: expected int, got 'x'"):
        build_settings(env={"STREAMDEDUP_NUM_PERM": "x"})  # garbage is still refused
