"""What one ``hvdscale fusion`` point sets: a fusion threshold, a cycle time and an overlap mode,
parsed from the command's lists and laid out as the grid plus the reference points (Horovod's
defaults, fusion off, independent replicas)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hvdscale.config import OVERLAP_MODES
from hvdscale.errors import HvdscaleError
from hvdscale.study.sweep.names import parse_names

HOROVOD_DEFAULT = (128.0, 1.0, "hooks")
"""Horovod 0.28.1's defaults: 128 MiB fusion threshold, 1 ms cycle, allreduce from hooks."""


@dataclass(frozen=True)
class Setting:
    """One point's Horovod setting; ``None`` leaves Horovod's default in force."""

    threshold_mb: float | None
    cycle_ms: float | None
    overlap: str = "hooks"
    kind: str = "grid"
    """``grid``, ``defaults``, ``off`` (fusion off), ``autotune`` (the autotuner's choice) or
    ``independent`` (replicas that never communicate: the ceiling)."""

    @property
    def label(self) -> str:
        """``"16MB/1ms/hooks"``; ``"defaults (...)"`` etc. for a reference point."""
        if self.kind == "independent":
            return "independent"
        t = "default" if self.threshold_mb is None else f"{self.threshold_mb:g}MB"
        c = "default" if self.cycle_ms is None else f"{self.cycle_ms:g}ms"
        base = f"{t}/{c}/{self.overlap}"
        return base if self.kind == "grid" else f"{self.kind} ({base})"

    def sets(self) -> tuple[str, ...]:
        """The ``--set`` overrides that put this setting in force."""
        if self.kind == "independent":
            return ()
        # Explicit, null included: the config under study may set its own values, and
        # "defaults" must mean Horovod's.
        t = "null" if self.threshold_mb is None else f"{self.threshold_mb:g}"
        c = "null" if self.cycle_ms is None else f"{self.cycle_ms:g}"
        return (f"strategy.horovod.overlap={self.overlap}",
                f"strategy.horovod.fusion_threshold_mb={t}", f"strategy.horovod.cycle_time_ms={c}")

    def effective(self) -> tuple[float, float, str]:
        """(threshold MiB, cycle ms, overlap) with Horovod's defaults filled in."""
        return (HOROVOD_DEFAULT[0] if self.threshold_mb is None else self.threshold_mb,
                HOROVOD_DEFAULT[1] if self.cycle_ms is None else self.cycle_ms, self.overlap)



def parse_floats(text: str, flag: str, positive: bool) -> list[float]:
    """``"0,1,4"`` -> ``[0.0, 1.0, 4.0]`` (given order, no repeats).

    Raises:
        HvdscaleError: an empty list or an entry that is not a number in range.
    """
    out: list[float] = []
    for t in (x.strip() for x in str(text).split(",")):
        try:
            v = float(t)
        except ValueError:
            raise HvdscaleError(f"{flag} entries must be numbers, e.g. {flag} 1,4,16 (got {t!r} "
                                f"in {text!r})") from None
        if not math.isfinite(v) or v < 0 or (positive and v == 0):
            need = "> 0" if positive else ">= 0"
            raise HvdscaleError(f"{flag} entries must be {need} (got {t!r})")
        if v not in out:
            out.append(v)
    return out


def parse_overlaps(text: str) -> list[str]:
    """``"hooks,after-backward"`` -> ``["hooks", "after-backward"]`` (given order, no repeats)."""
    return parse_names(text, OVERLAP_MODES, "--overlap", "mode")


def grid_settings(thresholds: list[float], cycles: list[float], overlaps: list[str],
                  independent: bool, grouped: bool = False) -> list[Setting]:
    """The grid, plus Horovod's defaults and fusion off where the grid lacks them.

    ``after-backward`` sends one tensor per step (without ``num_groups``), which no threshold
    splits or fuses, so it gets one point per cycle time (threshold left at Horovod's default)
    unless ``grouped``.
    """
    grid = []
    for o in overlaps:
        ts: list[float | None] = list(thresholds)
        if o == "after-backward" and not grouped:
            ts = [None]
        grid += [Setting(t, c, o) for t in ts for c in cycles]
    eff = {s.effective() for s in grid}
    extra = []
    if HOROVOD_DEFAULT not in eff:
        extra.append(Setting(None, None, "hooks", "defaults"))
    if (0.0, 1.0, "hooks") not in eff:
        extra.append(Setting(0.0, None, "hooks", "off"))
    base = [Setting(None, None, "hooks", "independent")] if independent else []
    return base + extra + grid
