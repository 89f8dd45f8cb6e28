"""``hvdscale fusion``: which Horovod settings make this config fastest here, and by how much.

Every (fusion threshold, cycle time, overlap mode) point is one launch through the sweep's
machinery (``hvdscale.study.sweep``: same launchers, logs, time limit, failed-point records, skip of
what is recorded). Repeats are interleaved: round r launches every point once before round r+1
starts, so slow phases of a shared machine hit all points alike, and ratios are taken per round
(paired). Horovod's defaults (128 MiB, 1 ms, hooks: verified in 0.28.1's
``horovod/common/operations.cc``), fusion off and, optionally, Horovod's autotuner's choice and
independent replicas are measured the same way. Each launch also captures a few steps of Horovod's
timeline after its measured window, summarised per point (allreduce time, fused buffers).

Outputs in the results directory: ``fusion.md`` (table and recommendation), ``fusion.json``,
``fusion_heatmap.png``; records in ``results.jsonl``, timelines in ``timelines/``, autotune logs
in ``autotune/``.
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hvdscale.config import OVERLAP_MODES, load_config
from hvdscale.errors import HvdscaleError
from hvdscale.study.hostfile import write_hostfile
from hvdscale.study.sweep import (
    Point,
    SweepSpec,
    plan_sweep,
    read_out,
    recorded,
    recorded_all,
    run_point,
)

DEFAULT_THRESHOLDS = "0,1,4,16,64,128"
DEFAULT_CYCLES = "0.5,1,2,5,10"
DEFAULT_OVERLAPS = "hooks,after-backward"
HOROVOD_DEFAULT = (128.0, 1.0, "hooks")
"""Horovod 0.28.1's defaults: 128 MiB fusion threshold, 1 ms cycle, allreduce from hooks."""


@dataclass(frozen=True)
class Setting:
    """One point's Horovod setting; ``None`` leaves Horovod's default in force."""

    threshold_mb: float | None
    cycle_ms: float | None
    overlap: str = "hooks"
    kind: str = "grid"
    """``grid``, ``defaults``, ``off`` (fusion off), ``autotune`` (the autotuner's choice) or
    ``independent`` (replicas that never communicate: the ceiling)."""

    @property
    def label(self) -> str:
        if self.kind == "independent":
            return "independent"
        t = "default" if self.threshold_mb is None else f"{self.threshold_mb:g}MB"
        c = "default" if self.cycle_ms is None else f"{self.cycle_ms:g}ms"
        base = f"{t}/{c}/{self.overlap}"
        return base if self.kind == "grid" else f"{self.kind} ({base})"

    def sets(self) -> tuple[str, ...]:
        if self.kind == "independent":
            return ()
        # Explicit, null included: the config under study may set its own values, and
        # "defaults" must mean Horovod's.
        t = "null" if self.threshold_mb is None else f"{self.threshold_mb:g}"
        c = "null" if self.cycle_ms is None else f"{self.cycle_ms:g}"
        return (f"strategy.horovod.overlap={self.overlap}",
                f"strategy.horovod.fusion_threshold_mb={t}", f"strategy.horovod.cycle_time_ms={c}")

    def effective(self) -> tuple[float, float, str]:
        """(threshold MiB, cycle ms, overlap) with Horovod's defaults filled in."""
        return (HOROVOD_DEFAULT[0] if self.threshold_mb is None else self.threshold_mb,
                HOROVOD_DEFAULT[1] if self.cycle_ms is None else self.cycle_ms, self.overlap)


@dataclass(frozen=True)
class FusionSpec:
    """A checked fusion sweep: the launch spec, its settings and how it is measured."""

    sweep: SweepSpec
    np: int
    settings: tuple[Setting, ...]
    repeats: int
    timeline_steps: int
    autotune: bool
    autotune_sets: tuple[str, ...]


def parse_floats(text: str, flag: str, positive: bool) -> list[float]:
    """``"0,1,4"`` -> ``[0.0, 1.0, 4.0]`` (given order, no repeats).

    Raises:
        HvdscaleError: an empty list or an entry that is not a number in range.
    """
    out: list[float] = []
    for t in (x.strip() for x in str(text).split(",")):
        try:
            v = float(t)
        except ValueError:
            raise HvdscaleError(f"{flag} entries must be numbers, e.g. {flag} 1,4,16 (got {t!r} "
                                f"in {text!r})") from None
        if not math.isfinite(v) or v < 0 or (positive and v == 0):
            need = "> 0" if positive else ">= 0"
            raise HvdscaleError(f"{flag} entries must be {need} (got {t!r})")
        if v not in out:
            out.append(v)
    return out


def parse_overlaps(text: str) -> list[str]:
    out: list[str] = []
    for t in (x.strip() for x in str(text).split(",")):
        if t not in OVERLAP_MODES:
            raise HvdscaleError(f"--overlap: unknown mode {t!r}; choose from "
                                f"{', '.join(OVERLAP_MODES)}")
        if t not in out:
            out.append(t)
    return out


def grid_settings(thresholds: list[float], cycles: list[float], overlaps: list[str],
                  independent: bool, grouped: bool = False) -> list[Setting]:
    """The grid, plus Horovod's defaults and fusion off where the grid lacks them.

    ``after-backward`` sends one tensor per step (without ``num_groups``), which no threshold
    splits or fuses, so it gets one point per cycle time (threshold left at Horovod's default)
    unless ``grouped``.
    """
    grid = []
    for o in overlaps:
        ts: list[float | None] = list(thresholds)
        if o == "after-backward" and not grouped:
            ts = [None]
        grid += [Setting(t, c, o) for t in ts for c in cycles]
    eff = {s.effective() for s in grid}
    extra = []
    if HOROVOD_DEFAULT not in eff:
        extra.append(Setting(None, None, "hooks", "defaults"))
    if (0.0, 1.0, "hooks") not in eff:
        extra.append(Setting(0.0, None, "hooks", "off"))
    base = [Setting(None, None, "hooks", "independent")] if independent else []
    return base + extra + grid


def plan_fusion(config: str | Path, np: int, thresholds: str = DEFAULT_THRESHOLDS,
                cycles: str = DEFAULT_CYCLES, overlaps: str = DEFAULT_OVERLAPS,
                repeats: int = 3, out: str | Path = "results/fusion",
                overrides: list[str] | tuple[str, ...] = (), launcher: str = "mpirun",
                hostfile: str | Path | None = None, timeout_s: float = 900.0,
                timeline_steps: int = 3, autotune: bool = True, independent: bool = True,
                autotune_steps_per_sample: int = 2, autotune_bayes_samples: int = 8,
                check_out: bool = True) -> FusionSpec:
    """Check every input of a fusion sweep and list its points; launches nothing.

    Raises:
        HvdscaleError: one clear message for the first bad input.
    """
    if not isinstance(np, int) or np < 2:
        raise HvdscaleError(f"--np must be a rank count >= 2 (Horovod has nothing to fuse on "
                            f"one rank; got {np!r})")
    if repeats < 1:
        raise HvdscaleError(f"--repeats must be >= 1 (got {repeats})")
    if timeline_steps < 0:
        raise HvdscaleError(f"--timeline-steps must be >= 0 (got {timeline_steps})")
    ts = parse_floats(thresholds, "--threshold-mb", positive=False)
    cs = parse_floats(cycles, "--cycle-ms", positive=True)
    os_ = parse_overlaps(overlaps)
    base_sets = list(overrides)
    if timeline_steps:
        base_sets += ["strategy.horovod.timeline=auto",
                      f"strategy.horovod.timeline_steps={timeline_steps}"]
    spec = plan_sweep(config, [np], ["horovod"], launcher=launcher, hostfile=hostfile, out=out,
                      overrides=base_sets, timeout_s=timeout_s, check_out=check_out)
    cfg = spec.points[0].cfg
    if cfg.measure.epochs:
        raise HvdscaleError("hvdscale fusion measures a fixed step count; set measure.epochs=0")
    settings = grid_settings(ts, cs, os_, independent,
                             grouped=cfg.strategy.horovod.num_groups > 1)
    # Horovod's autotuner: warm-up trials, then Bayesian trials (+1), each 5 samples of
    # steps_per_sample steps; it runs in the warm-up, so the window measures its choice.
    warm = 1
    trials = warm + autotune_bayes_samples + 1
    tune_steps = int(trials * 5 * autotune_steps_per_sample * 1.3) + cfg.measure.warmup_steps
    autotune_sets = ("strategy.horovod.overlap=hooks", "strategy.horovod.autotune=true",
                     "strategy.horovod.autotune_log=auto",
                     f"strategy.horovod.autotune_steps_per_sample={autotune_steps_per_sample}",
                     f"strategy.horovod.autotune_warmup_samples={warm}",
                     f"strategy.horovod.autotune_bayes_samples={autotune_bayes_samples}",
                     f"measure.warmup_steps={tune_steps}")
    return FusionSpec(replace(spec, points=()), np, tuple(settings), repeats, timeline_steps,
                      autotune, autotune_sets)


def _point(spec: FusionSpec, s: Setting, index: int, extra: tuple[str, ...] = (),
           name: str = "") -> Point:
    strategy = "independent" if s.kind == "independent" else "horovod"
    sets = (*s.sets(), *extra)
    cfg = load_config(spec.sweep.config, [*spec.sweep.overrides, *sets,
                                          f"strategy.name={strategy}"])
    return Point(index, strategy, spec.np, cfg, sets, name or s.label)


def points(spec: FusionSpec) -> list[tuple[Setting, Point]]:
    """Each setting's launch point (index in launch order within one round)."""
    return [(s, _point(spec, s, i)) for i, s in enumerate(spec.settings, 1)]


def autotune_point(spec: FusionSpec) -> Point:
    """The autotuner's launch: fusion and cycle time left to Horovod, tuned in the warm-up."""
    return _point(spec, Setting(None, None, "hooks", "autotune-run"), 0, spec.autotune_sets,
                  name="autotune-run")


def run_autotune(spec: FusionSpec, hostfile: Path | None,
                 say: Callable[[str], None]) -> Setting | None:
    """One launch with HOROVOD_AUTOTUNE (or its earlier record); returns its chosen setting."""
    p = autotune_point(spec)
    rec = recorded(read_out(spec.sweep.out), p)
    if rec is None:
        say(f"[autotune] {p.label}: Horovod's autotuner (log parsed when done)")
        o = run_point(spec.sweep, p, hostfile)
        if o.status != "ok":
            say(f"[autotune] FAILED: {o.error} [log: {o.log}]")
            return None
        rec = o.record
    else:
        say("[autotune] skipped, already recorded")
    tuned = (rec or {}).get("strategy", {}).get("autotune")
    if not tuned:
        say("[autotune] the record holds no autotune log; skipping its point")
        return None
    chosen = tuned["chosen"]
    state = "finished" if tuned["finished"] else "NOT finished (last trial taken)"
    say(f"[autotune] {state}: {chosen['fusion_threshold_mb']:g} MiB, "
        f"{chosen['cycle_time_ms']:g} ms after {len(tuned['trials'])} trials "
        f"(log: {tuned['log']})")
    return Setting(round(chosen["fusion_threshold_mb"], 3), round(chosen["cycle_time_ms"], 3),
                   "hooks", "autotune")


def run_fusion(spec: FusionSpec, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or resume) the fusion sweep; returns the analysis."""
    with tempfile.TemporaryDirectory(prefix="hvdscale-fusion-") as tmp:
        hf = (write_hostfile(spec.sweep.hostfile, Path(tmp) / "hostfile")
              if spec.sweep.hostfile else None)
        return _run(spec, hf, say)


def _run(spec: FusionSpec, hf: Path | None, say: Callable[[str], None]) -> dict[str, Any]:
    settings = list(spec.settings)
    autotune_info = None
    if spec.autotune:
        chosen = run_autotune(spec, hf, say)
        if chosen is not None:
            settings.insert(1 if settings and settings[0].kind == "independent" else 0, chosen)
            autotune_info = chosen
    spec = replace(spec, settings=tuple(settings))
    pts = points(spec)
    t0 = time.monotonic()
    total = len(pts) * spec.repeats
    done = 0
    for r in range(spec.repeats):
        for s, p in pts:
            done += 1
            head = f"[{done}/{total}] round {r + 1}/{spec.repeats} {s.label}"
            have = recorded_all(read_out(spec.sweep.out), p)
            if len(have) > r:
                say(f"{head}: skipped, already measured ({have[r]['words_per_s']:.0f} words/s)")
                continue
            o = run_point(spec.sweep, p, hf)
            el = time.monotonic() - t0
            if o.status == "ok":
                say(f"{head}: {o.words_per_s:.0f} words/s in {o.seconds:.0f} s "
                    f"(elapsed {el:.0f} s)")
            else:
                say(f"{head}: FAILED after {o.seconds:.0f} s: {o.error} [log: {o.log}]")
    records = read_out(spec.sweep.out)
    result = analyze([(s, recorded_all(records, p)[: spec.repeats]) for s, p in pts])
    result["autotune"] = autotune_info.label if autotune_info else None
    result["np"] = spec.np
    return result


# --- analysis ---------------------------------------------------------------------------------

def _med(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return statistics.median(xs) if xs else None


def _timeline_median(rec: dict[str, Any], key: str) -> float | None:
    tl = rec.get("strategy", {}).get("timeline") or {}
    return ((tl.get("summary") or {}).get("median") or {}).get(key)


def paired(a: list[dict], b: list[dict]) -> dict[str, Any] | None:
    """Per-round ratios of words/s of ``a`` over ``b`` (rounds paired by order)."""
    n = min(len(a), len(b))
    if n == 0:
        return None
    ratios = [a[i]["words_per_s"] / b[i]["words_per_s"] for i in range(n)]
    med = statistics.median(ratios)
    return {"median": med, "min": min(ratios), "max": max(ratios), "n": n, "ratios": ratios,
            # Every round (two at least) agrees on the sign: beyond the rounds' noise.
            "consistent": n >= 2 and (all(x > 1 for x in ratios) or all(x < 1 for x in ratios))}


def analyze(rows: list[tuple[Setting, list[dict[str, Any]]]]) -> dict[str, Any]:
    """Medians per point, the best point and its paired gains over defaults and fusion off."""
    table = []
    by_kind: dict[str, list[dict]] = {}
    recs_of: dict[str, list[dict]] = {}
    for s, recs in rows:
        wps = [r["words_per_s"] for r in recs]
        row = {"label": s.label, "kind": s.kind, "threshold_mb": s.effective()[0],
               "cycle_ms": s.effective()[1], "overlap": s.overlap, "repeats": len(recs),
               "words_per_s": _med(wps), "words_per_s_all": wps,
               "spread_pct": (100 * (max(wps) - min(wps)) / _med(wps)) if len(wps) > 1 else None,
               "non_compute_ms": _med([r.get("idle", {}).get("idle_ms_per_step") for r in recs]),
               "step_ms": _med([r["step_time"]["median"] * 1e3 for r in recs]),
               "allreduce_ms": _med([_timeline_median(r, "allreduce_ms") for r in recs]),
               "fused_buffers": _med([_timeline_median(r, "fused_buffers") for r in recs]),
               "loadavg": [r.get("loadavg") for r in recs]}
        table.append(row)
        recs_of[s.label] = recs
        if s.kind != "grid":
            by_kind.setdefault(s.kind, recs)
        eff = s.effective()
        if s.kind == "grid" and eff == HOROVOD_DEFAULT:
            by_kind.setdefault("defaults", recs)
        if s.kind == "grid" and eff == (0.0, 1.0, "hooks"):
            by_kind.setdefault("off", recs)
    hv = [r for r in table if r["kind"] != "independent" and r["words_per_s"] is not None]
    best = max(hv, key=lambda r: r["words_per_s"]) if hv else None
    out: dict[str, Any] = {"table": table, "best": best}
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


def _gain(p: dict[str, Any] | None) -> str:
    if not p:
        return "—"
    verdict = ("one round: no spread to judge noise by" if p["n"] < 2 else
               "beyond noise" if p["consistent"] else "within the rounds' noise")
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
    if best is None:
        lines.append("No Horovod point was measured: no recommendation.")
    else:
        lines += [f"**Recommended: {best['label']}** "
                  f"(fusion threshold {best['threshold_mb']:g} MiB, cycle time "
                  f"{best['cycle_ms']:g} ms, overlap {best['overlap']}): "
                  f"{best['words_per_s']:.0f} words/s.", "",
                  f"- over Horovod's defaults (128 MiB, 1 ms, hooks): "
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    modes = sorted({r["overlap"] for r in grid}, key=OVERLAP_MODES.index)
    ts = sorted({r["threshold_mb"] for r in grid})
    cs = sorted({r["cycle_ms"] for r in grid})
    vmin = min(r["words_per_s"] for r in grid)
    vmax = max(r["words_per_s"] for r in grid)
    fig, axes = plt.subplots(1, len(modes), figsize=(1.6 + 1.1 * len(cs) * len(modes),
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
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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
