"""Which setting to recommend over a reference (Horovod's defaults, DDP's bucket size...), from
paired rounds: in each round every setting ran once, so a setting's words/s divided by the
reference's words/s of the SAME round cancels what the round shared (a slow phase of a loaded
machine). Every verdict here is ``hvdscale.study.verdict.decide``'s (issue 62): a setting is
recommended only when the procedure, run on its paired ratios with its level divided among all
the candidates (Bonferroni), decides it faster; otherwise the reference stays.

Used by ``hvdscale fusion`` (``hvdscale.study.fusion.report``), the DDP bucket sweep, the
report and any other sweep whose rounds are interleaved the same way.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from hvdscale.study.verdict.decide import FASTER, MIN_ROUNDS, SLOWER, UNDECIDED, Verdict, decide

MIN_VERDICT_ROUNDS = MIN_ROUNDS
"""Paired rounds any verdict needs at least (``hvdscale.study.verdict.decide.MIN_ROUNDS``)."""

NO_WINNER = "no setting is decided faster than the defaults"
"""The verdict when no candidate is decided faster than the reference."""

WITHIN_NOISE = "undecided"
"""What a paired ratio says when the procedure cannot yet tell a difference from none."""


def paired_ratios(a: Sequence[float | None], b: Sequence[float | None]) -> list[float]:
    """Per-round ratios a[i] / b[i] (rounds paired by index; a round missing on either side, or
    with a non-positive or non-finite figure, is left out)."""
    out = []
    for x, y in zip(a, b, strict=False):
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)) or y <= 0:
            continue
        out.append(x / y)
    return out


def ratio_summary(ratios: Sequence[float], k: int = 1) -> dict[str, Any] | None:
    """Median and spread (min, max) of paired ratios with the procedure's verdict among ``k``
    candidates (``outcome``, ``gmean``, the 95 % interval ``lo``-``hi``, ``more`` rounds);
    None when there are none. ``consistent``: decided faster or slower."""
    if not ratios:
        return None
    v = decide(ratios, k=k)
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "n": len(ratios), "ratios": list(ratios), "k": k, "outcome": v.outcome,
            "gmean": v.ratio, "lo": v.lo, "hi": v.hi, "more": v.more,
            "consistent": v.outcome in (FASTER, SLOWER)}


def verdict_of(s: Mapping[str, Any]) -> Verdict:
    """The ``Verdict`` a ``ratio_summary`` holds."""
    return decide(s["ratios"], k=s.get("k", 1))


def rounds_short(n: int, min_rounds: int = MIN_VERDICT_ROUNDS) -> str:
    """What ``n`` paired rounds lack for any verdict from ``min_rounds``, in words ("" when
    they are enough)."""
    need = min_rounds - n
    if need <= 0:
        return ""
    return (f"undecided from {n} paired round{'s' * (n != 1)}: at least {need} more "
            f"round{'s' * (need != 1)} needed (--repeats {min_rounds})")


def paired_summary(a: Sequence[float | None],
                   b: Sequence[float | None]) -> dict[str, Any] | None:
    """``ratio_summary`` of a's words/s over b's, round by round (``paired_ratios``)."""
    return ratio_summary(paired_ratios(a, b))


def within_noise(s: dict[str, Any]) -> bool:
    """Whether a ``ratio_summary`` with enough rounds for a verdict is still undecided."""
    return s["n"] >= MIN_VERDICT_ROUNDS and s["outcome"] == UNDECIDED


def compare(a: str, b: str, s: dict[str, Any] | None) -> str:
    """One phrase on the paired ratio ``s`` of ``a`` over ``b``: the procedure's verdict in
    plain words (faster by x % [95 % interval], no difference larger than 2 %, or undecided
    with how many more rounds it would take)."""
    if s is None:
        return "no paired rounds"
    return verdict_of(s).words(a, b)


def recommend(rounds: Mapping[str, Sequence[float | None]], reference: str,
              min_rounds: int = MIN_VERDICT_ROUNDS) -> dict[str, Any]:
    """Pick the setting with the best paired ratio over ``reference``, recommended only when
    decided faster with the level shared among all candidates.

    Args:
        rounds: per setting label, its words/s in round 0, 1, ... (None: that round failed).
        reference: the label every ratio is taken over (the defaults).
        min_rounds: candidates with fewer paired rounds compete only when none has as many.

    Returns:
        ``reference``; ``ratios`` (label -> ``ratio_summary`` over the reference, k = the
        number of candidates); ``candidate`` (the best geometric-mean ratio; None when none is
        paired); ``recommended`` (that label when decided faster, else None); ``verdict``.
    """
    if reference not in rounds:
        return {"reference": reference, "ratios": {}, "candidate": None, "recommended": None,
                "verdict": f"the reference ({reference}) was not measured: no paired "
                           f"recommendation"}
    k = max(1, len(rounds) - 1)
    ratios = {label: ratio_summary(paired_ratios(wps, rounds[reference]), k)
              for label, wps in rounds.items() if label != reference}
    scored = {label: s for label, s in ratios.items() if s is not None}
    if not scored:
        return {"reference": reference, "ratios": ratios, "candidate": None,
                "recommended": None, "verdict": f"{NO_WINNER} (no paired rounds)"}
    enough = {label: s for label, s in scored.items()
              if s["n"] >= max(min_rounds, MIN_VERDICT_ROUNDS)} or scored
    candidate = max(enough, key=lambda label: enough[label]["gmean"])
    s = scored[candidate]
    v = verdict_of(s)
    recommended = candidate if v.outcome == FASTER else None
    if recommended:
        verdict = f"recommended: {v.words(candidate, reference)}, {k} candidates tested"
    else:
        verdict = f"{NO_WINNER} ({k} candidates tested); the best, {v.words(candidate, reference)}"
    return {"reference": reference, "ratios": ratios, "candidate": candidate,
            "recommended": recommended, "verdict": verdict}
