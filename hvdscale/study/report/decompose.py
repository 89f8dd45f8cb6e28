"""One decomposition of a measured point's step time, shared by the report's breakdown
(``hvdscale.study.report.breakdown``) and the fitted prediction
(``hvdscale.study.predict.ownfit``), so
"exposed communication" means the same in both.

Per computing rank r of a record, over its measured steps:

- compute: ``compute_s`` (forward + backward, ``meter.rank_times``);
- straggler idle: the time r waited at the steps for a slower rank's compute
  (``idle.per_rank[r].idle_s``, ``meter.idle_times``);
- exposed communication: the rest of r's step time, step - compute - idle, above the 1-worker
  run's own non-compute time per step (g1: optimizer, data, loop), times the steps;
- g1 x steps: the per-step time a 1-worker run also spends outside compute.

So step = compute + idle + exposed communication + g1 x steps, exactly, per rank. The loss of
efficiency against linear speedup (``split_loss``) adds a "rest" (time outside the steps and
per-word vs per-step differences), by difference.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

PARTS = ("compute_slowdown", "exposed_comm", "straggler_idle", "rest")


@dataclass(frozen=True)
class Baseline:
    """The 1-worker runs of a config: w1 (median words/s), c1 (compute seconds per word) and g1
    (non-compute step seconds per step), medians over the runs."""

    w1: float
    c1: float
    g1: float


def baseline(base: list[dict]) -> Baseline:
    """The ``Baseline`` of 1-worker records (each with ``rank_times``)."""
    c1, g1 = [], []
    for r in base:
        rt = r["rank_times"][0]
        c1.append(rt["compute_s"] / rt["words"])
        g1.append((rt["step_s"] - rt["compute_s"]) / rt["steps"])
    return Baseline(statistics.median(r["words_per_s"] for r in base), statistics.median(c1),
                    statistics.median(g1))


def rank_parts(rec: dict, g1: float) -> list[dict[str, float]]:
    """Per computing rank, seconds over the window: ``compute``, ``idle``, ``comm`` (exposed
    communication above g1 per step), ``g1`` (g1 x steps), plus ``step``, ``words``, ``steps``.
    compute + idle + comm + g1 == step for every rank."""
    idle = {p["rank"]: p["idle_s"] for p in (rec.get("idle") or {}).get("per_rank", [])}
    out = []
    for rt in rec["rank_times"]:
        wait = idle.get(rt["rank"], 0.0)
        base = rt["steps"] * g1
        out.append({"rank": rt["rank"], "compute": rt["compute_s"], "idle": wait,
                    "comm": rt["step_s"] - rt["compute_s"] - wait - base, "g1": base,
                    "step": rt["step_s"], "words": rt["words"], "steps": rt["steps"]})
    return out


def per_step(rec: dict, g1: float) -> dict[str, float]:
    """The rank-mean of ``rank_parts`` per measured step (seconds), and the words per rank per
    step: what the fitted model's terms are fitted to."""
    parts = rank_parts(rec, g1)
    n = len(parts)
    out = {k: sum(p[k] / p["steps"] for p in parts) / n
           for k in ("compute", "idle", "comm", "g1", "step", "words")}
    return out


def split_loss(rec: dict, base: list[dict]) -> dict[str, Any]:
    """The loss of ``rec`` against linear speedup over ``base`` (its 1-worker records), by part
    (see ``hvdscale.study.report.breakdown`` for the meaning).

    Returns:
        ``efficiency_pct``, ``loss_pct`` and each part of ``PARTS`` in points of efficiency
        (they sum to ``loss_pct``), in seconds per rank too, and the ``dominant`` part.
    """
    b = baseline(base)
    T = rec["window_s"]
    sums = dict.fromkeys(PARTS, 0.0)
    total = 0.0
    parts = rank_parts(rec, b.g1)
    for p in parts:
        gap = T - p["words"] / b.w1
        comp = p["compute"] - p["words"] * b.c1
        for k, v in zip(PARTS, (comp, p["comm"], p["idle"], gap - comp - p["comm"] - p["idle"]),
                        strict=True):
            sums[k] += v
        total += gap
    n = len(parts)
    eff = 100.0 * rec["words"] / T / (rec["workers"] * b.w1)
    out: dict[str, Any] = {"efficiency_pct": eff, "loss_pct": 100.0 * total / n / T,
                           "seconds": {k: v / n for k, v in sums.items()}}
    for k in PARTS:
        out[k] = 100.0 * sums[k] / n / T
    out["dominant"] = max(PARTS, key=lambda k: out[k])
    if (rec.get("strategy") or {}).get("compute_includes_allreduce"):
        out["merged"] = ("compute includes the allreduce and the wait for slower ranks "
                         "(TensorFlow reduces inside the train step)")
    return out
