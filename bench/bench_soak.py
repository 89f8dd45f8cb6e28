"""Soak: 1,000 measured steps at np=2; memory per rank must stay flat and words/s steady.

    python bench/bench_soak.py [--steps 1000] [--strategy horovod]

Reports each rank's RSS after the first measured step and at the end, peak RSS, and the median
step time of each tenth of the run (drift shows as a trend across the tenths).
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from emit import emit  # bench/ is on sys.path when a script runs

from hvdscale.study.sweep.one_run import RunLaunch, launch_run


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--strategy", default="horovod")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as out:
        rec = launch_run(2, args.config, out, [f"measure.steps={args.steps}",
                                               f"strategy.name={args.strategy}"],
                         RunLaunch(env={"TF_CPP_MIN_LOG_LEVEL": "2"}, timeout_s=3600))
    dec = rec.step_time_deciles
    result = {
        "config": args.config, "strategy": args.strategy, "steps": args.steps,
        "ranks": rec.ranks, "words_per_s": rec.words_per_s,
        "memory": rec.memory,
        "rss_growth_mb": [m.rss_last_mb - m.rss_first_mb for m in rec.memory],
        "step_time_decile_medians_ms": [round(d * 1e3, 2) for d in dec],
        "last_over_first_decile": dec[-1] / dec[0] if dec else None,
        "step_jitter_ms": rec.step_time.jitter * 1e3,
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
