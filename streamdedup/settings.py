"""One frozen settings object for every entry point.

Defaults are written once, here, as field defaults. A preset overrides some of them; the
environment (``STREAMDEDUP_<FIELD>``) and then CLI flags override the preset. The CLI builds
its options from these fields, so a new setting needs one line here, and its row in README's
configuration table (tests/test_settings.py checks both the name and the default there).
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from streamdedup.errors import ConfigError

log = logging.getLogger(__name__)

ENV_PREFIX = "STREAMDEDUP_"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# The mechanisms a user name and password are enough for (GSSAPI and OAUTHBEARER need options
# this tool does not pass); kafka-python names them in upper case and reads only that.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# A broker refuses a session timeout outside group.min/max.session.timeout.ms (6 s and 30 min
# by default); below 1 s no heartbeat schedule works at all.
MIN_SESSION_TIMEOUT_MS, MAX_SESSION_TIMEOUT_MS = 1_000, 1_800_000
MIN_OUTPUT_BYTES = 65_536
# Signatures of 1,024 values already estimate Jaccard to +-0.013 at 0.8 (the default's 128:
# +-0.035); 10^8 ended in a 24 GiB allocation, 10^6 took over a minute for 50 ads.
MAX_NUM_PERM = 1_024
# Counts, sizes and times in ms fit Kafka's and SQLite's 32-bit fields; --max-matches
# 99999999999999999999 ended in a traceback of SQLite's ("Python int too large") or islice's.
_MAX_COUNT = 2**31 - 1
_MAX_SEED = 2**63 - 1  # the hash seed is mixed as a 64-bit word
MINHASH_SCHEMES = ("oph", "multiply-shift")  # core/minhash.py signs with each
SHINGLE_KINDS = ("char", "word")
# Each changed normalize()'s output for some input; stores pin theirs, because shingles of
# two versions are not comparable. 2: a '<' where no tag stands is text (core/markup.py).
NORMALIZER_VERSIONS = (1, 2)
_AT_LEAST_ONE = ("shingle_size", "num_perm", "max_matches", "max_candidates",
                 "max_message_bytes", "poll_max_records", "commit_every", "topic_partitions")


def cache_root() -> Path:
    """``$STREAMDEDUP_CACHE`` or ``~/.cache/streamdedup``: outside the repo, shared by runs.

    Not a ``Settings`` field, because no detector setting depends on it: the replay keeps its
    ground truth there and the development harness its Kafka jars."""
    env = os.environ.get(ENV_PREFIX + "CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "streamdedup"


_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000,
             "w": 604_800_000}
_LONGEST_MS = 36_500 * 86_400_000
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration(text: str) -> int | None:
    """``60d``, ``12h``, ``1d12h``, ``90m``, ``30s`` -> milliseconds; '' -> None (off)."""
    text = text.strip().lower()
    if not text:
        return None
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        raise ConfigError(f"retention must be a duration such as 60d, 12h or 1d12h (units ms, "
                          f"s, m, h, d, w), not {text!r}")
    total = round(sum(float(n) * _UNITS_MS[u] for n, u in parts))
    if total <= 0:
        raise ConfigError(f"retention must be longer than 0, not {text!r}")
    if total > _LONGEST_MS:  # the cutoff (clock - window) left SQLite's 64-bit integers
        raise ConfigError(f"retention must be at most 100 years (36500d), not {text!r}; '' "
                          "keeps everything")
    return total


def _opt(default: Any, help: str, *, group: str, secret: bool = False) -> Any:
    return field(default=default, repr=not secret,
                 metadata={"help": help, "group": group, "secret": secret})


@dataclass(frozen=True)
class Settings:
    """Everything that configures the detector, its store and the Kafka service."""

    # --- text: which fields, and how they are normalized (the study's steps, each switchable)
    text_fields: tuple[str, ...] = _opt(
        ("title", "description"), "message fields joined to form the text", group="text"
    )
    id_field: str = _opt(
        "id", "the dump column, message key or Scrapy item field holding each ad's id, e.g."
        " link; where it is blank or missing, the ad's 'id', else one made from its content."
        " A TSV without an id column numbers its rows", group="text")
    strip_html: bool = _opt(True, "turn HTML into plain text", group="text")
    normalizer_version: int = _opt(
        NORMALIZER_VERSIONS[-1], "2 reads a '<' where no HTML tag stands as text; 1 (stores "
        "made before 2 was the default) drops the words after it, as an HTML parser does",
        group="text")
    lowercase: bool = _opt(True, "lowercase the text", group="text")
    strip_punctuation: bool = _opt(True, "replace punctuation by spaces", group="text")
    strip_digits: bool = _opt(True, "replace digits by spaces", group="text")
    fold_accents: bool = _opt(False, "remove accents (è -> e)", group="text")
    stopwords: str = _opt(
        "it", "stopword language (ISO 639-1 code) or path to a word-per-line file; '' = none",
        group="text",
    )
    stem_language: str = _opt(
        "italian", "Snowball stemmer language; '' = no stemming", group="text"
    )
    # --- shingles and sketches
    shingle_kind: str = _opt("char", "'char' k-shingles or 'word' n-grams", group="sketch")
    shingle_size: int = _opt(10, "k for char shingles, n for word n-grams", group="sketch")
    num_perm: int = _opt(128, "MinHash permutations (signature rows)", group="sketch")
    minhash: str = _opt(
        "oph", "signature scheme: 'oph' (one permutation, densified: 6x faster) or "
        "'multiply-shift' (one hash per row: stores made before 'oph' was the default)",
        group="sketch")
    seed: int = _opt(1, "seed of the MinHash permutations", group="sketch")
    threshold: float = _opt(0.8, "Jaccard similarity that makes a duplicate", group="sketch")
    bands: int = _opt(0, "LSH bands; 0 = chosen from the threshold", group="sketch")
    rows: int = _opt(0, "LSH rows per band; 0 = chosen from the threshold", group="sketch")
    max_matches: int = _opt(10, "verified matches listed per verdict", group="sketch")
    max_candidates: int = _opt(
        2000, "distinct candidate sets verified per document (most band hits first)",
        group="sketch",
    )
    # --- store
    store: str = _opt("streamdedup-store", "store directory (SQLite backend)", group="store")
    store_backend: str = _opt(
        "sqlite", "'sqlite' (a directory), 'redis' (a server: --redis-url) or 'memory'",
        group="store")
    redis_url: str = _opt(
        "", "redis://host:port/db of the Redis store (rediss:// for TLS; a password in it is "
        "never logged: pass it by the environment)", group="store", secret=True)
    redis_namespace: str = _opt("streamdedup", "prefix of the Redis store's keys",
                                group="store")
    redis_cluster: bool = _opt(False, "--redis-url names a node of a Redis Cluster",
                               group="store")
    # --- retention (store/retention in docs/RETENTION.md)
    retention: str = _opt(
        "", "keep documents this long after their announcement time, measured from the newest "
        "time seen (e.g. 60d, 12h, 1d12h); '' = forever", group="retention")
    time_field: str = _opt(
        "timestamp", "message field holding the announcement time (ISO 8601 or epoch seconds;"
        " else the Kafka record time, else the newest time seen, else the wall clock); read"
        " only with --retention, and by backfill --order-by timestamp",
        group="retention")
    # --- Kafka service
    bootstrap_servers: str = _opt("127.0.0.1:9092", "Kafka bootstrap servers", group="kafka")
    group_id: str = _opt("streamdedup", "consumer group id", group="kafka")
    input_topic: str = _opt("jobs", "topic of incoming announcements", group="kafka")
    output_topic: str = _opt("jobs.duplicates", "topic of verdicts", group="kafka")
    dlq_topic: str = _opt("jobs.dlq", "topic of dead letters", group="kafka")
    create_topics: bool = _opt(True, "create missing topics at start", group="kafka")
    topic_partitions: int = _opt(1, "partitions of topics created at start", group="kafka")
    session_timeout_ms: int = _opt(
        10_000, "group session timeout: how soon a crashed consumer's partitions move on",
        group="kafka",
    )
    group_instance_id: str = _opt(
        "", "static group membership: a name unique to this consumer in its group (its host "
        "or pod name); a restart then takes its partitions back at once instead of after the "
        "session timeout, and a clean stop no longer hands them on until then; '' = dynamic",
        group="kafka")
    only_duplicates: bool = _opt(False, "emit verdicts for duplicates only", group="kafka")
    max_message_bytes: int = _opt(
        1 << 20, "larger announcements are refused as 'oversized': a dead letter in run, a bad "
        "row in check and backfill, not sent by produce (a dump row measured as the message "
        "produce sends)", group="kafka")
    max_output_bytes: int = _opt(
        1_000_000, "largest verdict or dead-letter record written: at most the output topics' "
        "max.message.bytes (Kafka's default 1,048,588)", group="kafka")
    poll_max_records: int = _opt(500, "records per poll (one batch)", group="kafka")
    commit_every: int = _opt(2000, "commit after this many messages ...", group="kafka")
    commit_interval_s: float = _opt(
        0.005, "... or after this many seconds (verdicts wait for the checkpoint)", group="kafka"
    )
    security_protocol: str = _opt(
        "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", group="kafka"
    )
    sasl_mechanism: str = _opt("", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (with a SASL_* "
                               "protocol)", group="kafka")
    sasl_username: str = _opt("", "SASL user name", group="kafka", secret=True)
    sasl_password: str = _opt("", "SASL password (use the environment)", group="kafka",
                              secret=True)
    ssl_cafile: str = _opt("", "CA bundle for SSL", group="kafka")
    ssl_certfile: str = _opt("", "client certificate for SSL", group="kafka")
    ssl_keyfile: str = _opt("", "client key for SSL", group="kafka", secret=True)
    # --- operations
    metrics_host: str = _opt("127.0.0.1", "address of the metrics/health server", group="ops")
    metrics_port: int = _opt(9464, "port of the metrics/health server; 0 = off", group="ops")
    log_json: bool = _opt(False, "structured JSON logs", group="ops")
    log_level: str = _opt("INFO", "log level", group="ops")
    log_every_s: float = _opt(10.0, "seconds between throughput log lines", group="ops")
    sketch_ahead: bool = _opt(
        True, "sketch ahead in a second process, same verdicts: check the next batch (~1.5x on"
        " fresh ads, two cores), run the next part of a big batch (~1.1x)", group="ops")
    # --- the monitor (streamdedup monitor)
    monitor_host: str = _opt("127.0.0.1", "address the monitor's web page binds to",
                             group="monitor")
    monitor_port: int = _opt(8088, "port of the monitor's web page", group="monitor")
    monitor_token: str = _opt("", "token the monitor's API asks for (needed when it binds "
                              "beyond loopback)", group="monitor", secret=True)
    monitor_hosts: tuple[str, ...] = _opt(
        (), "Host names a monitor without a token answers besides loopback ones (as a proxy "
        "in front sends them; '*' = any): a page elsewhere could point its own name at "
        "127.0.0.1 and read the ads through a visitor's browser", group="monitor")

    def __post_init__(self) -> None:
        """Refuse what cannot work, with the setting's name: an operator's typo must stop the
        process at once with one line, not retry forever or fail deep inside a library."""
        if not self.retention.strip():  # ' ' read as off, though its truth turned times on:
            object.__setattr__(self, "retention", "")  # 300 of 300 rows were bad_time
        if self.shingle_kind not in SHINGLE_KINDS:
            raise ConfigError(f"shingle_kind must be 'char' or 'word', not {self.shingle_kind!r}")
        if self.minhash not in MINHASH_SCHEMES:
            raise ConfigError(f"minhash must be 'oph' or 'multiply-shift', not {self.minhash!r}")
        if self.normalizer_version not in NORMALIZER_VERSIONS:
            raise ConfigError(f"normalizer_version must be 1 or 2, not "
                              f"{self.normalizer_version}")
        for name in _AT_LEAST_ONE:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, not {getattr(self, name)}")
        if self.num_perm > MAX_NUM_PERM:
            raise ConfigError(f"num_perm must be <= {MAX_NUM_PERM}, not {self.num_perm}")
        if not 0.0 < self.threshold <= 1.0:
            raise ConfigError(f"threshold must be in (0, 1], not {self.threshold}")
        if self.bands < 0 or self.rows < 0:
            raise ConfigError(f"bands and rows must be >= 0 (0 = chosen), not {self.bands} "
                              f"and {self.rows}")
        if (self.bands == 0) != (self.rows == 0):
            raise ConfigError("give both bands and rows, or neither (then the threshold decides)")
        if self.bands * self.rows > self.num_perm:
            raise ConfigError(
                f"bands x rows = {self.bands * self.rows} exceeds num_perm = {self.num_perm}"
            )
        if self.store_backend not in ("sqlite", "memory", "redis"):
            raise ConfigError(f"store_backend must be 'sqlite', 'redis' or 'memory', not "
                              f"{self.store_backend!r}")
        if self.store_backend == "redis" and not self.redis_url:
            raise ConfigError("store_backend 'redis' needs redis_url (redis://host:port/db)")
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", self.redis_namespace):
            raise ConfigError(f"redis_namespace must be 1-64 letters, digits, '_', '.' or '-' "
                              f"(it becomes a Redis Cluster hash tag), not "
                              f"{self.redis_namespace!r}")
        if not self.text_fields:
            raise ConfigError("text_fields must name at least one field")
        twice = sorted({f for f in self.text_fields if self.text_fields.count(f) > 1})
        if twice:  # title,title was taken without a word
            raise ConfigError(f"text_fields names {', '.join(map(repr, twice))} twice")
        if not self.id_field.strip():
            raise ConfigError("id_field must name a column (default 'id')")
        if not MIN_SESSION_TIMEOUT_MS <= self.session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            raise ConfigError(
                f"session_timeout_ms must be in [{MIN_SESSION_TIMEOUT_MS}, "
                f"{MAX_SESSION_TIMEOUT_MS}] (Kafka brokers refuse other values by default), "
                f"not {self.session_timeout_ms}")
        for name in ("input_topic", "output_topic", "dlq_topic", "group_instance_id"):
            value = getattr(self, name)
            off = name == "group_instance_id" and not value  # '' = a dynamic member
            if not off and not _is_kafka_name(value):
                raise ConfigError(f"{name} must be 1-249 letters, digits, '.', '_' or '-' (not "
                                  f"'.' or '..'), as Kafka names are, not {value!r}")
        if self.input_topic in (self.output_topic, self.dlq_topic):
            # Each verdict or dead letter would be read again and dead-lettered: a loop that
            # wrote ~25 MB/s until the disk was full.
            raise ConfigError(f"input_topic {self.input_topic!r} must differ from output_topic "
                              "and dlq_topic")
        if self.output_topic == self.dlq_topic:
            # Whoever reads the duplicates topic would get dead letters among the verdicts
            # (the monitor counted each as an unreadable verdict).
            raise ConfigError(f"output_topic and dlq_topic must differ (both "
                              f"{self.output_topic!r})")
        ports = [_split_address(a)[1] for a in self.bootstrap_servers.split(",") if a.strip()]
        if not ports or any(p is not None and not (p.isdigit() and 1 <= int(p) <= 65535)
                            for p in ports):
            raise ConfigError(f"bootstrap_servers must be host[:port][,host[:port]...] with "
                              f"ports in [1, 65535], not {self.bootstrap_servers!r}")
        if not 1 <= self.monitor_port <= 65535:
            raise ConfigError(f"monitor_port must be in [1, 65535], not {self.monitor_port}")
        for name in self.monitor_hosts:
            if not (re.fullmatch(r"\*|[A-Za-z0-9._-]+", name) or _is_ipv6(name)):
                raise ConfigError(f"monitor_hosts must be host names or addresses (no port), "
                                  f"or '*', not {name!r}")
        if not 0 <= self.metrics_port <= 65535:
            raise ConfigError(f"metrics_port must be in [0, 65535] (0 = off), not "
                              f"{self.metrics_port}")
        if self.log_level.upper() not in LOG_LEVELS:
            raise ConfigError(f"log_level must be one of {', '.join(LOG_LEVELS)}, not "
                              f"{self.log_level!r}")
        if self.security_protocol.upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)},"
                              f" not {self.security_protocol!r}")
        self._check_sasl()
        if self.max_output_bytes < MIN_OUTPUT_BYTES:
            raise ConfigError(f"max_output_bytes must be >= {MIN_OUTPUT_BYTES} (room for a "
                              f"verdict with long ids), not {self.max_output_bytes}")
        if parse_duration(self.retention) is not None and self.store_backend == "redis" \
                and self.redis_cluster:
            raise ConfigError(
                "retention on Redis takes one server and one writer (its commits are one "
                "MULTI/EXEC); a Redis Cluster serves consumer groups, whose shared protocol "
                "does not evict yet: use one redis-server, or no --retention")
        for f in fields(self):  # nan passed every comparison below and held verdicts back
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{f.name} must be a finite number, not {value}")
            top = _MAX_SEED if f.name == "seed" else _MAX_COUNT
            if isinstance(value, int) and not isinstance(value, bool) and value > top:
                raise ConfigError(f"{f.name} must be <= {top}, not {value}")
        if self.commit_interval_s < 0:
            raise ConfigError(f"commit_interval_s must be >= 0, not {self.commit_interval_s}")
        if self.log_every_s <= 0:
            raise ConfigError(f"log_every_s must be > 0, not {self.log_every_s}")
        if not self.group_id.strip():  # the broker refused it at every poll, forever
            raise ConfigError("group_id must not be empty")

    def _check_sasl(self) -> None:
        """kafka-python takes a SASL setup it cannot use and fails only at each connection:
        a mechanism without a SASL protocol was ignored (plain text, no authentication), and
        a SASL protocol without a mechanism, a mechanism in lower case or without a user
        name and password failed every handshake, retried for as long as the consumer ran."""
        sasl = self.security_protocol.upper().startswith("SASL_")
        mechanism = self.sasl_mechanism.upper()
        if mechanism and mechanism not in SASL_MECHANISMS:
            raise ConfigError(f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}, "
                              f"not {self.sasl_mechanism!r}")
        if sasl and not mechanism:
            raise ConfigError(f"security_protocol {self.security_protocol} needs a "
                              f"sasl_mechanism ({', '.join(SASL_MECHANISMS)})")
        if mechanism and not sasl:
            raise ConfigError(f"sasl_mechanism {self.sasl_mechanism} needs security_protocol "
                              f"SASL_PLAINTEXT or SASL_SSL, not {self.security_protocol}: "
                              f"without it nothing authenticates")
        if mechanism and not (self.sasl_username and self.sasl_password):
            raise ConfigError(f"sasl_mechanism {self.sasl_mechanism} needs sasl_username and "
                              f"sasl_password (pass them by environment: "
                              f"{ENV_PREFIX}SASL_USERNAME, {ENV_PREFIX}SASL_PASSWORD)")

    @property
    def retention_ms(self) -> int | None:
        """The retention window in milliseconds, or None (keep forever)."""
        return parse_duration(self.retention)

    @property
    def read_time_field(self) -> str:
        """The field announcement times are read from: ``time_field`` with retention on, ''
        (not read, so no time can make a message a dead letter) with it off."""
        return self.time_field if self.retention else ""

    def topic_flag(self, topic: str) -> str:
        """The flag that names ``topic``: what `tail` and `explain` point at when the broker
        does not have it (most likely a flag that is not the detector's)."""
        name = {self.input_topic: "input_topic", self.dlq_topic: "dlq_topic"}.get(
            topic, "output_topic")
        return flag_name(name)

    def to_env(self) -> dict[str, str]:
        """Every field as the variable that builds it again: ``build_settings(env=...)``
        gives these settings back (a replay's consumer is started with them)."""
        return {env_name(f.name): _env_text(getattr(self, f.name))
                for f in dataclasses.fields(self)}

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    def public(self) -> dict[str, Any]:
        """Settings as a dict with secrets masked: safe to log."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = "***" if f.metadata.get("secret") and value else value
        return out


PRESETS: dict[str, dict[str, Any]] = {
    # The original study's setup on the Kijiji dump (GianRomani/LSH).
    "reference": {
        "text_fields": ("description",),
        "strip_html": True,
        "strip_punctuation": True,
        "strip_digits": True,
        "stopwords": "it",
        "stem_language": "italian",
        "shingle_kind": "char",
        "shingle_size": 10,
        "num_perm": 100,
        "bands": 20,
        "rows": 5,
        "threshold": 0.8,
    },
    # What we recommend for live job ads: title and description, bands chosen for recall.
    "default": {},
    # Word 3-grams, as in the MD5/Jaccard study; English text.
    "words-en": {
        "shingle_kind": "word",
        "shingle_size": 3,
        "stopwords": "en",
        "stem_language": "english",
    },
}


def preset_summary(name: str) -> str:
    """What a preset changes, in a few words for ``--help`` (written from ``PRESETS``, so the
    help cannot drift from it): ``words-en`` is "word 3-grams, en stopwords, english stems"."""
    given = PRESETS[name].keys()
    if not given:
        return "the defaults"
    p: dict[str, Any] = {f.name: f.default for f in fields(Settings)} | PRESETS[name]
    p["text_fields"] = ", ".join(p["text_fields"])
    phrases = (("text_fields", "{text_fields} only"),
               ("shingle_kind shingle_size", "{shingle_kind} {shingle_size}-grams"),
               ("stopwords", "{stopwords} stopwords"), ("stem_language", "{stem_language} stems"),
               ("num_perm", "{num_perm} permutations"), ("bands rows", "{bands}x{rows} bands"),
               ("threshold", "threshold {threshold}"))
    return ", ".join(text.format(**p) for keys, text in phrases if given & set(keys.split()))


def env_name(name: str) -> str:
    """The environment variable of setting ``name`` (or of ``preset``)."""
    return ENV_PREFIX + name.upper()


def flag_name(name: str) -> str:
    """The command-line flag of setting ``name``: ``max_message_bytes`` ->
    ``--max-message-bytes``."""
    return "--" + name.replace("_", "-")


def setting_named(name: str) -> str:
    """A setting as a message found wrong when it is used names it, where which of its flag
    and variable gave the value is no longer known ("no stopword list for language 'xx'"
    named neither)."""
    return f"{flag_name(name)} (or {env_name(name)})"


def field_name(flag: str) -> str:
    """The setting a flag names: ``flag_name`` undone."""
    return flag.removeprefix("--").replace("-", "_")


def _env_text(value: Any) -> str:
    """A field's value as the environment string ``_parse`` reads back to it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return repr(value) if isinstance(value, float) else str(value)


def switch_value(raw: str) -> bool | None:
    """A boolean variable's value: True, False, or None for a string that is neither."""
    low = raw.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    return None


def _parse(f: dataclasses.Field[Any], raw: str) -> Any:
    """Turn an environment string into the field's type (``_env_text`` is its inverse)."""
    kind: Any = type(f.default)
    if kind is bool:
        value = switch_value(raw)
        if value is None:
            raise ConfigError(f"{env_name(f.name)}: expected a boolean, got {raw!r}")
        return value
    if kind is tuple:
        return split_commas(raw)
    try:
        return kind(raw)
    except ValueError as exc:
        raise ConfigError(
            f"{env_name(f.name)}: expected {kind.__name__}, got {raw!r}"
        ) from exc


def _is_kafka_name(name: str) -> bool:
    """What Kafka takes as a topic or group instance name: 1-249 of [A-Za-z0-9._-], not '.'
    or '..'."""
    return re.fullmatch(r"[A-Za-z0-9._-]{1,249}", name) is not None and name not in (".", "..")


def _is_ipv6(text: str) -> bool:
    """``::1`` or ``[::1]``: an address a Host header may name (with its brackets)."""
    try:
        return isinstance(ipaddress.ip_address(text.removeprefix("[").removesuffix("]")),
                          ipaddress.IPv6Address)
    except ValueError:
        return False


def split_commas(raw: str) -> tuple[str, ...]:
    """A list setting as a flag or a variable gives it: comma-separated, blanks dropped."""
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _split_address(address: str) -> tuple[str, str | None]:
    """One bootstrap address as kafka-python reads it (an optional scheme://, [IPv6]:port, a
    bare IPv6 address, host:port): its host and its port, None when none is given (9092)."""
    address = re.sub(r"^[A-Za-z_]+://", "", address.strip())
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        return host, (rest[1:] if rest.startswith(":") else (rest or None))
    if address.count(":") > 1:  # an IPv6 address without brackets takes no port
        return address, None
    host, colon, port = address.rpartition(":")
    return (host, port) if colon else (port, None)


def broker_addresses(servers: str) -> list[tuple[str, int]]:
    """The (host, port) pairs of valid ``bootstrap_servers``, for a look at whether anything
    listens (``replay`` split them on its own, so 'localhost' and 'PLAINTEXT://host:9092',
    accepted here, were "no Kafka broker answers")."""
    pairs = [_split_address(a) for a in servers.split(",") if a.strip()]
    return [(host, int(port) if port else 9092) for host, port in pairs]


# Variables of the prefix that are no Settings field: read elsewhere (the preset above, the
# cache beside it, and the development harness's), so not typos.
OTHER_VARIABLES = frozenset({"PRESET", "CACHE", "KIJIJI", "SKIP_KAFKA_FETCH"})
_WARNED: set[str] = set()


def unknown_variables(env: Mapping[str, str]) -> list[str]:
    """A line for each ``STREAMDEDUP_*`` variable that nothing reads, with the setting it
    was likely meant to be (``STREAMDEDUP_TRESHOLD`` was silently ignored)."""
    names = [f.name.upper() for f in fields(Settings)]
    found = []
    for var in sorted(env):
        name = var[len(ENV_PREFIX):]
        if (not var.startswith(ENV_PREFIX) or name in names or name in OTHER_VARIABLES
                or name.startswith("TEST_")):
            continue
        close = difflib.get_close_matches(name, names, n=1)
        found.append(f"{var} is not a setting and is ignored"
                     + (f" (did you mean {ENV_PREFIX}{close[0]}?)" if close else ""))
    return found


def build_settings(
    preset: str | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults, then the preset, then ``STREAMDEDUP_*`` variables, then explicit overrides."""
    env = os.environ if env is None else env
    for line in unknown_variables(env):
        if line not in _WARNED:  # once a process (replay builds settings twice)
            _WARNED.add(line)
            log.warning(line)
    preset = preset or env.get(env_name("preset")) or "default"
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; known: {', '.join(sorted(PRESETS))}")
    values: dict[str, Any] = dict(PRESETS[preset])
    given: dict[str, Any] = {}
    for f in fields(Settings):
        raw = env.get(env_name(f.name))
        if raw is not None and not raw.strip() and type(f.default) in (bool, int, float):
            # `STREAMDEDUP_NUM_PERM=` (an .env file's blank line for it) was refused as no
            # integer; it says "not set" there, as click reads an empty variable.
            line = f"{env_name(f.name)} is empty: its default is used"
            if line not in _WARNED:
                _WARNED.add(line)
                log.warning(line)
        elif raw is not None:
            given[f.name] = _parse(f, raw)
    given.update({name: value for name, value in (overrides or {}).items() if value is not None})
    moved = [k for k in ("threshold", "num_perm") if k in given and k in values
             and given[k] != values[k]]
    if moved and not {"bands", "rows"} & set(given):
        # A preset's bands were chosen for its threshold and permutations: reference's 20x5
        # kept at --threshold 0.5 made P(candidate | s=0.5) 0.47. Chosen again for the new.
        values.pop("bands", None)
        values.pop("rows", None)
    values.update(given)
    known = {f.name for f in fields(Settings)}
    unknown = set(values) - known
    if unknown:
        raise ConfigError(f"unknown settings: {', '.join(sorted(unknown))}")
    return Settings(**values)
