"""What became of each point of a sweep (one launch of its own, or one place in a shared one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hvdscale.study.sweep.overhead import LaunchTiming
from hvdscale.study.sweep.plan import Point


@dataclass
class Outcome:
    """What became of one point."""

    point: Point
    status: str  # "ok", "skipped" or "failed"
    seconds: float = 0.0
    words_per_s: float | None = None
    error: str = ""  # why it failed; for an ok point, a note (e.g. it overran while exiting)
    log: Path | None = None
    record: dict[str, Any] | None = None
    timing: LaunchTiming | None = None  # when the launch spawned and exited (overhead)


@dataclass
class SweepResult:
    """All outcomes, in launch order."""

    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        """The outcomes that failed."""
        return [o for o in self.outcomes if o.status == "failed"]
