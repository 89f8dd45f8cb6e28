"""``hvdscale sweep --decide``: rounds until the report's comparisons are decided, within a budget.

The sweep first measures every point in ``MIN_ROUNDS`` interleaved rounds (``--repeats`` if
that is more): no verdict rests on fewer. Then, after each round, it reads the results as the
report does (``hvdscale.study.report.points.collect``), asks the decision procedure
(``hvdscale.study.verdict``) about every pair of series at each rank count (the comparisons the
report's answer decides: ``series_pairs``), and runs one more round for the points of the
undecided comparisons whose decision is in sight, nearest first, as many as the budget's time
left holds at the cost per point the rounds so far measured. It stops when every comparison is
decided, when no undecided one is in sight (at its spread, ``HORIZON`` more rounds would not
decide it), when a round measured nothing, or when the next round would overrun the budget.

Stopping on the results does not bend the error rate: the procedure looks at level
alpha / (j (j + 1)) at the j-th look, and the levels of all looks sum to alpha, so a verdict
read at whatever round the sweep stopped is false on identical series at most 5 % of the time
(docs/running.md, "How verdicts are decided"; the A/A file measures it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from hvdscale.records.fields import Record
from hvdscale.records.run import RunRecord
from hvdscale.study.paired.recommend import paired_summary, verdict_of
from hvdscale.study.paired.rounds import round_of
from hvdscale.study.report.answer import series_pairs
from hvdscale.study.report.points import Point as ReportPoint
from hvdscale.study.report.points import collect
from hvdscale.study.sweep.driver import run_sweep
from hvdscale.study.sweep.launcher import read_out
from hvdscale.study.sweep.outcome import SweepResult
from hvdscale.study.sweep.plan import SweepSpec, matches
from hvdscale.study.verdict.decide import HORIZON, MIN_ROUNDS, decide


@dataclass(frozen=True)
class Open:
    """An undecided comparison: its name, the further rounds it would take at its spread
    (None: not in sight), and the sweep's points (indices) that measure it."""

    name: str
    more: int | None
    points: frozenset[int]


@dataclass(frozen=True)
class Standing:
    """Where the sweep's comparisons stand after a round."""

    total: int
    decided: int
    open: tuple[Open, ...]
    """The undecided ones, nearest to a decision first (not in sight last)."""

    def in_sight(self) -> list[Open]:
        """The undecided comparisons more rounds would decide."""
        return [o for o in self.open if o.more is not None]


def _indices(spec: SweepSpec, p: ReportPoint) -> frozenset[int]:
    """The sweep's points a report point's records measured."""
    rec = p.records[-1]
    return frozenset(q.index for q in spec.points if matches(rec, q))


def standing(spec: SweepSpec, records: Sequence[Record]) -> Standing:
    """Every pair of this sweep's series at each rank count, decided or not (records of points
    outside the sweep, from an earlier one in the same folder, are left out)."""
    total = decided = 0
    opens: list[Open] = []
    for exp in collect(records).values():
        counts = sorted({p.ranks for pts in exp.series.values() for p in pts})
        for n in counts:
            for la, a, lb, b in series_pairs(exp, n):
                ia, ib = _indices(spec, a), _indices(spec, b)
                if not ia or not ib:
                    continue
                total += 1
                s = paired_summary(a.rounds, b.rounds)
                v = verdict_of(s) if s is not None else decide([])
                if v.decided:
                    decided += 1
                else:
                    opens.append(Open(f"np={n} {la} vs {lb}", v.more, ia | ib))
    opens.sort(key=lambda o: (o.more is None, o.more or 0))
    return Standing(total, decided, tuple(opens))


def choose(opens: Sequence[Open], per_point_s: float | None, left_s: float) -> frozenset[int]:
    """The points of the next round: the in-sight comparisons' points, nearest first, while
    the round's estimated time (points x ``per_point_s``) fits in ``left_s``; with no estimate
    yet (every point was already recorded), the nearest comparison's alone."""
    chosen: frozenset[int] = frozenset()
    for o in opens:
        if o.more is None:
            continue
        grown = chosen | o.points
        if per_point_s is None:
            return grown
        if per_point_s * len(grown) <= left_s:
            chosen = grown
    return chosen


def _rounds_recorded(spec: SweepSpec, records: Sequence[Record]) -> int:
    """Rounds the sweep's points already hold (1 + the highest round tag among their records)."""
    tags = [round_of(r) for r in records if isinstance(r, RunRecord)
            and any(matches(r, p) for p in spec.points)]
    return 1 + max((t for t in tags if t is not None), default=-1)


def _launched(result: SweepResult) -> int:
    return sum(o.status != "skipped" for o in result.outcomes)


def run_until_decided(spec: SweepSpec, budget_s: float,
                      say: Callable[[str], None] = print) -> SweepResult:
    """Run ``spec``'s points in ``MIN_ROUNDS`` rounds at least, then add rounds where a
    comparison is undecided and in sight, within ``budget_s`` of wall time for the whole sweep
    (the first rounds always run: no verdict rests on fewer)."""
    t0 = time.monotonic()
    first = replace(spec, repeats=max(spec.repeats, MIN_ROUNDS))
    result = run_sweep(first, say)
    rounds = max(first.repeats, _rounds_recorded(spec, read_out(spec.out)))
    launched, why = _launched(result), ""
    while True:
        now = standing(spec, read_out(spec.out))
        elapsed = time.monotonic() - t0
        per_point = elapsed / launched if launched else None
        chosen = choose(now.open, per_point, budget_s - elapsed)
        if not now.open:
            why = "every comparison decided"
        elif not now.in_sight():
            why = f"none undecided is in sight within {HORIZON} more rounds at its spread"
        elif not chosen:
            why = f"the next round would overrun --budget {budget_s:.0f} s"
        if why:
            say(_summary(now, rounds, elapsed, budget_s, why))
            return result
        nearest = now.in_sight()[0]
        say(f"hvdscale sweep --decide: {now.decided} of {now.total} comparisons decided after "
            f"{rounds} rounds; round {rounds + 1} for {len(chosen)} point(s) (nearest: "
            f"{nearest.name}, about {nearest.more} more round(s))")
        step = replace(spec, points=tuple(p for p in spec.points if p.index in chosen),
                       repeats=rounds + 1, first_round=rounds)
        more = run_sweep(step, say)
        result.outcomes.extend(more.outcomes)
        launched += _launched(more)
        rounds += 1
        if not any(o.status == "ok" for o in more.outcomes):
            why = "the last round measured nothing (its points failed)"
            say(_summary(standing(spec, read_out(spec.out)), rounds,
                         time.monotonic() - t0, budget_s, why))
            return result


def _summary(now: Standing, rounds: int, elapsed: float, budget_s: float, why: str) -> str:
    """The sweep's last line before the report: what was decided, in how long, and why it
    stopped."""
    far = len(now.open) - len(now.in_sight())
    rest = (f"; {len(now.open)} undecided ({far} not in sight)" if now.open else "")
    return (f"hvdscale sweep --decide: {now.decided} of {now.total} comparisons decided in "
            f"{rounds} rounds, {elapsed:.0f} s of the {budget_s:.0f} s budget{rest}; stopped: "
            f"{why}")
