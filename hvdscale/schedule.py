"""How many steps a run takes and which batch (or none) each rank trains on at each step.

Two modes, chosen by ``measure.epochs``:

* fixed steps (0): ``warmup_steps + steps`` batches from each rank's endless stream; every rank
  has a batch at every step.
* whole epochs (N >= 1): each rank trains on all of its own batches of N epochs. With length
  bucketing (or an uneven split of the data) ranks hold different numbers of batches. The
  ranks agree on the step count up front, the most batches any rank holds, with one small
  allgather before training; a rank that has run out gets ``None`` for the remaining steps and
  takes part in them with zero gradient and zero tokens. Under summed, token-weighted
  semantics that contribution is exact (the update is the one of the union of the batches that
  exist at that step), and every collective is entered by every rank, so nothing waits forever.

``hvd.join()`` was the alternative: it gives the same zeros but only for Horovod, leaves the
joined rank's replica (and optimizer state) behind until a broadcast from the last rank, and
has no counterpart for the MPI parameter server. Agreeing up front costs one allgather of an
int per run and works the same for every strategy.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from hvdscale.config import MeasureConfig
from hvdscale.data import Batch, BatchPlan
from hvdscale.errors import HvdscaleError
from hvdscale.world import World


@dataclass(frozen=True)
class Schedule:
    """The step counts every rank agreed on."""

    warmup_steps: int
    """Unmeasured steps before the window (negative step numbers); every rank has a batch."""
    steps: int
    """Measured steps: the same on every rank."""
    epochs: int
    """Whole epochs measured (0: fixed step count)."""
    batches_per_rank: tuple[int | None, ...] = ()
    """Epoch mode: measured batches each rank holds, in rank order (None: serve-only)."""


def agree_steps(world: World, own_batches: int | None) -> tuple[int, tuple[int | None, ...]]:
    """The step count of an epoch-bounded run, identical on every rank.

    Args:
        world: the job's ranks; every rank must call this (it is a collective).
        own_batches: this rank's number of batches, or None on a rank that only serves.

    Returns:
        (the most batches any rank holds, every rank's count in rank order).
    """
    counts = tuple(world.allgather(own_batches))  # hvd: one small collective, before training
    steps = max((c for c in counts if c is not None), default=0)
    if steps == 0:
        raise HvdscaleError("measure.epochs: no rank has a batch to train on (corpus smaller "
                            "than one batch?)")
    return steps, counts


def make_schedule(cfg: MeasureConfig, plan: BatchPlan | None,
                  world: World) -> tuple[Schedule, Iterator[Batch | None]]:
    """The agreed schedule and this rank's batches, one per step (None: no batch this step).

    Args:
        cfg: the ``measure`` section.
        plan: this rank's batch plan, or None on a rank that only serves.
        world: the job's ranks (used in epoch mode only, by every rank).

    Returns:
        The schedule and an iterator of exactly ``warmup_steps + steps`` items.
    """
    if cfg.epochs == 0:
        schedule = Schedule(cfg.warmup_steps, cfg.steps, 0)
        if plan is None:
            return schedule, itertools.repeat(None, cfg.warmup_steps + cfg.steps)
        return schedule, itertools.islice(plan.batches(), cfg.warmup_steps + cfg.steps)

    own = plan.epochs(cfg.epochs) if plan is not None else None
    steps, counts = agree_steps(world, len(own) if own is not None else None)
    schedule = Schedule(cfg.warmup_steps, steps, cfg.epochs, counts)
    if plan is None:
        return schedule, itertools.repeat(None, cfg.warmup_steps + steps)
    assert own is not None
    return schedule, _epoch_stream(plan, own, cfg.warmup_steps, steps, cfg.epochs)


def _epoch_stream(plan: BatchPlan, own: list, warmup: int, steps: int,
                  epochs: int) -> Iterator[Batch | None]:
    # Warm-up batches come from the epochs after the measured ones, so the window is exactly
    # the N measured epochs and warm-up never runs a rank out of data.
    yield from itertools.islice(plan.batches(first_epoch=epochs), warmup)
    for idx in own:
        yield plan.make(idx)
    yield from itertools.repeat(None, steps - len(own))
