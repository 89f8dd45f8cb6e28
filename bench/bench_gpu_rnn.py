"""fused vs loop (and the compiled loop on the GPU) LSTM words/s on one GPU next to the CPU,
for ``configs/nmt_torch.yaml`` (the seed notes' sizes). Needs a GPU; NOT run on the development
machine (it has none).

    python bench/bench_gpu_rnn.py [--repeats 3] [--cpu-steps 3] [--precision bf16]
        [--json bench/results/X.json]

The compiled loop (``model.rnn_impl: compiled``, issue 41) runs on the GPU only (its compile
time, recorded apart, is kept per repeat); ``--precision`` (default fp32: TF32 off) applies to
every point.

Each repeat runs the four points (gpu/cpu x fused/loop) back to back, np=1, so the ratios are
taken side by side; medians over repeats. The seed notes' ratio on one GPU is
43,398 / 55,411 = 0.783 (dynamic_rnn vs cudnn_lstm words/s). The CPU points are slow at these
sizes: they run ``--cpu-steps`` measured steps (default 3) after 1 warm-up step.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from emit import emit  # bench/ is on sys.path when a script runs

from hvdscale.records.run import RunRecord
from hvdscale.study.sweep.launcher import read_out

ROOT = Path(__file__).resolve().parents[1]
SEED_RATIO = 43398 / 55411


def point(device: str, impl: str, extra: list[str]) -> RunRecord:
    """One np=1 run; returns its record."""
    out = tempfile.mkdtemp(prefix="bench_gpu_rnn-")
    cmd = [sys.executable, "-m", "hvdscale", "run", "configs/nmt_torch.yaml", "--out", out,
           "--set", f"device={device}", "--set", f"model.rnn_impl={impl}",
           "--set", "strategy.name=independent"]
    for s in extra:
        cmd += ["--set", s]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_gpu_rnn: {device}/{impl} failed:\n{r.stderr[-3000:]}")
    rec = read_out(Path(out))[-1]
    if not isinstance(rec, RunRecord):
        sys.exit(f"bench_gpu_rnn: {device}/{impl} wrote a {rec.kind} record, not a run's")
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cpu-steps", type=int, default=3)
    ap.add_argument("--precision", default="fp32", help="precision of every point")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    prec = [f"precision={args.precision}"]
    cpu_extra = ["measure.warmup_steps=1", f"measure.steps={args.cpu_steps}", *prec]
    wps: dict[str, list[float]] = {}
    compile_s: list[float] = []
    gpu = None
    for _ in range(args.repeats):
        for device in ("cuda", "cpu"):
            for impl in ("fused", "loop", "compiled")[: 3 if device == "cuda" else 2]:
                rec = point(device, impl, cpu_extra if device == "cpu" else prec)
                wps.setdefault(f"{device}/{impl}", []).append(rec.words_per_s)
                if compiled := (rec.compile or {}):
                    compile_s.append(compiled["compile_s"])
                gpu = gpu or rec.device.gpu
    med = {k: statistics.median(v) for k, v in wps.items()}
    emit({"config": "configs/nmt_torch.yaml", "np": 1, "repeats": args.repeats,
          "precision": args.precision,
          "loadavg": os.getloadavg(), "gpu": gpu, "words_per_s": wps, "median": med,
          "loop_over_fused": {d: med[f"{d}/loop"] / med[f"{d}/fused"] for d in ("cuda", "cpu")},
          "compiled_over_loop_gpu": med["cuda/compiled"] / med["cuda/loop"],
          "compiled_over_fused_gpu": med["cuda/compiled"] / med["cuda/fused"],
          "compile_s_gpu": compile_s,
          "seed_notes_loop_over_fused_gpu": SEED_RATIO}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
