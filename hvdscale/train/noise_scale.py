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

from dataclasses import dataclass

import numpy as np


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
