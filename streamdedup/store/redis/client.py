"""Connecting to Redis (one server or a Redis Cluster), where the store's keys live, and
Redis errors turned into the store's.

Keys of namespace ``ns`` fall in two groups::

    {ns}:...   the ledger: meta, writer, seq, docs, ver, verof, dtime, stime, pos, set:<id>,
               mem:<id>, edges:<id>, into:<id>, crowded, counts, bsize, bk:<id>, claimed,
               joined, left (each described in ``store.py``). The hash tag puts them all
               in one slot, so the Lua scripts that hand out arrival numbers and merge
               clusters run atomically on one node.
    {ns:b<shard>}:<key> and ns:sh:<id>
               the index: band buckets (in 32 shards, hashed from the key) and shingle
               blobs, spread over a cluster's masters. They are most of the memory (a
               distinct set of ~300 shingles is 2.4 KB of blob and ~24 bucket entries), and
               what a probe fans out to: one Lua call per shard, one pipeline per node.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from streamdedup.errors import ConfigError, StoreError, StoreUnavailableError
from streamdedup.extras import require

redis = require("redis", "the Redis store")
log = logging.getLogger(__name__)

TIMEOUT_S = 30
BUCKET_SHARDS = 32  # bucket slots: spread over a cluster's masters, few calls per batch
CONNECT_TIMEOUT_S = 10


class Keys:
    """Key names of one namespace."""

    def __init__(self, namespace: str) -> None:
        self.ledger = f"{{{namespace}}}:"
        self.index = f"{namespace}:"

    def __call__(self, *parts: object) -> str:
        """A ledger key."""
        return self.ledger + ":".join(map(str, parts))

    def shard(self, key: int) -> int:
        return key % BUCKET_SHARDS

    def bucket(self, key: int) -> str:
        """``{ns:b<shard>}:<key>``: the keys of one shard share a hash slot, so one Lua call
        reads or writes all of a batch's keys of that shard on a cluster too."""
        return f"{{{self.index}b{self.shard(key)}}}:{key}"

    def shingles(self, set_id: int) -> str:
        return f"{self.index}sh:{set_id}"

    def patterns(self) -> tuple[str, ...]:
        """SCAN patterns that match every key of the namespace and no other namespace's (a
        namespace holds no ':', so ``{ns:b*`` cannot reach ``{ns2:b``)."""
        return (self.ledger + "*", "{" + self.index + "b*", self.index + "sh:*")


def connect(url: str, cluster: bool = False, writer: bool = True) -> Any:
    """A client that answered PING; ConfigError for a URL that cannot work, and
    StoreUnavailableError (password hidden) when nothing answers. A ``writer`` is warned
    when Redis does not fsync each write (a reader commits nothing it could lose)."""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(f"redis_url must be redis://host:port/db (or rediss://), not "
                          f"{safe_url(url)!r}")
    if cluster and url.startswith("unix://"):
        raise ConfigError("a Redis Cluster is reached by redis://host:port, not a unix socket")
    _check_url(url)
    if cluster:  # redis-py's cluster client drops the options it does not take, silently
        _check_cluster_options(url)
    options = {"socket_timeout": TIMEOUT_S, "socket_connect_timeout": CONNECT_TIMEOUT_S}
    try:
        if cluster:
            client = redis.cluster.RedisCluster.from_url(url, **options)
        else:
            client = redis.Redis.from_url(url, **options)
        client.ping()
        clustered = not cluster and client.info("cluster").get("cluster_enabled") == 1
    except ValueError:  # redis-py's own reading of the URL (its words may quote a password)
        raise ConfigError(f"redis_url {safe_url(url)!r} cannot be read") from None
    except TypeError as exc:  # a query option redis-py does not know reaches its connection
        name = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
        raise ConfigError(f"redis_url {safe_url(url)!r} has an option redis-py does not know"
                          + (f": {name.group(1)!r}" if name else "")) from None
    except redis.exceptions.RedisClusterException as exc:  # not a RedisError
        if "Cluster mode is not enabled" in str(exc):
            raise ConfigError(f"Redis at {safe_url(url)} is not a Redis Cluster: drop "
                              "--redis-cluster") from None
        if "can only be 0 in cluster mode" in str(exc):
            raise ConfigError(f"redis_url {safe_url(url)!r} names a database, and a Redis "
                              "Cluster has one: end the URL in /0 or at the port") from None
        raise StoreUnavailableError(f"Redis Cluster at {safe_url(url)} cannot be used: "
                                    f"{exc}") from exc
    except (redis.AuthenticationError, redis.exceptions.AuthorizationError) as exc:
        # a setting, not an outage (redis-py's are ConnectionErrors): retried, a wrong
        # password kept `run` waiting, never ready, for as long as it ran
        raise ConfigError(f"Redis at {safe_url(url)} refused the user name or password "
                          f"of redis_url: {exc}") from None
    except redis.RedisError as exc:
        if "DB index is out of range" in str(exc):  # a setting, as a bad port is (exit 2)
            raise ConfigError(f"redis_url {safe_url(url)!r} names a database this server "
                              "does not have (its `databases` setting; 16 by default: "
                              "/0 to /15)") from None
        tls = (" (rediss:// speaks TLS, and a server without it never answers the "
               "handshake: is it redis://?)" if url.startswith("rediss://") and isinstance(
                   exc, redis.TimeoutError) else "")  # (not "refused": nothing answered)
        raise StoreUnavailableError(f"Redis at {safe_url(url)} cannot be used: "
                                    f"{type(exc).__name__}: {exc}{tls}") from exc
    if clustered:
        client.close()
        raise ConfigError(f"Redis at {safe_url(url)} is a node of a Redis Cluster: add "
                          "--redis-cluster (STREAMDEDUP_REDIS_CLUSTER=true)")
    if writer:
        _warn_if_not_durable(client, url)
    return client


def _check_url(url: str) -> None:
    """What redis-py would take silently or raise a ValueError for: a port out of range, a
    database that is not a number (``/abc`` became database 0)."""
    from urllib.parse import parse_qs, unquote, urlsplit

    if url.startswith("unix://"):
        return
    # The messages quote nothing of the URL but what safe_url shows: a password with a '/'
    # or a '?' in it would otherwise be read as the port or the path, and echoed.
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises for a port out of range or not a number)
    except ValueError:
        raise ConfigError(f"redis_url {safe_url(url)!r} cannot be read: its port is not a "
                          "number in [0, 65535], or its host is not one (a password with "
                          "'/', '?' or '#' in it must be %-encoded)") from None
    db = unquote(parts.path).strip("/")
    if db and not db.isdigit() and "db" not in parse_qs(parts.query):
        raise ConfigError(f"redis_url {safe_url(url)!r}: the database after the last '/' must "
                          "be a number (redis://host:port/0)")


def _check_cluster_options(url: str) -> None:
    from urllib.parse import parse_qs, urlsplit

    unknown = sorted(set(parse_qs(urlsplit(url).query)) - set(redis.cluster.REDIS_ALLOWED_KEYS))
    if unknown:
        raise ConfigError(f"redis_url {safe_url(url)!r} has an option redis-py does not know "
                          f"for a cluster: {', '.join(map(repr, unknown))}")


def _warn_if_not_durable(client: Any, url: str) -> None:
    """Offsets are committed once Redis has answered; only with AOF and ``appendfsync
    always`` has it also written the answer to disk (see the README on what a crash loses)."""
    try:
        conf = client.config_get("append*")
    except redis.RedisError:
        return  # CONFIG may be renamed or forbidden on managed servers: nothing to check
    if isinstance(conf, dict) and conf and not all(isinstance(v, str) for v in conf.values()):
        conf = next(iter(conf.values()))  # a cluster answers per node
    if conf.get("appendonly") != "yes" or conf.get("appendfsync") != "always":
        log.warning("Redis at %s runs with appendonly=%s appendfsync=%s: a Redis crash can "
                    "lose writes whose offsets are committed; use appendonly yes, "
                    "appendfsync always", safe_url(url), conf.get("appendonly"),
                    conf.get("appendfsync"))


def ping(r: Any) -> None:
    """PING the server, or every master of a cluster: redis-py asks one node, whose PONG
    said nothing of a master down (the consumer's wait for the store returned at once, and
    it logged "retrying in 30.0s" every second)."""
    if isinstance(r, redis.RedisCluster):
        call(r.ping, target_nodes=redis.RedisCluster.PRIMARIES)
    else:
        call(r.ping)


def run_ids(r: Any) -> frozenset[str]:
    """The run id of a server, or of each master of a cluster (redis-py asks one node of a
    cluster unless told): new at every start."""
    if isinstance(r, redis.RedisCluster):
        info = call(r.info, "server", target_nodes=redis.RedisCluster.PRIMARIES)
    else:
        info = call(r.info, "server")
    if "run_id" in info:
        return frozenset({str(info["run_id"])})
    return frozenset(str(node.get("run_id")) for node in info.values() if isinstance(node, dict))


MESSAGE_CHARS = 300  # of a Redis error in a message or a log line


def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """One Redis call; a failure becomes StoreUnavailableError (connection) or StoreError."""
    try:
        return fn(*args, **kwargs)
    except redis.RedisError as exc:
        error = store_error(exc)
        # WRONGTYPE names no key: ours are "{namespace}:name" (after a script or a command)
        key = next((a for a in args if isinstance(a, str) and a.startswith("{") and "}:" in a),
                   None)
        if "WRONGTYPE" in str(exc) and key is not None:
            error = type(error)(f"{error} (key {key}: another program's? Give another "
                                "--redis-namespace)")
        raise error from exc


def store_error(exc: Exception) -> StoreError:
    """A Redis failure as the store contract names it: unavailable (retried by the consumer)
    when the server is away, still loading its data, or a cluster is moving slots (a script
    meeting a key already moved says "non local key": a reshard stopped `backfill` with it;
    redis-py gives up redirecting to a slot half moved after 16 tries: "TTL exhausted")."""
    text = str(exc)  # a failed pipeline's names its command, with a set's shingles in bytes
    text = text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "…"
    message = f"Redis: {type(exc).__name__}: {text}"
    # By class too: redis-py takes the CLUSTERDOWN word off the message of the error it
    # raises for it, so a member started while its cluster was down exited instead of waiting.
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError | redis.BusyLoadingError
                  | redis.exceptions.ClusterDownError | redis.exceptions.TryAgainError) or any(
            word in str(exc) for word in ("LOADING", "CLUSTERDOWN", "TRYAGAIN", "STOREGONE",
                                          "non local key", "TTL exhausted")):
        return StoreUnavailableError(message)
    return StoreError(message)


def safe_url(url: str) -> str:
    """The URL without a password, for messages and logs: the one before ``@`` and the one
    redis-py also takes as ``?password=`` (that one was printed and logged)."""
    url = re.sub(r"([?&]password=)[^&#]*", r"\1***", url, flags=re.IGNORECASE)
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest.rpartition('@')[2]}"
