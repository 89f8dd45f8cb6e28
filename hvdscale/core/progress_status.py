"""What rank 0's progress line says: where the run is (``Snapshot``) and that as one line of text.

Pure formatting: no clock, no thread, no I/O; ``hvdscale.core.progress`` takes the snapshots
and writes the lines.
"""

from __future__ import annotations

from dataclasses import dataclass

SLOW_STEP_S = 5.0
"""A step running longer than this (and several typical steps) is named in the line."""


def format_duration(s: float) -> str:
    """``7 s``, ``3 min 05 s``, ``2 h 04 min``."""
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


@dataclass(frozen=True)
class Snapshot:
    """Where the run is, as the reporting thread sees it at one moment."""

    phase: str
    """``start-up``, ``warm-up``, ``measured``, ``gather``."""
    elapsed_s: float
    """Since the report started."""
    done: int = 0
    """Steps finished, warm-up included."""
    warmup: int = 0
    steps: int = 0
    """Measured steps (batches of the agreed count in epoch mode)."""
    epochs: int = 0
    words: int = 0
    """Rank 0's real tokens over the measured steps so far."""
    window_s: float = 0.0
    """From the window's start to the end of the last measured step."""
    warmup_s: float = 0.0
    """From the first step's start to the end of the last warm-up step finished."""
    step_s: float | None = None
    """Recent time per step (over the last report's interval)."""
    running_s: float = 0.0
    """How long the step in progress has been running."""


def time_left(s: Snapshot) -> float | None:
    """Seconds left to the end of the measured steps, from the steps timed so far."""
    if s.phase not in ("warm-up", "measured"):
        return None
    measured = max(0, s.done - s.warmup)
    if measured > 0 and s.window_s > 0:
        per = s.window_s / measured
    elif s.done > 0 and s.warmup_s > 0:
        per = s.warmup_s / min(s.done, s.warmup)  # warm-up steps stand in until measured ones
    else:
        return None
    return per * (s.warmup + s.steps - s.done)


def format_status(s: Snapshot) -> str:
    """The progress text (no line ending): one line, for the live line and the plain lines."""
    if s.phase not in ("warm-up", "measured"):
        head = f"hvdscale: {s.phase}"
        if s.phase == "gather":
            head += f" (after {s.steps} measured {'batches' if s.epochs else 'steps'})"
        return f"{head} | elapsed {format_duration(s.elapsed_s)}"
    # Counts are of steps finished, like the figures beside them.
    unit = "batch" if s.epochs else "step"
    if s.phase == "warm-up":
        pos = f"warm-up {unit} {s.done}/{s.warmup} (then {s.steps} measured)"
    else:
        pos = f"measured {unit} {max(0, s.done - s.warmup)}/{s.steps}"
        if s.epochs:
            pos += f" of {s.epochs} epoch{'s' if s.epochs > 1 else ''}"
    parts = [f"hvdscale: {pos}"]
    if s.phase == "measured" and s.window_s > 0 and s.done > s.warmup:
        parts.append(f"{s.words / s.window_s:.0f} words/s (rank 0)")
    if s.step_s is not None:
        parts.append(f"{s.step_s * 1e3:.1f} ms/{unit}")
    left = time_left(s)
    if left is not None:
        parts.append(f"~{format_duration(left)} left")
    parts.append(f"elapsed {format_duration(s.elapsed_s)}")
    if s.running_s > SLOW_STEP_S and (s.step_s is None or s.running_s > 3 * s.step_s):
        parts.append(f"this {unit} running for {format_duration(s.running_s)}")
    return " | ".join(parts)
