"""Common random numbers: the blocks of two runs that trained on the same batches, paired.

At one rank count every series trains on the same sequence of batches: each computing rank's
shard and batch plan follow from the data settings, its worker index and the number of workers
(``hvdscale.train.rank_data``), never from the strategy. Step k of run A then held the very
sentences step k of run B held, so a block's words/s varies with its sentences alike in both,
and the ratio of A's block to B's block cancels that variance (the sentence lengths are
lognormal; a block of long sentences is slow in both). ``same_batches`` checks it from the
records' raw lists (every rank's words per step equal) before a pairing is believed.

A block's words/s: the block's words over all computing ranks over its wall time, the slowest
rank's summed step times (a synchronous step waits for it). This module measures what the
pairing buys (``bench/bench_crn.py``): the 95 % interval of the ratio from the blocks paired
against the same blocks taken as two unpaired samples (Welch), for the same measured time. The
verdicts stay on rounds (``decide``): blocks of one process are not independent draws of what
varies between launches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from hvdscale.records.run import RunRecord


def same_batches(a: RunRecord, b: RunRecord) -> bool:
    """Whether ``a`` and ``b`` measured the same steps of the same batches: the same computing
    ranks, each with the same words in every measured step."""
    return (a.raw is not None and b.raw is not None and a.raw.ranks == b.raw.ranks
            and a.raw.words == b.raw.words)


def block_rates(rec: RunRecord, block_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """(words, seconds) of each whole block of ``block_steps`` measured steps (a last partial
    block is left out): words summed over the computing ranks, seconds the slowest rank's."""
    if rec.raw is None or block_steps < 1:
        raise ValueError("a record with raw step lists and block_steps >= 1 is needed")
    words = np.asarray(rec.raw.words, dtype=np.float64)  # ranks x steps
    secs = np.asarray(rec.raw.step_s, dtype=np.float64)
    n = words.shape[1] // block_steps
    cut = n * block_steps
    w = words[:, :cut].reshape(words.shape[0], n, block_steps).sum(axis=(0, 2))
    t = secs[:, :cut].reshape(secs.shape[0], n, block_steps).sum(axis=2).max(axis=0)
    return w, t


@dataclass(frozen=True)
class BlockRatio:
    """A / B's words/s from paired blocks: the geometric mean ratio and its 95 % interval's
    half-width in log space, paired and unpaired, over ``blocks`` blocks each."""

    blocks: int
    ratio: float
    paired_half: float
    """Student's t over the blocks' log ratios (n - 1 degrees of freedom)."""
    unpaired_half: float
    """Welch's t over the two runs' log block rates taken as independent samples."""

    @property
    def width_gain(self) -> float:
        """How many times narrower the paired interval is (unpaired half-width / paired)."""
        return self.unpaired_half / self.paired_half if self.paired_half > 0 else math.inf


def block_ratio(a: RunRecord, b: RunRecord, block_steps: int) -> BlockRatio:
    """A / B from their blocks, paired block by block (same batches) and unpaired.

    Raises:
        ValueError: the runs did not see the same batches (no common random numbers), or
            fewer than 3 whole blocks.
    """
    if not same_batches(a, b):
        raise ValueError("the runs did not train on the same batches (raw words per step "
                         "differ): their blocks cannot be paired")
    wa, ta = block_rates(a, block_steps)
    wb, tb = block_rates(b, block_steps)
    n = min(wa.size, wb.size)
    if n < 3:
        raise ValueError(f"{n} whole blocks of {block_steps} steps: at least 3 are needed")
    la, lb = np.log(wa[:n] / ta[:n]), np.log(wb[:n] / tb[:n])
    d = la - lb
    paired = float(stats.t.ppf(0.975, n - 1)) * float(d.std(ddof=1)) / math.sqrt(n)
    va, vb = float(la.var(ddof=1)) / n, float(lb.var(ddof=1)) / n
    dof = (va + vb) ** 2 / (va ** 2 / (n - 1) + vb ** 2 / (n - 1)) if va + vb > 0 else n - 1
    unpaired = float(stats.t.ppf(0.975, dof)) * math.sqrt(va + vb)
    return BlockRatio(n, float(math.exp(d.mean())), paired, unpaired)
