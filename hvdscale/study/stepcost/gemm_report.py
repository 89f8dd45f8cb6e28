"""What ``hvdscale gemm``'s record shows (``hvdscale.study.stepcost.gemm``): per framework and
hidden size, the GFLOP/s of every variant and its pre-transposed twin by batch size, as Markdown
tables with the findings, and as one plot per framework."""

from __future__ import annotations

from pathlib import Path

from hvdscale.records.gemm import GemmRecord
from hvdscale.study.plotting import figure
from hvdscale.study.stepcost.gemm import VARIANTS
from hvdscale.study.stepcost.gemm_findings import findings_text, result_label


def markdown(rec: GemmRecord) -> str:
    """The GEMM tables (GFLOP/s; twin = pre-transposed) and the findings, as Markdown."""
    lines = [f"## GEMM of an RNN layer (M={rec.gates}xhidden, K=hidden, N=batch; "
             f"{rec.threads} thread(s), {rec.clock} clock, median of "
             f"{rec.repeats}; "
             f"loadavg {rec.loadavg.before[0]:.2f})", ""]
    for res in rec.frameworks:
        peak = res["peak"]
        for h in sorted({r["hidden"] for r in res["rows"]}):
            lines += [f"### {result_label(res)}, hidden {h} (peak {peak['gflops']:.1f} GFLOP/s "
                      f"= {peak['size']}^3 GEMM)", "",
                      "|batch|NN|TN|NT|NN pre-T|TN pre-T|NT pre-T|NN % peak|TN % peak|"
                      "NT % peak|", "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
            by = {(r["batch"], r["variant"]): r for r in res["rows"] if r["hidden"] == h}
            for b in sorted({bb for bb, _ in by}):
                rs = [by[(b, v)] for v in VARIANTS]
                cells = [f"{r['gflops']:.1f}" for r in rs]
                cells += [f"{r['twin_gflops']:.1f}" for r in rs]
                cells += [f"{100 * r['frac_peak']:.0f}" for r in rs]
                lines.append(f"|{b}|" + "|".join(cells) + "|")
            lines.append("")
        lines += [*findings_text(res), ""]
    return "\n".join(lines)


def plot(rec: GemmRecord, out_dir: Path) -> list[Path]:
    """One PNG per framework: GFLOP/s vs batch per variant (dashed: pre-transposed twin)."""
    written = []
    for res in rec.frameworks:
        hs = sorted({r["hidden"] for r in res["rows"]})
        path = out_dir / f"gemm_{result_label(res, '_')}.png"
        with figure(path, 1, len(hs), figsize=(5.5 * len(hs), 4.2), squeeze=False) as (_, axes):
            for ax, h in zip(axes[0], hs, strict=True):
                for v in VARIANTS:
                    rs = sorted((r for r in res["rows"]
                                 if r["hidden"] == h and r["variant"] == v),
                                key=lambda r: r["batch"])
                    xs = [r["batch"] for r in rs]
                    line, = ax.plot(xs, [r["gflops"] for r in rs], marker="o", ms=3, label=v)
                    ax.plot(xs, [r["twin_gflops"] for r in rs], ls="--", lw=1,
                            color=line.get_color(), alpha=0.7, label=f"{v} pre-transposed")
                ax.axhline(res["peak"]["gflops"], color="grey", ls=":", lw=1, label="peak")
                for x in range(32, max(rec.batch) + 1, 32):
                    ax.axvline(x, color="grey", lw=0.4, alpha=0.4)
                ax.set(xlabel="batch (N)", ylabel="GFLOP/s",
                       title=f"{result_label(res)} hidden {h}, {rec.threads} thread(s)")
                ax.grid(alpha=0.3)
                ax.legend(fontsize=7)
        written.append(path)
    return written
