"""Issue 14: communication microbenchmark, the scaling model's error here, and its predictions.

Run from the repository root: ``python bench/bench_comm_model.py [--json bench/results/...]``.
In one run (about 6-8 minutes on a loaded 2-core machine):

1. ``hvdscale commbench --np 2`` (every transport, 4 B..256 MB) into ``--out``/commbench;
2. sweeps of the default config (``configs/demo.yaml``) and of the
   communication-heavy config (study/commbench/configs.py) at np=1 and np=2 for horovod and ps;
3. ``hvdscale predict`` for each with ``--comm`` and ``--records``: predicted vs measured
   words/s per point;
4. the seed notes' NMT configuration (``configs/nmt_torch.yaml``) predicted at 8, 64 and 512
   ranks on 25 and 100 Gbit/s links, with the single-GPU rate of the seed notes (55,411 words/s,
   cudnn_lstm, 1 GPU) standing in for the compute time, which cannot be measured at full size
   here.

Every step records os.getloadavg(): other jobs share these cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from emit import emit  # bench/ is on sys.path when a script runs
from scratch import scratch_dir

from hvdscale.records.store import results_path
from hvdscale.study.commbench.configs import COMM_HEAVY
from hvdscale.study.sweep.launcher import launch_env

ROOT = Path(__file__).resolve().parents[1]
SEED_RATE = 55411.433  # words/s, 1 GPU, cudnn_lstm, seed notes 000_*.txt ("ideal case")
ENV = launch_env({**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
SWEEPS = {"default": [], "comm_heavy": [a for h in COMM_HEAVY for a in ("--set", h)]}
"""The configs swept and predicted: the default one, and the communication-heavy one
(``study.commbench.configs.COMM_HEAVY``), as ``--set`` arguments."""


def sh(*args: str) -> str:
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "hvdscale", *args], cwd=ROOT, env=ENV,
                       capture_output=True, text=True)
    print(f"[{time.monotonic() - t:.0f}s, load {os.getloadavg()[0]:.1f}] hvdscale "
          f"{' '.join(args[:2])} ...", file=sys.stderr, flush=True)
    if r.returncode != 0:
        sys.exit(f"hvdscale {' '.join(args)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def main() -> int:
    args = _parse_args()
    out = scratch_dir(args.out, "hvdscale-bench-comm-model-")
    print(f"work directory: {out}", file=sys.stderr)
    load = {"start": list(os.getloadavg())}
    cb, busbw = _commbench(args, out, load)
    validation = _validation(args, out, load)
    seed = _seed_predictions()
    load["end"] = list(os.getloadavg())

    from hvdscale.study.commbench import refit

    result = {"loadavg": load, "reused_measurements": args.reuse, "commbench": {
        "memcpy_GBps": cb["memcpy"], "busbw_GBps_at": busbw,
        "fits": {t: {"fit": {k: v for k, v in tr["fit"].items() if k != "residuals"},
                     "link": tr["link"]}
                 for t, tr in refit(cb)["transports"].items()},
        "raw": str(out / "commbench" / "commbench.json")},
        "validation": validation, "seed_nmt": seed,
        "assumptions": {"seed_compute": f"{SEED_RATE} words/s per GPU (seed notes, cudnn_lstm, "
                                        "1 GPU, batch 384), proportional to the per-rank batch",
                        "latency": "5 us per message", "backward_fraction": 2 / 3,
                        "fusion_threshold_MB": _used_threshold_mb(seed),
                        "ps_dedicated_servers": 1,
                        "ps_server_update": "not modelled (no memory bandwidth given)"}}
    if args.reuse and args.json and Path(args.json).exists():
        prev = json.loads(Path(args.json).read_text())
        result["measurement_loadavg"] = prev.get("measurement_loadavg") or prev["loadavg"]
    emit(result, args.json)
    if args.json:  # the raw commbench result and run records beside the summary
        where = Path(args.json)
        where.with_name("commbench_np2.json").write_text(
            (out / "commbench" / "commbench.json").read_text())
        for name in SWEEPS:
            where.with_name(f"comm_model_{name}.jsonl").write_text(
                results_path(out / f"sweep_{name}").read_text())
    return 0


def _parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None,
                    help="work directory (commbench and sweep results; default: a fresh "
                         "private temporary one)")
    ap.add_argument("--sizes", default="4B..256MB")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--json", default="")
    ap.add_argument("--reuse", action="store_true",
                    help="analyse the commbench and sweep results already in --out again "
                         "(no new measurements)")
    args = ap.parse_args()
    if args.reuse and not args.out:
        ap.error("--reuse needs --out DIR, the work directory of the earlier run")
    return args


def _commbench(args: argparse.Namespace, out: Path, load: dict) -> tuple[dict, dict]:
    """Step 1: the commbench result (run unless reused) and its bus bandwidth at a few sizes."""
    if not (args.reuse and (out / "commbench" / "commbench.json").exists()):
        sh("commbench", "--np", "2", "--sizes", args.sizes, "--out", str(out / "commbench"))
    cb = json.loads((out / "commbench" / "commbench.json").read_text())
    load["after_commbench"] = list(os.getloadavg())
    picks = [1 << 20, 16 << 20, 64 << 20]
    busbw = {t: {str(s): next((p["busbw_GBps"] for p in tr["points"] if p["bytes"] == s), None)
                 for s in picks} for t, tr in cb["transports"].items()}
    return cb, busbw


def _validation(args: argparse.Namespace, out: Path, load: dict) -> dict:
    """Steps 2 and 3: each config's sweep (run unless reused) and the model's predictions
    against it."""
    from hvdscale.study.predict import PredictSpec, run_predict

    measure = ["--set", f"measure.steps={args.steps}", "--set",
               f"measure.warmup_steps={args.warmup}"]
    validation = {}
    for name, sets in SWEEPS.items():
        res_dir = out / f"sweep_{name}"
        if not (args.reuse and results_path(res_dir).exists()):
            sh("sweep", "configs/demo.yaml", "--np", "1,2", "--strategies", "horovod,ps",
               "--out", str(res_dir), "--no-plot", "--redo", *measure, *sets)
        load[f"after_sweep_{name}"] = list(os.getloadavg())
        pred = run_predict("configs/demo.yaml", [s for s in sets if s != "--set"],
                           PredictSpec("1,2", comm=str(out / "commbench"), records=str(res_dir)))
        validation[name] = {"overrides": [s for s in sets if s != "--set"],
                            "model_bytes": pred["prediction"]["model_bytes"],
                            "compute": pred["compute"], "rows": pred["validation"],
                            "report_breakdown": (res_dir / "report.md").read_text()
                            .split("## Why not better")[-1]}
    return validation


def _used_threshold_mb(seed: dict) -> float:
    """The fusion threshold (MiB) the seed predictions used, read back from them (one value)."""
    used = {v["fusion_threshold_bytes"] / 2**20 for v in seed.values()}
    if len(used) != 1:
        raise SystemExit(f"seed predictions used different fusion thresholds: {sorted(used)}")
    return used.pop()


def _seed_predictions() -> dict:
    """Step 4: the seed notes' NMT configuration predicted on 25 and 100 Gbit/s links."""
    from hvdscale.study.predict import PredictSpec, run_predict

    seed = {}
    for bw in ("25Gbit", "100Gbit"):
        p = run_predict("configs/nmt_torch.yaml", [], PredictSpec(
            "1,8,64,512", latency="5us", bandwidth=bw, words_per_s=SEED_RATE))
        seed[bw] = {"network": p["network"], "compute": p["compute"],
                    "model_bytes": p["prediction"]["model_bytes"],
                    # The threshold the prediction used (the config's, else Horovod's default).
                    "fusion_threshold_bytes": p["prediction"]["fusion_threshold_bytes"],
                    "efficiency_pct": {
                        scaling: {s: {str(r["ranks"]): (r or {}).get("efficiency_pct")
                                      for r in rows if r is not None}
                                  for s, rows in t.items()}
                        for scaling, t in p["prediction"]["scaling"].items()}}
    return seed


if __name__ == "__main__":
    sys.exit(main())
