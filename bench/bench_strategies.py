"""End-to-end words/s of horovod, ps and independent at np=N on one config, side by side.

Each repeat launches the three strategies back to back (order rotated every repeat) with
``mpirun -np N hvdscale run``, so machine noise spreads over all of them; medians over repeats
and the ratios of medians are reported. The 1-minute load is recorded before and after every
launch (``launches``), and emit labels the result quiet from those. Records go to a scratch
results directory.

    python bench/bench_strategies.py --np 2 --repeats 5 [--config configs/demo.yaml]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

from emit import emit  # bench/ is on sys.path when a script runs

from hvdscale.study.sweep.one_run import RunLaunch, launch_run

STRATEGIES = ("independent", "horovod", "ps")


def run_point(config: str, np_: int, strategy: str, out: str, sets: list[str]) -> dict:
    """One launch of ``config`` with ``strategy``, as a sweep launches its point; its record."""
    return launch_run(np_, config, out, [f"strategy.name={strategy}", *sets],
                      RunLaunch(env={"TF_CPP_MIN_LOG_LEVEL": "2"}))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    wps: dict[str, list[float]] = {s: [] for s in STRATEGIES}
    step_ms: dict[str, list[float]] = {s: [] for s in STRATEGIES}
    launches: list[dict] = []
    with tempfile.TemporaryDirectory() as out:
        for r in range(args.repeats):
            order = STRATEGIES[r % 3:] + STRATEGIES[: r % 3]
            for s in order:
                # The load around every launch (os.getloadavg() triples), so emit's quiet label
                # rests on the run itself, not on one reading at the end.
                before = list(os.getloadavg())
                rec = run_point(args.config, args.np, s, out, args.set)
                launches.append({"repeat": r, "strategy": s, "words_per_s": rec.words_per_s,
                                 "load_before": before, "load_after": list(os.getloadavg())})
                wps[s].append(rec.words_per_s)
                step_ms[s].append(rec.step_median_s * 1e3)
                print(f"repeat {r + 1}/{args.repeats} {s:12s} words/s={wps[s][-1]:.0f}",
                      file=sys.stderr, flush=True)
    med = {s: statistics.median(v) for s, v in wps.items()}
    result = {"config": args.config, "np": args.np, "repeats": args.repeats, "set": args.set,
              "median_words_per_s": med,
              "median_step_ms": {s: statistics.median(v) for s, v in step_ms.items()},
              "all_words_per_s": wps, "launches": launches,
              "horovod_over_independent": med["horovod"] / med["independent"],
              "ps_over_independent": med["ps"] / med["independent"],
              "ps_over_horovod": med["ps"] / med["horovod"]}
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
