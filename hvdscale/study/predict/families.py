"""The fitted prediction's candidate families: each a formula with its meaning, linear in its
parameters (so a least-squares fit gives standard errors), and which families each strategy may
take (``family_names``: its registry entry says).

A family is a list of terms; a term is a basis function of n (ranks) scaled by the bytes one
rank reduces per step (``S``), whose fitted coefficient is the parameter (1/B: seconds per
byte, or alpha: seconds per message). Every basis is 0 at n = 1, so a family describes the cost
above the 1-rank run; the 1-rank part is the fit's intercept (tables) or measured (own runs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from hvdscale.errors import HvdscaleError
from hvdscale.registry import ALLREDUCE_FAMILIES, find, names


@lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals] (0 for n = 1): how far the slowest of n ranks
    with the same random step time lies above the mean, in standard deviations."""
    if n <= 1:
        return 0.0
    x = np.linspace(-12.0, 12.0, 24001)
    pdf = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    cdf = np.cumsum(pdf) * (x[1] - x[0])
    dens = n * pdf * np.minimum(cdf, 1.0) ** (n - 1)
    return float(np.sum(x * dens) * (x[1] - x[0]))


@dataclass(frozen=True)
class Term:
    """One parameter: ``basis(n, S, k)`` times the parameter is seconds per step."""

    param: str
    meaning: str
    basis: Callable[[int, float, int], float]


@dataclass(frozen=True)
class Family:
    """A communication (or waiting) cost formula: ``sum(param x basis)``."""

    name: str
    formula: str
    meaning: str
    terms: tuple[Term, ...]

    def row(self, n: int, nbytes: float = 1.0, servers: int = 1) -> list[float]:
        """The family's basis values at ``n`` (one per parameter)."""
        return [t.basis(n, nbytes, servers) for t in self.terms]


_INV_B = "1/B (s per byte)"
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("ring", "2(n-1)/n S/B + 2(n-1) alpha",
           "ring allreduce: each rank sends and receives 2(n-1)/n of the bytes in 2(n-1) hops",
           (Term("inv_bandwidth", _INV_B, lambda n, s, k: 2 * (n - 1) / n * s),
            Term("alpha", "latency per hop (s)", lambda n, s, k: 2.0 * (n - 1)))),
    Family("ring-bandwidth", "2(n-1)/n S/B",
           "ring allreduce whose latency is negligible: the bandwidth term alone",
           (Term("inv_bandwidth", _INV_B, lambda n, s, k: 2 * (n - 1) / n * s),)),
    Family("tree", "log2(n) S/B",
           "tree / recursive doubling: log2(n) rounds, each moving the bytes once",
           (Term("inv_bandwidth", _INV_B, lambda n, s, k: math.log2(n) * s),)),
    Family("shared-link", "(n-1) S/B",
           "one shared link (a PCIe root, a switch port) that every transfer crosses",
           (Term("inv_bandwidth", _INV_B, lambda n, s, k: (n - 1) * s),)),
    Family("ps", "max(S/B, n S/(k B)) - S/B",
           "parameter server with k servers: the busiest of a worker's link and a server's",
           (Term("inv_bandwidth", _INV_B, lambda n, s, k: max(s, n * s / k) - s),)),
    Family("sync", "c [n > 1]", "a constant synchronisation cost once ranks must meet",
           (Term("sync", "seconds per step", lambda n, s, k: float(n > 1)),)),
    Family("shared-link+straggler", "(n-1) S/B + sigma E[max of n]",
           "a shared link plus waiting for the slowest of n ranks with noisy step times",
           (Term("inv_bandwidth", _INV_B, lambda n, s, k: (n - 1) * s),
            Term("sigma", "step-time spread (s)", lambda n, s, k: expected_max_normal(n)))),
    Family("straggler", "sigma E[max of n]",
           "waiting for the slowest of n ranks whose step times vary with spread sigma",
           (Term("sigma", "step-time spread (s)", lambda n, s, k: expected_max_normal(n)),)),
    Family("contention", "(n-1) c",
           "a resource every rank shares (host CPU, memory bandwidth) slowing each by c per rank",
           (Term("per_rank", "seconds per extra rank", lambda n, s, k: float(n - 1)),)),
    Family("none", "0", "no cost beyond the 1-rank run", ()),
)}

SEED_TABLES: dict[str, tuple[str, ...]] = {"nccl": ALLREDUCE_FAMILIES}
"""Families of the seed tables' names that are no strategy (their NCCL all-reduce); a
strategy's own are in its registry entry (``hvdscale.registry``)."""


def family_names(strategy: str) -> tuple[str, ...]:
    """The names of ``strategy``'s candidate families, the first the default when the points
    cannot choose.

    Raises:
        HvdscaleError: a strategy predict does not know, or one naming a family that does not
            exist.
    """
    spec = find(strategy)
    if spec is None and strategy not in SEED_TABLES:
        raise HvdscaleError(f"predict knows no communication families for strategy "
                            f"{strategy!r} (known: {', '.join((*names(), *SEED_TABLES))})")
    got = spec.families if spec is not None else SEED_TABLES[strategy]
    unknown = [f for f in got if f not in FAMILIES]
    if unknown or not got:
        raise HvdscaleError(f"strategy {strategy!r} names prediction families "
                            f"{', '.join(unknown) or '(none)'}; known: {', '.join(FAMILIES)}")
    return got


def families_for(strategy: str) -> list[Family]:
    """The candidate families of ``strategy`` (``family_names``)."""
    return [FAMILIES[f] for f in family_names(strategy)]


def overlaps(strategy: str) -> bool:
    """Whether ``strategy``'s communication may run during backward (only the excess is
    exposed); False for a name this process does not know."""
    spec = find(strategy)
    return spec is not None and spec.overlaps
