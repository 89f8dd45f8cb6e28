"""Which setting to recommend over a reference (Horovod's defaults, DDP's bucket size...), from
paired rounds: in each round every setting ran once, so a setting's words/s divided by the
reference's words/s of the SAME round cancels what the round shared (a slow phase of a loaded
machine). A setting is recommended only when its paired ratios lie above 1.0 in every round
(their spread, min to max, does not straddle 1.0) of at least ``MIN_VERDICT_ROUNDS``;
otherwise the reference stays. Below that many rounds, the ratios and their range are given
with how many more rounds a verdict needs (issue 50: two rounds agreeing is not a verdict).

Used by ``hvdscale fusion`` (``hvdscale.study.fusion.report``) and by any other sweep whose
rounds are interleaved the same way.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

MIN_VERDICT_ROUNDS = 3
"""Paired rounds a verdict ("A beats B", "within X %", a recommendation) needs at least."""

NO_WINNER = "no setting beats the defaults beyond noise"
"""The verdict when no setting's paired ratios all lie above 1.0."""


def paired_ratios(a: Sequence[float | None], b: Sequence[float | None]) -> list[float]:
    """Per-round ratios a[i] / b[i] (rounds paired by index; a round missing on either side, or
    with a non-positive or non-finite figure, is left out)."""
    out = []
    for x, y in zip(a, b, strict=False):
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)) or y <= 0:
            continue
        out.append(x / y)
    return out


def ratio_summary(ratios: Sequence[float]) -> dict[str, Any] | None:
    """Median and spread (min, max) of paired ratios; None when there are none."""
    if not ratios:
        return None
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "n": len(ratios), "ratios": list(ratios),
            # Every round (MIN_VERDICT_ROUNDS at least) on one side of 1.0: beyond the noise.
            "consistent": (len(ratios) >= MIN_VERDICT_ROUNDS
                           and (min(ratios) > 1 or max(ratios) < 1))}


def rounds_short(n: int, min_rounds: int = MIN_VERDICT_ROUNDS) -> str:
    """What ``n`` paired rounds lack for a verdict from ``min_rounds``, in words ("" when they
    are enough)."""
    need = min_rounds - n
    if need <= 0:
        return ""
    return (f"no verdict from {n} paired round{'s' * (n != 1)}: {need} more "
            f"round{'s' * (need != 1)} needed (--repeats {min_rounds})")


WITHIN_NOISE = "within the noise"
"""What a paired ratio whose rounds straddle 1.0 says instead of naming a winner."""


def paired_summary(a: Sequence[float | None],
                   b: Sequence[float | None]) -> dict[str, Any] | None:
    """``ratio_summary`` of a's words/s over b's, round by round (``paired_ratios``)."""
    return ratio_summary(paired_ratios(a, b))


def within_noise(s: dict[str, Any]) -> bool:
    """Whether a ``ratio_summary``'s rounds (two at least) straddle 1.0: no winner."""
    return s["n"] >= 2 and s["min"] <= 1.0 <= s["max"]


def compare(a: str, b: str, s: dict[str, Any] | None) -> str:
    """One phrase on the paired ratio ``s`` of ``a`` over ``b``: which is faster in every
    round, or that the difference is within the noise (the rounds straddle 1.0); below
    ``MIN_VERDICT_ROUNDS`` the ratios without a verdict, and how many more rounds it needs."""
    if s is None:
        return "no paired rounds"
    spread = f"x{s['median']:.3f}, rounds {s['min']:.3f}-{s['max']:.3f}, n={s['n']}"
    if within_noise(s):
        return f"{WITHIN_NOISE} ({spread})"
    if s["n"] < MIN_VERDICT_ROUNDS:
        return f"{rounds_short(s['n'])} ({spread})"
    if s["min"] > 1.0:
        return f"{a} faster than {b} in every round ({spread})"
    return f"{b} faster than {a} in every round ({spread})"


def recommend(rounds: Mapping[str, Sequence[float | None]], reference: str,
              min_rounds: int = MIN_VERDICT_ROUNDS) -> dict[str, Any]:
    """Pick the setting with the best median paired ratio over ``reference``.

    Args:
        rounds: per setting label, its words/s in round 0, 1, ... (None: that round failed).
        reference: the label every ratio is taken over (the defaults).
        min_rounds: fewer paired rounds than this give no verdict, so no recommendation.

    Returns:
        ``reference``; ``ratios`` (label -> ``ratio_summary`` over the reference);
        ``candidate`` (the label with the best median ratio among those with at least
        ``min_rounds`` paired rounds, or among all when none has; None when none is paired);
        ``recommended`` (that label when its ratios all lie above 1.0 in at least
        ``min_rounds`` rounds, else None);
        ``verdict`` (one sentence saying which, and why).
    """
    if reference not in rounds:
        return {"reference": reference, "ratios": {}, "candidate": None, "recommended": None,
                "verdict": f"the reference ({reference}) was not measured: no paired "
                           f"recommendation"}
    ratios = {label: ratio_summary(paired_ratios(wps, rounds[reference]))
              for label, wps in rounds.items() if label != reference}
    scored = {label: s for label, s in ratios.items() if s is not None}
    if not scored:
        return {"reference": reference, "ratios": ratios, "candidate": None,
                "recommended": None, "verdict": f"{NO_WINNER} (no paired rounds)"}
    # Only settings with enough paired rounds to show a spread compete: one lucky round of
    # another setting must not hide one that wins every round. All compete when none has.
    enough = {label: s for label, s in scored.items() if s["n"] >= min_rounds} or scored
    candidate = max(enough, key=lambda label: enough[label]["median"])
    s = scored[candidate]
    spread = f"x{s['median']:.3f}, rounds {s['min']:.3f}-{s['max']:.3f}, n={s['n']}"
    if s["n"] < min_rounds:
        verdict = f"{NO_WINNER}: {rounds_short(s['n'], min_rounds)} ({candidate}: {spread})"
    elif s["min"] > 1.0:
        verdict = f"{candidate} beats {reference} in every round ({spread})"
    elif s["max"] < 1.0:
        verdict = f"{NO_WINNER}: even the best, {candidate}, is slower in every round ({spread})"
    else:
        verdict = f"{NO_WINNER}: the best, {candidate}, {spread}, straddles 1.0"
    recommended = candidate if s["n"] >= min_rounds and s["min"] > 1.0 else None
    return {"reference": reference, "ratios": ratios, "candidate": candidate,
            "recommended": recommended, "verdict": verdict}
