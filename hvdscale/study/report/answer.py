"""The answer on top of the report (issue 62): at most ``MAX_LINES`` lines saying, per rank
count, how well each strategy scales (speedup and efficiency with their intervals), what the
decision procedure decided between the series, where the missing speedup of the most efficient
point that communicates went (its dominant cause with the rounds' range, or "not separable
here"), and one next step tied to that cause, marked measured (the results hold a run that
tried it) or untested. The tables below it are unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hvdscale.config.run import RunConfig
from hvdscale.records.fields import Record
from hvdscale.records.run import RunRecord
from hvdscale.study.paired.recommend import compare, paired_summary, verdict_of
from hvdscale.study.report.breakdown import PART_LABELS, breakdowns
from hvdscale.study.report.points import Experiment, Point

MAX_LINES = 15
"""The answer's length cap: the tables follow it."""
SHOWN = 4
"""Decided verdicts named per rank count (the rest are in the tables)."""

NEXT_STEP = {
    "straggler_idle": ("global bucketing (`data.bucketing.mode: global`), so every rank's "
                       "batch holds sentences of like length",
                       lambda c: c.data.bucketing.enabled and c.data.bucketing.mode == "global"),
    "exposed_comm": ("Horovod's fusion settings (`hvdscale fusion`) or more parameter servers "
                     "(`strategy.ps.num_servers`)",
                     lambda c: c.strategy.horovod.fusion_threshold_mb is not None
                     or c.strategy.horovod.cycle_time_ms is not None
                     or c.strategy.ps.num_servers > 1),
    "compute_slowdown": ("fewer compute threads per rank, or a core per rank and thread "
                         "(`threads.intra_op`, fewer ranks per host)",
                         lambda c: (c.threads.intra_op or 1) != 1),
}
"""Per cause: the next step, and whether a record's config tried it (then "measured")."""


def _speedup(p: Point) -> str:
    """``horovod 1.80 [1.52-2.13], 90% [76-106]`` (the paired rounds' 95 % interval)."""
    s = p.speedup_range
    w = p.workers
    if s is not None and s.get("lo") is not None:
        return (f"{s['gmean']:.2f} [{s['lo']:.2f}-{s['hi']:.2f}], "
                f"{100 * s['gmean'] / w:.0f}% [{100 * s['lo'] / w:.0f}-{100 * s['hi'] / w:.0f}]")
    n = s["n"] if s else 1
    return (f"{p.speedup:.2f}, {p.efficiency:.0f}% (no interval from {n} "
            f"round{'s' * (n != 1)})")


def series_pairs(exp: Experiment, n: int) -> list[tuple[str, Point, str, Point]]:
    """Every pair of series measured at ``n`` ranks, each once (label A, A, label B, B): the
    comparisons the answer decides, and ``hvdscale sweep --decide`` measures until decided."""
    at = [(label, p) for label, pts in sorted(exp.series.items()) for p in pts if p.ranks == n]
    return [(la, a, lb, b) for i, (la, a) in enumerate(at) for lb, b in at[i + 1:]]


def _verdicts(exp: Experiment, n: int) -> tuple[list[str], int]:
    """The decided verdicts among the series at ``n`` ranks (each pair once), and how many
    pairs are undecided."""
    decided, undecided = [], 0
    for la, a, lb, b in series_pairs(exp, n):
        s = paired_summary(a.rounds, b.rounds)
        if s is None:
            continue
        if verdict_of(s).decided:
            decided.append(compare(la, lb, s))
        else:
            undecided += 1
    return decided, undecided


def _cause(rows: list[dict[str, Any]], n: int, configs: list[RunConfig]) -> str:
    """Where the missing speedup of the most efficient point at ``n`` ranks went, and the
    next step tied to that cause."""
    at = [r for r in rows if r["ranks"] == n and "note" not in r]
    if not at:
        return "where the rest went: not separable here (no per-rank times at this count)"
    # The most efficient point that communicates: independent replicas scale by construction.
    r = max([x for x in at if not x.get("sends_nothing")] or at,
            key=lambda x: x["efficiency_pct"])
    who = f"{r['framework']} {r['strategy']}"
    if r["loss_pct"] <= 0:
        return f"{who} lost no speedup against linear ({r['efficiency_pct']:.0f}% efficiency)"
    top = r["dominant"]
    spread = r["spread"]
    # Separable: the dominant cause's lowest round lies above 0 and above every other
    # cause's highest round; one run has no spread, so nothing separates it from the noise.
    others = [spread[k][1] for k in PART_LABELS if k not in (top, "unexplained") and k in spread]
    lo_hi = spread.get(top) if top else None
    if (top in (None, "unexplained") or lo_hi is None or lo_hi[0] <= 0
            or (others and lo_hi[0] <= max(others))):
        why = ("one run: no spread to tell a cause from the noise" if not spread
               else "no cause stands clear of the others over the rounds")
        return f"where {who}'s missing {r['loss_pct']:.0f} points went: not separable here ({why})"
    step, tried = NEXT_STEP[top]
    mark = "measured (a run in these results tried it)" if any(map(tried, configs)) \
        else "untested"
    return (f"where {who}'s missing {r['loss_pct']:.0f} points went: mostly "
            f"{PART_LABELS[top]}, {r[top]:.0f} points [{lo_hi[0]:.0f} to {lo_hi[1]:.0f} over "
            f"the rounds]; next step: {step} ({mark})")


def answer(records: Sequence[Record], exps: dict[str, Experiment]) -> str:
    """The report's opening answer ("" when no experiment has a multi-worker point)."""
    rows = breakdowns(records)
    configs = [r.config for r in records if isinstance(r, RunRecord)]
    lines: list[str] = []
    for exp in exps.values():
        counts = sorted({p.ranks for pts in exp.series.values() for p in pts if p.workers > 1})
        for n in counts:
            pts = [(label, p) for label, ps in sorted(exp.series.items()) for p in ps
                   if p.ranks == n and p.speedup is not None and p.workers > 1]
            if not pts:
                continue
            head = f"- **np={n}** ({exp.names[0]}) speedup, efficiency: " + "; ".join(
                f"{label} {_speedup(p)}" for label, p in pts)
            decided, undecided = _verdicts(exp, n)
            said = ("; ".join(decided[:SHOWN]) if decided else "no comparison decided yet") + (
                f"; {len(decided) - SHOWN} more in the tables" if len(decided) > SHOWN else "")
            more = (f" ({undecided} undecided: `hvdscale sweep --decide` measures until "
                    "decided)" if undecided else "")
            lines += [head, f"  - decided: {said}{more}", f"  - {_cause(rows, n, configs)}"]
    if not lines:
        return ""
    if len(lines) > MAX_LINES - 4:  # the heading, two blank lines and the footnote
        lines = [*lines[:MAX_LINES - 5], "- (more rank counts in the tables below)"]
    return ("## The answer\n\n" + "\n".join(lines)
            + "\n\nIntervals: 95%, from the paired rounds, valid at every look "
              "(docs/running.md, \"How verdicts are decided\").\n\n")
