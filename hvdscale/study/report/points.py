"""The report's points: successful run records grouped by experiment
(hvdscale.records.experiment) and series, each point the median of its repeats with their
spread, and its speedup and efficiency over the series' 1-worker point.

speedup_N = words/s with N workers / words/s with 1 worker (same experiment and series), the
median of the ratios of the rounds both measured (``hvdscale.study.paired.recommend``'s paired
ratios; the rounds from each record's tag, ``hvdscale.study.paired.rounds``), with their range;
efficiency = 100 * speedup_N / N. Workers are the ranks that compute: all ranks, except under a
dedicated parameter server, whose serve-only ranks are not counted. A point counts its runs
whose host was busy (``hvdscale.records.load``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hvdscale.config.run import RunConfig
from hvdscale.records.experiment import differences, experiment_id, series_label
from hvdscale.records.fields import UNSET, Record
from hvdscale.records.load import record_load
from hvdscale.records.run import RunRecord
from hvdscale.study.paired.recommend import paired_summary
from hvdscale.study.paired.rounds import untagged, words_by_round

MAD_SCALE = 1.4826
"""MAD x this estimates a normal spread's standard deviation (the benches' jitter)."""


@dataclass
class Point:
    """One (group, strategy, ranks) point of the report: the median of its repeats."""

    strategy: str
    ranks: int
    workers: int
    batch_size: int
    steps: int
    time_s: float
    words_per_s: float
    repeats: int
    jitter_ms: float
    placement: str
    speedup: float | None = None
    efficiency: float | None = None
    tokens_per_batch: int = 0
    real_tokens: int | None = None
    token_slots: int | None = None
    padded_pct: float | None = None
    unbucketed_padded_pct: float | None = None
    pad_to_max_padded_pct: float | None = None
    work_ratio: float | None = None
    idle_ms_per_step: float | None = None
    idle_pct: float | None = None
    idle_per_rank: str = ""
    out_of_batches: str = ""
    wps_min: float = 0.0
    wps_max: float = 0.0
    wps_mad: float = 0.0
    """1.4826 x the median absolute deviation of the runs' words/s."""
    rounds: list[float | None] = field(default_factory=list)
    """words/s per round (None: no ok run in that round)."""
    runs: list[float] = field(default_factory=list)
    """Every run's words/s, in record order."""
    speedup_range: dict[str, Any] | None = None
    """``ratio_summary`` of the paired speedups (None: no paired round with the 1-worker)."""
    busy_runs: int = 0
    """Runs whose host was busy (``records.load``)."""
    load_known: int = 0
    """Runs whose record tells the host's load."""
    busy_detail: str = ""
    """What the rule saw in the busiest run."""
    rel_ci95: float | None = None
    """Median over runs of the 95% interval of words/s, as a fraction of it, for runs measured
    to a precision target (``measure.target_rel_ci``; None: no such run)."""
    ci_target: float | None = None
    """That target."""
    ci_missed: int = 0
    """Runs that stopped (at ``measure.max_seconds``) before their interval met the target."""
    records: list[RunRecord] = field(default_factory=list)
    """The point's runs' records, oldest first: a column shows any of their fields through
    ``median`` without a field of its own here."""

    def median(self, get: Callable[[RunRecord], float | None]) -> float | None:
        """The median of ``get(record)`` over the point's runs (None where no run says)."""
        return _median_of(self.records, get)


@dataclass
class Experiment:
    """The records of one experiment (see hvdscale.records.experiment): its series, each a list of
    points by rank count, and what sets it apart from the other experiments of the report."""

    id: str
    config: RunConfig
    names: list[str]
    series: dict[str, list[Point]] = field(default_factory=dict)
    differs: dict[str, Any] = field(default_factory=dict)


def _median_of(recs: list[RunRecord], get: Callable[[RunRecord], Any]) -> float | None:
    """Median of ``get(rec)`` over the records where it is known."""
    vals = []
    for r in recs:
        try:
            v = get(r)
        except (KeyError, TypeError, IndexError):
            continue
        if v is not None and v is not UNSET:  # UNSET: a section's key an older file lacks
            vals.append(v)
    return statistics.median(vals) if vals else None


def _idle_cells(rec: RunRecord) -> tuple[str, str]:
    """Per-rank idle (ms/step) and ranks out of batches (idle steps), from one record."""
    steps = "?" if rec.idle.steps is UNSET else rec.idle.steps
    per_rank = rec.idle_per_rank
    ms = " / ".join(f"r{p.rank}: {p.idle_ms_per_step:.1f}" for p in per_rank)
    out = ", ".join(f"r{p.rank}: {p.idle_steps} of {steps}" for p in per_rank if p.idle_steps)
    return ms, out or "none"


def _noise(p: Point, recs: list[RunRecord]) -> Point:
    """``p`` with its runs' spread, rounds and busy runs."""
    p.runs = [r.words_per_s for r in recs]
    p.wps_min, p.wps_max = min(p.runs), max(p.runs)
    p.wps_mad = MAD_SCALE * statistics.median(abs(x - p.words_per_s) for x in p.runs)
    p.rounds = words_by_round(recs)
    loads = [x for x in (record_load(r) for r in recs) if x is not None]
    p.load_known = len(loads)
    busy = [x for x in loads if x.busy]
    p.busy_runs = len(busy)
    intervals = [r.interval for r in recs if r.interval is not None]
    rels = [i.rel_ci95 for i in intervals if i.rel_ci95 is not None]
    if intervals:
        p.rel_ci95 = statistics.median(rels) if rels else None
        p.ci_target = intervals[-1].target_rel_ci
        p.ci_missed = sum(not i.met for i in intervals)
    if busy:
        p.busy_detail = min(busy, key=lambda x: x.free - x.demand).describe()
    return p


def _point(label: str, ranks: int, recs: list[RunRecord]) -> Point:
    """The median of one series' repeats at one rank count."""
    cfg = recs[-1].config
    idle_ms, out_of = _idle_cells(recs[-1])
    bucketing = cfg.data.bucketing
    point = Point(
        strategy=label, ranks=ranks, workers=recs[-1].workers,
        batch_size=cfg.data.batch_size,
        steps=recs[-1].measured_steps,
        time_s=statistics.median(r.window_s for r in recs),
        words_per_s=statistics.median(r.words_per_s for r in recs), repeats=len(recs),
        jitter_ms=statistics.median(r.step_time.jitter for r in recs) * 1e3,
        placement=cfg.strategy.ps.placement if cfg.strategy.name == "ps" else "",
        tokens_per_batch=bucketing.tokens_per_batch if bucketing.enabled else 0,
        real_tokens=_median_of(recs, lambda r: r.padding.window.words),
        token_slots=_median_of(recs, lambda r: r.padding.window.slots),
        padded_pct=_median_of(recs, lambda r: 100 * r.padded_fraction),
        unbucketed_padded_pct=_median_of(
            recs, lambda r: 100 * r.padding.epoch_unbucketed.padded_fraction),
        pad_to_max_padded_pct=_median_of(
            recs, lambda r: 100 * r.padding.epoch_pad_to_max.padded_fraction),
        work_ratio=_median_of(recs, lambda r: r.padding.window.work_ratio),
        # A record without idle figures leaves the cell empty (KeyError), not 0.
        idle_ms_per_step=_median_of(recs, lambda r: r.idle.idle_ms_per_step),
        idle_pct=_median_of(recs, lambda r: 100 * r.idle.idle_fraction),
        idle_per_rank=idle_ms, out_of_batches=out_of, records=list(recs))
    return _noise(point, recs)


def collect(records: Sequence[Record]) -> dict[str, Experiment]:
    """Successful records as experiments of series of points: records of different
    experiments never share a table, and a point's repeats share one identity."""
    by: dict[str, dict[str, dict[int, list[RunRecord]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    first: dict[str, RunConfig] = {}
    names: dict[str, list[str]] = defaultdict(list)
    for rec in records:
        if not isinstance(rec, RunRecord):
            continue
        cfg = rec.config
        eid = experiment_id(cfg)
        first.setdefault(eid, cfg)
        name = untagged(cfg.name)
        if name not in names[eid]:
            names[eid].append(name)
        by[eid][series_label(cfg)][rec.ranks].append(rec)
    diffs = differences(first)
    out: dict[str, Experiment] = {}
    for eid, series in by.items():
        exp = Experiment(eid, first[eid], names[eid], differs=diffs[eid])
        for label, per_ranks in series.items():
            points = [_point(label, n, recs) for n, recs in sorted(per_ranks.items())]
            base = next((p for p in points if p.workers == 1), None)
            for p in points:
                if base is not None:
                    # Paired: round r's words/s over round r's 1-worker words/s, once two
                    # rounds pair (a spread); before that, every run counts: medians' ratio.
                    s = paired_summary(p.rounds, base.rounds)
                    p.speedup_range = s
                    p.speedup = (s["median"] if s and s["n"] >= 2
                                 else p.words_per_s / base.words_per_s)
                    p.efficiency = 100.0 * p.speedup / p.workers
            exp.series[label] = points
        out[eid] = exp
    return out


def summary_rows(records: Sequence[Record]) -> list[Point]:
    """Every point, flat (for callers that print their own view)."""
    return [p for e in collect(records).values() for pts in e.series.values() for p in pts]
