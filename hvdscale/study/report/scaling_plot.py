"""The report's plots: per experiment, one PNG of throughput and scaling efficiency against
the workers, every series a line through its medians, with the spread of its runs (every run a
faint dot, the min-max an error bar; efficiency's bar from the paired speedups' range) and the
points measured on a busy host ringed. One run per point has no spread: no bars are drawn and
the legend says so. The efficiency axis is framed to the data (``efficiency_limits``): lines
at 85 and 95 % are compared with each other, not with 0. The legend stands beside the panels,
never over a point, and one entry stands for all the dashed linear-scaling lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hvdscale.study.plotting import figure
from hvdscale.study.report.points import Experiment, Point
from hvdscale.study.report.tables import has_rounds, title


def _slug(exp: Experiment) -> str:
    """The experiment's names and id as a file-name part (no path separators, no spaces)."""
    s = f"{'+'.join(exp.names)}_{exp.id}"
    return "".join(c if c.isalnum() or c in "-_.+" else "-" for c in s)


def _bars(mid: list[float], lo: list[float], hi: list[float]) -> list[list[float]]:
    """Asymmetric error bars (below, above) around ``mid``."""
    return [[max(0.0, m - x) for m, x in zip(mid, lo, strict=True)],
            [max(0.0, x - m) for m, x in zip(mid, hi, strict=True)]]


def _efficiency_range(p: Point) -> tuple[float, float]:
    """Efficiency's range from the paired speedups (the point itself without two rounds)."""
    s = p.speedup_range
    if p.efficiency is None or s is None or s["n"] < 2:
        e = p.efficiency or 0.0
        return e, e
    return 100 * s["min"] / p.workers, 100 * s["max"] / p.workers


def efficiency_limits(ranges: list[tuple[float, float]]) -> tuple[float, float] | None:
    """The efficiency panel's y limits from its points' (low, high) in %: the data's extent
    padded by a tenth of its span, at least 2 points each side, never below 0; None without
    points (matplotlib's own then)."""
    if not ranges:
        return None
    lo, hi = min(r[0] for r in ranges), max(r[1] for r in ranges)
    pad = max(2.0, 0.1 * (hi - lo))
    return max(0.0, lo - pad), hi + pad


def _series(ax1: Any, ax2: Any, label: str, pts: list[Point], dx: float = 0.0,
            spread: bool = True) -> None:
    """One series on both panels: medians, spread (``spread``: the experiment has rounds),
    ideal line, busy rings; its markers and bars shifted by ``dx`` workers so the series at
    one worker count do not cover each other."""
    xs = [p.workers + dx for p in pts]
    mid = [p.words_per_s for p in pts]
    bars = _bars(mid, [p.wps_min for p in pts], [p.wps_max for p in pts]) if spread else None
    line = ax1.errorbar(xs, mid, yerr=bars, marker="o", capsize=3, label=label).lines[0]
    color = line.get_color()
    runs = [(p.workers + dx, w) for p in pts for w in p.runs]
    ax1.scatter([x for x, _ in runs], [w for _, w in runs], s=12, color=color, alpha=0.3,
                zorder=1)
    base = next((p for p in pts if p.workers == 1), None)
    if base is not None:
        ideal_x = sorted({1, *(p.workers for p in pts)})
        ax1.plot(ideal_x, [base.words_per_s * x for x in ideal_x], ls="--", lw=1,
                 color=color, alpha=0.6)
        eff = [p for p in pts if p.efficiency is not None]
        em = [p.efficiency for p in eff]
        lo, hi = zip(*map(_efficiency_range, eff), strict=True) if eff else ((), ())
        ax2.errorbar([p.workers + dx for p in eff], em,
                     yerr=_bars(em, list(lo), list(hi)) if spread else None,
                     marker="o", capsize=3, color=color)
    for p in pts:
        if p.busy_runs:
            ax1.scatter([p.workers + dx], [p.words_per_s], s=110, facecolors="none",
                        edgecolors="red", lw=1.1, zorder=3)


def legend_title(spread: bool) -> str:
    """What the legend says the marks are: bars only where the runs have a spread."""
    if spread:
        return "median, min-max bar, runs as dots"
    return "one run per point: no spread, no bars\n(--repeats N adds them)"


def _legend(ax: Any, ax1: Any, any_ideal: bool, any_busy: bool, spread: bool) -> None:
    """The legend in its own panel: one entry per series, one for every dashed ideal line."""
    from matplotlib.lines import Line2D

    handles, labels = ax1.get_legend_handles_labels()
    if any_ideal:
        handles.append(Line2D([], [], ls="--", lw=1, color="grey"))
        labels.append("linear scaling from each\nseries' 1-worker median")
    if any_busy:
        handles.append(Line2D([], [], ls="", marker="o", markersize=10, markerfacecolor="none",
                              markeredgecolor="red"))
        labels.append("busy host (see report)")
    ax.axis("off")
    if handles:
        ax.legend(handles, labels, loc="center left", fontsize=8, frameon=False,
                  title=legend_title(spread), title_fontsize=8)


def draw(exp: Experiment, axes: tuple[Any, Any, Any]) -> None:
    """One experiment on (throughput, efficiency, legend) axes: what ``plot_scaling`` saves."""
    ax1, ax2, ax3 = axes
    series = sorted(exp.series.items())
    spread = has_rounds(exp)
    for i, (label, pts) in enumerate(series):
        _series(ax1, ax2, label, pts, dx=0.03 * (i - (len(series) - 1) / 2), spread=spread)
    ax1.set(xlabel="workers (ranks computing)", ylabel="words/s",
            title="Throughput (dashed: linear scaling)")
    ax2.axhline(100, color="grey", lw=1, ls=":")
    lims = efficiency_limits([_efficiency_range(p) for s in exp.series.values()
                              for p in s if p.efficiency is not None])
    ax2.set(xlabel="workers (ranks computing)", ylabel="efficiency (%)",
            title="Scaling efficiency = 100 x speedup / N", ylim=lims)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
    pts = [p for s in exp.series.values() for p in s]
    _legend(ax3, ax1, any(p.workers == 1 for p in pts), any(p.busy_runs for p in pts), spread)


def plot_scaling(experiments: dict[str, Experiment], out_dir: Path) -> list[Path]:
    """Per experiment, one PNG: words/s vs workers (with the ideal line) and efficiency."""
    written = []
    for exp in sorted(experiments.values(), key=lambda e: (e.names, e.id)):
        path = out_dir / f"scaling_{_slug(exp)}.png"
        with figure(path, 1, 3, figsize=(13, 4.4),
                    gridspec_kw={"width_ratios": [1, 1, 0.42]}) as (fig, axes):
            draw(exp, axes)
            fig.suptitle(title(exp), fontsize=10)
        written.append(path)
    return written
