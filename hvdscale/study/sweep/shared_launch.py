"""One launch for several points of a round (``hvdscale run-points`` on every rank), watched and
resumed.

The sweep writes the launch's plan (``records.launch_plan``) in its logs/ folder and starts the
launcher once (``process.start``). While it runs, rank 0's state lines (``records.point_state``)
say which point is running: a point past the sweep's ``--timeout`` ends the launch, and each
point's progress line is told as it ends. When the launch ends early (a hang, a lost rank, a
point that failed on some ranks only), the point it was in gets a failed record here, and the
points it did not reach run in a fresh launch, once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from hvdscale.records.failed import FailedRecord
from hvdscale.records.fields import Record
from hvdscale.records.launch_plan import LaunchPlan, PlannedPoint
from hvdscale.records.point_state import PointState
from hvdscale.records.run import RunRecord
from hvdscale.records.store import read_complete_lines, write_record_file
from hvdscale.study.sweep import process
from hvdscale.study.sweep.groups import Launch
from hvdscale.study.sweep.launcher import (
    error_summary,
    launch_env,
    launch_line,
    rank_command,
    read_out,
)
from hvdscale.study.sweep.outcome import Outcome, failed_record
from hvdscale.study.sweep.plan import Point, SweepSpec, in_round, point_sets
from hvdscale.study.sweep.timing import write_timing

ATTEMPTS = 2
"""A launch that ended early runs the points it did not reach once more, in a fresh launch."""


def shared_command(spec: SweepSpec, ranks: int, plan_path: Path,
                   hostfile_path: Path | None = None) -> list[str]:
    """The launcher command that runs a plan's points on ``ranks`` ranks."""
    prog = rank_command("run-points", plan_path, spec.out, (), spec.progress_every)
    return launch_line(spec.launcher, ranks, prog, hostfile_path, spec.network_interfaces,
                       spec.launcher_args)


@dataclass
class Watched:
    """How a watched launch went: its end and rank 0's state lines (each point's start, end)."""

    ended: process.Ended | None = None
    events: list[PointState] = field(default_factory=list)

    def positions(self, event: str) -> set[int]:
        """Positions with a ``event`` (start or end) line."""
        return {e.position for e in self.events if e.event == event}

    def span(self, k: int) -> tuple[float, float] | None:
        """(start, end) epoch seconds of position ``k`` (its end: the launch's, if cut)."""
        at = {e.event: e.at for e in reversed(self.events) if e.position == k}
        if "start" not in at:
            return None
        return at["start"], at.get("end", self.ended.exited if self.ended else time.time())

    def seconds(self, k: int) -> float:
        """Seconds position ``k`` ran (0 if it never started)."""
        span = self.span(k)
        return span[1] - span[0] if span else 0.0


def launch_name(launch: Launch, attempt: int) -> str:
    """A file-name-safe name for one launch of a round."""
    p = launch.points[0]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    base = f"r{launch.round + 1}_np{p.ranks}_{p.cfg.framework}_{stamp}_{attempt}"
    return re.sub(r"[^\w.-]", "-", base)


def plan_for(spec: SweepSpec, launch: Launch, points: list[Point], name: str,
             folder: Path) -> LaunchPlan:
    """The plan a launch's ranks read, written to ``folder`` through the store."""
    plan = LaunchPlan(launch=name, points=[
        PlannedPoint(label=p.label, config=str(spec.config),
                     sets=point_sets(spec, in_round(spec, p, launch.round))) for p in points],
        state=str(folder / f"{name}.state.jsonl"))
    write_record_file(folder / f"{name}.plan.json", plan)
    return plan


def run_shared(spec: SweepSpec, launch: Launch, points: list[Point], hostfile: Path | None,
               tell: Callable[[Outcome], None], say: Callable[[str], None]) -> None:
    """Run ``points`` (``launch``'s, those not yet measured) in one launch, and the points it
    did not reach in a fresh one; ``tell`` hears of each point once, as it ends."""
    folder = spec.out / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    todo = list(points)
    for attempt in range(1, ATTEMPTS + 1):
        name = launch_name(launch, attempt)
        todo = _attempt(spec, launch, todo, name, hostfile, tell)
        if not todo:
            return
        if attempt < ATTEMPTS:
            say(f"launch {name} ended before {len(todo)} of its points "
                f"({', '.join(p.label for p in todo)}); running them in a fresh launch")
    for p in todo:
        why = f"not reached: {ATTEMPTS} launches ended before this point"
        failed_record(spec, in_round(spec, p, launch.round).cfg, p.ranks, why, {})
        tell(Outcome(p, "failed", 0.0, error=why))


def _attempt(spec: SweepSpec, launch: Launch, todo: list[Point], name: str,
             hostfile: Path | None, tell: Callable[[Outcome], None]) -> list[Point]:
    """One launch of ``todo``; returns the points it did not reach."""
    folder = spec.out / "logs"
    plan = plan_for(spec, launch, todo, name, folder)
    logs = (folder / f"{name}.stdout", folder / f"{name}.stderr")
    w = Watched()

    def take() -> float | None:
        """New state lines; an end tells its point. Returns what the limit counts from: the
        last start or end, or (None) the launch's start before the first."""
        for e in read_complete_lines(plan.state, PointState)[len(w.events):]:
            w.events.append(e)  # type: ignore[arg-type]
            if e.event == "end":  # type: ignore[attr-defined]
                k = e.position  # type: ignore[attr-defined]
                tell(_from_record(todo[k], by_position(read_out(spec.out), name).get(k),
                                  w.seconds(k), logs[1]))
        return w.events[-1].at if w.events else None

    cmd = shared_command(spec, launch.ranks, folder / f"{name}.plan.json", hostfile)
    w.ended = process.start(cmd, launch_env(), logs, spec.timeout_s, watch=take)
    take()
    rest = _settle(spec, launch, todo, name, w, logs, tell)
    _write_timings(spec, launch, todo, name, w)
    return rest


def _from_record(point: Point, rec: RunRecord | FailedRecord | None, seconds: float,
                 log: Path) -> Outcome:
    """A point's outcome from its record (ok, or failed on every rank)."""
    if isinstance(rec, RunRecord):
        return Outcome(point, "ok", seconds, rec.words_per_s, log=log, record=rec)
    why = (rec.error if rec is not None else "") or "no record written"
    return Outcome(point, "failed", seconds, error=why, log=log)


def _settle(spec: SweepSpec, launch: Launch, todo: list[Point], name: str, w: Watched,
            logs: tuple[Path, Path], tell: Callable[[Outcome], None]) -> list[Point]:
    """Tell the points the launch did not see to their end; returns those it did not reach."""
    recs = by_position(read_out(spec.out), name)
    ended, rest = w.ended, []
    assert ended is not None
    # A launch that ended before its first point began (start-up past the limit, or failed)
    # charges that to its first point, as that point's own launch would have.
    started = w.positions("start") or {0}
    for k, p in enumerate(todo):
        if k in w.positions("end"):
            continue  # told as it ended
        if k in recs:  # its record written, the launch ended before its end line
            tell(_from_record(p, recs[k], w.seconds(k), logs[1]))
        elif k in started:  # the launch ended inside this point
            why = (f"timed out after {spec.timeout_s:g} s (no record written); ended the launch"
                   if ended.timed_out else stderr_why(logs[1], logs[0], ended.rc))
            failed_record(spec, in_round(spec, p, launch.round).cfg, p.ranks, why, {
                "launch": {"id": name, "position": k, "shared": True},
                "timed_out": ended.timed_out, "returncode": ended.rc, "log": str(logs[1])})
            tell(Outcome(p, "failed", w.seconds(k), error=why, log=logs[1]))
        else:
            rest.append(p)
    return rest


def _write_timings(spec: SweepSpec, launch: Launch, todo: list[Point], name: str,
                   w: Watched) -> None:
    """One timing line per point the launch ran (``sweep_timing.jsonl``), each carrying the
    launch's whole span (so a record is accounted for by its launch) and its own."""
    ended = w.ended
    assert ended is not None
    for k in sorted(w.positions("start")):
        write_timing(spec.out, todo[k].label, launch.round, {
            "launch_s": round(ended.exited - ended.spawned, 4), "shared": True, "launch": name,
            "position": k, "points": len(todo), "point_s": round(w.seconds(k), 4),
            "first_point_start_s": round(w.events[0].at - ended.spawned, 4)})


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
                and r.launch.id == name:
            out[r.launch.position] = r
    return out
