"""A/A evidence: how often ``decide`` and ``recommend`` give a verdict on identical series.

The noise is drawn from rounds recorded under bench/results (``recorded_noise``): each point
measured in several interleaved rounds gives its rounds' log words/s about the point's mean
(scaled by sqrt(n / (n - 1)), which the centring took out). A simulated sweep draws, per
round, one such deviation for every series by bootstrap (with replacement, so the recorded
tails come along, not a normal law), and the series differ by ``effect`` only. Each sweep looks
after every round from ``MIN_ROUNDS`` to ``max_rounds`` and stops at its first decided look, as
a sweep measuring until decided would; ``any_look`` counts a false verdict at any look, decided
or not before. Everything runs through the real functions, with numpy's Generator seeded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hvdscale.study.verdict.decide import FASTER, MIN_ROUNDS, SLOWER, UNDECIDED, decide

NOISE_FILES = ("precision_target_issue53.json", "demo_pair_issue53.json")
"""Raw files under bench/results whose rounds give the noise: per round, per mode (shared /
alone launch), per point, its words/s."""


def recorded_noise(results: Path, files: Sequence[str] = NOISE_FILES) -> np.ndarray:
    """The pooled, centred log words/s deviations of every point measured in 3+ rounds."""
    out: list[float] = []
    for name in files:
        rounds = json.loads((results / name).read_text())["rounds"]
        modes = [m for m, v in rounds[0].items() if isinstance(v, dict) and "points" in v]
        for mode in modes:
            for label in rounds[0][mode]["points"]:
                w = [r[mode]["points"].get(label, {}).get("words_per_s") for r in rounds]
                lw = np.log([x for x in w if x and x > 0])
                if lw.size >= MIN_ROUNDS:
                    out.extend((lw - lw.mean()) * math.sqrt(lw.size / (lw.size - 1)))
    return np.asarray(out, dtype=np.float64)


Rule = Callable[[Sequence[float]], str]


def sign_rule(ratios: Sequence[float]) -> str:
    """The rule before issue 62: a verdict when every round (3 at least) lies on one side of
    1.0. Kept to show what the A/A bound catches."""
    if len(ratios) < MIN_ROUNDS:
        return UNDECIDED
    return FASTER if min(ratios) > 1 else SLOWER if max(ratios) < 1 else UNDECIDED


def procedure(ratios: Sequence[float]) -> str:
    """``decide``'s outcome: the rule under test."""
    return decide(ratios).outcome


def comparisons(noise: np.ndarray, rng: np.random.Generator, sweeps: int, max_rounds: int,
                effect: float = 0.0, rule: Rule = procedure) -> dict[str, Any]:
    """``sweeps`` simulated sweeps of A against B, A faster by ``effect`` (a fraction): how
    many end decided, false (a direction when effect is 0; the wrong one or none otherwise)."""
    draws = rng.choice(noise, size=(sweeps, 2, max_rounds))
    ratios = np.exp(draws[:, 0] - draws[:, 1] + math.log1p(effect))
    false = any_look = right = decided = 0
    rounds_used = []
    for r in ratios:
        first, ever = None, False
        for n in range(MIN_ROUNDS, max_rounds + 1):
            out = rule(r[:n])
            ever = ever or (out in (FASTER, SLOWER) and (effect == 0 or out == SLOWER))
            if first is None and out != UNDECIDED:
                first, used = out, n
        any_look += ever
        if first is not None:
            decided += 1
            rounds_used.append(used)
            false += first in (FASTER, SLOWER) and (effect == 0 or first == SLOWER)
            right += effect > 0 and first == FASTER
    return {"n": sweeps, "max_rounds": max_rounds, "effect": effect, "decided": decided,
            "false_verdicts": false, "false_any_look": any_look, "right_direction": right,
            "median_rounds_to_decide": (float(np.median(rounds_used)) if rounds_used
                                        else None)}


def recommendations(noise: np.ndarray, rng: np.random.Generator, sweeps: int, max_rounds: int,
                    candidates: int) -> dict[str, Any]:
    """``sweeps`` simulated fusion-like sweeps of ``candidates`` no-op settings against a
    reference, through ``recommend`` at every look: how many recommended one at some look."""
    from hvdscale.study.paired.recommend import recommend  # the real one (it imports decide)

    draws = np.exp(rng.choice(noise, size=(sweeps, candidates + 1, max_rounds))) * 1000.0
    false = 0
    for d in draws:
        for n in range(MIN_ROUNDS, max_rounds + 1):
            rounds = {"ref" if i == 0 else f"c{i}": list(d[i, :n]) for i in range(candidates + 1)}
            if recommend(rounds, "ref")["recommended"] is not None:
                false += 1
                break
    return {"n": sweeps, "candidates": candidates, "max_rounds": max_rounds,
            "comparisons": sweeps * candidates, "false_verdicts": false}


def simulated(results: Path, seed: int = 62, sweeps: int = 10_000, rec_sweeps: int = 1_000,
              max_rounds: int = 10, candidates: int = 6) -> dict[str, Any]:
    """The ``simulated`` section of aa_verdicts.json: A/A comparisons, A/A recommendations,
    the old sign rule on the same draws, and the power for a real 5 % difference."""
    noise = recorded_noise(results)
    out: dict[str, Any] = {"seed": seed, "noise_files": list(NOISE_FILES),
                           "noise_deviations": int(noise.size),
                           "noise_sd": float(noise.std(ddof=1))}
    out["comparison"] = comparisons(noise, np.random.default_rng(seed), sweeps, max_rounds)
    out["recommendation"] = recommendations(noise, np.random.default_rng(seed + 1), rec_sweeps,
                                            max_rounds, candidates)
    out["sign_rule"] = comparisons(noise, np.random.default_rng(seed), sweeps, max_rounds,
                                   rule=sign_rule)
    out["power_5pct"] = {str(m): comparisons(noise, np.random.default_rng(seed + 2), 2_000, m,
                                             effect=0.05) for m in (5, 10, 20)}
    # n counts sweeps: each comparison sweep, and each recommendation among its candidates.
    out["n"] = sweeps + rec_sweeps
    out["false_verdicts"] = (out["comparison"]["false_verdicts"]
                             + out["recommendation"]["false_verdicts"])
    return out
