"""Click options made from ``Settings``: one flag per field, defaults written once.

Every ``Settings`` field is a flag (``--input-topic``) and an environment variable
(``STREAMDEDUP_INPUT_TOPIC``); the flags are generated from the dataclass, so a new setting
needs one line in ``settings.py`` and nothing here (a command that reads it names its group
or name in ``shown``, else its --help leaves it out). Precedence: defaults < ``--preset`` <
environment < flags. Options default to None, meaning "not given", so that the environment
is not overridden by a flag's default.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from typing import Any

import click

from streamdedup.errors import ConfigError, MissingExtraError, StreamdedupError
from streamdedup.settings import (
    PRESETS,
    Settings,
    build_settings,
    env_name,
    flag_name,
    preset_summary,
    split_commas,
    switch_value,
)

# What a Kafka client reads: where the broker is and how to reach it.
KAFKA_CLIENT = ("bootstrap_servers", "security_protocol", "sasl_*", "ssl_*")
# Flags that only a Redis store reads.
_REDIS_ONLY = ("redis_url", "redis_namespace", "redis_cluster")


def settings_options(func: Callable[..., Any] | None = None, *,
                     shown: Iterable[str] | None = None, own: Iterable[str] = ()) -> Any:
    """Add one option per Settings field (default None: 'not given'). ``shown``: the groups
    (``settings.py``'s: text, sketch, store, ...), field names and ``prefix_*`` names the
    command reads; the other flags are still taken (a script or an environment shared with
    ``run`` keeps working) but left out of its --help, where ~60 flags, most of them without
    effect (Kafka's on ``check``), hid the few that matter. ``own``: fields the command
    declares itself, with another meaning (``replay --store``, which reads no variable)."""
    if func is None:
        return lambda f: settings_options(f, shown=shown, own=own)
    wanted = None if shown is None else set(shown)

    def is_shown(name: str, group: str) -> bool:
        return wanted is None or group in wanted or name in wanted or any(
            w.endswith("*") and name.startswith(w[:-1]) for w in wanted)

    for f in reversed(fields(Settings)):
        if f.name in own:
            continue
        flag = flag_name(f.name)
        env = env_name(f.name)
        default = ",".join(f.default) if isinstance(f.default, tuple) else f.default
        help_text = f"{f.metadata['help']} [default: {default!r}; env {env}]"
        hidden = not is_shown(f.name, f.metadata.get("group", ""))
        if isinstance(f.default, bool):
            opt = click.option(f"{flag}/--no-{flag[2:]}", f.name, default=None, help=help_text,
                               hidden=hidden)
        elif isinstance(f.default, tuple):
            opt = click.option(flag, f.name, default=None, help=help_text + " (comma-separated)",
                               callback=_split_commas, hidden=hidden)
        else:
            opt = click.option(flag, f.name, type=type(f.default), default=None, help=help_text,
                               hidden=hidden)
        func = opt(func)
    # --preset where the command reads a field some preset sets (tail and store read none)
    groups = {f.name: f.metadata.get("group", "") for f in fields(Settings)}
    reads_preset = any(is_shown(name, groups[name])
                       for preset in PRESETS.values() for name in preset)
    return click.option(
        "--preset", type=click.Choice(sorted(PRESETS)), default=None, hidden=not reads_preset,
        help="named settings bundle; it changes the defaults shown ("
             + "; ".join(f"{name}: {preset_summary(name)}" for name in PRESETS if PRESETS[name])
             + f") [default: 'default'; env {env_name('preset')}]",
    )(func)


def _split_commas(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    return split_commas(value)


def make_settings(preset: str | None, options: dict[str, Any], *,
                  opens_store: bool = False, env: Mapping[str, str] | None = None
                  ) -> Settings:
    """The settings of a command's flags, the environment and the preset. A value refused
    is said by where it came from: each setting the message names, as its flag or its
    variable; a flag's as a usage error, a variable's in one line without the usage text
    (``STREAMDEDUP_NUM_PERM=0`` said "num_perm must be >= 1" under the command's usage, as
    if a flag were wrong). ``opens_store``: the command opens the configured store, so a
    Redis flag given for another backend is refused (elsewhere it is one of the flags taken
    without effect, so that one environment or script serves every command). ``env``:
    the variables to read, if not all of them."""
    try:
        settings = build_settings(preset, env=env, overrides=options)
    except StreamdedupError as exc:
        text = str(exc)
        if text.startswith(env_name("")):  # a variable that does not parse
            raise BadSetting(text) from None
        given = {name for name, value in options.items() if value is not None}
        if preset is not None:
            given.add("preset")
        names = {f.name for f in fields(Settings)} | {"preset"}
        came: set[str] = set()
        as_flags = False  # a setting given by neither is then named as a flag too

        def named(match: re.Match[str]) -> str:
            word = match.group()
            if word not in names:  # a quoted value, a flag, or prose
                return word
            if word in given:
                came.add("flag")
                return flag_name(word)
            if env_name(word) in os.environ:
                came.add("variable")
                return env_name(word)
            # the default's or the preset's: "give both --bands and rows" said of one flag
            return flag_name(word) if as_flags else word

        # quoted values and flags the message already spells are kept as they are
        words = r"'[^']*'|--[a-z][a-z0-9-]*|[a-z][a-z0-9_]*"
        said = re.sub(words, named, text)
        if came == {"flag"}:
            as_flags = True
            said = re.sub(words, named, text)
        if "variable" in came and "flag" not in came:
            raise BadSetting(said) from None
        raise click.UsageError(said) from None
    # A Redis flag on another backend was ignored: `backfill --redis-url ...` wrote into
    # ./streamdedup-store, run's default store, and said nothing.
    unused = [flag_name(name) for name in _REDIS_ONLY
              if options.get(name) not in (None, False)]
    if unused and opens_store and settings.store_backend != "redis":
        raise click.UsageError(
            f"{' and '.join(unused)} {'is' if len(unused) == 1 else 'are'} for "
            f"--store-backend redis, and the store here is {settings.store_backend!r}: add "
            f"--store-backend redis, or leave {'it' if len(unused) == 1 else 'them'} out")
    if opens_store and options.get("store") is not None and settings.store_backend != "sqlite":
        # the opposite of the above: a directory given and no file written there
        raise click.UsageError(f"--store is a SQLite store's directory, and the store here "
                               f"is {settings.store_backend!r}: leave --store out, or give "
                               "--store-backend sqlite")
    return settings


class _Rate(click.ParamType):
    """``--rate`` of `produce` and `replay`: messages a second, 0 for no limit, else at
    least one an hour. A number too small for a float (``1e-400``) reads as 0, no limit:
    the opposite of what was asked, so it is refused as below the bound."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        from streamdedup.replay.config import rate_error

        if isinstance(value, float):
            return value
        try:
            rate = float(value)
        except ValueError:
            self.fail(f"{value!r} is not a number", param, ctx)
        if rate == 0 and re.search(r"[1-9]", re.split(r"[eE]", str(value))[0]):
            self.fail(f"{value} is below one message an hour (as a float it is 0, no "
                      "limit): give 0, or at least 1/3600", param, ctx)
        if said := rate_error(rate):
            self.fail(said, param, ctx)
        return rate


RATE = _Rate()


class BadSetting(click.ClickException):
    """A setting that parsed but cannot be used, found by the command: exit 2 as for the
    values refused at parsing, in one line (no usage text: the flag was spelled right)."""

    exit_code = 2


class LoggedFailure(click.ClickException):
    """A failure said as the process's last log record: with ``--log-json`` a collector that
    reads one JSON object a line got "Error: ..." among them, and lost why ``run`` stopped."""

    def show(self, file: Any = None) -> None:
        logging.getLogger("streamdedup").error(self.format_message(),
                                               extra={"exit_code": self.exit_code})


class LoggedBadSetting(LoggedFailure):
    exit_code = BadSetting.exit_code


def logged_settings(preset: str | None, options: dict[str, Any], *,
                    opens_store: bool = False) -> Settings:
    """``make_settings`` for the commands that log (``run``, ``monitor``), with logging set
    up from them: a variable's bad value is said as a JSON record when ``--log-json`` (or
    its variable) asks for JSON ("Error: STREAMDEDUP_NUM_PERM: ..." came plain among the
    JSON lines a collector reads). A flag's comes with the usage text, as parsing says it."""
    from streamdedup.service.logs import holding, setup_logging

    refused: BadSetting | None = None
    with holding() as early:
        try:
            settings = make_settings(preset, options, opens_store=opens_store)
        except BadSetting as exc:
            refused = exc
    if refused is None:
        setup_logging(settings.log_level, settings.log_json, early)
        return settings
    wanted = options.get("log_json")
    if wanted is None:  # (an unreadable value is itself refused in plain words)
        wanted = switch_value(os.environ.get(env_name("log_json"), "")) is True
    if not wanted:
        for record in early:  # as holding() shows them when its block fails
            logging.lastResort.handle(record)  # type: ignore[union-attr]
        raise refused
    setup_logging("INFO", True, early)  # the warnings held before it, as JSON too
    raise LoggedBadSetting(refused.format_message()) from None


def failure(exc: StreamdedupError, more: str = "", logged: bool = False
            ) -> click.ClickException:
    """A command's error as its exit status says it: 2 for a setting found wrong once the
    command used it (``--stopwords xx``, ``--stem-language klingon``, a port in use: they
    exited 1 while every value refused at parsing exited 2), else 1; a missing extra is not
    a wrong setting. ``logged``: said as a log record (``--log-json``)."""
    wrong = isinstance(exc, ConfigError) and not isinstance(exc, MissingExtraError)
    if logged:
        return (LoggedBadSetting if wrong else LoggedFailure)(str(exc) + more)
    return BadSetting(str(exc) + more) if wrong else click.ClickException(str(exc) + more)
