"""Least-squares fits of a family to measured points, held-out errors and the family choice.

The same procedure serves the back-test on the public tables and the fit to one's own runs:
each candidate family is fitted by linear least squares (standard errors from the residual
scatter), scored by leave-one-n-out error (every observation at one rank count left out, the
family refitted on the rest and asked for the left-out n: the fit never sees the point it is
scored on; the smallest n, the anchor, always stays in), and the family with the smallest
root-mean-square held-out error wins (ties: fewer parameters; a fit with a negative cost
parameter is no candidate). Errors are relative errors in words/s, which for a fixed number
of words per step is measured step time / predicted step time - 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from hvdscale.errors import HvdscaleError
from hvdscale.study.predict.families import Family

MIN_TO_CHOOSE = 3
"""Distinct rank counts a family choice by held-out error needs: the anchor (never left out)
plus two, so that each count left out is predicted from a fit that still has a cost term's
worth of points (with two, leaving one out leaves only the anchor)."""


def t975(dof: int) -> float:
    """Two-sided 95 % Student-t quantile for ``dof`` degrees of freedom (nan for none), from
    scipy.stats (a fit has a handful: the normal 1.96 would make a 95 % interval far too
    narrow)."""
    return float(stats.t.ppf(0.975, dof)) if dof >= 1 else float("nan")


@dataclass
class Fit:
    """A family fitted to points: parameters, their covariance, the fit's degrees of freedom
    (informative observations minus parameters; 0 leaves the standard errors unknown) and the
    residual variance ``s2`` (one new observation's own scatter)."""

    family: Family
    names: list[str]
    params: np.ndarray
    cov: np.ndarray
    dof: int
    intercept: bool
    nbytes: float = 1.0
    servers: int = 1
    s2: float = 0.0

    def row(self, n: int) -> np.ndarray:
        """The design row at ``n``."""
        return np.array(([1.0] if self.intercept else [])
                        + self.family.row(n, self.nbytes, self.servers))

    def predict(self, n: int) -> tuple[float, float]:
        """Predicted value at ``n`` and its standard error from the parameters' uncertainty
        (nan when the fit has no degrees of freedom)."""
        x = self.row(n)
        if not np.any(x):  # every basis is 0 here (n = 1 without intercept): exactly 0
            return 0.0, 0.0
        mean = float(x @ self.params)
        sd = float(math.sqrt(max(0.0, x @ self.cov @ x)))
        return mean, (sd if self.dof > 0 else float("nan"))

    def half_width(self, n: int) -> float:
        """Half-width of the 95 % prediction interval of one new observation at ``n``:
        t(dof) x sqrt(var of the mean + s2) (nan when the fit has no degrees of freedom)."""
        if not np.any(self.row(n)):
            return 0.0
        sd = self.predict(n)[1]
        return t975(self.dof) * math.sqrt(sd * sd + self.s2) if self.dof > 0 else float("nan")

    def table(self) -> list[dict]:
        """Each parameter with its standard error (null when unknown)."""
        se = np.sqrt(np.maximum(np.diag(self.cov), 0.0)) if len(self.params) else []
        return [{"name": nm, "value": float(v), "se": float(s) if self.dof > 0 else None}
                for nm, v, s in zip(self.names, self.params, se, strict=True)]


def fit_family(family: Family, ns: list[int], y: list[float], intercept: bool = True,
               nbytes: float = 1.0, servers: int = 1) -> Fit:
    """Least squares of ``y`` against the family's basis at ``ns`` (plus an intercept).

    Raises:
        HvdscaleError: more parameters than points (the fit would be anything).
    """
    names = (["intercept"] if intercept else []) + [t.param for t in family.terms]
    rows = [([1.0] if intercept else []) + family.row(n, nbytes, servers) for n in ns]
    # Without an intercept a row whose bases are all 0 (n = 1) tells nothing: it would only
    # inflate the degrees of freedom (and print a standard error of 0), so it is dropped.
    keep = [i for i, r in enumerate(rows) if any(r)] if not intercept else list(range(len(ns)))
    p, m = len(names), len(keep)
    # Repeats at one n pin a value down, not a shape: count rank counts.
    points = len({ns[i] for i in keep})
    if p > points:
        raise HvdscaleError(f"family {family.name!r} has {p} parameter(s) ({', '.join(names)}) "
                            f"but only {points} informative rank count(s): measure more rank "
                            "counts or choose a family with fewer parameters")
    X = np.array([rows[i] for i in keep], float).reshape(m, p)
    yv = np.asarray([y[i] for i in keep], float)
    if p and np.linalg.matrix_rank(X) < p:
        raise HvdscaleError(f"family {family.name!r}: its {p} parameter(s) cannot be told apart "
                            f"at rank counts {', '.join(map(str, sorted(set(ns))))}")
    if p == 0:
        return Fit(family, names, np.zeros(0), np.zeros((0, 0)), m, intercept, nbytes, servers)
    params, *_ = np.linalg.lstsq(X, yv, rcond=None)
    dof = m - p
    s2 = float(np.sum((yv - X @ params) ** 2)) / dof if dof > 0 else 0.0
    # pinv(X) pinv(X)^T, not pinv(X^T X): the byte columns (~1e6-1e8) next to a column of
    # ~1 square the condition number past pinv's cutoff, which drops the small direction.
    xp = np.linalg.pinv(X)
    return Fit(family, names, params, s2 * xp @ xp.T, dof, intercept, nbytes, servers, s2)


def physical(fit: Fit) -> bool:
    """Whether every cost parameter (all but the intercept) is non-negative."""
    return all(v >= 0 for nm, v in zip(fit.names, fit.params, strict=True) if nm != "intercept")


@dataclass
class Choice:
    """The chosen family, its fit on every point, each candidate's held-out score and each
    point's held-out error under the chosen family; ``how`` says how the choice was made."""

    fit: Fit
    how: str
    scores: dict[str, float] = field(default_factory=dict)
    held_out: dict[int, float] = field(default_factory=dict)


def held_out_errors(family: Family, ns: list[int], y: list[float], intercept: bool = True,
                    nbytes: float = 1.0, servers: int = 1,
                    base: list[float] | None = None) -> dict[int, float]:
    """Leave-one-n-out relative error at each distinct n: (measured total) / (predicted total)
    - 1, the family refitted without any observation at that n. ``base`` (same length as
    ``y``) is a known part added to both (e.g. compute) so the error is that of the step time.
    The smallest n (the 1-rank run every prediction is anchored on) is never left out; rank
    counts the rest cannot fit are skipped."""
    base_v = np.zeros(len(y)) if base is None else np.asarray(base, float)
    out = {}
    for n in sorted(set(ns))[1:]:
        keep = [i for i, m in enumerate(ns) if m != n]
        try:
            f = fit_family(family, [ns[i] for i in keep], [y[i] for i in keep], intercept,
                           nbytes, servers)
        except HvdscaleError:
            continue
        at = [i for i, m in enumerate(ns) if m == n]
        meas = float(np.mean([y[i] + base_v[i] for i in at]))
        pred = f.predict(n)[0] + float(np.mean(base_v[at]))
        out[n] = meas / pred - 1.0 if pred > 0 else float("inf")
    return out


def choose(families: list[Family], ns: list[int], y: list[float], intercept: bool = True,
           nbytes: float = 1.0, servers: int = 1, base: list[float] | None = None) -> Choice:
    """The family with the smallest held-out RMS error (see the module docstring).

    Raises:
        HvdscaleError: no candidate can be fitted to the points at all.
    """
    distinct = len(set(ns))
    scores: dict[str, float] = {}
    held: dict[str, dict[int, float]] = {}
    for fam in families:
        errs = held_out_errors(fam, ns, y, intercept, nbytes, servers, base)
        held[fam.name] = errs
        if len(errs) == distinct - 1 and distinct >= MIN_TO_CHOOSE:
            scores[fam.name] = float(np.sqrt(np.mean(np.square(list(errs.values())))))
    fittable: list[Fit] = []
    last = HvdscaleError("no candidate family")
    for fam in families:
        try:
            f = fit_family(fam, ns, y, intercept, nbytes, servers)
        except HvdscaleError as e:
            last = e
            continue
        fittable.append(f)
        if not physical(f):  # a negative bandwidth or latency is no explanation
            scores.pop(fam.name, None)
    if not fittable:
        raise last
    if scores:
        best = min(scores, key=lambda k: (round(scores[k], 6), len(next(
            f for f in fittable if f.family.name == k).params)))
        fit = next(f for f in fittable if f.family.name == best)
        how = (f"smallest leave-one-n-out error over the {distinct - 1} rank counts above "
               f"the smallest ({scores[best] * 100:.1f} % RMS)")
    elif any(physical(f) for f in fittable):
        fit = next(f for f in fittable if physical(f))
        how = (f"the strategy's first family that fits: {distinct} rank count(s) cannot "
               "score held-out error for any candidate" if distinct < MIN_TO_CHOOSE else
               "the strategy's first physical family: no physical candidate could be fitted "
               "without each rank count in turn")
    else:
        fit = fittable[0]
        neg = ", ".join(f"{q['name']} = {q['value']:.3g}" for q in fit.table()
                        if q["name"] != "intercept" and q["value"] < 0)
        how = ("NO PHYSICAL FIT: every candidate family needs a negative cost parameter; "
               f"shown is the strategy's default, unphysical ({neg}): the points do not "
               "follow any candidate cost model")
    return Choice(fit, how, scores, held.get(fit.family.name, {}))
