"""Gradient noise scale B_simple = tr(Sigma)/|G|^2 (issue 33).

McCandlish et al. (2018), "An Empirical Model of Large-Batch Training", appendix A: data
parallelism hands us, every step, the gradient at each rank's batch B_i and at the summed batch
B_big = sum B_i. Their squared norms give unbiased estimates of |G|^2 and tr(Sigma).

Why the harmonic mean of the per-rank batches: for a token-mean gradient g_i over B_i tokens,
E|g_i|^2 = |G|^2 + tr(Sigma)/B_i, so E mean_i |g_i|^2 = |G|^2 + tr(Sigma) * mean_i(1/B_i);
B_small = 1/mean(1/B_i) makes the estimate exact for uneven batches (the arithmetic mean biases
it). Why a ratio of means over the window: single points are very noisy (each may be negative);
McCandlish et al. average numerator and denominator separately before dividing.

This module only estimates; collecting the per-rank sums (one allreduce) is the caller's job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from hvdscale.corpora.corpus import Batch
from hvdscale.registry import get as get_strategy


@dataclass(frozen=True)
class Point:
    """One evaluation point's estimates: |G|^2 and tr(Sigma), both unbiased."""

    g2: float
    s: float


def point_from_sums(reduced: np.ndarray) -> Point | None:
    """Estimate one point from the allreduced [summed grad..., tokens, 1/tokens, |g_i|^2, 1].

    ``summed grad`` is the sum over ranks of each rank's token-SUMMED gradient; ``|g_i|^2`` is
    each rank's squared norm of its token-MEAN gradient. Ranks without a batch add zeros. None
    when fewer than two ranks contributed (no small/big pair).
    """
    grad, tokens, inv_tokens, sq_small, count = (
        reduced[:-4], float(reduced[-4]), float(reduced[-3]), float(reduced[-2]),
        float(reduced[-1]))
    if count < 2 or tokens <= 0:
        return None
    b_big = tokens
    b_small = count / inv_tokens  # harmonic mean of the per-rank token counts
    g_big = grad / b_big
    g_big_sq = float(np.dot(g_big, g_big))
    mean_small_sq = sq_small / count
    g2 = (b_big * g_big_sq - b_small * mean_small_sq) / (b_big - b_small)
    s = (mean_small_sq - g_big_sq) / (1.0 / b_small - 1.0 / b_big)
    return Point(g2=g2, s=s)


def local_sums(summed_grad: np.ndarray | None, tokens: int, size: int) -> np.ndarray:
    """This rank's contribution to the allreduce (zeros when it has no batch or computes none)."""
    out = np.zeros(size + 4, dtype=np.float64)
    if summed_grad is None or tokens <= 0:
        return out
    g = np.asarray(summed_grad, dtype=np.float64)
    mean = g / tokens
    out[:size] = g
    out[size:] = (tokens, 1.0 / tokens, float(np.dot(mean, mean)), 1.0)
    return out


def b_simple(points: list[Point], resamples: int = 400, seed: int = 0) -> dict | None:
    """The window's B_simple = mean(S)/mean(|G|^2) (ratio of means) with a bootstrap 10-90%.

    Deterministic: the bootstrap is seeded. None when there are no points or mean |G|^2 <= 0.
    """
    if not points:
        return None
    g2 = np.array([p.g2 for p in points])
    s = np.array([p.s for p in points])
    if g2.mean() <= 0:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(points), size=(resamples, len(points)))
    den = g2[idx].mean(axis=1)
    ratios = s[idx].mean(axis=1)[den > 0] / den[den > 0]
    p10, p90 = (np.percentile(ratios, [10, 90]) if ratios.size else (np.nan, np.nan))
    return {"b_simple_tokens": float(s.mean() / g2.mean()), "p10": float(p10),
            "p90": float(p90), "points": len(points)}


HOW = ("McCandlish et al. 2018 appendix A: per-rank and averaged gradients of the batch just "
       "trained, at each evaluation point (outside training time); B_simple = mean tr(Sigma) / "
       "mean |G|^2 over the points, in loss tokens; p10-p90 of a seeded bootstrap over points")


class NoiseProbe:
    """Collects one point per evaluation (every rank calls ``probe`` at the same moments)."""

    def __init__(self, world: Any, adapter: Any, computes: bool, why_not: str | None) -> None:
        """``why_not``: why this run cannot estimate (None: it can); the probe then does no
        collective at all, on every rank alike."""
        self.world, self.adapter, self.computes, self.why_not = world, adapter, computes, why_not
        self.size = int(sum(n for _, n in adapter.tensor_sizes())) if why_not is None else 0
        self.points: list[Point] = []
        self.per_point: list[dict[str, float]] = []
        self.seconds = 0.0

    def probe(self, batch: Batch | None) -> float:
        """One point from ``batch`` (this rank's last trained batch; None: adds zeros).

        Returns the seconds it took (the caller excludes them from training time)."""
        if self.why_not is not None:
            return 0.0
        start = time.perf_counter()
        if self.computes and batch is not None and batch.loss_tokens > 0:
            mine = local_sums(self.adapter.probe_grad(batch), batch.loss_tokens, self.size)
        else:
            mine = local_sums(None, 0, self.size)
        reduced = self.world.allreduce_sum(mine)  # hvd: one allreduce per evaluation point
        point = point_from_sums(reduced)
        g = reduced[:-4]
        self.per_point.append({
            "tokens": float(reduced[-4]), "inv_tokens": float(reduced[-3]),
            "sq_small": float(reduced[-2]), "ranks": float(reduced[-1]),
            "sq_big_sum": float(np.dot(g, g)),
            "g2": point.g2 if point else None, "s": point.s if point else None})
        if point is not None:
            self.points.append(point)
        took = time.perf_counter() - start
        self.seconds += took
        return took

    def summary(self) -> dict[str, Any]:
        """The record's ``quality.noise_scale``: B_simple or null with its ``why``."""
        est = b_simple(self.points) if self.why_not is None else None
        why = self.why_not
        if why is None and est is None:
            why = ("no evaluation point had two contributing ranks" if not self.points
                   else "mean |G|^2 estimate not positive (too few or too noisy points)")
        tokens = [p["tokens"] for p in self.per_point if p["ranks"] >= 2]
        return {"b_simple_tokens": est["b_simple_tokens"] if est else None,
                "p10": est["p10"] if est else None, "p90": est["p90"] if est else None,
                "points": len(self.points),
                "global_batch_tokens": float(np.mean(tokens)) if tokens else None,
                "per_point": self.per_point, "probe_s": self.seconds, "why": why, "how": HOW}


def why_not(strategy: str, world_size: int, enabled: bool) -> str | None:
    """Why a run records no noise scale (None: it records one)."""
    if not enabled:
        return "measure.noise_scale is off"
    if not get_strategy(strategy).sends:  # ranks that send nothing train no shared model
        return f"strategy {strategy} trains no shared model (replicas share no weights)"
    if world_size < 2:
        return "needs at least two ranks (one rank has no small/big batch pair)"
    return None
