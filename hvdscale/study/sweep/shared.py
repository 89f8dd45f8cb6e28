"""One launch for several points of a round (``hvdscale run-points`` on every rank), watched.

The sweep writes the launch's plan (hvdscale.train.points) in its logs/ folder and starts the
launcher once. While it runs, rank 0's state file says which point is running: a point past the
sweep's ``--timeout`` ends the launch, and each point's progress line is printed as its record
arrives. When the launch ends early (a hang, a lost rank, a point that failed on some ranks
only), the point it was in gets a failed record here, and the points it did not reach run in a
fresh launch, once.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hvdscale.records.failed import FailedRecord
from hvdscale.records.fields import Record
from hvdscale.records.run import RunRecord
from hvdscale.study.sweep import process
from hvdscale.study.sweep.groups import Launch
from hvdscale.study.sweep.launcher import error_summary, launch_line, rank_command
from hvdscale.study.sweep.plan import Point, SweepSpec, in_round, point_sets
from hvdscale.train.points import LaunchPlan, PlannedPoint, write_plan


def shared_command(spec: SweepSpec, ranks: int, plan_path: Path,
                   hostfile_path: Path | None = None) -> list[str]:
    """The launcher command that runs a plan's points on ``ranks`` ranks."""
    prog = rank_command("run-points", plan_path, spec.out, (), spec.progress_every)
    return launch_line(spec.launcher, ranks, prog, hostfile_path, spec.network_interfaces,
                       spec.launcher_args)


@dataclass
class Watched:
    """How a watched launch went."""

    rc: int | None = None
    timed_out: bool = False
    spawned: float = 0.0
    exited: float = 0.0
    events: list[dict[str, Any]] = field(default_factory=list)
    """Rank 0's state lines: each point's start and end."""

    def started(self) -> set[int]:
        """Positions the launch started."""
        return {e["position"] for e in self.events if e.get("event") == "start"}

    def span(self, k: int) -> tuple[float, float] | None:
        """(start, end) epoch seconds of position ``k`` (its end: the launch's, if cut)."""
        s = [e["at"] for e in self.events if e.get("position") == k and e.get("event") == "start"]
        e = [e["at"] for e in self.events if e.get("position") == k and e.get("event") == "end"]
        return (s[0], e[0] if e else self.exited or time.time()) if s else None


def _read_state(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a state file (a line being written is left for the next read)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            break
        # Only a line of the shape rank 0 writes is believed; anything else ends the reading.
        if not (isinstance(e, dict) and isinstance(e.get("at"), int | float)
                and isinstance(e.get("position"), int) and e.get("event") in ("start", "end")):
            break
        out.append(e)
    return out


def watch_launch(cmd: list[str], env: Mapping[str, str], limit_s: float, state: Path,
                 logs: tuple[Path, Path],
                 on_event: Callable[[dict[str, Any], Watched], None]) -> Watched:
    """Run ``cmd`` (``process.start``), ending it when one point runs longer than ``limit_s``
    (or, before the first point starts, when start-up does); ``on_event`` sees each new state
    line (and ``w``)."""
    w = Watched()
    w.spawned = time.time()
    ended = process.start(cmd, env, logs, limit_s,
                          watch=lambda: _take_events(w, state, on_event, w.spawned))
    w.spawned, w.exited, w.rc, w.timed_out = ended.spawned, ended.exited, ended.rc, \
        ended.timed_out
    _take_events(w, state, on_event, 0.0)
    return w


def _take_events(w: Watched, state: Path,
                 on_event: Callable[[dict[str, Any], Watched], None],
                 since: float) -> float:
    """New state lines into ``w``; returns when the launch's last event was (a point's start or
    end), or ``since`` before its first: what the time limit counts from."""
    for e in _read_state(state)[len(w.events):]:
        w.events.append(e)
        on_event(e, w)
    return float(w.events[-1]["at"]) if w.events else since


def launch_name(launch: Launch, attempt: int) -> str:
    """A file-name-safe name for one launch of a round."""
    p = launch.points[0]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    base = f"r{launch.round + 1}_np{p.ranks}_{p.cfg.framework}_{stamp}_{attempt}"
    return re.sub(r"[^\w.-]", "-", base)


def plan_for(spec: SweepSpec, launch: Launch, points: list[Point], name: str,
             folder: Path) -> LaunchPlan:
    """The plan a launch's ranks read (written to ``folder``)."""
    plan = LaunchPlan(name, tuple(PlannedPoint(p.label, str(spec.config),
                                               tuple(point_sets(spec, in_round(spec, p,
                                                                               launch.round))))
                                  for p in points), str(folder / f"{name}.state.jsonl"))
    write_plan(folder / f"{name}.plan.json", plan)
    return plan


def stderr_why(err_log: Path, out_log: Path, rc: int | None) -> str:
    """The launch's own last words, for a failed point's record."""
    stderr, stdout = (f.read_text(errors="replace") if f.exists() else ""
                      for f in (err_log, out_log))
    return (f"exit {rc}: " if rc else "") + error_summary(stderr, stdout=stdout)


def by_position(records: Sequence[Record], name: str) -> dict[int, RunRecord | FailedRecord]:
    """The records one launch wrote (ok or failed), by their position in it."""
    out: dict[int, RunRecord | FailedRecord] = {}
    for r in records:
        if isinstance(r, RunRecord | FailedRecord) and r.launch is not None \
                and r.launch["id"] == name:
            out[r.launch["position"]] = r
    return out
