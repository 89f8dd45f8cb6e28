"""The report's plots: per experiment, one PNG of throughput and scaling efficiency against
the workers, every series a line."""

from __future__ import annotations

from pathlib import Path

from hvdscale.study.plotting import figure
from hvdscale.study.report.points import Experiment
from hvdscale.study.report.tables import title


def _slug(exp: Experiment) -> str:
    """The experiment's names and id as a file-name part (no path separators, no spaces)."""
    s = f"{'+'.join(exp.names)}_{exp.id}"
    return "".join(c if c.isalnum() or c in "-_.+" else "-" for c in s)


def plot_scaling(experiments: dict[str, Experiment], out_dir: Path) -> list[Path]:
    """Per experiment, one PNG: words/s vs workers (with the ideal line) and efficiency."""
    written = []
    for exp in sorted(experiments.values(), key=lambda e: (e.names, e.id)):
        path = out_dir / f"scaling_{_slug(exp)}.png"
        with figure(path, 1, 2, figsize=(11, 4.2)) as (fig, (ax1, ax2)):
            for label, pts in sorted(exp.series.items()):
                xs = [p.workers for p in pts]
                line, = ax1.plot(xs, [p.words_per_s for p in pts], marker="o", label=label)
                base = next((p for p in pts if p.workers == 1), None)
                if base is not None:
                    ideal_x = sorted({1, *xs})
                    ax1.plot(ideal_x, [base.words_per_s * x for x in ideal_x], ls="--", lw=1,
                             color=line.get_color(), alpha=0.6, label=f"{label} ideal")
                    ax2.plot(xs, [p.efficiency for p in pts], marker="o", label=label,
                             color=line.get_color())
            ax1.set(xlabel="workers (ranks computing)", ylabel="words/s",
                    title="Throughput (dashed: linear scaling)")
            ax2.axhline(100, color="grey", lw=1, ls=":")
            ax2.set(xlabel="workers (ranks computing)", ylabel="efficiency (%)",
                    title="Scaling efficiency = 100 x speedup / N", ylim=(0, 110))
            for ax in (ax1, ax2):
                ax.grid(alpha=0.3)
                if ax.get_legend_handles_labels()[0]:  # no 1-worker run: no lines
                    ax.legend(fontsize=8)
                ax.xaxis.get_major_locator().set_params(integer=True)
            fig.suptitle(title(exp), fontsize=10)
        written.append(path)
    return written
