"""Several points in one launch (``hvdscale run-points``): the ranks start once (interpreter,
imports, MPI), then run each point of the plan as ``hvdscale run`` would, one after another.

Each point builds its own Horovod (started again with its settings: Horovod reads them at
init), world on a communicator of its own, side channel, data, model and strategy, writes its
record (with its place in the launch and what ran before it) and releases all of it
(hvdscale.train.teardown). After each point the ranks agree how it ended
(hvdscale.train.agree): a point that failed on every rank gets a failed record and the launch
goes on; a rank that does not answer (stuck in a collective of a failed point, or gone) ends the
job, and the sweep runs the points not reached in a fresh launch. A hung point ends the job at
its own deadline (``measure.run_timeout_s``), as a launch of its own would.

Rank 0 appends a line to the plan's state file as each point starts and ends, so the sweep
knows which point a launch was in when it ended, and can hold each point to its time limit.
"""

from __future__ import annotations

import gc
import os
import time
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hvdscale.config import RunConfig, load_config, to_dict
from hvdscale.core import faults, startup
from hvdscale.core.progress import ProgressSettings, start_progress
from hvdscale.core.supervise import abort_job, start_deadline, stop_deadline
from hvdscale.core.world import launch_kind, launch_rank
from hvdscale.errors import ConfigError, HvdscaleError
from hvdscale.records.failed import FailedRecord
from hvdscale.records.launch_plan import LaunchPlan, PlannedPoint
from hvdscale.records.point_state import PointState
from hvdscale.records.store import append_line, append_record, read_record_file, record_key
from hvdscale.train.agree import Agreement, agree, agree_on_store
from hvdscale.train.runner import LaunchParts, PointRun, prepare_launch, run_prepared
from hvdscale.train.teardown import teardown


def read_plan(path: str | Path) -> LaunchPlan:
    """The plan in ``path`` (``records.launch_plan``, read through the store); one clear error
    for a missing or malformed file, naming the field."""
    plan = read_record_file(path, LaunchPlan)
    assert isinstance(plan, LaunchPlan)
    if not plan.points:
        raise HvdscaleError(f"launch plan {path}: no points")
    return plan


def _state(plan: LaunchPlan, **line: Any) -> None:
    """Rank 0: one state line of the launch (``records.point_state``), flushed: the sweep reads
    them while the launch runs."""
    if plan.state and launch_rank() == 0:
        append_line(plan.state, PointState(at=round(time.time(), 3), **line))


@dataclass
class _Launch:
    """The launch's state between points on this rank."""

    plan: LaunchPlan
    out_dir: Path
    settings: ProgressSettings
    argv: list[str] | None
    parts: LaunchParts | None = None
    agreements: Any = None  # the communicator only agreements use, or TORCHRUN_STORE
    after: tuple[str, ...] = ()
    teardown_s: float | None = None


def process_state() -> dict[str, Any]:
    """This rank's resident memory (MB) and OS threads now: what a point finds when it starts
    (equal from point to point when each releases what it set up)."""
    from hvdscale.train.memory import current_rss_mb

    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError:  # not Linux
        threads = None
    return {"rss_mb_before": current_rss_mb(), "threads_before": threads}


def run_points(plan: LaunchPlan, out_dir: str | Path, settings: ProgressSettings,
               argv: list[str] | None = None) -> int:
    """Run every point of ``plan`` on this rank; returns how many failed (on every rank).

    Raises:
        HvdscaleError: a ``horovodrun --gloo`` launch (the points agree over MPI, or over
            torchrun's store under torchrun; ``--gloo`` gives neither).
    """
    if launch_kind() not in ("mpi", "torchrun"):
        raise HvdscaleError("run-points needs an MPI job (mpirun, srun --mpi=pmix, horovodrun "
                            "--mpi) or torchrun: its ranks agree on each point over MPI or "
                            "torchrun's store; under horovodrun --gloo run each point with "
                            "`hvdscale run`")
    launch = _Launch(plan, Path(out_dir), settings, argv)
    startup.begin()  # the first point's start-up holds the launch's own (imports, MPI)
    failed = 0
    for k, p in enumerate(plan.points):
        if k:
            startup.begin()
        failed += not _one_point(launch, k, p)
        launch.after = (*launch.after, p.label)
    return failed


def _one_point(launch: _Launch, k: int, p: PlannedPoint) -> bool:
    """Run point ``k``, agree on how it ended, release it; True when it finished everywhere."""
    rank = launch_rank()
    info = {"id": launch.plan.launch, "position": k, "points": len(launch.plan.points),
            "after": list(launch.after), "shared": True,
            "previous_teardown_s": launch.teardown_s, **process_state()}
    point = PointRun(launch.argv, datetime.now(UTC).isoformat(timespec="seconds"), launch=info)
    faults.set_scope(" ".join(f"--set {x}" for x in p.sets) + " ")  # as `hvdscale run` reads
    _state(launch.plan, position=k, event="start", label=p.label)
    cfg, ok, error, refused = None, True, "", False
    progress = start_progress(launch.settings, rank)
    try:
        try:
            cfg = load_config(p.config, list(p.sets))
        except ConfigError:
            refused = True  # the plan's own input, read alike on every rank
            raise
        start_deadline(cfg.measure.run_deadline_s(), rank)
        faults.maybe_fault(rank, "config")
        if launch.parts is None:
            launch.parts = prepare_launch(cfg.threads, cfg.framework, cfg.device)
            launch.agreements = _agreements()
            # What start-up made (the frameworks' modules) lives as long as the process: kept
            # out of the collector's reach, a point's teardown collects only its own garbage
            # (0.6 s a point here otherwise, for nothing).
            gc.freeze()
        run_prepared(launch.parts, cfg, launch.out_dir, point, progress)
    except Exception as e:  # a failed point: the ranks agree below whether the launch goes on
        ok, error = False, _describe(e, rank, k, p.label) or type(e).__name__
    finally:
        progress.close()
    if launch.agreements is None and not refused:  # failed before MPI: nothing to agree on
        raise HvdscaleError(f"point {k + 1} ({p.label}): {error}")
    # A config every rank refused needs no agreement (each read the same file and --set keys):
    # the point failed on every rank, and the launch goes on to the next.
    said = (Agreement([False] * launch_size(), [error] * launch_size())
            if launch.agreements is None else _agree(launch, k, ok, error))
    if not (said.all_ok or said.all_failed):
        _end_launch(said.ok, k, p.label)
    t0 = time.perf_counter()
    teardown(point.held, launch.parts.fw if launch.parts else None)
    launch.teardown_s = round(time.perf_counter() - t0, 4)
    stop_deadline()
    if said.all_failed and rank == 0:
        _failed_record(launch, cfg, point, said.errors)
    _state(launch.plan, position=k, event="end", status="ok" if said.all_ok else "failed",
           teardown_s=launch.teardown_s)
    return said.all_ok


TORCHRUN_STORE = "torchrun-store"
"""``_Launch.agreements`` under torchrun: each point agrees on keys of its own in the store."""


def _agreements() -> Any:
    """What the points agree on: a communicator of their own over MPI (a collective, once per
    launch), or, under torchrun, its store (each point's keys made when it ends)."""
    if launch_kind() == "torchrun":
        return TORCHRUN_STORE
    from mpi4py import MPI

    return MPI.COMM_WORLD.Dup()  # hvd: collective, once per launch


def _agree(launch: _Launch, k: int, ok: bool, error: str) -> Agreement:
    """Every rank's word on point ``k``."""
    if launch.agreements == TORCHRUN_STORE:
        from hvdscale.core.world_torch import named_store

        store = named_store(f"agree/{launch.plan.launch}/{k}")
        return agree_on_store(store, launch_rank(), launch_size(), ok, error)
    return agree(launch.agreements, ok, error)


SIZE_ENV_VARS = ("OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_NTASKS", "HOROVOD_SIZE",
                 "WORLD_SIZE")
"""Where a launcher states the job's size (read before MPI starts)."""


def launch_size() -> int:
    """The job's ranks as the launcher's environment states them (1 when not launched)."""
    for var in SIZE_ENV_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 1


def _describe(e: Exception, rank: int, k: int, label: str) -> str:
    """The error, printed on this rank (a traceback unless it is a clear input error)."""
    import sys

    if isinstance(e, HvdscaleError):
        text = str(e)
        sys.stderr.write(f"hvdscale: error (rank {rank}): point {k + 1} ({label}): {text}\n")
    else:
        text = f"{type(e).__name__}: {e}"
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        sys.stderr.write(f"hvdscale: rank {rank} failed in point {k + 1} ({label}):\n{tb}")
    sys.stderr.flush()
    return text


def _end_launch(ok: list[bool] | None, k: int, label: str) -> None:
    """A point failed on some ranks only, or a rank never answered: end the job now."""
    import sys

    who = ("a rank did not answer within the agreement's limit" if ok is None else
           "it failed on rank(s) " + ", ".join(str(r) for r, o in enumerate(ok) if not o))
    sys.stderr.write(f"hvdscale: error (rank {launch_rank()}): point {k + 1} ({label}): {who}; "
                     "ending this launch (the sweep runs the points not reached in a new one)\n")
    sys.stderr.flush()
    abort_job(1)


def _failed_record(launch: _Launch, cfg: RunConfig | None, point: PointRun,
                   errors: list[str]) -> None:
    """Rank 0: the failed record of a point that failed on every rank."""
    first = next((e for e in errors if e), "failed")
    known = {} if cfg is None else {
        "name": cfg.name, "key": record_key(cfg), "config": to_dict(cfg),
        "workers": cfg.strategy.workers(len(errors))}
    append_record(launch.out_dir, FailedRecord.from_dict(dict(
        status="failed", started=point.started,
        finished=datetime.now(UTC).isoformat(timespec="seconds"), ranks=len(errors),
        error=f"failed on every rank: {first}", errors_per_rank=errors, launch=point.launch,
        **known)))

