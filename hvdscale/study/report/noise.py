"""How the report tells signal from noise: the spread of a repeated point's runs, ratios between
points taken round by round (paired, ``hvdscale.study.paired.recommend``) with their range, and the
points whose host was busy (``hvdscale.records.load``), marked in every table and named at the
top of the report with what to do.
"""

from __future__ import annotations

from typing import Any

from hvdscale.records.load import SLACK
from hvdscale.study.paired.recommend import (
    MIN_VERDICT_ROUNDS,
    WITHIN_NOISE,
    compare,
    paired_summary,
)
from hvdscale.study.report.points import Experiment, Point
from hvdscale.study.verdict.decide import EQUIVALENT, FASTER, SLOWER, UNDECIDED

BUSY = " (busy)"
"""The mark of a point measured on a busy host, in every table that shows the point."""


def mark(p: Point) -> str:
    """``" (busy)"`` when some run of ``p`` had a busy host, else ""."""
    return BUSY if p.busy_runs else ""


def ci_cell(p: Point) -> str:
    """`` +-1.8%``: the 95% interval of a point measured to a precision target, with
    `` (target +-2% missed in 1 of 3)`` when runs stopped before meeting it; "" otherwise."""
    if p.ci_target is None:
        return ""
    rel = f" +-{100 * p.rel_ci95:.1f}%" if p.rel_ci95 is not None else " +-?"
    missed = (f" (target +-{100 * p.ci_target:g}% missed in {p.ci_missed} of {p.repeats})"
              if p.ci_missed else "")
    return rel + missed


def wps_cell(p: Point) -> str:
    """words/s: the median, with the runs' min-max when there are several, and the busy mark."""
    rng = f" [{p.wps_min:.1f}-{p.wps_max:.1f}]" if len(p.runs) > 1 else ""
    return f"{p.words_per_s:.1f}{rng}{mark(p)}"


def range_cells(p: Point) -> tuple[str, str]:
    """(min-max, 1.4826 x MAD) of a point's words/s; empty for a single run."""
    if len(p.runs) < 2:
        return "", ""
    return f"{p.wps_min:.1f}-{p.wps_max:.1f}", f"{p.wps_mad:.1f}"


def speedup_cell(p: Point) -> str:
    """The speedup (paired median once two rounds pair, with their range; else the medians'
    ratio, ``points.collect``)."""
    if p.speedup is None or p.workers == 1:
        return ""
    s = p.speedup_range
    if s is None or s["n"] < 2:
        return f"{p.speedup:.2f}"
    return f"{p.speedup:.2f} [{s['min']:.2f}-{s['max']:.2f}]"


def host_cell(p: Point) -> str:
    """The host's load over a point's runs: busy in k of n, quiet, or unknown (old records)."""
    if p.busy_runs:
        return f"busy in {p.busy_runs} of {p.repeats}"
    return "quiet" if p.load_known else "unknown"


def paired(a: Point, b: Point) -> dict[str, Any] | None:
    """``a``'s words/s over ``b``'s, round by round (None: no round measured both)."""
    return paired_summary(a.rounds, b.rounds)


def ratio_cell(a: Point, b: Point) -> str:
    """a / b: from 3 paired rounds the geometric mean with its 95 % interval and the verdict
    (``hvdscale.study.verdict``: faster, slower, within 2 %, undecided); from 2 the paired
    median with the rounds' range, undecided; the ratio of medians below that."""
    s = paired(a, b)
    if s is None or s["n"] < 2:
        return f"{a.words_per_s / b.words_per_s:.3f}"
    if s["n"] < MIN_VERDICT_ROUNDS:
        return f"{s['median']:.3f} [{s['min']:.3f}-{s['max']:.3f}], {WITHIN_NOISE}"
    return f"{s['gmean']:.3f} [{s['lo']:.3f}-{s['hi']:.3f}], {OUTCOME_WORDS[s['outcome']]}"


OUTCOME_WORDS = {FASTER: "faster", SLOWER: "slower", EQUIVALENT: "within 2%",
                 UNDECIDED: WITHIN_NOISE}
"""A verdict in one word for a table cell (the margin is the procedure's default, 2 %)."""


def _busy_points(exps: dict[str, Experiment]) -> list[str]:
    return [f"{label} np={p.ranks} (busy in {p.busy_runs} of {p.repeats}: {p.busy_detail})"
            for e in exps.values() for label, pts in sorted(e.series.items())
            for p in pts if p.busy_runs]


def busy_line(exps: dict[str, Experiment]) -> str:
    """The report's opening warning: which points ran on a busy host, and what to do; ""
    when none did."""
    busy = _busy_points(exps)
    if not busy:
        return ""
    return (f"**Busy host: {len(busy)} point{'s' * (len(busy) != 1)} ran with less than a core "
            f"free per rank x thread (marked{BUSY} below): {'; '.join(busy)}.** Their words/s "
            "read low and their speedups and ratios are unreliable: measure them again on a "
            "quiet machine (or an exclusive allocation), or with `hvdscale sweep --repeats N` "
            "so the medians and paired ratios outlast a busy phase (the sweep fills only the "
            f"missing rounds). Rule: free cores = cores - (1-minute load - the run's own "
            f"rank x threads), against the point's rank x threads, {SLACK:g} core forgiven.\n\n")


def comparisons(exp: Experiment, order: list[str]) -> str:
    """Per rank count with two or more series measured in paired rounds: the fastest series
    (median) against each other, round by round, with the procedure's verdict
    (``recommend.compare``, ``hvdscale.study.verdict``)."""
    rows, met = [], []
    for n in sorted({p.ranks for pts in exp.series.values() for p in pts}):
        at = [(label, p) for label in order for p in exp.series[label] if p.ranks == n]
        if len(at) < 2:
            continue
        met.append(n)
        best_label, best = max(at, key=lambda lp: lp[1].words_per_s)
        for label, p in at:
            s = paired(best, p) if p is not best else None
            if s is None or s["n"] < 2:
                continue
            interval = (f"{s['lo']:.3f}-{s['hi']:.3f}" if s["lo"] is not None
                        else f"rounds {s['min']:.3f}-{s['max']:.3f}")
            rows.append(f"|{n}|{best_label}{mark(best)}|{label}{mark(p)}|{s['gmean']:.3f}|"
                        f"{interval}|{s['n']}|{compare('A', 'B', s)}|")
    if not rows:
        return no_verdict(met)
    return ("### A vs B, paired by round\n\n"
            "A: the fastest series at that rank count (median words/s); B: each other series. "
            "A / B is taken round by round (both measured in the same interleaved round, so a "
            "slow phase of the machine hits both): its geometric mean and 95% interval, valid "
            "at every look, and the verdict of one procedure (docs/running.md, \"How verdicts "
            "are decided\"): faster by x%, no difference larger than 2%, or undecided with the "
            "rounds a decision would take. From 3 paired rounds; identical series get a false "
            "verdict at most 5% of the time.\n\n"
            "|Ranks|A|B|A / B|95% interval|Rounds|Verdict|\n"
            "|:--|:--|:--|:--|:--|:--|:--|\n" + "\n".join(rows) + "\n\n")


ONE_ROUND = "one run each: no spread to judge by (`--repeats N`)"
"""What a comparison of points measured once says instead of a verdict."""


def one_round(a: Point, b: Point) -> bool:
    """Whether fewer than two rounds measured both ``a`` and ``b``: no spread to judge by."""
    s = paired(a, b)
    return s is None or s["n"] < 2


def no_verdict(ranks: list[int]) -> str:
    """The comparisons' section when series meet at ``ranks`` but no two rounds pair them:
    why there is no verdict and how to get one ("" when no series met)."""
    if not ranks:
        return ""
    at = ", ".join(map(str, ranks))
    return ("### A vs B: no verdict from one round\n\n"
            f"Several series were measured at {at} rank(s), but no two rounds measured them "
            "both, so there is no spread to tell a difference between them from the noise of "
            "the machine: the words/s and ratios above are single runs, not a winner. "
            "`hvdscale sweep ... --repeats N` (N >= 2) runs N interleaved rounds, filling only "
            "the missing ones; the report then takes each ratio round by round and, from 3 "
            "rounds, says which series is faster, that they differ by no more than 2%, or "
            "that it is undecided and how many more rounds would decide it.\n\n")
