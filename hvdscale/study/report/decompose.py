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

So step = compute + idle + exposed communication + g1 x steps, exactly, per rank.

The loss of efficiency against linear speedup (``split_loss``) names three causes, each a
measured amount of time that cannot be negative: a timer reading below zero (compute slightly
faster per word than with 1 worker, step minus compute in a noisy round) is no cause, so the
cause counts 0 and the reading stays in "unexplained". A strategy that sends nothing
(``independent``) has no exposed communication: 0 by definition, whatever its step time minus
compute reads. "Unexplained (noise included)" is the loss minus the causes: time outside the
timed steps, per-word vs per-step differences, timer noise and those below-zero readings.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from hvdscale.records.run import RunRecord
from hvdscale.registry import find

CAUSES = ("compute_slowdown", "exposed_comm", "straggler_idle")
"""The parts of a loss that a measured time explains (never negative)."""
PARTS = (*CAUSES, "unexplained")
"""The causes, then what none explains (the loss minus the causes; noise included)."""


def sends_nothing(rec: RunRecord) -> bool:
    """Whether ``rec``'s strategy communicates nothing between ranks (its registry entry says;
    then no exposed communication by definition). A name this process does not know sends."""
    spec = find(rec.strategy_name)
    return spec is not None and not spec.sends


@dataclass(frozen=True)
class Baseline:
    """The 1-worker runs of a config: w1 (median words/s), c1 (compute seconds per word) and g1
    (non-compute step seconds per step), medians over the runs."""

    w1: float
    c1: float
    g1: float


def baseline(base: list[RunRecord]) -> Baseline:
    """The ``Baseline`` of 1-worker records (each with ``rank_times``)."""
    c1, g1 = [], []
    for r in base:
        rt = r.rank_times[0]
        c1.append(rt.compute_s / rt.words)
        g1.append((rt.step_s - rt.compute_s) / rt.steps)
    return Baseline(statistics.median(r.words_per_s for r in base), statistics.median(c1),
                    statistics.median(g1))


def rank_parts(rec: RunRecord, g1: float) -> list[dict[str, float]]:
    """Per computing rank, seconds over the window: ``compute``, ``idle``, ``comm`` (exposed
    communication above g1 per step), ``g1`` (g1 x steps), plus ``step``, ``words``, ``steps``.
    compute + idle + comm + g1 == step for every rank of a synchronous strategy. Replicas that
    never meet (``independent``, ``idle.synchronous`` false) wait only at the end of the window,
    outside their steps (``meter.idle_times``): their idle is not taken out of the step time,
    so compute + comm + g1 == step (reading it as inside made their "communication" the
    negative of that wait)."""
    idle = {p.rank: p.idle_s for p in rec.idle_per_rank}
    in_steps = rec.idle.synchronous is not False  # UNSET (older files): synchronous
    out = []
    for rt in rec.rank_times:
        wait = idle.get(rt.rank, 0.0)
        base = rt.steps * g1
        comm = rt.step_s - rt.compute_s - (wait if in_steps else 0.0) - base
        out.append({"rank": rt.rank, "compute": rt.compute_s, "idle": wait,
                    "comm": comm, "g1": base, "step": rt.step_s, "words": rt.words,
                    "steps": rt.steps})
    return out


def per_step(rec: RunRecord, g1: float) -> dict[str, float]:
    """The rank-mean of ``rank_parts`` per measured step (seconds), and the words per rank per
    step: what the fitted model's terms are fitted to."""
    parts = rank_parts(rec, g1)
    n = len(parts)
    out = {k: sum(p[k] / p["steps"] for p in parts) / n
           for k in ("compute", "idle", "comm", "g1", "step", "words")}
    return out


def split_loss(rec: RunRecord, base: list[RunRecord]) -> dict[str, Any]:
    """The loss of ``rec`` against linear speedup over ``base`` (its 1-worker records), by part
    (see ``hvdscale.study.report.breakdown`` for the meaning).

    Returns:
        ``efficiency_pct``, ``loss_pct`` and each part of ``PARTS`` in points of efficiency
        (they sum to ``loss_pct``; the causes are >= 0), the same in ``seconds`` per rank,
        the causes' raw readings in ``measured_s`` (a negative one counted 0),
        ``sends_nothing``, and the ``dominant`` part (``None`` when no part is above 0).
    """
    b = baseline(base)
    T = rec.window_s
    parts = rank_parts(rec, b.g1)
    n = len(parts)
    # Rank means, in seconds over the window.
    gap = sum(T - p["words"] / b.w1 for p in parts) / n
    raw = {"compute_slowdown": sum(p["compute"] - p["words"] * b.c1 for p in parts) / n,
           "exposed_comm": sum(p["comm"] for p in parts) / n,
           "straggler_idle": sum(p["idle"] for p in parts) / n}
    quiet = sends_nothing(rec)
    secs = {k: 0.0 if (k == "exposed_comm" and quiet) else max(0.0, v) for k, v in raw.items()}
    secs["unexplained"] = gap - sum(secs.values())
    eff = 100.0 * rec.words / T / (rec.workers * b.w1)
    out: dict[str, Any] = {"efficiency_pct": eff, "loss_pct": 100.0 * gap / T,
                           "seconds": secs, "measured_s": raw, "sends_nothing": quiet}
    for k in PARTS:
        out[k] = 100.0 * secs[k] / T
    top = max(PARTS, key=lambda k: out[k])
    out["dominant"] = top if out[top] > 0 else None
    if rec.strategy.get("compute_includes_allreduce"):
        out["merged"] = ("compute includes the allreduce and the wait for slower ranks "
                         "(TensorFlow reduces inside the train step)")
    return out
