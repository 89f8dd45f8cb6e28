"""``measure.target_rel_ci``: measure in blocks of steps until the figure is precise.

After every ``block_steps`` measured steps the ranks sum the block's real tokens and average its
seconds (one small allreduce, outside the measured window: the loop takes a stop check's time
out of it), and rank 0 decides for everyone: stop once at least ``MIN_BLOCKS`` blocks give a 95%
interval of words/s within +-``target_rel_ci`` of it, or once ``max_seconds`` have been measured.
The interval is the one decision procedure's (``hvdscale.study.verdict``, issue 62): rank 0 looks
after every block, so the look at n blocks is made at its spent level alpha_n (the levels of all
looks sum to 5 %), and stopping as soon as it is narrow enough keeps its 95 % coverage.

The figure is the record's own: all words over all seconds (a ratio). Its interval comes from
the blocks by the ratio estimator's standard error (the spread of each block's words about the
figure times its seconds), with Student's t for the blocks' degrees of freedom. Blocks of one
process are not independent draws (a slow phase of the host spans several), so the interval
says how precisely this launch measured; the spread between processes shows in a sweep's
rounds (``--repeats``), which stay separate launches.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from hvdscale.config import MeasureConfig
from hvdscale.core.meter import t95
from hvdscale.core.world import World
from hvdscale.corpora.corpus import Batch

MIN_BLOCKS = 3
"""Blocks before the interval is trusted (2 degrees of freedom)."""
MAX_BLOCKS = 100_000
"""The step stream's length cap in blocks; ``max_seconds`` ends a run long before."""


def ratio_interval(words: list[float], seconds: list[float],
                   anytime: bool = False) -> tuple[float, float]:
    """(words/s over all blocks, the 95% half-width of it) by the ratio estimator; the
    half-width is inf for fewer than 2 blocks. ``anytime``: the half-width valid at every look
    (``hvdscale.study.verdict.decide.critical`` for this many blocks; inf below its minimum)."""
    w, t = np.asarray(words, dtype=np.float64), np.asarray(seconds, dtype=np.float64)
    total = float(t.sum())
    rate = float(w.sum()) / total if total > 0 else float("nan")
    n = w.size
    if n < 2 or total <= 0:
        return rate, math.inf
    resid = w - rate * t
    se = math.sqrt(float(np.sum(resid ** 2)) / (n - 1)) / (float(t.mean()) * math.sqrt(n))
    if not anytime:
        return rate, t95(n - 1) * se
    # Here, not at the top: ranks import this module at start-up; scipy loads on rank 0 only.
    from hvdscale.study.verdict.decide import MIN_ROUNDS, critical

    return rate, (critical(n)[0] * se if n >= MIN_ROUNDS else math.inf)


class BlockMeter:
    """Counts one run's measured blocks on every rank and says when to stop."""

    def __init__(self, measure: MeasureConfig, world: World) -> None:
        self.target, self.block_steps = measure.target_rel_ci, measure.block_steps
        self.max_seconds, self.world = measure.max_seconds, world
        self.blocks: list[dict[str, float]] = []
        self.words = 0
        self.t0 = 0.0
        self.steps = 0
        self.stopped = "max blocks"

    def begin(self) -> None:
        """The measured window opens: the first block starts."""
        self.t0 = time.perf_counter()

    def after_step(self, step: int, batch: Batch | None) -> bool:
        """Count measured step ``step`` (warm-up steps: negative, ignored); at a block's end,
        True when every rank should stop."""
        if step < 0:
            return False
        self.steps = step + 1
        if batch is not None:
            self.words += batch.words
        if self.steps % self.block_steps:
            return False
        secs = time.perf_counter() - self.t0
        tot = self.world.allreduce_sum(np.array([self.words, secs], dtype=np.float64))
        self.blocks.append({"steps": self.block_steps, "words": round(float(tot[0])),
                            "seconds": float(tot[1]) / self.world.size})
        self.words = 0
        stop = self.world.bcast(self._decide() if self.world.rank == 0 else None, root=0)
        self.stopped = stop or self.stopped
        self.t0 = time.perf_counter()  # the exchange is not part of the next block
        return bool(stop)

    def _decide(self) -> str:
        """Rank 0: "target met", "max_seconds" or "" (go on)."""
        rate, half = self.interval()
        if len(self.blocks) >= MIN_BLOCKS and rate > 0 and half / rate <= self.target:
            return "target met"
        if sum(b["seconds"] for b in self.blocks) >= self.max_seconds:
            return "max_seconds"
        return ""

    def interval(self) -> tuple[float, float]:
        """(words/s, its 95% half-width, valid at every look) over the blocks so far."""
        return ratio_interval([b["words"] for b in self.blocks],
                              [b["seconds"] for b in self.blocks], anytime=True)

    def summary(self) -> dict[str, Any]:
        """The record's ``interval``: the blocks, the interval and whether it met the target."""
        rate, half = self.interval()
        rel = half / rate if rate > 0 and math.isfinite(half) else None
        return {"target_rel_ci": self.target, "block_steps": self.block_steps,
                "max_seconds": self.max_seconds, "blocks": self.blocks,
                "words_per_s": rate, "ci95": half if math.isfinite(half) else None,
                "rel_ci95": rel, "met": self.stopped == "target met", "stopped": self.stopped}
