"""Horovod or TensorFlow's own MultiWorkerMirroredStrategy for the TF model on this machine:
words/s, efficiency against independent replicas, and the paired ratio mwms / horovod at np=N.

Every round runs each variant once with ``mpirun -np N hvdscale run CONFIG --set framework=tf``
(the order rotated per round: interleaved, paired rounds), recording the 1-minute load before
and after every run. Reported from the raw result alone (``--render``): median words/s and step
time per variant, the per-round efficiency against the same round's independent replicas, and
the per-round ratios mwms / horovod with their spread (min-max).

    python bench/bench_mwms.py --np 2 --rounds 5 --json bench/results/mwms.json
    python bench/bench_mwms.py --render bench/results/mwms.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from emit import emit, paired, words_per_s  # bench/ is on sys.path when a script runs

from hvdscale.study.sweep.one_run import RunLaunch, launch_run

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"independent": ("strategy.name=independent",),
            "horovod": ("strategy.name=horovod",),
            "mwms": ("strategy.name=mwms",)}
"""Variant -> its ``--set`` overrides (on top of ``framework=tf``)."""
PAIRS = (("mwms", "horovod"), ("horovod", "independent"), ("mwms", "independent"))


def run_once(config: str, np_: int, sets: tuple[str, ...], out: str) -> dict:
    """One ``mpirun -np N hvdscale run`` of the TF model; its figures and the load around it."""
    before = os.getloadavg()
    t0 = time.monotonic()
    rec = launch_run(np_, config, out, ["framework=tf", *sets],
                     RunLaunch(quiet=True, env={"TF_CPP_MIN_LOG_LEVEL": "2"}, cwd=ROOT))
    wall = time.monotonic() - t0
    return {"words_per_s": rec.words_per_s, "step_ms": rec.step_median_s * 1e3,
            "wall_s": wall, "strategy": rec.strategy.get("name"),
            "load_before": list(before), "load_after": list(os.getloadavg())}


def measure(args: argparse.Namespace) -> dict:
    """``args.rounds`` rounds of every variant, the order rotated each round."""
    names = list(VARIANTS)
    runs: dict[str, list[dict]] = {v: [] for v in names}
    with tempfile.TemporaryDirectory() as out:
        for r in range(args.rounds):
            for v in names[r % len(names):] + names[: r % len(names)]:
                runs[v].append(run_once(args.config, args.np, (*VARIANTS[v], *args.set), out))
                print(f"round {r + 1}/{args.rounds} {v:12s} "
                      f"{runs[v][-1]['words_per_s']:.0f} words/s", file=sys.stderr, flush=True)
    return {"bench": "mwms", "config": args.config, "np": args.np, "rounds": args.rounds,
            "set": args.set, "variants": {v: list(s) for v, s in VARIANTS.items()},
            "runs": runs}






def render(res: dict) -> str:
    """The BENCHMARKS.md table and ratios, computed from the raw result alone."""
    runs = res["runs"]
    ind = words_per_s(runs["independent"])
    lines = [f"{res['config']}, framework=tf, np={res['np']}, {res['rounds']} interleaved "
             f"rounds; max 1-minute load {res.get('load_1min_max', float('nan')):.1f}, "
             f"quiet={res.get('quiet')}.", "",
             "|Strategy|Words/s (median)|Step (ms, median)|Efficiency vs independent (%)|",
             "|:--|--:|--:|--:|"]
    for v, rs in runs.items():
        eff = paired(words_per_s(rs), ind)
        lines.append(f"|{v}|{statistics.median(words_per_s(rs)):.0f}|"
                     f"{statistics.median(r['step_ms'] for r in rs):.1f}|"
                     f"{100 * eff['median']:.1f}|")
    lines.append("")
    for a, b in PAIRS:
        p = paired(words_per_s(runs[a]), words_per_s(runs[b]))
        lines.append(f"- {a} / {b}: x{p['median']:.3f} (rounds {p['min']:.3f}-{p['max']:.3f}, "
                     f"n={p['n']})")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--set", action="append", default=[], help="applied to every run")
    ap.add_argument("--json", default="")
    ap.add_argument("--render", default="", metavar="RAW.json")
    args = ap.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())), end="")
        return 0
    t0 = time.monotonic()
    res = measure(args)
    res["wall_s"] = time.monotonic() - t0
    print(render(emit(res, args.json)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
