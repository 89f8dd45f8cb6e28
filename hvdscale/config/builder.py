"""A custom model's builder in the config: its ``"PACKAGE.MODULE:FUNCTION"`` spelling, where its
module's source file is, and that file's sha256 (the run's identity holds it, so a changed model
is a new experiment). Only files are read here, nothing is imported: the ranks import the module
(``hvdscale.models.custom``), and a config is read by tools that must not run user code.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from pathlib import Path
from typing import Any

from hvdscale.errors import ConfigError

CUSTOM_ONLY = ("task", "builder", "builder_path", "builder_sha256")
"""ModelConfig fields that mean something only with ``kind: custom`` (besides ``task``, which
a shipped model may repeat)."""


def parse_builder(spec: str) -> tuple[str, str]:
    """``"pkg.mod:func"`` as (module, function); ConfigError naming ``model.builder`` if not."""
    module, sep, func = spec.partition(":")
    parts = module.split(".") if module else []
    if (not sep or not func.isidentifier() or not parts
            or not all(p.isidentifier() for p in parts)):
        raise ConfigError(f"model.builder must be 'PACKAGE.MODULE:FUNCTION' (got {spec!r})")
    return module, func


def check_custom(model: Any) -> None:
    """The custom-model fields of ``model`` (a ModelConfig) agree with its kind."""
    if model.kind != "custom":
        for name in CUSTOM_ONLY[1:]:
            if name != "builder_sha256" and getattr(model, name) is not None:
                raise ConfigError(f"model.{name} needs model.kind=custom "
                                  f"(got model.kind={model.kind!r})")
        if model.task is not None and model.task != model.kind:
            raise ConfigError(f"model.task must be unset or {model.kind!r} for "
                              f"model.kind={model.kind} (got {model.task!r})")
        return
    if model.task not in ("nmt", "lm"):
        raise ConfigError(f"model.task must be 'nmt' or 'lm' with model.kind=custom "
                          f"(got {model.task!r})")
    if not model.builder:
        raise ConfigError("model.builder must name the function that builds the model, "
                          "'PACKAGE.MODULE:FUNCTION', with model.kind=custom")
    parse_builder(model.builder)


def search_dirs(builder_path: str | None) -> list[Path]:
    """Where the builder's module is looked for, in order: ``builder_path``, then sys.path."""
    dirs = [Path(builder_path)] if builder_path else []
    return dirs + [Path(p or ".") for p in sys.path]


def module_file(module: str, builder_path: str | None) -> Path | None:
    """The source file of ``module`` (``a/b.py`` or ``a/b/__init__.py``) in the first search
    directory that has it; None if none does."""
    rel = Path(*module.split("."))
    for d in search_dirs(builder_path):
        for cand in (d / rel.with_suffix(".py"), d / rel / "__init__.py"):
            if cand.is_file():
                return cand
    return None


def source_sha256(spec: str, builder_path: str | None) -> str:
    """sha256 (hex) of the builder module's source file.

    Raises:
        ConfigError: the module's file is not found (the message Python's import would give,
            and where it was looked for).
    """
    module, _ = parse_builder(spec)
    path = module_file(module, builder_path)
    if path is None:
        where = f"{builder_path} and " if builder_path else ""
        raise ConfigError(f"model.builder {spec!r}: No module named {module!r} (looked in "
                          f"{where}PYTHONPATH/sys.path)")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def resolve_builder(model: Any, config_dir: Path | None) -> Any:
    """``model`` (a ModelConfig) with ``builder_path`` defaulted to ``config_dir`` (absolute)
    and ``builder_sha256`` computed; unchanged unless ``kind`` is custom."""
    if model.kind != "custom":
        return model
    path = model.builder_path
    if path is None and config_dir is not None:
        path = str(config_dir.resolve())
    elif path is not None and config_dir is not None and not Path(path).is_absolute():
        path = str((config_dir / path).resolve())  # relative to the config file, as the default
    return dataclasses.replace(model, builder_path=path,
                               builder_sha256=source_sha256(model.builder, path))
