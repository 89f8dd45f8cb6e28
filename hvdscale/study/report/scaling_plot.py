"""The report's plots: per experiment, one PNG of throughput and scaling efficiency against
the workers, every series a line through its medians, with the spread of its runs (every run a
faint dot, the min-max an error bar; efficiency's bar from the paired speedups' range) and the
points measured on a busy host ringed. The legend stands beside the panels, never over a point,
and one entry stands for all the dashed linear-scaling lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hvdscale.study.plotting import figure
from hvdscale.study.report.points import Experiment, Point
from hvdscale.study.report.tables import title


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


def _series(ax1: Any, ax2: Any, label: str, pts: list[Point], dx: float = 0.0) -> None:
    """One series on both panels: medians, spread, ideal line, busy rings; its markers and bars
    shifted by ``dx`` workers so the series at one worker count do not cover each other."""
    xs = [p.workers + dx for p in pts]
    mid = [p.words_per_s for p in pts]
    line = ax1.errorbar(xs, mid, yerr=_bars(mid, [p.wps_min for p in pts],
                                             [p.wps_max for p in pts]),
                        marker="o", capsize=3, label=label).lines[0]
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
        ax2.errorbar([p.workers + dx for p in eff], em, yerr=_bars(em, list(lo), list(hi)),
                     marker="o", capsize=3, color=color)
    for p in pts:
        if p.busy_runs:
            ax1.scatter([p.workers + dx], [p.words_per_s], s=110, facecolors="none",
                        edgecolors="red", lw=1.1, zorder=3)


def _legend(ax: Any, ax1: Any, any_ideal: bool, any_busy: bool) -> None:
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
                  title="median, min-max bar, runs as dots", title_fontsize=8)


def plot_scaling(experiments: dict[str, Experiment], out_dir: Path) -> list[Path]:
    """Per experiment, one PNG: words/s vs workers (with the ideal line) and efficiency."""
    written = []
    for exp in sorted(experiments.values(), key=lambda e: (e.names, e.id)):
        path = out_dir / f"scaling_{_slug(exp)}.png"
        with figure(path, 1, 3, figsize=(13, 4.4),
                    gridspec_kw={"width_ratios": [1, 1, 0.42]}) as (fig, (ax1, ax2, ax3)):
            series = sorted(exp.series.items())
            for i, (label, pts) in enumerate(series):
                _series(ax1, ax2, label, pts, dx=0.03 * (i - (len(series) - 1) / 2))
            ax1.set(xlabel="workers (ranks computing)", ylabel="words/s",
                    title="Throughput (dashed: linear scaling)")
            ax2.axhline(100, color="grey", lw=1, ls=":")
            top = max([115.0, *(_efficiency_range(p)[1] + 5 for s in exp.series.values()
                                for p in s if p.efficiency is not None)])
            ax2.set(xlabel="workers (ranks computing)", ylabel="efficiency (%)",
                    title="Scaling efficiency = 100 x speedup / N", ylim=(0, top))
            for ax in (ax1, ax2):
                ax.grid(alpha=0.3)
                ax.xaxis.get_major_locator().set_params(integer=True)
            pts = [p for s in exp.series.values() for p in s]
            _legend(ax3, ax1, any(p.workers == 1 for p in pts), any(p.busy_runs for p in pts))
            fig.suptitle(title(exp), fontsize=10)
        written.append(path)
    return written
