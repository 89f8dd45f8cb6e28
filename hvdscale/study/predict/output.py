"""predict's outputs: the Markdown tables, the efficiency plot and the JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hvdscale.study.plotting import figure
from hvdscale.study.predict.forecast import LABELS

OVERSUBSCRIBED = "oversubscribed (more rank threads than cores)"


def render(result: dict[str, Any]) -> str:
    """Markdown: the assumptions, efficiency per strategy and rank count, validation (or the
    fitted model's output for ``predict --fit``)."""
    if result.get("fitted"):
        from hvdscale.study.predict.fitoutput import render_fit

        return render_fit(result)
    p = result["prediction"]
    lines = [f"# hvdscale predict: {result['config']}\n",
             "- Unfitted: the model below is built from the given network and compute inputs, "
             "not fitted to measured scaling (fit it to your own runs with --fit RESULTS).",
             f"- Model: {p['model_bytes'] / 2**20:.1f} MB of gradients in {p['tensors']} tensors "
             f"(largest {p['largest_tensor_bytes'] / 2**20:.1f} MB); fusion threshold "
             f"{p['fusion_threshold_bytes'] / 2**20:g} MB; PS dedicated servers: {p['servers']}",
             f"- Network: {result['network']['source']}: ring alpha "
             f"{result['network']['ring_alpha'] * 1e6:.2f} µs, overhead per allreduce "
             f"{result['network']['ring_overhead'] * 1e6:.1f} µs, bandwidth "
             f"{1e-9 / result['network']['ring_beta']:.2f} GB/s; PS alpha "
             f"{result['network']['ps_alpha'] * 1e6:.2f} µs, bandwidth "
             f"{1e-9 / result['network']['ps_beta']:.2f} GB/s; server update at "
             + (f"{result['network']['mem_bw'] / 1e9:.2f} GB/s" if result['network']['mem_bw']
                else "(not modelled)"),
             f"- Compute: {result['compute']['source']}; c0 = "
             f"{result['compute']['c0'] * 1e3:.2f} ms, c1 = {result['compute']['c1'] * 1e6:.3f} "
             f"µs/word; backward = {p['backward_fraction']:.2f} of compute", ""]
    for scaling, table in p["scaling"].items():
        ranks = [r for r in result["ranks"]]
        lines += [f"## {scaling} scaling: predicted efficiency (%) and step time (ms)", "",
                  "|Ranks|" + "|".join(f"{LABELS[s]} eff.|step" for s in table) + "|",
                  "|:--|" + ":--|" * (2 * len(table))]
        for i, n in enumerate(ranks):
            row = [str(n)]
            for s in table:
                q = table[s][i]
                row += ["", ""] if q is None else [f"{q.get('efficiency_pct', float('nan')):.1f}",
                                                   f"{q['step_s'] * 1e3:.1f}"]
            lines.append("|" + "|".join(row) + "|")
        lines.append("")
    if result.get("validation"):
        lines += ["## Validation: predicted vs measured words/s", "",
                  "|Strategy|Ranks|Workers|Measured|Predicted|Error (%)|Predicted with the "
                  "run's own compute (slowest rank per step)|Error (%)|Note|", "|:--|" + ":--|" * 8]
        for v in result["validation"]:
            lines.append(f"|{v['strategy']}|{v['ranks']}|{v['workers']}|"
                         f"{v['measured_words_per_s']:.0f}|{v['predicted_words_per_s']:.0f}|"
                         f"{v['error_pct']:+.1f}|{v['predicted_own_compute_words_per_s']:.0f}|"
                         f"{v['error_own_compute_pct']:+.1f}|"
                         f"{OVERSUBSCRIBED if v['oversubscribed'] else ''}|")
        lines.append("")
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> Path:
    """PNG: predicted efficiency vs ranks per strategy, one panel per scaling mode."""
    tables = result["prediction"]["scaling"]
    with figure(path, 1, len(tables), figsize=(5.5 * len(tables), 4.2),
                squeeze=False) as (fig, axes):
        for ax, (scaling, table) in zip(axes[0], tables.items(), strict=True):
            for s, rows in table.items():
                pts = [(r["ranks"], r["efficiency_pct"]) for r in rows
                       if r is not None and "efficiency_pct" in r]
                if pts:
                    ax.semilogx(*zip(*pts, strict=True), "o-", ms=3, base=2, label=LABELS[s])
            ax.axhline(100, color="grey", lw=1, ls=":")
            ax.set(xlabel="ranks", ylabel="predicted efficiency (%)", ylim=(0, 105),
                   title=f"{scaling} scaling")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"hvdscale predict: {result['config']}", fontsize=10)
    return path


def dumps(result: dict[str, Any]) -> str:
    """The result as JSON (NaN-free: missing values are null)."""
    def clean(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x

    return json.dumps(clean(result), indent=1)
