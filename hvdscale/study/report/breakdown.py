"""Why not better: a measured point's gap to linear speedup, split into its causes.

For a point with W workers, window T and words summed over the workers, linear speedup over
the 1-worker run of the same config (words/s w1, the median of its runs, as the report's
speedup) would have taken T_lin = words / (W w1). The loss of efficiency is (T - T_lin) / T,
exactly 100 minus the point's efficiency. Averaged over the workers, T - T_lin is the mean over
ranks r of T - words_r / w1, which splits per rank into
(``hvdscale.study.report.decompose``, the one decomposition the fitted prediction uses too):

- compute slowdown: compute_r - words_r x c1, the rank's forward+backward time above what the
  1-worker run spent per word (c1): contention for cores and memory, smaller GEMMs;
- straggler idle: the time r waited at the steps for a slower rank's compute
  (``meter.idle_times``);
- exposed communication: the rest of r's step time (step - compute - idle: waiting for
  gradients, push/pull, the update), above the 1-worker run's own per step (g1);
- the rest: everything else (time outside the steps, per-word vs per-step differences), by
  difference, so the four parts add up to the loss exactly.

Each part is reported in points of efficiency (share of T). Needs records that hold
``rank_times`` (written since this module exists).

TensorFlow's Horovod integration reduces gradients inside the traced train step, so its
compute time already holds the allreduce and the wait for slower ranks (the record's strategy
says ``compute_includes_allreduce``): for those points the compute-slowdown part holds exposed
communication and straggler idle too, and the row says so rather than pretending to split them.
"""

from __future__ import annotations

from typing import Any

from hvdscale.records.load import record_load
from hvdscale.study.report.decompose import PARTS, split_loss
from hvdscale.study.report.noise import BUSY
from hvdscale.study.rounds import untagged

PART_LABELS = {"compute_slowdown": "compute slowdown", "exposed_comm": "exposed communication",
               "straggler_idle": "straggler idle", "rest": "rest"}
__all__ = ["PARTS", "PART_LABELS", "breakdowns", "section", "split_loss"]


def _label(rec: dict) -> str:
    k = rec["key"]
    s = k["strategy"]
    ps = (rec.get("config") or {}).get("strategy", {}).get("ps", {})
    if s == "ps" and "num_servers" in ps:
        k = ps["num_servers"]
        s = f"ps ({ps.get('placement', 'colocated')}, {k} server{'s' * (k > 1)})"
    return s


def breakdowns(records: list[dict]) -> list[dict[str, Any]]:
    """One breakdown per multi-worker point (its median-words/s record) that has a 1-worker
    run of the same config; points without ``rank_times`` are listed with a note."""
    ok = [r for r in records if r.get("status") == "ok"]
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in ok:
        # The rounds of one point (``hvdscale.study.rounds`` tags the name) are one group.
        cfg = {**r.get("config", {}), "name": untagged(str(r.get("config", {}).get("name")))}
        groups.setdefault((repr(cfg), r["workers"]), []).append(r)
    out = []
    for (cfg, workers), recs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if workers <= 1:
            continue
        recs = sorted(recs, key=lambda r: r["words_per_s"])
        rec = recs[(len(recs) - 1) // 2]
        base = groups.get((cfg, 1), [])
        row: dict[str, Any] = {"name": untagged(rec["key"]["name"]), "model": rec["key"]["model"],
                               "framework": rec["key"].get("framework", "torch"),
                               "rnn_impl": rec["key"]["rnn_impl"],
                               "scaling": rec["key"]["scaling"], "strategy": _label(rec),
                               "ranks": rec["ranks"], "workers": workers,
                               "busy": bool((load := record_load(rec)) and load.busy)}
        if not base:
            row["note"] = "no 1-worker run of this config"
        elif "rank_times" not in rec or any("rank_times" not in r for r in base):
            row["note"] = "records predate per-rank times (rerun to see the breakdown)"
        else:
            try:
                row.update(split_loss(rec, base))
            except (KeyError, TypeError, ZeroDivisionError):
                row["note"] = "incomplete timings in the records"
        out.append(row)
    return out


def section(records: list[dict]) -> str:
    """The report's "Why not better" section (empty when no point has more than 1 worker)."""
    rows = breakdowns(records)
    if not rows:
        return ""
    lines = ["## Why not better: the gap to linear speedup, by cause\n",
             "Points of efficiency lost against linear speedup over the 1-worker run of the "
             "same config (one run per point: the median one). Compute slowdown: forward and "
             "backward slower per word than with 1 worker; exposed communication: step time "
             "beyond compute and idle, above the 1-worker run's; straggler idle: waiting for a "
             "slower rank's compute; rest: everything else. The parts add up to the loss.\n",
             "|Run|Strategy|Ranks|Workers|Efficiency (%)|Loss (points)|Compute slowdown|"
             "Exposed communication|Straggler idle|Rest|Dominant|",
             "|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|"]
    for r in rows:
        head = (f"|{r['name']} ({r['model']}/{r['framework']}/{r['rnn_impl']}, "
                f"{r['scaling']})|{r['strategy']}{BUSY if r['busy'] else ''}|"
                f"{r['ranks']}|{r['workers']}|")
        if "note" in r:
            lines.append(head + f"|||||||{r['note']}|")
            continue
        dominant = PART_LABELS[r["dominant"]]
        if "merged" in r:
            dominant += f" ({r['merged']})"
        lines.append(head + f"{r['efficiency_pct']:.1f}|{r['loss_pct']:.1f}|"
                     + "|".join(f"{r[k]:.1f}" for k in PARTS) + f"|{dominant}|")
    return "\n".join(lines) + "\n\n"
