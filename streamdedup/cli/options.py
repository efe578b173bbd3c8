"""Click options made from ``Settings``: one flag per field, defaults written once.

Every ``Settings`` field is a flag (``--input-topic``) and an environment variable
(``STREAMDEDUP_INPUT_TOPIC``); the flags are generated from the dataclass, so a new setting
needs one line in ``settings.py`` and nothing here. Precedence: defaults < ``--preset`` <
environment < flags. Options default to None, meaning "not given", so that the environment
is not overridden by a flag's default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

import click

from streamdedup.errors import StreamdedupError
from streamdedup.settings import ENV_PREFIX, PRESETS, Settings, build_settings


def settings_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add one option per Settings field (default None: 'not given')."""
    for f in reversed(fields(Settings)):
        flag = "--" + f.name.replace("_", "-")
        env = ENV_PREFIX + f.name.upper()
        default = ",".join(f.default) if isinstance(f.default, tuple) else f.default
        help_text = f"{f.metadata['help']} [default: {default!r}; env {env}]"
        if isinstance(f.default, bool):
            opt = click.option(f"{flag}/--no-{flag[2:]}", f.name, default=None, help=help_text)
        elif isinstance(f.default, tuple):
            opt = click.option(flag, f.name, default=None, help=help_text + " (comma-separated)",
                               callback=_split_commas)
        else:
            opt = click.option(flag, f.name, type=type(f.default), default=None, help=help_text)
        func = opt(func)
    return click.option(
        "--preset", type=click.Choice(sorted(PRESETS)), default=None,
        help=f"named settings bundle [default: 'default'; env {ENV_PREFIX}PRESET]",
    )(func)


def _split_commas(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    return tuple(v.strip() for v in value.split(",") if v.strip())


def make_settings(preset: str | None, options: dict[str, Any]) -> Settings:
    try:
        return build_settings(preset, overrides=options)
    except StreamdedupError as exc:
        raise click.UsageError(str(exc)) from None
