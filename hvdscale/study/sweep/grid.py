"""A sweep's grid (nothing launches here): its axes and the points they make.

The first axes are the rank counts, frameworks and strategies (``--np``, ``--frameworks``,
``--strategies``); every further axis is a config key and its values (``--axis
strategy.horovod.fusion_threshold_mb=0,32,128``, ``--axis strategy.ddp.bucket_cap_mb=1,25``;
``--scale-lr RULES`` is the axis ``optim.scale_lr``). Several axes make a product: every point
is one combination, its config loaded with it here, so a bad key or value fails before any
launch. A new kind of axis goes here; ``hvdscale fusion`` and its DDP bucket sweep build their
points themselves (their settings are not a plain product) and run them through the same driver.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hvdscale.config import RunConfig, load_config
from hvdscale.config.model import SCALE_LR_RULES
from hvdscale.errors import HvdscaleError
from hvdscale.study.sweep.names import parse_names

SCALE_LR = "optim.scale_lr"


@dataclass(frozen=True)
class Axis:
    """One config key of the grid and the values it takes (given order, no repeats)."""

    key: str
    values: tuple[str, ...]

    @property
    def short(self) -> str:
        """The key's last part (``fusion_threshold_mb``): how a point's name shows it."""
        return self.key.rsplit(".", 1)[-1]

    def describe(self) -> str:
        """``"optim.scale_lr none,sqrt"``."""
        return f"{self.key} {','.join(self.values)}"


def parse_axis(text: str) -> Axis:
    """``"strategy.ddp.bucket_cap_mb=1,25"`` -> its Axis.

    Raises:
        HvdscaleError: no ``=``, no key, or no value.
    """
    key, eq, values = str(text).partition("=")
    key = key.strip()
    vals = tuple(dict.fromkeys(v.strip() for v in values.split(",") if v.strip()))
    if not eq or not key or not vals:
        raise HvdscaleError(f"--axis needs KEY=VALUE,VALUE,..., e.g. --axis "
                            f"strategy.horovod.fusion_threshold_mb=0,32,128 (got {text!r})")
    if key in ("framework", "strategy.name", "name"):
        flag = {"framework": "--frameworks", "strategy.name": "--strategies"}.get(key)
        raise HvdscaleError(f"--axis {key}: " + (f"use {flag}, the grid's own axis" if flag
                                                 else "the name labels a point, not an axis"))
    return Axis(key, vals)


def scale_lr_axis(text: str) -> Axis:
    """``--scale-lr "none,sqrt"`` as the axis ``optim.scale_lr`` (rules checked by name)."""
    return Axis(SCALE_LR, tuple(parse_names(text, SCALE_LR_RULES, "--scale-lr",
                                            "learning-rate rule")))


def axes_of(axis_texts: Sequence[str], scale_lr: str | None) -> list[Axis]:
    """The grid's config axes: ``--scale-lr``'s first, then each ``--axis``; a key twice is
    refused."""
    axes = ([scale_lr_axis(scale_lr)] if scale_lr is not None else [])
    axes += [parse_axis(t) for t in axis_texts]
    keys = [a.key for a in axes]
    if len(set(keys)) < len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise HvdscaleError(f"--axis {dup} is given twice (one axis per key; list its values "
                            "once, comma-separated)")
    return axes


def combinations(axes: Sequence[Axis]) -> list[tuple[str, ...]]:
    """Every combination of the axes' values as ``--set`` strings (one empty one without
    axes), the last axis changing fastest."""
    return [tuple(f"{a.key}={v}" for a, v in zip(axes, vs, strict=True))
            for vs in itertools.product(*(a.values for a in axes))]


def combination_name(strategy: str, axes: Sequence[Axis], sets: tuple[str, ...]) -> str:
    """A point's name: its strategy and its axes' values (``"horovod scale_lr=sqrt"``); ""
    without axes (the strategy names it)."""
    if not axes:
        return ""
    return " ".join([strategy, *(f"{a.short}={s.split('=', 1)[1]}"
                                 for a, s in zip(axes, sets, strict=True))])


def describe_grid(nps: Sequence[int], pairs: Sequence[tuple[str, str]],
                  axes: Sequence[Axis]) -> str:
    """The grid in one line, as ``--dry-run`` prints it."""
    return " x ".join([f"np {','.join(map(str, nps))}",
                       f"(framework, strategy) {' '.join(f'{f}:{s}' for f, s in pairs)}",
                       *(a.describe() for a in axes)])


def load_point_config(config: Path, overrides: Sequence[str], sets: Sequence[str],
                      framework: str, strategy: str) -> RunConfig:
    """One point's config: the sweep's overrides, its axes' values, then its framework and
    strategy; a bad key or value names the point's axis values."""
    try:
        return load_config(config, [*overrides, *sets, f"framework={framework}",
                                    f"strategy.name={strategy}"])
    except HvdscaleError as e:
        if not sets:
            raise
        raise HvdscaleError(f"axis values {' '.join(sets)}: {e}") from None
