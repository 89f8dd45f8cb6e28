"""``predict --fit``'s outputs: the fitted families, held-out errors and predictions (Markdown)
and the plot (measured points, the fit and its interval)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hvdscale.study.plotting import figure


def _params(rows: list[dict]) -> str:
    return ", ".join(f"{q['name']} = {q['value']:.4g}"
                     + (f" +- {q['se']:.2g}" if q["se"] is not None else " (se unknown)")
                     for q in rows) or "none"


def _pct(x: float | None) -> str:
    return "unknown" if x is None else f"+-{x:.1f} %"


def gaps_line(g: dict[str, Any]) -> str:
    """One line: the rank counts measured, those left out, and how much wider that leaves the
    95 % intervals (``ownfit.gaps``)."""
    head = f"- rank counts measured: {', '.join(map(str, g['measured']))}"
    if not g["missing"]:
        return head + " (none missing up to the largest)"
    t = (f"x{g['t_widening']:.2f}" if g["t_widening"] is not None
         else "by an unknown factor (too few degrees of freedom to say)")
    at = ", ".join(f"n={n}: {_pct(v)}" for n, v in g["interval_pct_at_missing"].items())
    return (f"{head}; not measured: {', '.join(map(str, g['missing']))}. The communication fit "
            f"has {g['comm_dof']} degree(s) of freedom instead of {g['comm_dof_if_measured']} "
            f"with them, which alone widens its 95 % interval {t}; at the unmeasured n the "
            f"interval is {at} (at the measured n: {_pct(g['interval_pct_at_measured'])}, "
            "median): interpolated, not measured")


def render_fit(result: dict[str, Any]) -> str:
    """Markdown for a fitted prediction."""
    f = result["fit"]
    lines = [f"# hvdscale predict (fitted to {result['records']}): {result['config']}\n",
             f"- Gradient bytes per rank per step (S): {f['bytes_per_step'] / 2**20:.2f} MB; "
             f"PS servers (k, from the ps records): {f['servers'] or '-'}",
             "- step(n) = compute(n) + exposed communication(n) + straggler idle(n) + g1, split "
             "as the report's breakdown splits it (hvdscale.study.report.decompose)",
             "- Interval: 95 % prediction interval of one new run (Student t on each fit's "
             "degrees of freedom: the parameters' uncertainty plus the repeats' scatter); it "
             "does not cover a change of regime past the measured n. The back-test on the "
             "shipped tables (hvdscale backtest) counts how often it held.", ""]
    if c := f.get("carried"):
        lines[-1:-1] = [f"- Carried from {c['from']} to {c['to']}: communication x "
                        f"{c['comm_factor']['allreduce']:.3f} (allreduce families), x "
                        f"{c['comm_factor']['ps']:.3f} (ps); compute, idle and g1 as fitted"]
    for s, r in f["strategies"].items():
        lines += [f"## {s}",
                  f"- communication: {r['family']}: {r['formula']} ({r['meaning']}); chosen by "
                  f"{r['how']}", f"- parameters: {_params(r['params'])}",
                  f"- compute slowdown s (per extra rank, from {r['slowdown_from']} records): "
                  f"{_params(r['slowdown'])}; straggler: {_params(r['straggler'])}"]
        lines.append(gaps_line(r["gaps"]))
        if r["held_out"]:
            lines.append("- held-out error (the whole model refitted without that n): "
                         + ", ".join(f"n={n}: {h['error_pct']:+.1f} % (measured "
                                     f"{h['measured_words_per_s']:.0f}, predicted "
                                     f"{h['predicted_words_per_s']:.0f} words/s)"
                                     for n, h in r["held_out"].items()))
        else:
            lines.append("- held-out error: none (too few rank counts to leave one out)")
        lines += ["", "|Ranks|Compute (ms)|Exposed comm (ms)|Idle (ms)|g1 (ms)|Step (ms)|"
                  "Words/s|95 % prediction interval|Compute from|",
                  "|--:|--:|--:|--:|--:|--:|--:|:--|:--|"]
        for p in r["predictions"]:
            lo, hi = p["interval"]
            iv = (f"{lo:.0f} - {hi:.0f}" if lo is not None and hi is not None
                  else ("unknown" if lo is None else f">= {lo:.0f}"))
            mark = " (beyond measured)" if p["beyond_measured"] else ""
            lines.append(f"|{p['n']}{mark}|{p['compute_s'] * 1e3:.1f}|{p['comm_s'] * 1e3:.1f}|"
                         f"{p['idle_s'] * 1e3:.1f}|{p['g1_s'] * 1e3:.1f}|"
                         f"{p['step_s'] * 1e3:.1f}|{p['words_per_s']:.0f}|{iv}|"
                         f"{p['compute_source']}|")
        lines.append("")
    return "\n".join(lines) + "\n"


def plot_fit(result: dict[str, Any], measured: dict[str, list[tuple[int, float]]],
             path: Path) -> Path:
    """PNG: per strategy measured words/s (every record), the fit and its 95 % interval."""
    strategies = result["fit"]["strategies"]
    with figure(path, 1, len(strategies), figsize=(4.5 * len(strategies), 3.6),
                squeeze=False) as (fig, axes):
        for ax, (s, r) in zip(axes[0], strategies.items(), strict=True):
            pts = measured.get(s, [])
            if pts:
                ax.plot(*zip(*pts, strict=True), "ko", ms=3, label="measured")
            ps = r["predictions"]
            ns = [p["n"] for p in ps]
            ax.plot(ns, [p["words_per_s"] for p in ps], "C0-", label=f"fit ({r['family']})")
            lo = [p["interval"][0] if p["interval"][0] is not None else float("nan") for p in ps]
            hi = [p["interval"][1] if p["interval"][1] is not None else float("nan") for p in ps]
            ax.fill_between(ns, lo, hi, color="C0", alpha=0.25, label="95 % prediction interval")
            ax.axvline(r["largest_measured"] + 0.5, color="grey", ls=":", lw=1)
            ax.set(xlabel="ranks", ylabel="words/s", title=s)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(f"hvdscale predict --fit: {result['config']}", fontsize=9)
    return path
