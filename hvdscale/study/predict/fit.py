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

from hvdscale.errors import HvdscaleError
from hvdscale.study.predict.families import Family

Z95 = 1.96
"""Two-sided 95 % normal quantile: the interval is prediction +- Z95 x its standard error."""


@dataclass
class Fit:
    """A family fitted to points: parameters, their covariance and the fit's degrees of freedom
    (observations minus parameters; 0 leaves the standard errors unknown)."""

    family: Family
    names: list[str]
    params: np.ndarray
    cov: np.ndarray
    dof: int
    intercept: bool
    nbytes: float = 1.0
    servers: int = 1

    def row(self, n: int) -> np.ndarray:
        """The design row at ``n``."""
        return np.array(([1.0] if self.intercept else [])
                        + self.family.row(n, self.nbytes, self.servers))

    def predict(self, n: int) -> tuple[float, float]:
        """Predicted value at ``n`` and its standard error from the parameters' uncertainty
        (nan when the fit has no degrees of freedom)."""
        x = self.row(n)
        mean = float(x @ self.params) if len(x) else 0.0
        sd = float(math.sqrt(max(0.0, x @ self.cov @ x))) if len(x) else 0.0
        return mean, (sd if self.dof > 0 else (float("nan") if len(x) else 0.0))

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
    p, m = len(names), len(ns)
    # Repeats at one n pin a value down, not a shape: count rank counts, and without an
    # intercept n = 1 tells nothing (every basis is 0 there).
    points = len(set(ns)) - (0 if intercept or 1 not in ns else 1)
    if p > points:
        raise HvdscaleError(f"family {family.name!r} has {p} parameter(s) ({', '.join(names)}) "
                            f"but only {points} informative rank count(s): measure more rank "
                            "counts or choose a family with fewer parameters")
    X = np.array([([1.0] if intercept else []) + family.row(n, nbytes, servers) for n in ns])
    yv = np.asarray(y, float)
    if p and np.linalg.matrix_rank(X) < p:
        raise HvdscaleError(f"family {family.name!r}: its {p} parameter(s) cannot be told apart "
                            f"at rank counts {', '.join(map(str, sorted(set(ns))))}")
    if p == 0:
        return Fit(family, names, np.zeros(0), np.zeros((0, 0)), m, intercept, nbytes, servers)
    params, *_ = np.linalg.lstsq(X, yv, rcond=None)
    dof = m - p
    rss = float(np.sum((yv - X @ params) ** 2))
    cov = (rss / dof if dof > 0 else 0.0) * np.linalg.pinv(X.T @ X)
    return Fit(family, names, params, cov, dof, intercept, nbytes, servers)


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
        if len(errs) == distinct - 1 and distinct >= 3:
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
    else:
        fit = next((f for f in fittable if physical(f)), fittable[0])
        how = (f"the strategy's default family: {distinct} rank count(s) cannot score "
               "held-out error for any candidate")
    return Choice(fit, how, scores, held.get(fit.family.name, {}))
