"""The noise scale's interval and record (issue 39): the bootstrap's 10-90% interval has the
width of the estimate's sampling spread (never collapsed to the point), and the record carries
the estimate the points give (never a null beside points that give one)."""

from __future__ import annotations

import numpy as np

from hvdscale.train.noise_scale import (
    HOW,
    NoiseProbe,
    Point,
    b_simple,
    local_sums,
    point_from_sums,
)
from tests.unit.test_noise_scale import TRUE_B, _points


def test_the_interval_is_as_wide_as_the_estimates_spread() -> None:
    """40 independent windows of 50 points: the true B lies in about 80% of the 10-90%
    intervals, and the intervals are about as wide as the estimates' own 10-90% spread."""
    got = [b_simple(_points([8, 64, 64], n=50, seed=10 + i)) for i in range(40)]
    for g in got:
        assert g["p10"] < g["b_simple_tokens"] < g["p90"], g
    covered = sum(g["p10"] <= TRUE_B <= g["p90"] for g in got)
    assert 22 <= covered <= 39, f"true B in {covered} of 40 intervals (about 32 expected)"
    spread = np.subtract(*np.percentile([g["b_simple_tokens"] for g in got], [90, 10]))
    width = float(np.median([g["p90"] - g["p10"] for g in got]))
    assert 0.5 < width / spread < 2.0, (width, spread)


class _Sized:
    """The one thing the probe asks its adapter before any point: the gradient's size."""

    def tensor_sizes(self) -> list[tuple[str, int]]:
        return [("w", 4)]


def test_the_record_carries_the_points_estimate() -> None:
    probe = NoiseProbe(world=None, adapter=_Sized(), computes=True, why_not=None)
    probe.points = _points([8, 64, 64], n=50, seed=3)
    want = b_simple(probe.points)
    got = probe.summary()
    assert got["b_simple_tokens"] is not None and got["why"] is None, got
    assert (got["b_simple_tokens"], got["p10"], got["p90"]) == (
        want["b_simple_tokens"], want["p10"], want["p90"])
    assert got["points"] == 50


def test_a_null_estimate_says_why() -> None:
    probe = NoiseProbe(world=None, adapter=_Sized(), computes=True, why_not=None)
    assert probe.summary()["why"] == "no evaluation point had two contributing ranks"
    probe.points = [Point(g2=-1.0, s=2.0), Point(g2=0.5, s=1.0)]
    got = probe.summary()
    assert got["b_simple_tokens"] is None
    assert got["why"] == "mean |G|^2 estimate not positive (too few or too noisy points)"
    off = NoiseProbe(world=None, adapter=_Sized(), computes=True, why_not="probe off")
    assert off.summary()["why"] == "probe off" and off.size == 0


def test_a_rank_without_a_batch_adds_zeros_and_one_token_counts() -> None:
    g = np.array([3.0, -1.0, 2.0])
    for grad, tokens in ((None, 8), (g, 0), (None, 0)):
        assert not local_sums(grad, tokens, 3).any(), (grad, tokens)
    one = local_sums(g, 1, 3)  # a batch of one token is a contribution like any other
    assert one.tolist() == [3.0, -1.0, 2.0, 1.0, 1.0, 14.0, 1.0]
    assert local_sums(g, 4, 3).tolist() == [3.0, -1.0, 2.0, 4.0, 0.25, 14.0 / 16, 1.0]


def test_no_point_without_tokens() -> None:
    # Two ranks counted but no token (never sent by local_sums; a reduced vector is still
    # checked): no point, and no division by zero.
    assert point_from_sums(np.array([1.0, 2.0, 0.0, 0.0, 0.0, 2.0])) is None


def test_no_estimate_when_mean_g2_is_zero() -> None:
    assert b_simple([Point(g2=1.0, s=1.0), Point(g2=-1.0, s=2.0)]) is None


def test_the_bootstrap_draws_every_point() -> None:
    """Two points of ratio 1 and 3: resampled pairs give 1, 2 or 3, so the 10-90% interval is
    exactly [1, 3]; a bootstrap that skipped a point would collapse it."""
    got = b_simple([Point(g2=1.0, s=1.0), Point(g2=1.0, s=3.0)])
    assert (got["b_simple_tokens"], got["p10"], got["p90"]) == (2.0, 1.0, 3.0), got


def test_the_interval_is_the_bootstraps_10th_and_90th_percentile() -> None:
    """400 points of |G|^2 = 1: a resample's ratio is the mean of its S draws, near normal
    with the standard deviation of S over sqrt(400), so its 10th and 90th percentiles lie
    1.2816 of those from the mean (20,000 resamples: within 0.03 of that; the 11th and 91st
    percentiles lie 0.05 off)."""
    s = np.linspace(0.0, 1.0, 400)
    got = b_simple([Point(g2=1.0, s=float(x)) for x in s], resamples=20_000, seed=0)
    sigma = s.std() / np.sqrt(s.size)
    z10, z90 = (got["p10"] - s.mean()) / sigma, (got["p90"] - s.mean()) / sigma
    assert abs(z10 + 1.2816) < 0.03 and abs(z90 - 1.2816) < 0.03, (z10, z90)


def test_resamples_whose_mean_g2_is_not_positive_are_left_out() -> None:
    """A point of |G|^2 = 0 beside one of 2: a quarter of the pairs drawn have mean |G|^2 0;
    those give no ratio (their S and their |G|^2 are both left out), the others 0.5 or 1."""
    got = b_simple([Point(g2=0.0, s=1.0), Point(g2=2.0, s=1.0)])
    assert got is not None and 0.5 <= got["p10"] <= got["p90"] <= 1.0, got


def test_the_record_carries_every_field_and_the_mean_batch_of_contributing_points() -> None:
    """The global batch is the mean token count of the points two or more ranks gave (a point
    of one rank gives no estimate, so its batch is no part of it); the rest as the probe has
    it."""
    probe = NoiseProbe(world=None, adapter=_Sized(), computes=True, why_not=None)
    probe.points = _points([8, 64, 64], n=3, seed=3)
    probe.per_point = [{"tokens": 100.0, "ranks": 2.0}, {"tokens": 300.0, "ranks": 3.0},
                       {"tokens": 7.0, "ranks": 1.0}]
    probe.seconds = 1.5
    got = probe.summary()
    assert got["global_batch_tokens"] == 200.0
    assert (got["per_point"], got["probe_s"], got["how"]) == (probe.per_point, 1.5, HOW)
    assert set(got) == {"b_simple_tokens", "p10", "p90", "points", "global_batch_tokens",
                        "per_point", "probe_s", "why", "how"}
    probe.per_point = [{"tokens": 7.0, "ranks": 1.0}]
    assert probe.summary()["global_batch_tokens"] is None
