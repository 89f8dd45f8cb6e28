"""``predict --fit``: fit the step-time model to one's own recorded points, per strategy.

step(n) = compute(n) + exposed communication(n) + straggler idle(n) + g1, each measured per
point by ``hvdscale.study.report.decompose`` (the report's breakdown uses the same split):

- compute(n): the 1-worker compute times the independent replicas' slowdown (compute per word
  at n over their own at 1) at the same n where recorded (contention without communication),
  else the 1-worker compute per word times a fitted slowdown 1 + s (n - 1) (fitted on the
  independent records when they span two rank counts, else on the strategy's own); the output
  says which;
- exposed communication: a family of ``families.family_names`` chosen by held-out error
  (``fit.choose``; parameters in seconds per byte of the step's gradients and per hop); with
  overlap (Horovod hooks, DDP) only the part beyond the backward pass is exposed: the fit adds
  the backward share of compute back to the measured exposed time, the prediction subtracts it;
- straggler idle: sigma x E[max of n normals], fitted on the measured idle;
- g1: the 1-worker run's own non-compute time per step.

Every record of a point is an observation (repeats give the standard errors). Held-out error at
each measured n > 1 comes from the whole model refitted without that n's records.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hvdscale.config.run import RunConfig
from hvdscale.errors import HvdscaleError
from hvdscale.records.experiment import experiment_id, series_label, series_of
from hvdscale.records.run import RunRecord
from hvdscale.study.predict.compute import has_comm_core
from hvdscale.study.predict.families import FAMILIES, families_for, overlaps
from hvdscale.study.predict.fit import Fit, choose, fit_family, t975
from hvdscale.study.report.decompose import baseline, per_step


def overlapped(config: RunConfig) -> bool:
    """Whether a record's strategy reduces gradients during backward (Horovod's ``hooks``;
    DDP's buckets; any such strategy unless its section says ``after-backward``)."""
    name = config.strategy.name
    section = getattr(config.strategy, name, None)  # a plugin's strategy has none
    return overlaps(name) and getattr(section, "overlap", "hooks") != "after-backward"


def _obs(records: list[RunRecord], backward_fraction: float) -> dict[str, list[dict]]:
    """Per strategy, one observation per record: workers, the per-step parts, and the
    communication hidden behind backward (``hidden``: the backward share of compute when the
    strategy overlaps and the ranks communicate, else 0)."""
    by: dict[str, list[RunRecord]] = {}
    for r in records:
        by.setdefault(r.strategy_name, []).append(r)
    out = {}
    for s, recs in by.items():
        ones = [r for r in recs if r.workers == 1]
        if not ones:
            raise HvdscaleError(f"--fit: strategy {s} has no 1-worker record: the fit needs "
                                "the 1-rank run of every strategy it fits")
        g1 = baseline(ones).g1
        out[s] = []
        for r in recs:
            o = {"n": r.workers, **per_step(r, g1), "g1_per_step": g1}
            # hidden only on a core of the communication thread's own (compute.has_comm_core)
            over = overlapped(r.config) and r.workers > 1 and has_comm_core(r)
            o["hidden"] = backward_fraction * o["compute"] if over else 0.0
            out[s].append(o)
    return out


def check_points(records: list[RunRecord]) -> None:
    """One experiment, at least two rank counts per strategy (any: 1, 2, 4, 8 is fine; what the
    unmeasured ones cost is in ``gaps``).

    Raises:
        HvdscaleError: mixed experiments, a single rank count, no rank_times.
    """
    if not records:
        raise HvdscaleError("--fit: no successful run records")
    ids = {experiment_id(r.config) for r in records}
    if len(ids) > 1:
        raise HvdscaleError(f"--fit: the records hold {len(ids)} experiments "
                            f"({', '.join(sorted(ids))}); fit one at a time (one results "
                            "directory per experiment)")
    _check_series(records)
    if any(not r.rank_times for r in records):
        raise HvdscaleError("--fit: records without rank_times (made before per-rank times "
                            "were recorded); rerun the points")
    by: dict[str, set[int]] = {}
    for r in records:
        by.setdefault(r.strategy_name, set()).add(r.workers)
    for s, ns in sorted(by.items()):
        if len(ns) < 2:
            raise HvdscaleError(f"--fit: strategy {s} has one rank count only ({min(ns)}); "
                                "a fit needs at least two (e.g. np=1 and np=2)")


def _check_series(records: list[RunRecord]) -> None:
    """One series per strategy, all of one framework and RNN implementation: an experiment's
    series (torch and tf, fused and loop, ps x1 and x2, ...) are not repeats of one point, and
    the independent replicas lend their compute only to their own framework.

    Raises:
        HvdscaleError: naming the series found.
    """
    labels = sorted({series_label(r.config) for r in records})
    by: dict[str, set[str]] = {}
    for r in records:
        by.setdefault(r.strategy_name, set()).add(series_label(r.config))
    stacks = {(series_of(r.config)["framework"], series_of(r.config)["rnn_impl"])
              for r in records}
    many = [v for v in by.values() if len(v) > 1]
    if many or len(stacks) > 1:
        raise HvdscaleError(f"--fit: the records hold {len(labels)} series "
                            f"({'; '.join(labels)}); the fit needs one series per strategy, "
                            "all of one framework and RNN implementation (one results "
                            "directory per series)")


def servers_of(records: list[RunRecord], given: int | None) -> int:
    """The PS servers k of one strategy's records (``strategy.ps.num_servers``).

    Raises:
        HvdscaleError: ``given`` (--servers) differs from what the records ran with.
    """
    ks = {r.config.strategy.ps.num_servers for r in records}
    k = max(ks)
    if given is not None and given != k:
        raise HvdscaleError(f"--servers {given}: the records ran with strategy.ps.num_servers="
                            f"{k}; --fit uses the records' value (leave --servers out)")
    return k


def _slowdown(obs: list[dict], c1: float) -> Fit:
    """compute per word / c1 - 1 = s (n - 1), fitted."""
    return fit_family(FAMILIES["contention"], [o["n"] for o in obs],
                      [o["compute"] / o["words"] / c1 - 1.0 for o in obs], intercept=False)


def _fit_all(obs: list[dict], indep: list[dict], strategy: str, nbytes: float,
             servers: int) -> dict[str, Any]:
    """Fit the three terms to ``obs`` (one strategy's observations)."""
    ones = [o for o in obs if o["n"] == 1]
    c1 = float(np.mean([o["compute"] / o["words"] for o in ones]))
    ind_ns = {o["n"] for o in indep}
    slow_src = indep if len(ind_ns) >= 2 and strategy != "independent" else obs
    ind_c1 = float(np.mean([o["compute"] / o["words"] for o in indep if o["n"] == 1] or [c1]))
    slow = _slowdown(slow_src, ind_c1 if slow_src is indep else c1)
    ns = [o["n"] for o in obs]
    # The family is the whole communication; with overlap the measured exposed part is what
    # the backward pass did not hide, so the hidden share is added back before the fit.
    comm = choose(families_for(strategy), ns, [o["comm"] + o["hidden"] for o in obs],
                  intercept=False, nbytes=nbytes, servers=servers,
                  base=[o["compute"] + o["idle"] + o["g1_per_step"] - o["hidden"] for o in obs])
    multi = [o for o in obs if o["n"] > 1]
    idle = fit_family(FAMILIES["straggler"], [o["n"] for o in multi],
                      [o["idle"] for o in multi], intercept=False)
    hide = [o["hidden"] / o["compute"] for o in obs if o["n"] > 1]
    return {"c1": c1, "g1": float(np.mean([o["g1_per_step"] for o in obs])),
            "hidden_share": float(np.mean(hide)) if hide else 0.0,
            "words": float(np.mean([o["words"] for o in ones])), "slowdown": slow,
            "slowdown_from": "independent" if slow_src is indep else "own", "comm": comm,
            "idle": idle, "indep": indep}


def _compute_at(model: dict[str, Any], n: int) -> tuple[float, float, str]:
    """Compute per step at n (words per rank as at 1 worker), its sd, and its source."""
    same = [o for o in model["indep"] if o["n"] == n]
    one = [o for o in model["indep"] if o["n"] == 1]
    if same and one:  # the replicas' slowdown at n, applied to this strategy's own 1-rank run
        ratio = (float(np.mean([o["compute"] / o["words"] for o in same]))
                 / float(np.mean([o["compute"] / o["words"] for o in one])))
        return model["c1"] * model["words"] * ratio, 0.0, f"independent replicas at n={n}"
    s = model["slowdown"].predict(n)[0]
    base = model["c1"] * model["words"]
    hw = model["slowdown"].half_width(n)  # nan (unknown) when the fit has no dof
    how = f"1-worker compute x fitted slowdown ({model['slowdown_from']} records)"
    return base * (1 + s), base * hw, how


def predict_at(model: dict[str, Any], n: int) -> dict[str, Any]:
    """The fitted model's step at ``n``: each term, words/s and its 95 % prediction interval
    (each term's t-based half-width, combined in quadrature; unknown if any term's is)."""
    comp, comp_hw, src = _compute_at(model, n)
    total = model["comm"].fit.predict(n)[0]
    # only the part beyond what backward hides is exposed
    comm = max(0.0, total - (model["hidden_share"] * comp if n > 1 else 0.0))
    idle = model["idle"].predict(n)[0]
    step = comp + comm + idle + model["g1"]
    hws = (comp_hw, model["comm"].fit.half_width(n), model["idle"].half_width(n))
    hw = math.sqrt(sum(x * x for x in hws))
    wps = n * model["words"] / step
    lo = n * model["words"] / (step + hw) if math.isfinite(hw) else None
    hi = n * model["words"] / (step - hw) if math.isfinite(hw) and step - hw > 0 else None
    return {"n": n, "compute_s": comp, "compute_source": src, "comm_s": comm,
            "comm_total_s": total, "idle_s": idle,
            "g1_s": model["g1"], "step_s": step, "words_per_s": wps, "interval": [lo, hi]}


def _interval_pct(p: dict[str, Any]) -> float | None:
    """Half the 95 % interval of a prediction, in % of its words/s (None: unknown)."""
    lo, hi = p["interval"]
    return None if lo is None or hi is None else 50 * (hi - lo) / p["words_per_s"]


def gaps(obs: list[dict], model: dict[str, Any]) -> dict[str, Any]:
    """The rank counts left unmeasured between 1 and the largest measured, and what that costs:
    the communication fit's degrees of freedom with and without them (as many records each as
    the measured ones have), the factor by which the fewer degrees of freedom alone widen every
    95 % interval (the Student t quantiles' ratio; None when either is unknown), and the
    interval at each unmeasured n beside the median one at the measured n > 1 (the
    interpolation's own widening)."""
    measured = sorted({o["n"] for o in obs})
    missing = sorted(set(range(1, measured[-1] + 1)) - set(measured))
    dof = model["comm"].fit.dof
    full = dof + round(len(obs) / len(measured) * len(missing))
    t_now, t_full = t975(dof), t975(full)
    factor = t_now / t_full if math.isfinite(t_now) and math.isfinite(t_full) else None
    at_meas = [x for x in (_interval_pct(predict_at(model, n)) for n in measured if n > 1)
               if x is not None]
    return {"measured": measured, "missing": missing, "comm_dof": dof,
            "comm_dof_if_measured": full, "t_widening": factor,
            "interval_pct_at_missing": {n: _interval_pct(predict_at(model, n)) for n in missing},
            "interval_pct_at_measured": float(np.median(at_meas)) if at_meas else None}


def fit_strategy(obs: list[dict], indep: list[dict], strategy: str, nbytes: float,
                 servers: int, ranks: list[int]) -> dict[str, Any]:
    """Fit one strategy, its held-out error per measured n > 1 and its predictions."""
    model = _fit_all(obs, indep, strategy, nbytes, servers)
    held = {}
    for n in sorted({o["n"] for o in obs if o["n"] > 1}):
        rest = [o for o in obs if o["n"] != n]
        try:
            sub = _fit_all(rest, [o for o in indep if o["n"] != n], strategy, nbytes, servers)
        except HvdscaleError:
            continue  # too few points left to fit without n
        at = [o for o in obs if o["n"] == n]
        meas = float(np.mean([o["n"] * o["words"] / o["step"] for o in at]))
        pred = predict_at(sub, n)
        held[n] = {"measured_words_per_s": meas, "predicted_words_per_s": pred["words_per_s"],
                   "error_pct": 100 * (pred["words_per_s"] - meas) / meas}
    largest = max(o["n"] for o in obs)
    c = model["comm"]
    preds = [{**predict_at(model, n), "beyond_measured": n > largest} for n in ranks]
    return {"strategy": strategy, "family": c.fit.family.name, "formula": c.fit.family.formula,
            "meaning": c.fit.family.meaning, "how": c.how, "params": c.fit.table(),
            "slowdown": model["slowdown"].table(), "slowdown_from": model["slowdown_from"],
            "straggler": model["idle"].table(), "held_out": held, "largest_measured": largest,
            "gaps": gaps(obs, model), "predictions": preds}


def fit_records(records: list[RunRecord], nbytes: float, servers: int | None, ranks: list[int],
                backward_fraction: float = 2 / 3) -> dict[str, Any]:
    """Every strategy in ``records`` (one experiment, one series each) fitted; ``independent``
    lends its compute to the others; ``backward_fraction`` of compute can hide communication
    under overlap. The PS servers k come from the records (``servers``, if given, must agree)."""
    ok = [r for r in records if isinstance(r, RunRecord)]
    check_points(ok)
    obs = _obs(ok, backward_fraction)
    indep = obs.get("independent", [])
    ks = {s: servers_of([r for r in ok if r.strategy_name == s],
                        servers if s == "ps" else None) for s in obs}
    return {"bytes_per_step": nbytes, "servers": ks.get("ps"),
            "backward_fraction": backward_fraction,
            "strategies": {s: fit_strategy(o, indep if s != "independent" else [], s, nbytes,
                                           ks[s], ranks) for s, o in sorted(obs.items())}}
