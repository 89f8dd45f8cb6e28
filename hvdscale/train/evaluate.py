"""Evaluation of the model on the held-out set, on its own clock, outside the measured window.

Where: one rank evaluates, the first rank that computes (rank 0 unless the parameter server's
dedicated servers come first), and one allreduce in which every other rank adds exact zeros
hands the same float64 sums to every rank. Why not shard the set over the ranks: a sharded sum
adds the per-rank parts in an order that depends on the rank count, so the same weights would
give a loss that differs in its last bits between np=1 and np=2; evaluated on one rank the loss
of the same weights is identical for every rank count and strategy, and every rank sees the
identical number, so all of them take the same stop decision. The set is small (hundreds of
sentences), and its time is recorded apart from training time.
"""

from __future__ import annotations

import time

import numpy as np

from hvdscale.core.world import World
from hvdscale.corpora.evalset import EvalSet
from hvdscale.strategies.base import Adapter


def eval_loss_sum(adapter: Adapter, evalset: EvalSet) -> float:
    """Summed token loss of the whole evaluation set (no gradients), added in float64 in
    the set's fixed batch order."""
    total = 0.0
    for batch in evalset.batches:
        total += float(adapter.loss(batch))
    return total


class Evaluator:
    """Evaluates on the first computing rank and shares the result with every rank."""

    def __init__(self, world: World, adapter: Adapter, evalset: EvalSet, computes: bool) -> None:
        self.world, self.adapter, self.evalset = world, adapter, evalset
        # hvd: one small collective at set-up: which rank holds a model that trains
        flags = world.allgather(bool(computes))
        self.rank = flags.index(True) if True in flags else 0
        self.seconds = 0.0
        """Seconds spent evaluating and agreeing, all evaluations together (this rank)."""

    def evaluate(self, extra: list[float]) -> tuple[float, np.ndarray]:
        """The per-token eval loss of the current weights, plus ``extra`` summed over ranks.

        ``extra`` carries each rank's counters (words, sentences, ...) in the same allreduce,
        so an evaluation costs one collective. Every rank must call this at the same step.
        """
        start = time.perf_counter()
        mine = eval_loss_sum(self.adapter, self.evalset) if self.world.rank == self.rank else 0.0
        # hvd: the evaluator's sum plus exact zeros from every other rank
        out = self.world.allreduce_sum(np.array([mine, *extra], dtype=np.float64))
        self.seconds += time.perf_counter() - start
        return float(out[0]) / max(1, self.evalset.tokens), out[1:]

    def agree(self, flag: bool) -> bool:
        """The evaluator rank's ``flag`` on every rank (for decisions by its clock)."""
        start = time.perf_counter()
        out = bool(self.world.bcast(bool(flag), root=self.rank))  # hvd: one-bool broadcast
        self.seconds += time.perf_counter() - start
        return out
