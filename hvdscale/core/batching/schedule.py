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
has no counterpart for the MPI parameter server. Agreeing up front costs one allgather per run
and works the same for every strategy.

``data.bucketing.mode`` (see ``BucketConfig.mode``) says how a step's batches are formed:

* ``per_rank``: each rank's own batches, as above.
* ``aligned``: every rank draws its batch of a step from the same length bucket; the same one
  allgather carries each rank's batch counts per bucket, and the bucket sequence is drawn from
  the data seed, identically everywhere.
* ``global``: every rank derives the same global batches from the whole corpus
  (``hvdscale.core.batching.plan.GlobalPlan``) and takes its part of each; the step count is
  the number of global batches, known on every rank without communication. The allgather then
  only checks that the ranks agree (a different corpus file on one host would otherwise train
  silently on a different split) and carries each rank's non-empty parts for the record. A
  rank whose part of a step is empty gets None, as a rank out of batches does above.

``make_schedule`` does the collective; ``build_schedule`` is pure, so a test can rebuild every
rank's stream in one process.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from hvdscale.config import MeasureConfig
from hvdscale.core.batching.plan import BatchPlan, GlobalPlan
from hvdscale.core.world import World
from hvdscale.corpora.corpus import Batch
from hvdscale.errors import HvdscaleError

ALIGN_SEED_TAG = 11  # the shared bucket sequences' seed: [data.seed, epoch, 11]; no rank in it


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
    aligned: bool = False
    """Whether every rank draws from the same length bucket at each step."""
    mode: str = "per_rank"
    """``data.bucketing.mode`` in force: ``per_rank``, ``aligned`` or ``global``."""


def _mode(mode: str | bool, align: bool = False) -> str:
    """The bucketing mode; a bool is the older ``align`` flag (True: ``aligned``)."""
    if isinstance(mode, bool):
        mode = "aligned" if mode else "per_rank"
    return "aligned" if align and mode == "per_rank" else mode


def local_summary(cfg: MeasureConfig, plan: BatchPlan | None, mode: str | bool) -> Any:
    """What this rank contributes to the agreement (None on a rank that only serves).

    Epoch mode: its number of batches, or aligned its batch count per bucket per epoch. Fixed
    steps aligned: its batch count per bucket in one epoch (the draw's weights). Global: the
    global batches' count and checksum, and its non-empty parts in the measured epochs.
    """
    mode = _mode(mode)
    if plan is None:
        return None
    if mode == "global":
        assert isinstance(plan, GlobalPlan)
        return (plan.digest(cfg.epochs), len(plan.epochs(cfg.epochs)) if cfg.epochs else 0)
    if mode == "per_rank":
        return len(plan.epochs(cfg.epochs))
    if cfg.epochs == 0:
        return _counts(plan.epoch_buckets(0))
    return [_counts(plan.epoch_buckets(e)) for e in range(cfg.epochs)]


def make_schedule(cfg: MeasureConfig, plan: BatchPlan | None, world: World,
                  mode: str | bool = "per_rank",
                  align: bool = False) -> tuple[Schedule, Iterator[Batch | None]]:
    """The agreed schedule and this rank's batches, one per step (None: no batch this step).

    Args:
        cfg: the ``measure`` section.
        plan: this rank's batch plan (a ``GlobalPlan`` in global mode), or None on a rank that
            only serves.
        world: the job's ranks; every rank calls this (a collective, except with fixed steps
            in ``per_rank`` mode).
        mode: ``data.bucketing.mode`` (``per_rank`` without bucketing); True/False is read as
            the older ``align`` flag.
        align: deprecated: True means ``mode="aligned"``.

    Returns:
        The schedule and an iterator of exactly ``warmup_steps + steps`` items.
    """
    mode = _mode(mode, align)
    if cfg.epochs == 0 and mode == "per_rank":
        schedule = Schedule(cfg.warmup_steps, cfg.steps, 0)
        if plan is None:
            return schedule, itertools.repeat(None, cfg.warmup_steps + cfg.steps)
        return schedule, itertools.islice(plan.batches(), cfg.warmup_steps + cfg.steps)
    # hvd: one small collective before training, entered by every rank (servers send None)
    gathered = world.allgather(local_summary(cfg, plan, mode))
    return build_schedule(cfg, plan, gathered, mode)


def build_schedule(cfg: MeasureConfig, plan: BatchPlan | None, gathered: list[Any],
                   mode: str | bool) -> tuple[Schedule, Iterator[Batch | None]]:
    """``make_schedule`` after the allgather: the same steps on every rank, from ``gathered``
    (every rank's ``local_summary``, in rank order)."""
    mode = _mode(mode)
    warmup = cfg.warmup_steps
    workers = [g for g in gathered if g is not None]
    if mode == "global":
        return _global_schedule(cfg, plan, gathered)
    align = mode == "aligned"
    if cfg.epochs == 0:  # aligned fixed steps
        weights: dict[int, int] = {}
        for counts in workers:
            for b, n in counts.items():
                weights[b] = weights.get(b, 0) + n
        schedule = Schedule(warmup, cfg.steps, 0, aligned=True, mode="aligned")
        if plan is None:
            return schedule, itertools.repeat(None, warmup + cfg.steps)
        return schedule, _aligned_steps(plan, weights, warmup + cfg.steps)
    if not align:
        steps = max(workers, default=0)
        _check_steps(steps)
        schedule = Schedule(warmup, steps, cfg.epochs, tuple(gathered))
        if plan is None:
            return schedule, itertools.repeat(None, warmup + steps)
        own = plan.epochs(cfg.epochs)
        return schedule, _epoch_stream(plan, own, warmup, steps, cfg.epochs)
    seed = plan.cfg.seed if plan is not None else 0
    shuffle = plan.cfg.shuffle if plan is not None else False
    sequences = [aligned_sequence([w[e] for w in workers], seed, e, shuffle)
                 for e in range(cfg.epochs)]
    steps = sum(len(s) for s in sequences)
    _check_steps(steps)
    totals = tuple(None if g is None else sum(sum(c.values()) for c in g) for g in gathered)
    schedule = Schedule(warmup, steps, cfg.epochs, totals, aligned=True, mode="aligned")
    if plan is None:
        return schedule, itertools.repeat(None, warmup + steps)
    return schedule, _aligned_epochs(plan, sequences, warmup, cfg.epochs)


def aligned_sequence(counts: list[dict[int, int]], seed: int, epoch: int,
                     shuffle: bool = True) -> list[int]:
    """The bucket of each step of one epoch when ranks align: every bucket as many times as
    the rank with most batches in it holds, shuffled with a seed shared by all ranks.

    Args:
        counts: each worker's batch count per bucket in this epoch.
        seed: the data seed (``data.seed``), the same on every rank.
        epoch: the epoch (a new order each epoch).
        shuffle: False keeps the buckets in order, short to long (``data.shuffle=false``).
    """
    buckets = sorted({b for c in counts for b in c})
    seq = [b for b in buckets for _ in range(max(c.get(b, 0) for c in counts))]
    if not shuffle:
        return seq
    perm = np.random.default_rng([seed, epoch, ALIGN_SEED_TAG]).permutation(len(seq))
    return [seq[i] for i in perm]


def _global_schedule(cfg: MeasureConfig, plan: BatchPlan | None,
                     gathered: list[Any]) -> tuple[Schedule, Iterator[Batch | None]]:
    digests = {g[0] for g in gathered if g is not None}
    if len(digests) > 1:
        raise HvdscaleError("data.bucketing.mode=global: the ranks derived different global "
                            "batches (is the corpus the same file on every host?); "
                            f"(global batches, checksum) by rank: {[g and g[0] for g in gathered]}")
    warmup = cfg.warmup_steps
    steps = cfg.steps if cfg.epochs == 0 else next(iter(digests))[0]
    _check_steps(steps)
    counts = tuple(None if g is None else g[1] for g in gathered) if cfg.epochs else ()
    schedule = Schedule(warmup, steps, cfg.epochs, counts, mode="global")
    if plan is None:
        return schedule, itertools.repeat(None, warmup + steps)
    assert isinstance(plan, GlobalPlan)
    if cfg.epochs == 0:
        return schedule, itertools.islice(plan.steps(), warmup + steps)
    # As in _epoch_stream: warm-up from the epochs after the measured ones.
    return schedule, itertools.chain(itertools.islice(plan.steps(first_epoch=cfg.epochs), warmup),
                                     itertools.islice(plan.steps(), steps))


def _counts(groups: dict[int, list]) -> dict[int, int]:
    return {b: len(v) for b, v in groups.items()}


def _check_steps(steps: int) -> None:
    if steps == 0:
        raise HvdscaleError("measure.epochs: no rank has a batch to train on (corpus smaller "
                            "than one batch?)")


def _epoch_stream(plan: BatchPlan, own: list, warmup: int, steps: int,
                  epochs: int) -> Iterator[Batch | None]:
    # Warm-up batches come from the epochs after the measured ones, so the window is exactly
    # the N measured epochs and warm-up never runs a rank out of data.
    yield from itertools.islice(plan.batches(first_epoch=epochs), warmup)
    for idx in own:
        yield plan.make(idx)
    yield from itertools.repeat(None, steps - len(own))


def _aligned_epochs(plan: BatchPlan, sequences: list[list[int]], warmup: int,
                    epochs: int) -> Iterator[Batch | None]:
    yield from itertools.islice(plan.batches(first_epoch=epochs), warmup)
    for e, seq in enumerate(sequences):
        queues = {b: iter(v) for b, v in plan.epoch_buckets(e).items()}
        for b in seq:
            idx = next(queues.get(b, iter(())), None)
            yield None if idx is None else plan.make(idx)  # None: this bucket is spent here


def _aligned_steps(plan: BatchPlan, weights: dict[int, int], n: int) -> Iterator[Batch]:
    """``n`` batches, the bucket of each drawn in proportion to ``weights`` (all ranks' batch
    counts per bucket) with the shared seed; each bucket cycles through its own epochs."""
    buckets = sorted(weights)
    p = np.array([weights[b] for b in buckets], dtype=np.float64)
    rng = np.random.default_rng([plan.cfg.seed, ALIGN_SEED_TAG])
    draws = rng.choice(len(buckets), size=n, p=p / p.sum())
    epoch_buckets = functools.lru_cache(maxsize=4)(plan.epoch_buckets)
    mine = sorted(epoch_buckets(0))

    def endless(b: int) -> Iterator[np.ndarray]:
        for e in itertools.count():
            yield from epoch_buckets(e).get(b, [])

    queues: dict[int, Iterator[np.ndarray]] = {}
    for d in draws:
        b = buckets[int(d)]
        # A bucket this rank has no sentence in: its nearest one (lengths stay close).
        own = b if b in mine else min(mine, key=lambda m: (abs(m - b), m))
        if own not in queues:
            queues[own] = endless(own)
        yield plan.make(next(queues[own]))
