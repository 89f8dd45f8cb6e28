"""What a sweep cost, said: its launches' wall time split into the ranks' start-up (once per
launch), each point's warm-up and measured steps, and the rest (each point's set-up, record and
teardown, and the launch's exit), from the sweep's timing file and its records.

Start-up is charged to its launch, not to each point: in a shared launch only the first point's
record holds the interpreter, imports and MPI (``startup.max_s`` ``imports`` and ``mpi``); the
others start from their own beginning (hvdscale.train.points).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hvdscale.records.fields import Record
from hvdscale.records.launch import TIMING_FILE, LaunchCost
from hvdscale.records.run import RunRecord

LAUNCH_PHASES = ("imports", "mpi")
"""The start-up phases a launch pays once, whatever number of points it runs."""


@dataclass(frozen=True)
class SweepCost:
    """Seconds of a sweep's launches, by what they were spent on."""

    launches: int
    points: int
    launch_s: float
    """The launches' wall time, launcher spawn to exit, summed."""
    startup_s: float
    """The ranks' start-up (interpreter, imports, MPI; slowest rank), once per launch."""
    warmup_s: float
    measured_s: float

    @property
    def rest_s(self) -> float:
        """Launch time that is neither start-up, warm-up nor measurement."""
        return max(0.0, self.launch_s - self.startup_s - self.warmup_s - self.measured_s)

    @property
    def per_point_s(self) -> float:
        """The rest per point: what a point costs beyond its warm-up and measured steps."""
        return self.rest_s / self.points if self.points else 0.0

    @property
    def measured_fraction(self) -> float:
        """Measured seconds over the launches' wall time."""
        return self.measured_s / self.launch_s if self.launch_s > 0 else 0.0

    def describe(self) -> str:
        """One paragraph for people."""
        a = max(1, self.launches)
        return (f"{self.launches} launch(es) for {self.points} point(s), {self.launch_s:.1f} s "
                f"in all: ranks' start-up {self.startup_s:.1f} s ({self.startup_s / a:.2f} s a "
                f"launch: interpreter, imports, MPI), warm-up {self.warmup_s:.1f} s, measured "
                f"{self.measured_s:.1f} s ({100 * self.measured_fraction:.0f}% of the launches' "
                f"time), the rest {self.rest_s:.1f} s ({self.per_point_s:.2f} s a point: its "
                "set-up, record and teardown, the launches' exits)")


def timing_rows(results: str | Path) -> list[LaunchCost]:
    """The sweep's timing lines, typed (none without its file)."""
    from hvdscale.records.reader import read

    path = Path(results) / TIMING_FILE
    if not path.is_file():
        return []
    return [r for r in read(path) if isinstance(r, LaunchCost)]


def launch_seconds(rows: Sequence[LaunchCost]) -> tuple[int, float]:
    """(launches, their summed wall time): a shared launch's lines count once."""
    seen: dict[str, float] = {}
    own = []
    for r in rows:
        if r.launch:
            seen[r.launch] = r.launch_s
        else:
            own.append(r.launch_s)
    return len(seen) + len(own), sum(seen.values()) + sum(own)


def sweep_cost(records: Sequence[Record], results: str | Path) -> SweepCost | None:
    """The cost of the sweep whose timing file is in ``results`` (None without one)."""
    rows = timing_rows(results)
    if not rows:
        return None
    launches, launch_s = launch_seconds(rows)
    ok = [r for r in records if isinstance(r, RunRecord)]
    startup = warm = measured = 0.0
    for r in ok:
        if r.launch is None or r.launch.position == 0:
            marks = r.startup
            startup += sum(marks.max_s.get(p, 0.0) for p in LAUNCH_PHASES) if marks else 0.0
        warm += r.warmup_s
        measured += r.window_s
    return SweepCost(launches, len(rows), launch_s, startup, warm, measured)
