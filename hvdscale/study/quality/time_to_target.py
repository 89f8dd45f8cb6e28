"""Time-to-target experiments run one launch at a time (the quality, learning-rate-rule and
noise-scale benches): one run to a target loss, the target picked from a 1-rank curve, and the
paired figures of one round (time to target interpolated by ``quality.crossing``, speedups,
statistical efficiency).

Each run is launched as a sweep launches its point (``study.sweep.one_run.launch_run``).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from hvdscale.errors import HvdscaleError
from hvdscale.records.run import RunRecord
from hvdscale.study.quality.time_to_quality import crossing

TARGET_AT = 0.6
"""The target is the 1-rank loss at this fraction of its training time."""


def quality_config(task: str, fw: str, configs: Path = Path("configs")) -> Path:
    """The config of a time-to-target task: ``lm`` (Markov source) or ``nmt`` (gettext)."""
    return configs / (f"quality_lm_{fw}.yaml" if task == "lm"
                      else f"quality_nmt_gettext_{fw}.yaml")


def run_to_target(task: str, fw: str, strategy: str, np_: int, sets: list[str],
                  work: Path) -> dict[str, Any]:
    """One run of ``task`` (its results in a fresh directory under ``work``): the figures the
    time-to-target benches keep from its record, plus the 1-minute load around it."""
    import os

    from hvdscale.study.sweep.one_run import RunLaunch, launch_run

    out = Path(tempfile.mkdtemp(dir=work))
    before = os.getloadavg()[0]
    rec = launch_run(np_, quality_config(task, fw), out, [f"strategy.name={strategy}", *sets],
                     RunLaunch(launcher_args=("--oversubscribe",),
                               env={"TF_CPP_MIN_LOG_LEVEL": "2"}, timeout_s=900))
    after = os.getloadavg()[0]
    if not isinstance(rec, RunRecord) or rec.quality is None:
        raise HvdscaleError(f"the run of {task} at np={np_} wrote no quality record")
    q, data = rec.quality, rec.config.data
    return {"task": task, "framework": fw, "strategy": strategy, "np": np_,
            "scaling": data.scaling,
            "batch_size": data.batch_size, "words_per_s": rec.words_per_s,
            "load_before": before, "load_after": after, "stop": q["stop"], "steps": q["steps"],
            "curve": [{k: p[k] for k in ("step", "updates", "words", "train_s", "wall_s",
                                         "loss") if k in p} for p in q["curve"]],
            "optim": q["optim"], "floor_loss": q["floor_loss"], "reached": q["reached"],
            "diverged": q.get("diverged", False), "start_loss": q.get("start_loss"),
            "noise_scale": {k: v for k, v in (q.get("noise_scale") or {}).items()
                            if k != "per_point"}}


def stopped_at(curve: list[dict], target: float) -> dict | None:
    """The first evaluation at or below ``target``, where the run stopped (None: never)."""
    return next((p for p in curve if p["loss"] <= target), None)


def _updates(point: dict) -> float:
    """Updates at a point: warm-up included where the raw file has it (``updates``)."""
    return point.get("updates", point["step"])


def pick_target(curve: list[dict]) -> float:
    """The 1-rank loss at ``TARGET_AT`` of its training time (the last point before it)."""
    end = curve[-1]["train_s"]
    before = [p for p in curve if p["train_s"] <= TARGET_AT * end] or curve[:1]
    return before[-1]["loss"]


def round_figures(one: dict, two: dict) -> dict[str, Any]:
    """Paired figures of one round (a 1-rank and an N-rank run with their ``target``): time to
    target (interpolated; and where the N-rank run stopped), speedups, efficiency, steps
    growth."""
    a, b = crossing(one["curve"], one["target"]), crossing(two["curve"], two["target"])
    stop = stopped_at(two["curve"], two["target"])
    thr = two["words_per_s"] / one["words_per_s"]
    out = {"ttt1": a["train_s"] if a else None, "ttt2": b["train_s"] if b else None,
           "stop2": stop["train_s"] if stop else None,
           "thr": thr, "speedup": None, "eff": None, "steps_x": None}
    if a and b:
        out["speedup"] = a["train_s"] / b["train_s"]
        out["eff"] = out["speedup"] / thr
        out["steps_x"] = _updates(b) / _updates(a)
    return out


def median_range(values: list[float | None], spec: str = ".2f") -> str:
    """Median (min-max) of the rounds; 'not reached' where no round reached the target."""
    vals = [v for v in values if v is not None]
    if not vals:
        return "not reached"
    med = format(statistics.median(vals), spec)
    miss = f", {len(values) - len(vals)} not reached" if len(vals) < len(values) else ""
    if len(vals) == 1:
        return med + miss
    return f"{med} ({format(min(vals), spec)}-{format(max(vals), spec)}){miss}"
