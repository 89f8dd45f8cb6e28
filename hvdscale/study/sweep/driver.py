"""The one driver of every sweep (``hvdscale sweep``, ``hvdscale fusion`` and its DDP bucket
sweep): the grid's points (``plan``, ``grid``) times ``repeats`` interleaved rounds, each round
in its launches (``groups``: one launch per round for the points that can share one, run by
``shared_launch``; a launch of its own for the others, ``run_point``), every launch started by
``process.start``.

A point whose ``ok`` record is already in the results directory (same config, same ranks; with
rounds, tagged with the round: ``hvdscale.study.paired.rounds``) is skipped unless ``redo``, so a
rerun fills only what is missing. A point that fails (non-zero exit, time limit, no record)
gets a ``status: failed`` record with the last lines of its stderr, and the sweep goes on.
Before each launch the host's load is checked (``hvdscale.records.load``) and a busy host is
warned about. ``dry_run`` prints the grid and each launch instead.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from hvdscale.records.fields import Record
from hvdscale.records.load import load_now
from hvdscale.records.run import RunRecord
from hvdscale.study.sweep import process
from hvdscale.study.sweep.groups import Launch, all_launches
from hvdscale.study.sweep.hostfile import write_hostfile
from hvdscale.study.sweep.launcher import (
    error_summary,
    launch_env,
    launch_line,
    rank_command,
    read_out,
)
from hvdscale.study.sweep.outcome import Outcome, SweepResult, failed_record
from hvdscale.study.sweep.plan import (
    Point,
    SweepSpec,
    in_round,
    matches,
    point_sets,
    recorded,
    rounds_of,
)
from hvdscale.study.sweep.shared_launch import run_shared, shared_command
from hvdscale.study.sweep.timing import LaunchTiming, write_timing

# --- launch commands ---------------------------------------------------------------------------

def run_argv(spec: SweepSpec, point: Point) -> list[str]:
    """The ``hvdscale run`` command every rank of ``point`` executes."""
    return rank_command("run", spec.config, spec.out, point_sets(spec, point),
                        spec.progress_every)


def launch_command(spec: SweepSpec, point: Point, hostfile_path: Path | None = None,
                   env: Mapping[str, str] | None = None) -> list[str]:
    """The launcher command line of ``point``.

    Args:
        spec: the sweep.
        point: the point to launch.
        hostfile_path: the clean copy of the sweep's hostfile (see ``write_hostfile``).
        env: environment whose variables mpirun forwards with ``-x``.
    """
    return launch_line(spec.launcher, point.ranks, run_argv(spec, point), hostfile_path,
                       spec.network_interfaces, spec.launcher_args, env=env)


def _log_base(spec: SweepSpec, point: Point) -> Path:
    name = re.sub(r"[^\w.-]", "-", point.cfg.name)
    tag = re.sub(r"[^\w.-]", "-", point.name) if point.name else point.strategy
    return spec.out / "logs" / f"{name}_{point.cfg.framework}_{tag}_np{point.ranks}"


def run_point(spec: SweepSpec, point: Point, hostfile_path: Path | None = None,
              timing: LaunchTiming | None = None) -> Outcome:
    """Launch one point, wait for it (up to the time limit), and record a failure."""
    timing = timing or LaunchTiming()
    timing.sampled = timing.sampled or timing.begin
    base = _log_base(spec, point)
    base.parent.mkdir(parents=True, exist_ok=True)
    cmd = launch_command(spec, point, hostfile_path)
    env = launch_env()
    before = len(read_out(spec.out))
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    out_log, err_log = base.with_suffix(".stdout"), base.with_suffix(".stderr")
    ended = process.start(cmd, env, (out_log, err_log), spec.timeout_s)
    rc, timed_out = ended.rc, ended.timed_out
    timing.spawned, timing.exited = ended.spawned, ended.exited
    seconds = time.monotonic() - t0
    new = read_out(spec.out)[before:]
    rec = next((r for r in reversed(new) if isinstance(r, RunRecord) and matches(r, point)),
               None)
    if rec is not None:
        # The record is written after the last barrier, when every rank has finished: the
        # measurement is complete even if the launch overran its limit while exiting.
        late = (f" (record written; the launch then overran --timeout {spec.timeout_s:g} s "
                "while exiting and was ended)") if timed_out else ""
        return Outcome(point, "ok", seconds, rec.words_per_s, error=late.strip(),
                       log=out_log, record=rec, timing=timing)
    stderr, stdout = (f.read_text(errors="replace") if f.exists() else ""
                      for f in (err_log, out_log))
    if timed_out:
        error = f"timed out after {spec.timeout_s:g} s (no record written); ended the launch"
    else:
        why = error_summary(stderr, stdout=stdout)
        error = (f"exit {rc}: " if rc else "launch exited 0 but wrote no record: ") + why
    failed_record(spec, point.cfg, point.ranks, error, {
        "started": started, "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": cmd, "returncode": rc, "timed_out": timed_out, "seconds": round(seconds, 3),
        "stderr_tail": stderr.splitlines()[-20:], "log": str(err_log)})
    return Outcome(point, "failed", seconds, error=error, log=err_log, timing=timing)


def time_left(launched: list[Outcome], remaining: list[Point]) -> float | None:
    """Estimated seconds for the ``remaining`` points, from the points ``launched`` so far.

    A point is expected to take as long as the launched points with its rank count took on
    average (start-up and step time grow with the ranks on a host), or, for a rank count not
    launched yet, as long as all launched points on average. None before any launch.
    """
    if not launched:
        return None
    overall = sum(o.seconds for o in launched) / len(launched)
    by_ranks: dict[int, list[float]] = {}
    for o in launched:
        by_ranks.setdefault(o.point.ranks, []).append(o.seconds)
    return sum(sum(by_ranks[p.ranks]) / len(by_ranks[p.ranks]) if p.ranks in by_ranks
               else overall for p in remaining)


def launches(spec: SweepSpec) -> list[tuple[int, Point]]:
    """(round, point) in launch order: round r launches every point once before round r+1,
    the order rotated by one point per round (as the benches do), so no point always runs
    first, or always right after the largest one."""
    return [(x.round, x.points[0]) for x in all_launches(list(spec.points), spec.repeats,
                                                         per_point=True)]


def measured(records: Sequence[Record], spec: SweepSpec, r: int,
             point: Point) -> RunRecord | None:
    """The ok record of ``point`` in round ``r``, or None (always None under ``redo``).

    One round: any ok record of the point, as before rounds existed. Several: the record tagged
    with round r (``hvdscale.study.paired.rounds``), so a rerun fills only the missing rounds and a
    failed round stays empty instead of shifting the later ones.
    """
    if spec.redo:
        return None
    if spec.repeats == 1:
        return recorded(records, point)
    return rounds_of(records, point, spec.repeats)[r]


def planned_demand(spec: SweepSpec, point: Point) -> int:
    """Rank x threads ``point`` will run on this host (the first host of a hostfile, which
    mpirun fills first): what ``hvdscale.records.load`` weighs the free cores against."""
    local = min(point.ranks, spec.hostfile.hosts[0].slots) if spec.hostfile else point.ranks
    threads = point.cfg.threads.intra_op or max(1, (os.cpu_count() or 1) // local)
    return local * threads


def busy_warning(spec: SweepSpec, point: Point) -> str:
    """A warning when this host is busy right now for ``point`` (``records.load``), else ""."""
    now = load_now(planned_demand(spec, point))
    if not now.busy:
        return ""
    return (f"warning: this host is busy before the launch ({now.describe()}): the point "
            "will read slow (the report marks it when its record shows the load); measure "
            "on a quiet machine, or with --repeats")


def run_sweep(spec: SweepSpec, say: Callable[[str], None] = print) -> SweepResult:
    """Run every round of every point of ``spec``: one launch per round for the points that
    share one (hvdscale.study.sweep.groups), one launch each for the others; one progress line
    per point, with the sweep's estimated time left once a point has been measured."""
    result = SweepResult()
    plan = [x for x in all_launches(list(spec.points), spec.repeats, spec.launch_per_point)
            if x.round >= spec.first_round]
    total = sum(len(launch.points) for launch in plan)
    # Each point's number is its place in the plan, whatever ran (or was skipped) before it.
    number = {(x.round, p.index): k for k, (x, p) in enumerate(
        ((x, p) for x in plan for p in x.points), 1)}
    records = read_out(spec.out)
    todo = [(launch.round, p) for launch in plan for p in launch.points
            if measured(records, spec, launch.round, p) is None]
    launched: list[Outcome] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hvdscale-sweep-") as tmp:
        hf = write_hostfile(spec.hostfile, Path(tmp) / "hostfile") if spec.hostfile else None
        for launch in plan:
            r = launch.round
            rnd = f" round {r + 1}/{spec.repeats}" if spec.repeats > 1 else ""
            run: list[Point] = []
            for point in launch.points:
                done = measured(read_out(spec.out), spec, r, point)
                if done is None:
                    run.append(point)
                    continue
                o = Outcome(point, "skipped", 0.0, done.words_per_s)
                result.outcomes.append(o)
                say(f"[{number[r, point.index]}/{total}]{rnd} {point.label}: skipped, already "
                    f"recorded {o.words_per_s:.1f} words/s (--redo measures it again)")
            if not run:
                continue

            def tell(o: Outcome, rnd: str = rnd, r: int = r) -> None:
                launched.append(o)
                result.outcomes.append(o)
                rest = todo[len(launched):]
                say(f"[{number[r, o.point.index]}/{total}]{rnd} {o.point.label}: "
                    f"{_progress(o, time.monotonic() - t0, launched, [p for _, p in rest])}")

            _run_launch(spec, launch, run, hf, tell, say)
    return result


def _run_launch(spec: SweepSpec, launch: Launch, run: list[Point], hf: Path | None,
                tell: Callable[[Outcome], None], say: Callable[[str], None]) -> None:
    """One launch of the plan: shared (hvdscale.study.sweep.shared_launch) or a point's own."""
    r = launch.round
    if launch.shared:
        warning = busy_warning(spec, run[0])
        if warning:
            say(f"round {r + 1} np={launch.ranks}: {warning}")
        run_shared(spec, launch, run, hf, tell, say)
        return
    (point,) = run
    timing = LaunchTiming()
    warning = busy_warning(spec, point)
    timing.sampled = time.time()
    if warning:
        say(f"{point.label}: {warning}")
    o = run_point(spec, in_round(spec, point, r), hf, timing)
    o.point = point
    write_timing(spec.out, point.label, r, timing.entry(o.record, None))
    tell(o)


def _progress(o: Outcome, elapsed: float, launched: list[Outcome], rest: list[Point]) -> str:
    """One launch's progress line (after its head): result, times and the sweep's time left."""
    from hvdscale.core.progress_status import format_duration

    left = time_left(launched, rest) if rest else None
    when = f"elapsed {elapsed:.0f} s" + (
        f", sweep ~{format_duration(left)} left" if left is not None else "")
    if o.status == "ok":
        return (f"ok {o.words_per_s:.1f} words/s in {o.seconds:.1f} s ({when})"
                f"{' ' + o.error if o.error else ''}")
    return f"FAILED after {o.seconds:.1f} s ({when}): {o.error} [log: {o.log}]"


def dry_run(spec: SweepSpec, say: Callable[[str], None] = print) -> None:
    """Print each launch's command (every round's, in launch order) and the points it runs;
    launch nothing."""
    from hvdscale.study.sweep.groups import all_launches
    hf = spec.hostfile.path if spec.hostfile else None  # the launch uses a clean copy of it
    plan = all_launches(list(spec.points), spec.repeats, spec.launch_per_point)
    if spec.grid:
        say(f"grid: {spec.grid} = {len(spec.points)} points x {spec.repeats} round(s), "
            f"{len(plan)} launches")
    for k, launch in enumerate(plan, 1):
        r = launch.round
        rnd = f" round {r + 1}/{spec.repeats}" if spec.repeats > 1 else ""
        if not launch.shared:
            (point,) = launch.points
            pt = in_round(spec, point, r)
            say(f"[launch {k}/{len(plan)}]{rnd} {point.label} (a launch of its own: "
                f"{launch.alone}): {shlex.join(launch_command(spec, pt, hf))}")
            continue
        line = shared_command(spec, launch.ranks, Path("<logs>/<launch>.plan.json"), hf)
        say(f"[launch {k}/{len(plan)}]{rnd} np={launch.ranks}, {len(launch.points)} points "
            f"in one launch: {shlex.join(line)}")
        for j, point in enumerate(launch.points, 1):
            pt = in_round(spec, point, r)
            say(f"    {j}. {point.label}: --set {' --set '.join(point_sets(spec, pt))}")
