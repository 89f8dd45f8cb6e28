"""Which points of a sweep share a launch (one launch per round, not per point).

Points share a launch when their ranks start the same way: the same rank count, framework,
thread counts and device (fixed once a process has started them; the launcher and hosts are the
sweep's). A point that cannot share one gets its own, and the plan says why: its strategy's
registry entry says so (``alone``: TensorFlow's MultiWorkerMirroredStrategy is set up once per
process, its collective runtime cannot be configured again), Horovod with a fixed fusion
threshold or cycle time (``HOROVOD_FIXED``), or the sweep asked for ``--launch-per-point``.

Within a round the points of one launch run in the sweep's order rotated by the round, so no
point is always first or always right after the same one; rounds stay separate launches, so
what varies between processes shows in the spread.
"""

from __future__ import annotations

from dataclasses import dataclass

from hvdscale.registry import get as get_strategy
from hvdscale.study.sweep.plan import Point

HOROVOD_FIXED = ("Horovod 0.28's parameter manager crashes when Horovod starts again in one "
                 "process with a fixed fusion threshold or cycle time (a segfault in "
                 "ParameterManager::BayesianParameter::SetValue, seen here)")
"""Why a Horovod point that fixes its fusion threshold, its cycle time or autotunes them runs
alone: after one such point, ``hvd.init()`` in the same process crashed for most changes of
which of the two are fixed (cycle time then fusion threshold, both then neither, both then
both), on every rank. Points at Horovod's defaults share launches."""


@dataclass(frozen=True)
class Launch:
    """One launch of a round: its points in the order they run."""

    round: int
    points: tuple[Point, ...]
    alone: str = ""
    """Why this point runs in a launch of its own ("" for a shared launch)."""

    @property
    def shared(self) -> bool:
        """Whether the launch runs its points one after another in the same processes."""
        return not self.alone

    @property
    def ranks(self) -> int:
        """The launch's rank count."""
        return self.points[0].ranks


def share_key(point: Point) -> tuple:
    """What a shared launch fixes for all its points (they must agree on it)."""
    c = point.cfg
    return (point.ranks, c.framework, c.threads.intra_op, c.threads.inter_op,
            c.threads.mpi_yield, c.device)


def alone_reason(point: Point, per_point: bool) -> str:
    """Why ``point`` cannot share a launch ("" when it can)."""
    if per_point:
        return "--launch-per-point"
    hvd = point.cfg.strategy.horovod
    if point.strategy == "horovod" and (hvd.fusion_threshold_mb is not None
                                        or hvd.cycle_time_ms is not None or hvd.autotune):
        return HOROVOD_FIXED
    return get_strategy(point.strategy).alone


def round_launches(points: list[Point], r: int, per_point: bool = False) -> list[Launch]:
    """Round ``r``'s launches: the shareable points grouped by ``share_key`` (in order of
    first appearance, so the smallest rank count still comes first), each group's order rotated
    by ``r``; the others one launch each, in their place."""
    out: list[Launch] = []
    groups: dict[tuple, list[Point]] = {}
    order: list[tuple | Point] = []
    for p in points:
        why = alone_reason(p, per_point)
        if why:
            order.append(p)
            continue
        key = share_key(p)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(p)
    for item in order:
        if isinstance(item, Point):
            out.append(Launch(r, (item,), alone_reason(item, per_point)))
            continue
        g = groups[item]
        k = r % len(g)
        out.append(Launch(r, tuple(g[k:] + g[:k])))
    return out


def all_launches(points: list[Point], repeats: int, per_point: bool = False) -> list[Launch]:
    """Every round's launches, round by round; a per-point sweep keeps the old rotation of the
    whole point list (``hvdscale.study.sweep.driver.launches``)."""
    if per_point:
        out = []
        for r in range(repeats):
            k = r % len(points) if points else 0
            out += [Launch(r, (p,), "--launch-per-point") for p in points[k:] + points[:k]]
        return out
    return [launch for r in range(repeats) for launch in round_launches(points, r)]
