"""Why not better: a measured point's gap to linear speedup, split into its causes.

For a point with W workers, window T and words summed over the workers, linear speedup over
the 1-worker run of the same config (words/s w1, the median of its runs, as the report's
speedup) would have taken T_lin = words / (W w1). The loss of efficiency is (T - T_lin) / T,
exactly 100 minus the point's efficiency. Averaged over the workers, T - T_lin is the mean over
ranks r of T - words_r / w1, which splits (``hvdscale.study.report.decompose``, the one
decomposition the fitted prediction uses too) into three causes, each measured from a timer:

- compute slowdown: from each rank's timed forward+backward (``rank_times.compute_s``) above
  what the 1-worker run spent per word (c1): contention for cores and memory, smaller GEMMs;
- straggler idle: from the time r waited at the steps for a slower rank's compute
  (``meter.idle_times``);
- exposed communication: from r's timed steps: step - compute - idle (waiting for gradients,
  push/pull, the update), above the 1-worker run's own per step (g1); a strategy that sends
  nothing (``independent``) has none, by definition;

and "unexplained (noise included)", the loss minus the causes: time outside the timed steps,
per-word vs per-step differences and timer noise. No cause is negative: a timer that reads
below zero (noise) counts 0 and its reading stays in the unexplained part, so the four add up
to the loss exactly. Where a point has several rounds, each round is split against the
1-worker run of the same round, and each cell gives the mean over the rounds (means add up)
and their range.

Each part is reported in points of efficiency (share of T). Needs records that hold
``rank_times`` (written since this module exists).

TensorFlow's Horovod integration reduces gradients inside the traced train step, so its
compute time already holds the allreduce and the wait for slower ranks (the record's strategy
says ``compute_includes_allreduce``): for those points the compute-slowdown part holds exposed
communication and straggler idle too, and the row says so rather than pretending to split them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hvdscale.records.fields import Record
from hvdscale.records.load import record_load
from hvdscale.records.run import RunRecord
from hvdscale.study.paired.rounds import round_of, untagged
from hvdscale.study.report.decompose import CAUSES, PARTS, split_loss
from hvdscale.study.report.noise import BUSY

PART_LABELS = {"compute_slowdown": "compute slowdown", "exposed_comm": "exposed communication",
               "straggler_idle": "straggler idle", "unexplained": "unexplained (noise included)"}
__all__ = ["CAUSES", "PARTS", "PART_LABELS", "breakdowns", "section", "split_loss"]


def _label(rec: RunRecord) -> str:
    k = rec.key
    s = k["strategy"]
    ps = rec.config.strategy.ps
    if s == "ps":
        k = ps.num_servers
        s = f"ps ({ps.placement}, {k} server{'s' * (k > 1)})"
    return s


def over_rounds(recs: list[RunRecord], base: list[RunRecord]) -> dict[str, Any]:
    """``split_loss`` of a point over its runs: one run against all 1-worker runs; several
    rounds each against the 1-worker run of the same round where one is tagged (else all),
    then averaged (means add up, so the parts still sum to the loss, and lie within their
    range), with ``spread``: per part and the loss, (min, max) over the rounds ({} for one run).
    ``measured_s`` keeps each cause's lowest reading (below zero: no cause in some round)."""
    if len(recs) < 2:
        return {**split_loss(recs[0], base), "spread": {}}
    by_round = {round_of(b): b for b in base if round_of(b) is not None}
    splits = [split_loss(r, [by_round[round_of(r)]] if round_of(r) in by_round else base)
              for r in recs]
    keys = (*PARTS, "loss_pct", "efficiency_pct")
    out = {**splits[0], **{k: sum(x[k] for x in splits) / len(splits) for k in keys}}
    out["seconds"] = {k: sum(x["seconds"][k] for x in splits) / len(splits) for k in PARTS}
    out["measured_s"] = {k: min(x["measured_s"][k] for x in splits) for k in CAUSES}
    top = max(PARTS, key=lambda k: out[k])
    out["dominant"] = top if out[top] > 0 else None
    out["spread"] = {k: (min(x[k] for x in splits), max(x[k] for x in splits))
                     for k in (*PARTS, "loss_pct")}
    return out


def breakdowns(records: Sequence[Record]) -> list[dict[str, Any]]:
    """One breakdown per multi-worker point that has a 1-worker run of the same config
    (``over_rounds``: the mean over its rounds and their range, where it has several); points
    without ``rank_times`` are listed with a note."""
    ok = [r for r in records if isinstance(r, RunRecord)]
    groups: dict[tuple[str, int], list[RunRecord]] = {}
    for r in ok:
        # The rounds of one point (``hvdscale.study.paired.rounds`` tags the name) are one group.
        cfg = replace(r.config, name=untagged(r.config.name))
        groups.setdefault((repr(cfg), r.workers), []).append(r)
    out = []
    for (cfg, workers), recs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if workers <= 1:
            continue
        rec = recs[-1]
        base = groups.get((cfg, 1), [])
        key = rec.key
        row: dict[str, Any] = {"name": untagged(key["name"]), "model": key["model"],
                               "framework": key.get("framework", "torch"),
                               "rnn_impl": key["rnn_impl"],
                               "scaling": key["scaling"], "strategy": _label(rec),
                               "ranks": rec.ranks, "workers": workers, "runs": len(recs),
                               "busy": any((load := record_load(r)) and load.busy
                                           for r in recs)}
        if not base:
            row["note"] = "no 1-worker run of this config"
        elif any(not r.rank_times for r in recs + base):
            row["note"] = "records predate per-rank times (rerun to see the breakdown)"
        else:
            try:
                row.update(over_rounds(recs, base))
            except (KeyError, TypeError, ZeroDivisionError):
                row["note"] = "incomplete timings in the records"
        out.append(row)
    return out


def _cell(r: dict[str, Any], k: str) -> str:
    """One part's cell: its points (the rounds' mean), the rounds' range where there are
    rounds."""
    if k == "exposed_comm" and r["sends_nothing"]:
        return "0 (sends nothing)"
    lo_hi = r["spread"].get(k)
    below = k in CAUSES and r["measured_s"][k] < 0  # a timer read below zero: counted 0
    return (f"{r[k]:.1f}" + ("*" if below else "")
            + (f" [{lo_hi[0]:.1f} to {lo_hi[1]:.1f}]" if lo_hi else ""))


def _dominant(r: dict[str, Any]) -> str:
    """The largest part's label (none above 0: the point lost nothing measurable)."""
    if r["dominant"] is None or r["loss_pct"] <= 0:
        return "none (no loss)" if r["loss_pct"] <= 0 else "none (no part above 0)"
    text = PART_LABELS[r["dominant"]]
    return text + (f" ({r['merged']})" if "merged" in r else "")


def section(records: Sequence[Record]) -> str:
    """The report's "Why not better" section (empty when no point has more than 1 worker)."""
    rows = breakdowns(records)
    if not rows:
        return ""
    rounds = any(r["runs"] > 1 for r in rows)
    lines = ["## Why not better: the gap to linear speedup, by cause\n",
             "Points of efficiency lost against linear speedup over the 1-worker run of the "
             "same config. Each cause is a measured time, never negative: compute slowdown, "
             "from each rank's timed forward and backward, per word, against the 1-worker "
             "run's; straggler idle, from the time a rank waited at a step for a slower rank's "
             "compute; exposed communication, from each rank's step time beyond its compute "
             "and idle, above the 1-worker run's (0 by definition for a strategy that sends "
             "nothing). Unexplained (noise included): the loss minus the causes (time outside "
             "the timed steps, and timer noise: a cause whose timer reads below zero counts 0 "
             "and its reading stays here, so this part may be negative; such a cause shows "
             "0.0*). The four add up to the loss.\n",
             ("Several rounds: each round is split against the 1-worker run of the same "
              "round; a cell is the mean over the rounds (so the parts still add up), with [the "
              "range over the rounds]; * marks a cause that read below zero in some round.\n"
              if rounds
              else "One run per point: no range to show; `hvdscale sweep --repeats N` (N >= 2) "
                   "measures the rounds that give each part its spread.\n"),
             "|Run|Strategy|Ranks|Workers|Runs|Efficiency (%)|Loss (points)|Compute slowdown|"
             "Exposed communication|Straggler idle|Unexplained (noise included)|Dominant|",
             "|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|"]
    for r in rows:
        head = (f"|{r['name']} ({r['model']}/{r['framework']}/{r['rnn_impl']}, "
                f"{r['scaling']})|{r['strategy']}{BUSY if r['busy'] else ''}|"
                f"{r['ranks']}|{r['workers']}|{r['runs']}|")
        if "note" in r:
            lines.append(head + f"||||||{r['note']}|")
            continue
        lines.append(head + f"{r['efficiency_pct']:.1f}|{_cell(r, 'loss_pct')}|"
                     + "|".join(_cell(r, k) for k in PARTS) + f"|{_dominant(r)}|")
    return "\n".join(lines) + "\n\n"
