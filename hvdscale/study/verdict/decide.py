"""The decision procedure for a paired ratio: one verdict, with a stated error rate.

Unit of replication: the round. In round i both series ran once (separate launches, so the
variance that shows only between processes is in it), and r_i = words/s of A / words/s of B. The
log ratios are taken as independent draws from a normal law with mean mu (issue 62; the A/A
figures in bench/results/aa_verdicts.json measure what that assumption costs).

At n rounds (``MIN_ROUNDS`` at least) the procedure looks once, at level

    alpha_n = alpha / (j (j + 1)),  j = n - MIN_ROUNDS + 1

(alpha/2 at the first look, alpha/6 at the next...): the levels of all looks n = 3, 4, ... sum
to alpha, so by the union bound the chance that ANY look gives a false verdict is at most alpha
however long one goes on and whenever one stops (an alpha-spending rule, Lan & DeMets 1983,
over an open-ended sequence of looks, made valid under optional stopping by the union bound as
Darling & Robbins 1967 built confidence sequences). With k candidates (a recommendation)
alpha_n is divided by k as well (Bonferroni). At each look, with m the mean log ratio and se
its standard error (Student's t with n - 1 degrees of freedom, from scipy.stats):

- A faster (slower): the two-sided 1 - alpha_n interval of mu lies above (below) 0;
- no difference larger than delta: the 1 - 2 alpha_n interval lies within +-log(1 + delta)
  (two one-sided tests, Schuirmann 1987);
- otherwise undecided, with the rounds a decision would take if m and the spread held.

The interval the verdict prints is the 1 - alpha_n one: a 95 % interval that holds at every look
at once. A sweep calls ``decide`` after every round and stops measuring a comparison once it
is decided (``Verdict.decided``), nearest-to-decided first (``Verdict.more_rounds``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

ALPHA = 0.05
"""The chance of a false verdict on identical series, over all looks and candidates."""
DELTA = 0.02
"""The default equivalence margin: "no difference larger than 2 %"."""
MIN_ROUNDS = 3
"""Paired rounds any verdict needs (two degrees of freedom for the spread)."""
HORIZON = 60
"""How many further rounds a projection looks ahead before it says "not in sight"."""

FASTER, SLOWER, EQUIVALENT, UNDECIDED = "faster", "slower", "equivalent", "undecided"


def look_alpha(n: int, alpha: float = ALPHA, k: int = 1) -> float:
    """The level of the look at ``n`` paired rounds among ``k`` candidates (0 below
    ``MIN_ROUNDS``): alpha / (j (j + 1) k), j = n - MIN_ROUNDS + 1, summing to alpha / k."""
    if n < MIN_ROUNDS:
        return 0.0
    j = n - MIN_ROUNDS + 1
    return alpha / (j * (j + 1) * max(1, k))


@lru_cache(maxsize=8192)
def critical(n: int, alpha: float = ALPHA, k: int = 1) -> tuple[float, float]:
    """(two-sided, one-sided) Student-t quantiles of the look at ``n`` rounds (scipy.stats)."""
    a = look_alpha(n, alpha, k)
    return float(stats.t.ppf(1 - a / 2, n - 1)), float(stats.t.ppf(1 - a, n - 1))


def outcome(m: float, se: float, n: int, delta: float = DELTA, alpha: float = ALPHA,
            k: int = 1) -> str:
    """The verdict at the look of ``n`` rounds for mean log ratio ``m`` with standard error
    ``se``: ``FASTER``, ``SLOWER``, ``EQUIVALENT`` or ``UNDECIDED``."""
    if n < MIN_ROUNDS:
        return UNDECIDED
    two, one = critical(n, alpha, k)
    if m - two * se > 0:
        return FASTER
    if m + two * se < 0:
        return SLOWER
    margin = math.log1p(delta)
    if -margin < m - one * se and m + one * se < margin:
        return EQUIVALENT
    return UNDECIDED


def more_rounds(m: float, sd: float, n: int, delta: float = DELTA, alpha: float = ALPHA,
                k: int = 1) -> int | None:
    """Further rounds until a decision if the mean ``m`` and spread ``sd`` of the log ratios
    held (at least what ``MIN_ROUNDS`` lacks); None when none comes within ``HORIZON``."""
    if not math.isfinite(sd):
        return max(1, MIN_ROUNDS - n)
    for extra in range(max(1, MIN_ROUNDS - n), HORIZON + 1):
        if outcome(m, sd / math.sqrt(n + extra), n + extra, delta, alpha, k) != UNDECIDED:
            return extra
    return None


@dataclass(frozen=True)
class Verdict:
    """What ``decide`` says about a paired ratio A / B."""

    outcome: str
    """``FASTER`` (A faster than B), ``SLOWER``, ``EQUIVALENT`` or ``UNDECIDED``."""
    n: int
    """Paired rounds it rests on."""
    ratio: float | None
    """The geometric mean of the paired ratios (None: no rounds)."""
    lo: float | None
    """The 95 % interval of the ratio, valid at every look (None below ``MIN_ROUNDS``)."""
    hi: float | None
    delta: float = DELTA
    more: int | None = None
    """Undecided: further rounds a decision would take at this spread (None: not in sight)."""

    @property
    def decided(self) -> bool:
        """Whether the comparison is settled (no more rounds needed)."""
        return self.outcome != UNDECIDED

    def interval(self) -> str:
        """``x1.053 [1.021-1.086]`` (the ratio alone below ``MIN_ROUNDS``)."""
        if self.ratio is None:
            return "no paired rounds"
        if self.lo is None or self.hi is None:
            return f"x{self.ratio:.3f}, {self.n} round{'s' * (self.n != 1)}"
        return f"x{self.ratio:.3f} [{self.lo:.3f}-{self.hi:.3f}], {self.n} rounds"

    def words(self, a: str, b: str, round_s: float | None = None) -> str:
        """The verdict in plain words, A and B named; ``round_s``: one round's wall time, to say
        about how long an undecided comparison would take."""
        if self.outcome in (FASTER, SLOWER) and self.ratio and self.lo and self.hi:
            win, lose, r, lo, hi = ((a, b, self.ratio, self.lo, self.hi) if self.outcome == FASTER
                                    else (b, a, 1 / self.ratio, 1 / self.hi, 1 / self.lo))
            return (f"{win} faster than {lose} by {100 * (r - 1):.1f}% (95% interval "
                    f"{100 * (lo - 1):.1f} to {100 * (hi - 1):.1f}%, {self.n} rounds)")
        if self.outcome == EQUIVALENT:
            return (f"no difference larger than {100 * self.delta:g}% between {a} and {b} "
                    f"({self.interval()})")
        return f"undecided ({self.interval()}): {self.needs(round_s)}"

    def needs(self, round_s: float | None = None) -> str:
        """What an undecided verdict lacks, in words ("" when decided)."""
        if self.decided:
            return ""
        if self.more is None:
            return (f"no decision in sight within {HORIZON} more rounds at this spread (the "
                    f"difference may lie near +-{100 * self.delta:g}%)")
        when = f", about {self.more * round_s:.0f} s" if round_s else ""
        return f"about {self.more} more round{'s' * (self.more != 1)}{when} to decide"


def decide(ratios: Sequence[float], delta: float = DELTA, alpha: float = ALPHA,
           k: int = 1) -> Verdict:
    """The verdict on paired ratios A / B (one per round; non-positive or non-finite ones are
    left out), among ``k`` candidates tested alike, at the look of ``len(ratios)`` rounds."""
    x = np.log(np.asarray([r for r in ratios if r is not None and math.isfinite(r) and r > 0],
                          dtype=np.float64))
    n = int(x.size)
    if n == 0:
        return Verdict(UNDECIDED, 0, None, None, None, delta, MIN_ROUNDS)
    m = float(x.mean())
    sd = float(x.std(ddof=1)) if n > 1 else math.nan
    if n < MIN_ROUNDS:
        return Verdict(UNDECIDED, n, math.exp(m), None, None, delta,
                       more_rounds(m, sd, n, delta, alpha, k))
    se = sd / math.sqrt(n)
    out = outcome(m, se, n, delta, alpha, k)
    two = critical(n, alpha, k)[0]
    return Verdict(out, n, math.exp(m), math.exp(m - two * se), math.exp(m + two * se), delta,
                   None if out != UNDECIDED else more_rounds(m, sd, n, delta, alpha, k))


def still_open(comparisons: dict[str, Sequence[float]], delta: float = DELTA,
               alpha: float = ALPHA) -> list[tuple[str, int | None]]:
    """What a sweep measuring until decided runs next: the undecided comparisons (name ->
    paired ratios so far), nearest to a decision first, each with the further rounds it would
    take at its spread (None: not in sight within ``HORIZON``; those come last)."""
    open_ = [(name, decide(r, delta, alpha)) for name, r in comparisons.items()]
    todo = [(name, v.more) for name, v in open_ if not v.decided]
    return sorted(todo, key=lambda nm: (nm[1] is None, nm[1] or 0))
