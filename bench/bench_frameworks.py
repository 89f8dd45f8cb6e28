"""TensorFlow next to PyTorch: words/s of fused vs loop in both frameworks at np=1 and np=2,
TF horovod vs TF independent at np=2, and TF's embedding gradients allreduced dense vs gathered.

Every variant is one ``mpirun -np N hvdscale run`` launch; each repeat runs all variants back to
back in a rotated order, so machine noise spreads over all of them (paired repeats); medians
and ratios of medians are reported. Records go to a scratch results directory.

    python bench/bench_frameworks.py --repeats 3 --json bench/results/frameworks.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

from emit import emit  # bench/ is on sys.path when a script runs

from hvdscale.study.sweep.one_run import RunLaunch, launch_run

# (label, ranks, strategy, --set overrides)
VARIANTS = [
    (f"{fw} {impl} np={n}", n, "horovod", [f"framework={fw}", f"model.rnn_impl={impl}"])
    for n in (1, 2) for fw in ("torch", "tf") for impl in ("fused", "loop")
] + [
    ("tf fused np=2 independent", 2, "independent", ["framework=tf"]),
    ("torch fused np=2 independent", 2, "independent", ["framework=torch"]),
    ("tf fused np=2 embeddings gathered", 2, "horovod",
     ["framework=tf", "strategy.horovod.embedding_grads=gathered"]),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    load = os.getloadavg()
    wps: dict[str, list[float]] = {v[0]: [] for v in VARIANTS}
    step_ms: dict[str, list[float]] = {v[0]: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory() as out:
        for r in range(args.repeats):
            k = r % len(VARIANTS)
            for label, n, strategy, sets in VARIANTS[k:] + VARIANTS[:k]:
                rec = launch_run(n, args.config, out,
                                 [f"strategy.name={strategy}", *args.set, *sets],
                                 RunLaunch(env={"TF_CPP_MIN_LOG_LEVEL": "2"}))
                wps[label].append(rec.words_per_s)
                step_ms[label].append(rec.step_median_s * 1e3)
                print(f"repeat {r + 1}/{args.repeats} {label:34s} "
                      f"words/s={wps[label][-1]:.0f}", file=sys.stderr, flush=True)
    med = {k: statistics.median(v) for k, v in wps.items()}

    def ratio(a: str, b: str) -> float:
        return med[a] / med[b]

    result = {
        "config": args.config, "repeats": args.repeats, "set": args.set,
        "loadavg_at_start": load, "loadavg_at_end": os.getloadavg(),
        "median_words_per_s": med,
        "median_step_ms": {k: statistics.median(v) for k, v in step_ms.items()},
        "all_words_per_s": wps,
        "ratios": {
            **{f"loop/fused {fw} np={n}": ratio(f"{fw} loop np={n}", f"{fw} fused np={n}")
               for fw in ("torch", "tf") for n in (1, 2)},
            **{f"tf/torch {impl} np={n}": ratio(f"tf {impl} np={n}", f"torch {impl} np={n}")
               for impl in ("fused", "loop") for n in (1, 2)},
            "tf horovod/independent np=2": ratio("tf fused np=2", "tf fused np=2 independent"),
            "torch horovod/independent np=2": ratio("torch fused np=2",
                                                    "torch fused np=2 independent"),
            "tf gathered/dense embeddings np=2": ratio("tf fused np=2 embeddings gathered",
                                                       "tf fused np=2"),
            **{f"speedup {fw} {impl}": ratio(f"{fw} {impl} np=2", f"{fw} {impl} np=1")
               for fw in ("torch", "tf") for impl in ("fused", "loop")},
        },
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
