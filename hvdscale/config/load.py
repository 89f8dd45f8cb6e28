"""Reading a run config: YAML through pyyaml, ``--set`` overrides, each value checked against
its field's type, unknown keys refused; and the config back as plain data for records."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml

from hvdscale.config.builder import resolve_builder
from hvdscale.config.run import RunConfig
from hvdscale.errors import ConfigError


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against annotation ``tp``; return it converted where lossless."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be a mapping (got {value!r})")
        return _build(tp, value, key)
    if origin is Literal:
        choices = typing.get_args(tp)
        if isinstance(value, bool) and {"on", "off"} <= set(choices):
            value = "on" if value else "off"  # YAML 1.1 reads a bare on/off as a boolean
        if value not in choices:
            names = ", ".join(map(str, choices))
            raise ConfigError(f"{key} must be one of {names} (got {value!r})")
        return value
    if origin in (typing.Union, types.UnionType):
        return _coerce_union(value, typing.get_args(tp), key)
    if origin is tuple:
        return _coerce_tuple(value, typing.get_args(tp), key)
    return _coerce_scalar(value, tp, key)


def _coerce_union(value: Any, args: tuple[Any, ...], key: str) -> Any:
    """``value`` as the first member of the union that takes it (None where optional)."""
    if value is None and type(None) in args:
        return None
    last: ConfigError | None = None
    for arg in args:
        if arg is type(None):
            continue
        try:
            return _coerce(value, arg, key)
        except ConfigError as e:
            last = e
    raise last or ConfigError(f"{key} has a bad value (got {value!r})")


def _coerce_tuple(value: Any, args: tuple[Any, ...], key: str) -> tuple[Any, ...]:
    """A list as a tuple: of any length (``tuple[X, ...]``) or of exactly ``args``' types."""
    if not isinstance(value, list | tuple):
        raise ConfigError(f"{key} must be a list (got {value!r})")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_coerce(v, args[0], f"{key}[{i}]") for i, v in enumerate(value))
    if len(value) != len(args):
        raise ConfigError(f"{key} must have {len(args)} entries (got {value!r})")
    pairs = enumerate(zip(value, args, strict=True))
    return tuple(_coerce(v, a, f"{key}[{i}]") for i, (v, a) in pairs)


def _coerce_scalar(value: Any, tp: Any, key: str) -> Any:
    """A bool, int, float (an int is taken, as a float) or str; a bool is never a number."""
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false (got {value!r})")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} must be an integer (got {value!r})")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key} must be a number (got {value!r})")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be a string (got {value!r})")
        return value
    raise ConfigError(f"{key}: unsupported type {_type_name(tp)}")  # pragma: no cover


def _build(cls: type, data: dict[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if k not in names:
            known = ", ".join(sorted(names))
            raise ConfigError(f"unknown config key '{key}' (known here: {known})")
        kwargs[k] = _coerce(v, hints[k], key)
    return cls(**kwargs)


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
    cfg = _build(RunConfig, data, "")
    # A custom model's module is found next to the config file, and its source hashed now: the
    # identity of what is run is fixed when the config is read, on every rank and in the sweep.
    model = resolve_builder(cfg.model, Path(path).parent if path is not None else None)
    return cfg if model is cfg.model else dataclasses.replace(cfg, model=model)


def config_from_dict(data: dict[str, Any]) -> RunConfig:
    """A validated RunConfig from a mapping (e.g. a record's ``config``, as ``to_dict`` wrote)."""
    return _build(RunConfig, data, "")


def to_dict(cfg: Any) -> dict[str, Any]:
    """The config as plain data (tuples become lists) for JSON records."""
    def conv(v: Any) -> Any:
        if isinstance(v, tuple | list):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v
    return conv(dataclasses.asdict(cfg))
