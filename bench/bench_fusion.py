"""Horovod fusion settings side by side at np=2: fusion off, Horovod's defaults, the autotuner's
choice and the best of a small sweep, against independent replicas (the ceiling).

For each config this runs ``hvdscale fusion`` (the same code as the command): one autotune
launch, then rounds in which every point is launched once (interleaved, so each round sees the
same machine), and ratios are taken per round (paired). The sweep's best comes from the same
rounds, so it is measured with the same repeats as the others. Each launch also captures a few
steps of Horovod's timeline after its measured window; their medians say where the time goes.

    python bench/bench_fusion.py                       # both configs, 3 rounds (~8 min quiet)
    python bench/bench_fusion.py --configs configs/demo.yaml --rounds 5
    python bench/bench_fusion.py --render bench/results/fusion_demo.json   # BENCHMARKS.md table

Writes bench/results/fusion_<config>.json (every round's words/s, the 1-minute load at the end
of every launch and before/after the config, the recommendation from paired per-round ratios
over Horovod's defaults, timeline medians; ``quiet`` is computed by bench/emit.py) and keeps the
launches' records and timelines under --work. ``--render`` prints the markdown table from a raw
file alone (recommendation recomputed from its per-round words/s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from emit import emit  # bench/ is on sys.path when a script runs
from scratch import scratch_dir

from hvdscale.config import HorovodConfig
from hvdscale.records.run import RunRecord
from hvdscale.study.fusion import horovod as fusion
from hvdscale.study.fusion import report as fusion_report
from hvdscale.study.fusion.settings import HOROVOD_DEFAULT, Setting
from hvdscale.study.paired.recommend import paired_ratios, recommend
from hvdscale.study.sweep.launcher import read_out

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ("configs/commheavy_torch.yaml", "configs/demo.yaml")
# A small grid: fusion off and Horovod's defaults (1 ms), a slower cycle with full fusion, and
# one allreduce after backward at both cycle times.
THRESHOLDS, CYCLES = f"0,{HOROVOD_DEFAULT[0]:g}", f"{HOROVOD_DEFAULT[1]:g},5"
DEFAULTS_LABEL = Setting(*HOROVOD_DEFAULT).label
"""The grid point at Horovod's defaults ("128MB/1ms/hooks")."""
OFF_LABEL = Setting(0.0, HOROVOD_DEFAULT[1]).label
"""The grid point with fusion off at the default cycle ("0MB/1ms/hooks")."""


def summarize(res: dict, np_: int) -> dict:
    """The side-by-side rows of one config: off, defaults, autotune, best, independent."""
    rows = {r["kind"] if r["kind"] != "grid" else r["label"]: r for r in res["table"]}
    defaults = rows.get(DEFAULTS_LABEL) or rows.get("defaults")
    off = rows.get(OFF_LABEL) or rows.get("off")
    pick = {"fusion off": off, "Horovod defaults": defaults, "autotune's choice":
            rows.get("autotune"), "sweep's best": res["best"],
            "independent": rows.get("independent")}
    indep = pick["independent"]
    out = {}
    for name, row in pick.items():
        if row is None:
            continue
        wps = row["words_per_s_all"]
        entry = {"setting": row["label"], "words_per_s_median": row["words_per_s"],
                 "words_per_s_rounds": wps, "allreduce_ms": row["allreduce_ms"],
                 "non_compute_ms": row["non_compute_ms"], "fused_buffers": row["fused_buffers"]}
        # Rounds are paired by index; a failed round (None) on either side is left out.
        if indep is not None and name != "independent":
            ratios = paired_ratios(wps, indep["words_per_s_all"])
            entry["over_independent_median"] = statistics.median(ratios) if ratios else None
            entry["over_independent_rounds"] = ratios
        if defaults is not None and name not in ("independent", "Horovod defaults"):
            ratios = paired_ratios(wps, defaults["words_per_s_all"])
            entry["over_defaults_median"] = statistics.median(ratios) if ratios else None
            entry["over_defaults_rounds"] = ratios
        out[name] = entry
    return out


def _parser() -> argparse.ArgumentParser:
    """The bench's command line."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rounds", "--repeats", dest="repeats", type=int, default=3,
                    help="interleaved rounds (every point once per round); >= 5 to judge noise")
    ap.add_argument("--threshold-mb", default=THRESHOLDS)
    ap.add_argument("--cycle-ms", default=CYCLES)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--work", default=None,
                    help="records, timelines and logs of the launches (kept; a rerun naming "
                         "the same directory resumes; default: a fresh private temporary one)")
    ap.add_argument("--fresh", action="store_true", help="clear --work first")
    ap.add_argument("--results", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--no-autotune", action="store_true",
                    help="skip Horovod's autotuner launch and its point (a quick smoke run)")
    ap.add_argument("--render", metavar="RAW.json",
                    help="print the markdown table of a raw result and exit (measures nothing)")
    return ap


def main() -> int:
    args = _parser().parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())), end="")
        return 0
    # (The sweep's launch_env allows root for the launches.)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.fresh and args.work:
        shutil.rmtree(args.work, ignore_errors=True)
    args.work = str(scratch_dir(args.work, "hvdscale-bench-fusion-"))
    print(f"work directory: {args.work}", file=sys.stderr)
    for config in args.configs.split(","):
        name = Path(config).stem
        out = Path(args.work) / name
        t0 = time.monotonic()
        load0 = os.getloadavg()
        grid = fusion.FusionGrid(args.np, args.threshold_mb, args.cycle_ms,
                                 "hooks,after-backward", args.repeats, timeline_steps=3,
                                 autotune=not args.no_autotune)
        spec = fusion.plan_fusion(ROOT / config, grid, out, args.set)
        res = fusion.run_fusion(spec, lambda s: print(s, file=sys.stderr, flush=True))
        md = fusion_report.write_outputs(res, out, f"Fusion sweep: {name} at np={args.np}")
        print(md, file=sys.stderr)
        defaults_row = next((r for r in res["table"] if r["label"] == DEFAULTS_LABEL), None)
        best_label = res["best"]["label"] if res["best"] else None
        best_row = next((r for r in res["table"] if r["label"] == best_label), None)
        result = {"config": config, "np": args.np, "repeats": args.repeats,
                  "grid": {"threshold_mb": args.threshold_mb, "cycle_ms": args.cycle_ms,
                           "overlap": "hooks,after-backward"},
                  "seconds": round(time.monotonic() - t0, 1),
                  "loadavg_start": load0, "loadavg_end": os.getloadavg(),
                  "side_by_side": summarize(res, args.np),
                  "recommended": best_label,
                  "recommendation": res.get("recommendation"),
                  "launch_loadavg": {r["label"]: r["loadavg"] for r in res["table"]},
                  "best_over_defaults": res.get("best_over_defaults"),
                  "best_over_off": res.get("best_over_off"),
                  "best_over_autotune": res.get("best_over_autotune"),
                  "autotune": res.get("autotune"),
                  "timeline_medians": {
                      "defaults": _timeline(out, defaults_row),
                      "best": _timeline(out, best_row),
                      **{r["label"]: _timeline(out, r) for r in res["table"]
                         if r["kind"] != "independent"}},
                  "table": res["table"]}
        emit(result, str(Path(args.results) / f"fusion_{name}.json"))
    return 0


def render(raw: dict) -> str:
    """The BENCHMARKS.md table of one raw result: per setting its words/s per round, the median,
    the paired ratio over Horovod's defaults (median, min-max) and the highest 1-minute load of
    its launches; then the recommendation, recomputed from the rounds."""
    rows = raw["table"]
    ref = next((r["label"] for r in rows if r["kind"] == "grid" and
                (r["threshold_mb"], r["cycle_ms"], r["overlap"]) == HOROVOD_DEFAULT), None)
    rec = recommend({r["label"]: r["words_per_s_all"] for r in rows
                     if r["kind"] != "independent"}, ref or "Horovod's defaults")
    loads = [x for r in rows for x in _one_minute_loads(r)] + [
        raw[k][0] for k in ("loadavg_start", "loadavg_end") if raw.get(k)]
    out = [f"{raw['config']}, np={raw['np']}, {raw['repeats']} round(s); 1-minute load "
           f"{min(loads):.1f}-{max(loads):.1f} (start, end and every launch); quiet (every "
           f"load <= 2.5): "
           f"{'yes' if max(loads) <= 2.5 else 'no'}", "",
           "| setting | words/s per round | median | / defaults per round | / defaults median "
           "(min-max) | max load |", "|:--|--:|--:|--:|--:|--:|"]
    for r in sorted(rows, key=lambda r: -(r["words_per_s"] or 0)):
        p = rec["ratios"].get(r["label"])
        per = ", ".join(f"{x:.2f}" for x in p["ratios"]) if p else "—"
        med = f"x{p['median']:.3f} ({p['min']:.3f}-{p['max']:.3f})" if p else (
            "1 (reference)" if r["label"] == ref else "—")
        # A failed round shows as a dash in its own column: rounds stay paired by position.
        wps = ", ".join("—" if x is None else f"{x:.0f}" for x in r["words_per_s_all"])
        median = "—" if r["words_per_s"] is None else f"{r['words_per_s']:.0f}"
        out.append(f"| {r['label']} | {wps} | {median} | {per} | {med} | "
                   f"{max(_one_minute_loads(r), default=float('nan')):.1f} |")
    out += ["", f"Recommendation (paired per-round ratios over the defaults): {rec['verdict']}."]
    return "\n".join(out) + "\n"


def _one_minute_loads(row: dict) -> list[float]:
    return [x[0] for x in row.get("loadavg") or [] if x]


def _timeline(out: Path, row: dict | None) -> dict | None:
    """Median timeline figures of a point's launches (from its records)."""
    if row is None:
        return None
    def setting(h: HorovodConfig) -> tuple:
        return Setting(h.fusion_threshold_mb, h.cycle_time_ms, h.overlap).effective()

    want = (row["threshold_mb"], row["cycle_ms"], row["overlap"])
    meds = [s["median"] | {"cycle_gap_ms": s["cycles"]["median_gap_ms"],
                           "buffer_bytes_max": s["buffers"]["max_bytes"]}
            for r in read_out(out)
            if isinstance(r, RunRecord) and (s := r.timeline_summary)
            and r.strategy_name == "horovod"
            and setting(r.horovod_settings) == want
            and not r.horovod_settings.autotune]
    if not meds:
        return None
    return {k: statistics.median([m[k] for m in meds if m.get(k) is not None])
            for k in meds[0] if any(m.get(k) is not None for m in meds)}


if __name__ == "__main__":
    sys.exit(main())
