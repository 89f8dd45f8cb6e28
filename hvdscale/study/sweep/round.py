"""A shared launch's points from plan to outcomes: launch, watch, record what it did not finish,
and run the points it did not reach in a fresh launch, once (hvdscale.study.sweep.shared)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hvdscale.records.failed import FailedRecord
from hvdscale.records.run import RunRecord
from hvdscale.study.sweep.groups import Launch
from hvdscale.study.sweep.launcher import launch_env, read_out
from hvdscale.study.sweep.outcome import Outcome, failed_record
from hvdscale.study.sweep.overhead import write_timing
from hvdscale.study.sweep.plan import Point, SweepSpec, in_round
from hvdscale.study.sweep.shared import (
    Watched,
    by_position,
    launch_name,
    plan_for,
    shared_command,
    stderr_why,
    watch_launch,
)

ATTEMPTS = 2
"""A launch that ended early runs the points it did not reach once more, in a fresh launch."""


def run_shared(spec: SweepSpec, launch: Launch, points: list[Point], hostfile: Path | None,
               tell: Callable[[Outcome], None], say: Callable[[str], None]) -> list[Outcome]:
    """Run ``points`` (``launch``'s, those not yet measured) in one launch; ``tell`` hears of
    each point as it ends. Returns every point's outcome, in the order they ran."""
    folder = spec.out / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    todo, outcomes = list(points), []
    for attempt in range(1, ATTEMPTS + 1):
        name = launch_name(launch, attempt)
        plan = plan_for(spec, launch, todo, name, folder)
        logs = (folder / f"{name}.stdout", folder / f"{name}.stderr")
        cmd = shared_command(spec, launch.ranks, folder / f"{name}.plan.json", hostfile)
        told: set[int] = set()

        def on_event(e: dict[str, Any], w: Watched, todo: list[Point] = todo, name: str = name,
                     told: set[int] = told, logs: tuple[Path, Path] = logs) -> None:
            if e.get("event") == "end":
                k = int(e["position"])
                rec = by_position(read_out(spec.out), name).get(k)
                span = w.span(k) or (0.0, 0.0)
                o = _from_record(todo[k], rec, span[1] - span[0], logs[1])
                told.add(k)
                tell(o)

        w = watch_launch(cmd, launch_env(), spec.timeout_s, Path(plan.state), logs, on_event)
        done, rest = _settle(spec, launch, todo, name, w, logs)
        _write_timings(spec, launch, todo, name, w)
        for k, o in enumerate(done):
            if o is not None:
                if k not in told:
                    tell(o)
                outcomes.append(o)
        if not rest:
            break
        if attempt < ATTEMPTS:
            say(f"launch {name} ended before {len(rest)} of its points "
                f"({', '.join(p.label for p in rest)}); running them in a fresh launch")
        todo = rest
    else:
        for p in todo:
            why = f"not reached: {ATTEMPTS} launches ended before this point"
            failed_record(spec, in_round(spec, p, launch.round).cfg, p.ranks, why, {})
            o = Outcome(p, "failed", 0.0, error=why)
            tell(o)
            outcomes.append(o)
    return outcomes


def _from_record(point: Point, rec: RunRecord | FailedRecord | None, seconds: float,
                 log: Path) -> Outcome:
    """A point's outcome from its record (ok, or failed on every rank)."""
    if isinstance(rec, RunRecord):
        return Outcome(point, "ok", seconds, rec.words_per_s, log=log, record=rec)
    why = (rec.error if rec is not None else "") or "no record written"
    return Outcome(point, "failed", seconds, error=why, log=log)


def _settle(spec: SweepSpec, launch: Launch, todo: list[Point], name: str, w: Watched,
            logs: tuple[Path, Path]) -> tuple[list[Outcome | None], list[Point]]:
    """Each point's outcome (None: not reached) and the points to run again."""
    recs = by_position(read_out(spec.out), name)
    done: list[Outcome | None] = []
    rest: list[Point] = []
    # A launch that ended before its first point began (start-up past the limit, or failed)
    # charges that to its first point, as that point's own launch would have.
    started = w.started() or {0}
    for k, p in enumerate(todo):
        span = w.span(k)
        seconds = span[1] - span[0] if span else 0.0
        if k in recs:
            done.append(_from_record(p, recs[k], seconds, logs[1]))
        elif k in started:  # the launch ended inside this point
            why = (f"timed out after {spec.timeout_s:g} s (no record written); ended the launch"
                   if w.timed_out else stderr_why(logs[1], logs[0], w.rc))
            failed_record(spec, in_round(spec, p, launch.round).cfg, p.ranks, why, {
                "launch": {"id": name, "position": k, "shared": True},
                "timed_out": w.timed_out, "returncode": w.rc, "log": str(logs[1])})
            done.append(Outcome(p, "failed", seconds, error=why, log=logs[1]))
        else:
            done.append(None)
            rest.append(p)
    return done, rest


def _write_timings(spec: SweepSpec, launch: Launch, todo: list[Point], name: str,
                   w: Watched) -> None:
    """One timing line per point the launch ran (``sweep_timing.jsonl``), each carrying the
    launch's whole span (so a record is accounted for by its launch) and its own."""
    for k in sorted(w.started()):
        span = w.span(k)
        write_timing(spec.out, todo[k].label, launch.round, {
            "launch_s": round(w.exited - w.spawned, 4), "shared": True, "launch": name,
            "position": k, "points": len(todo),
            "point_s": round(span[1] - span[0], 4) if span else None,
            "first_point_start_s": (round(w.events[0]["at"] - w.spawned, 4)
                                    if w.events else None)})
