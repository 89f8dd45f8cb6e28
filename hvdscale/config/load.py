"""Reading a run config: YAML through pyyaml, ``--set`` overrides, then ``msgspec.convert``
onto the frozen dataclasses (each value checked against its field's type, an int taken as a
float), unknown keys refused; and the config back as plain data for records.

A refusal is one line naming the dotted key and what it accepts, e.g.
``data.batch_size must be an integer (got 'abc')``.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
from pathlib import Path
from typing import Any

import msgspec
import yaml

from hvdscale.config.builder import resolve_builder
from hvdscale.config.run import RunConfig
from hvdscale.errors import ConfigError

_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
          "array": "a list", "object": "a mapping", "null": "null"}
_ERROR = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)


@functools.cache
def _fields(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _check_keys(cls: type, data: Any, prefix: str) -> None:
    """Refuse a key no section declares (msgspec ignores a dataclass's unknown keys)."""
    if not isinstance(data, dict):
        return  # msgspec says what the section should be
    fields = _fields(cls)
    for k, v in data.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if k not in fields:
            raise ConfigError(f"unknown config key '{key}' (known here: "
                              f"{', '.join(sorted(fields))})")
        if dataclasses.is_dataclass(fields[k]):
            _check_keys(fields[k], v, key)


def _located(path: str, data: Any) -> tuple[list[str], Any, Any]:
    """(the key's parts, its declared type, its value) at msgspec's error path."""
    parts = [p for p in re.split(r"\.|\[(\d+)\]", path.lstrip(".")) if p]
    tp: Any = RunConfig
    value = data
    for p in parts:
        value = value[int(p)] if isinstance(value, list | tuple) else value.get(p)
        tp = _fields(tp).get(p) if dataclasses.is_dataclass(tp) else None
    return parts, tp, value


def _refusal(msg: str, key: str, tp: Any, value: Any) -> ConfigError:
    """msgspec's complaint in the words of a config key."""
    if got := re.match(r"Expected `array` of length (\d+)", msg):
        return ConfigError(f"{key} must have {got[1]} entries (got {value!r})")
    if got := re.match(r"Expected `(.+?)`, got", msg):
        words = " or ".join(_WORDS.get(w, w) for w in got[1].split(" | "))
        return ConfigError(f"{key} must be {words} (got {value!r})")
    lit = next((a for a in (tp, *typing.get_args(tp))
                if typing.get_origin(a) is typing.Literal), None)  # Literal, or Optional of one
    if msg.startswith("Invalid enum value") and lit is not None:
        choices = ", ".join(map(str, typing.get_args(lit)))
        return ConfigError(f"{key} must be one of {choices} (got {value!r})")
    return ConfigError(f"{key}: {msg} (got {value!r})")


def _build(data: dict[str, Any]) -> RunConfig:
    """The validated config of ``data`` (each section's own checks run as it is built)."""
    _check_keys(RunConfig, data, "")
    while True:
        try:
            return msgspec.convert(data, RunConfig)
        except msgspec.ValidationError as e:
            m = _ERROR.match(str(e))
            msg, path = (m["msg"], m["path"] or "") if m else (str(e), "")
            parts, tp, value = _located(path, data)
            if isinstance(value, bool) and {"on", "off"} <= set(typing.get_args(tp)):
                # YAML 1.1 reads a bare on/off as a boolean; the key means the word
                node = data
                for p in parts[:-1]:
                    node = node[p]
                node[parts[-1]] = "on" if value else "off"
                continue
            raise _refusal(msg, ".".join(parts) or "the config", tp, value) from None


def _parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise ConfigError(f"--set expects key=value (got {item!r})")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not p for p in key.split(".")):
        raise ConfigError(f"--set has an empty key (got {item!r})")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {key}: value is not valid YAML: {e}") from None
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return ``data`` with each ``a.b.c=value`` override applied (values parsed as YAML)."""
    for item in overrides:
        path, value = _parse_override(item)
        node = data
        for i, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"--set {'.'.join(path)}: {'.'.join(path[: i + 1])} is not a "
                                  "section")
            node = child
        node[path[-1]] = value
    return data


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML run config, apply ``--set`` overrides and validate everything.

    Args:
        path: YAML file; None starts from the defaults.
        overrides: ``key=value`` strings with dotted keys, e.g. ``strategy.name=independent``.

    Returns:
        The validated, frozen config.

    Raises:
        ConfigError: missing file, malformed YAML, unknown key, wrong type or bad value.
    """
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        try:
            loaded = yaml.safe_load(p.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ConfigError(f"config file {p} is not UTF-8 text (byte {e.start}); "
                              "is it a YAML config?") from None
        except OSError as e:
            raise ConfigError(f"config file {p} cannot be read: {e.strerror or e}") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {p} is not valid YAML: {e}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {p} must hold a mapping at the top level")
        data = loaded
    data = apply_overrides(data, overrides or [])
    cfg = _build(data)
    # A custom model's module is found next to the config file, and its source hashed now: the
    # identity of what is run is fixed when the config is read, on every rank and in the sweep.
    model = resolve_builder(cfg.model, Path(path).parent if path is not None else None)
    return cfg if model is cfg.model else dataclasses.replace(cfg, model=model)


def config_from_dict(data: dict[str, Any]) -> RunConfig:
    """A validated RunConfig from a mapping (e.g. a record's ``config``, as ``to_dict`` wrote)."""
    return _build(dict(data))


def to_dict(cfg: Any) -> dict[str, Any]:
    """The config as plain data (tuples become lists) for JSON records, every key written
    (``msgspec.to_builtins`` leaves out a dataclass's defaults)."""
    def conv(v: Any) -> Any:
        if isinstance(v, tuple | list):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v
    return conv(dataclasses.asdict(cfg))
