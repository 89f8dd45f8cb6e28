"""The per-rank batch question of issue 15: words/s at np=1 across per-rank batch sizes beside
the RNN layer's GEMM rate, for one config (default: the demo model, short runs).

Runs ``hvdscale batch`` as a user would and keeps its record, table and plot:

    python bench/bench_batch.py --json bench/results/batch_demo.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from emit import emit  # bench/ is on sys.path when a script runs

from hvdscale.study.sweep.launcher import launch_env


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--batch", default="8,16,32,64,128")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    env = launch_env({**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as out:
        cmd = [sys.executable, "-m", "hvdscale", "batch", args.config, "--batch", args.batch,
               "--set", "measure.warmup_steps=3", "--set", f"measure.steps={args.steps}",
               "--out", out, "--json"]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3000)
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return r.returncode
        rec = json.loads(r.stdout)
        if args.json:
            dest = Path(args.json).parent
            shutil.copy(Path(out, "batch.md"), Path(args.json).with_suffix(".md"))
            shutil.copy(rec["plot"], dest / Path(rec["plot"]).name)
            rec["plot"] = str(dest / Path(rec["plot"]).name)
    emit(rec, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
