"""The one way a config section refuses a value: a ConfigError naming the dotted key."""

from __future__ import annotations

from typing import Any

from hvdscale.errors import ConfigError


def check(cond: bool, key: str, msg: str, value: Any) -> None:
    """Raise ``ConfigError("<key> <msg> (got <value>)")`` unless ``cond``."""
    if not cond:
        raise ConfigError(f"{key} {msg} (got {value!r})")
