"""``hvdscale fusion``'s results: medians per point, the recommendation from paired per-round
ratios over Horovod's defaults (``hvdscale.study.paired.recommend``), paired gains over the
references, and the outputs in the results directory: ``fusion.md`` (table and
recommendation), ``fusion.json`` and ``fusion_heatmap.png``."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from hvdscale.config import OVERLAP_MODES
from hvdscale.records.run import RunRecord
from hvdscale.study.fusion.settings import HOROVOD_DEFAULT, Setting
from hvdscale.study.paired.recommend import (
    MIN_VERDICT_ROUNDS,
    paired_ratios,
    ratio_summary,
    recommend,
    rounds_short,
    verdict_of,
)
from hvdscale.study.plotting import pyplot, save
from hvdscale.study.verdict import EQUIVALENT, FASTER, SLOWER, UNDECIDED


def _med(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return statistics.median(xs) if xs else None


def _timeline_median(rec: RunRecord, key: str) -> float | None:
    return (rec.timeline_summary.get("median") or {}).get(key)


def words_per_round(recs: list[RunRecord | None]) -> list[float | None]:
    """Each round's words/s (None where that round's launch failed or did not run)."""
    return [None if r is None else r.words_per_s for r in recs]


def paired(a: list[RunRecord | None], b: list[RunRecord | None]) -> dict[str, Any] | None:
    """Per-round ratios of words/s of ``a`` over ``b`` (both indexed by round, None for a
    failed round): median, spread (min, max), n, the ratios, and whether every round agrees on
    the side of 1.0."""
    return ratio_summary(paired_ratios(words_per_round(a), words_per_round(b)))


def _point_row(s: Setting, rounds: list[RunRecord | None]) -> dict[str, Any]:
    """One point's row of the table: its setting, words/s per round, and the medians over the
    rounds it recorded (words/s, idle and step time, the timeline's allreduce and buffers)."""
    wps_all = words_per_round(rounds)
    recs = [r for r in rounds if r is not None]
    wps = [r.words_per_s for r in recs]
    return {"label": s.label, "kind": s.kind, "threshold_mb": s.effective()[0],
            "cycle_ms": s.effective()[1], "overlap": s.overlap, "repeats": len(recs),
            "words_per_s": _med(wps), "words_per_s_all": wps_all,
            "spread_pct": (100 * (max(wps) - min(wps)) / _med(wps)) if len(wps) > 1 else None,
            "non_compute_ms": _med([r.idle_ms_per_step for r in recs]),
            "step_ms": _med([r.step_median_s * 1e3 for r in recs]),
            "allreduce_ms": _med([_timeline_median(r, "allreduce_ms") for r in recs]),
            "fused_buffers": _med([_timeline_median(r, "fused_buffers") for r in recs]),
            "loadavg": [r.loadavg for r in recs]}


def analyze(rows: list[tuple[Setting, list[RunRecord | None]]]) -> dict[str, Any]:
    """Medians per point; the recommended point (best paired ratio over the defaults, beyond
    noise; else the defaults) as ``best``, with ``recommendation`` saying why; its paired gains
    over defaults, fusion off, autotune and independent replicas.

    Each row's records are indexed by round (``hvdscale.study.paired.rounds.by_round``), None for a
    round whose launch failed: ratios pair round i with round i, never shifted records."""
    table = []
    by_kind: dict[str, list[RunRecord | None]] = {}
    recs_of: dict[str, list[RunRecord | None]] = {}
    for s, rounds in rows:
        table.append(_point_row(s, rounds))
        recs_of[s.label] = rounds
        if s.kind != "grid":
            by_kind.setdefault(s.kind, rounds)
        eff = s.effective()
        if s.kind == "grid" and eff == HOROVOD_DEFAULT:
            by_kind.setdefault("defaults", rounds)
        if s.kind == "grid" and eff == (0.0, 1.0, "hooks"):
            by_kind.setdefault("off", rounds)
    # The recommendation: the best PAIRED ratio over the defaults (per round, same machine
    # state), and only when its spread lies above 1.0; otherwise the defaults stay.
    row_of = {r["label"]: r for r in table}
    defaults = next((r["label"] for r in table if recs_of[r["label"]] is by_kind.get("defaults")),
                    None)
    rec = recommend({r["label"]: r["words_per_s_all"] for r in table
                     if r["kind"] != "independent"}, defaults or "Horovod's defaults")
    pick = rec["recommended"] or defaults
    best = row_of.get(pick) if pick else None
    out: dict[str, Any] = {"table": table, "best": best, "recommendation": rec}
    if best is not None:
        b = recs_of[best["label"]]
        for ref in ("defaults", "off", "autotune", "independent"):
            if ref in by_kind:
                out[f"best_over_{ref}"] = paired(b, by_kind[ref])
        if "defaults" in by_kind and "independent" in by_kind:
            out["defaults_over_independent"] = paired(by_kind["defaults"], by_kind["independent"])
        if "autotune" in by_kind and "defaults" in by_kind:
            out["autotune_over_defaults"] = paired(by_kind["autotune"], by_kind["defaults"])
    return out


def _f(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


GAIN_WORDS = {FASTER: "faster", SLOWER: "slower", EQUIVALENT: "no difference larger than 2%",
              UNDECIDED: "undecided"}
"""A setting's paired ratio over the defaults in words (the procedure's margin, 2 %)."""


def _gain(p: dict[str, Any] | None) -> str:
    if not p:
        return "—"
    # The decision procedure's words (hvdscale.study.verdict), at the level shared among the
    # recommendation's candidates (the summary's k).
    if p["n"] < MIN_VERDICT_ROUNDS:
        verdict = rounds_short(p["n"])
    else:
        v = verdict_of(p)
        verdict = f"{GAIN_WORDS[v.outcome]}, 95% x{v.lo:.3f}-{v.hi:.3f}"
    return (f"x{p['median']:.3f} (rounds {p['min']:.3f}–{p['max']:.3f}, n={p['n']}; "
            f"{verdict})")


def markdown(res: dict[str, Any], title: str) -> str:
    """The fusion report: one row per point, then the recommendation."""
    lines = [f"# {title}", "",
             "Medians over interleaved rounds. non-compute = step time minus forward/backward "
             "(communication and waiting); allreduce and buffers from Horovod's timeline of a "
             "few steps after each measured window.", "",
             "| setting | repeats | words/s | spread % | step ms | non-compute ms | "
             "allreduce ms | fused buffers/step |",
             "|:--|--:|--:|--:|--:|--:|--:|--:|"]
    for r in sorted(res["table"], key=lambda r: -(r["words_per_s"] or 0)):
        lines.append(f"| {r['label']} | {r['repeats']} | {_f(r['words_per_s'], '.0f')} | "
                     f"{_f(r['spread_pct'], '.1f')} | {_f(r['step_ms'], '.1f')} | "
                     f"{_f(r['non_compute_ms'], '.1f')} | {_f(r['allreduce_ms'], '.1f')} | "
                     f"{_f(r['fused_buffers'], '.0f')} |")
    best = res.get("best")
    lines.append("")
    rec = res.get("recommendation") or {}
    if best is None:
        lines.append(f"No recommendation: {rec.get('verdict', 'no Horovod point was measured')}.")
    else:
        head = (f"**Recommended: {best['label']}**" if rec.get("recommended") else
                f"**Recommended: keep Horovod's defaults, {best['label']}**")
        lines += [f"{head} (fusion threshold {best['threshold_mb']:g} MiB, cycle time "
                  f"{best['cycle_ms']:g} ms, overlap {best['overlap']}): "
                  f"{best['words_per_s']:.0f} words/s (median). Why: {rec.get('verdict')}.", "",
                  "Paired ratios over Horovod's defaults (each round's words/s over the "
                  "defaults' in the same round; median, spread min-max):", ""]
        lines += [f"- {label}: {_gain(p)}" for label, p in sorted(
            (rec.get("ratios") or {}).items(), key=lambda kv: -(kv[1] or {}).get("median", 0))]
        lines += ["", f"- recommended over Horovod's defaults (128 MiB, 1 ms, hooks): "
                  f"{_gain(res.get('best_over_defaults'))}",
                  f"- over fusion off: {_gain(res.get('best_over_off'))}"]
        if res.get("best_over_autotune"):
            lines.append(f"- over the autotuner's choice ({res.get('autotune')}): "
                         f"{_gain(res['best_over_autotune'])}")
        if res.get("best_over_independent"):
            lines.append(f"- Horovod / independent replicas with it: "
                         f"{_gain(res['best_over_independent'])}; with the defaults: "
                         f"{_gain(res.get('defaults_over_independent'))}")
        lines += ["", "Set it with `--set strategy.horovod.fusion_threshold_mb="
                  f"{best['threshold_mb']:g} --set strategy.horovod.cycle_time_ms="
                  f"{best['cycle_ms']:g} --set strategy.horovod.overlap={best['overlap']}`."]
    return "\n".join(lines) + "\n"


def heatmap(res: dict[str, Any], path: Path) -> Path | None:
    """One panel per overlap mode: median words/s over fusion threshold x cycle time."""
    grid = [r for r in res["table"] if r["kind"] == "grid" and r["words_per_s"] is not None]
    if not grid:
        return None
    import numpy as np

    modes = sorted({r["overlap"] for r in grid}, key=OVERLAP_MODES.index)
    ts = sorted({r["threshold_mb"] for r in grid})
    cs = sorted({r["cycle_ms"] for r in grid})
    vmin = min(r["words_per_s"] for r in grid)
    vmax = max(r["words_per_s"] for r in grid)
    fig, axes = pyplot().subplots(1, len(modes), figsize=(1.6 + 1.1 * len(cs) * len(modes),
                                                          1.4 + 0.5 * len(ts)), squeeze=False)
    im = None
    for ax, mode in zip(axes[0], modes, strict=True):
        z = np.full((len(ts), len(cs)), np.nan)
        for r in grid:
            if r["overlap"] == mode:
                z[ts.index(r["threshold_mb"]), cs.index(r["cycle_ms"])] = r["words_per_s"]
        im = ax.imshow(z, cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto", origin="lower")
        for i in range(len(ts)):
            for j in range(len(cs)):
                if not np.isnan(z[i, j]):
                    ax.text(j, i, f"{z[i, j]:.0f}", ha="center", va="center", fontsize=7,
                            color="white" if z[i, j] < (vmin + vmax) / 2 else "black")
        ax.set_xticks(range(len(cs)), [f"{c:g}" for c in cs])
        ax.set_yticks(range(len(ts)), [f"{t:g}" for t in ts])
        ax.set(xlabel="cycle time (ms)", ylabel="fusion threshold (MiB)", title=mode)
    fig.colorbar(im, ax=axes[0].tolist(), label="words/s (median)")
    fig.suptitle("Horovod fusion sweep", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    return save(fig, path)


def write_outputs(res: dict[str, Any], out: Path, title: str, plot: bool = True) -> str:
    """fusion.md, fusion.json and (with ``plot``) fusion_heatmap.png in ``out``."""
    md = markdown(res, title)
    if plot:
        png = heatmap(res, out / "fusion_heatmap.png")
        if png is not None:
            md += f"\nHeat-map: {png}\n"
    (out / "fusion.md").write_text(md)
    (out / "fusion.json").write_text(json.dumps(res, indent=1, default=str))
    return md
