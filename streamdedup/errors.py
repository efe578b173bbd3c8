"""Every error streamdedup raises on purpose, under one root.

    StreamdedupError
    ├── ConfigError            bad settings or flags; the process should not start
    │   └── MissingExtraError      an optional dependency is not installed (names the extra)
    ├── StoreError             the store cannot be used
    │   ├── StoreUnavailableError  a store server cannot be reached now (retrying may help)
    │   │   └── StoreRestartedError    it restarted under a dump's judging (may have lost writes)
    │   ├── StoreLockedError       another process has the store open for writing
    │   ├── StoreParamsError       the store was built with other sketch parameters
    │   └── StoreCorruptError      the store file is damaged or not a streamdedup store
    ├── InputError             a whole input file cannot be read (missing, wrong format)
    ├── BackfillError          the backfill's engine (Spark) failed
    └── MessageError           one message cannot be used; becomes a dead letter, never a crash

Per-message problems are ``MessageError`` with a short machine-readable ``reason`` so the
dead-letter record can say why; everything else stops the process with a clear message.
Three signals of the consumer are not under this root: the checkpoint's
``CheckpointFailed`` (rewound, retried) and ``BrokerRefused`` (an exit status) never leave
it; ``StoppedWhileConnecting`` (a stop before the broker first answered) reaches `run`,
which exits quietly.
"""

from __future__ import annotations


class StreamdedupError(Exception):
    """Root of streamdedup's own errors."""


class ConfigError(StreamdedupError):
    """Settings that cannot work together or cannot be parsed."""


class MissingExtraError(ConfigError):
    """A feature needs an optional dependency; the message says which extra installs it."""


class StoreError(StreamdedupError):
    """The store cannot be opened or written."""


class StoreUnavailableError(StoreError):
    """The store's server does not answer; a consumer retries, and so do `check` and
    `backfill` (for two minutes)."""


class StoreRestartedError(StoreUnavailableError):
    """The store's server restarted while `check` or `backfill` judged a dump: it may have
    come back from an older copy, so the command stops (the same command again goes on)."""


class StoreLockedError(StoreError):
    """A second writer would corrupt the store, so it is refused."""


class StoreParamsError(StoreError):
    """Signatures from other parameters are not comparable with the stored ones."""


class StoreCorruptError(StoreError):
    """The store's files are damaged; refusing beats giving silent wrong verdicts."""


class InputError(StreamdedupError):
    """An input file as a whole cannot be read."""


class BackfillError(StreamdedupError):
    """The distributed engine of a backfill failed (after its own task retries)."""


class MessageError(StreamdedupError):
    """One message cannot be turned into a document."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail

    def __reduce__(self) -> tuple[type[MessageError], tuple[str, str]]:
        """Pickled as made (a bad row crosses from ``check``'s reading process)."""
        return type(self), (self.reason, self.detail)


def describe(exc: BaseException) -> str:
    """``Name: text`` for a message; kafka-python's errors name themselves already (the
    message said "KafkaTimeoutError: KafkaTimeoutError: Unable to bootstrap"; its broker
    errors read "[Error 10] MessageSizeTooLargeError: ...")."""
    text, name = str(exc), type(exc).__name__
    return text if name in text else f"{name}: {text}" if text else name


def shown(value: object, limit: int = 80) -> str:
    """A value as a message quotes it: its repr, cut to ``limit`` characters (an API answer
    gave a 100,000-character id back whole)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    if isinstance(value, str):  # cut inside the quotes, which stay: 'aaaa…'
        return repr(value[:limit - 2]) + "…"
    return text[:limit] + "…"
