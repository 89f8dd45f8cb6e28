"""Time to quality (issue 23): does scaling out train a model to a target sooner?

Tasks: ``lm`` (configs/quality_lm_<fw>.yaml, the Markov source) and ``nmt``
(configs/quality_nmt_gettext_<fw>.yaml on this machine's gettext catalogs, extracted first).
For each task, framework and strategy: one np=1 run (strong and weak coincide at one rank),
then np=2 strong (the same total batch) and np=2 weak (the same batch per rank), interleaved.

The target is chosen from the 1-rank curve: the 1-rank run trains to its time cap with no
target, and the target is the held-out loss it had reached at 60% of its training time (so
one rank reaches it in about 0.6 x the cap). Every np=2 run trains until that target (cap: 2 x
the 1-rank cap). Time to target is computed from each run's curve by
hvdscale.study.quality.time_to_quality's
``crossing`` (the report's too): linear interpolation of training time, steps and words between
the last evaluation above the target and the first at or below it, for every run, np=1
included; the measured stop (that first evaluation, up to one interval late) is shown beside
it. Statistical efficiency = time-to-target speedup /
throughput speedup; a weak point keeps its throughput gain when it is >= 0.9, else the table
says by how much the steps to target grew.

    python bench/bench_quality.py --out bench/results/quality.json          # full, ~11 min
    python bench/bench_quality.py --smoke --tasks lm --frameworks torch --strategies horovod
    python bench/bench_quality.py --render bench/results/quality.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hvdscale.config.model import SCALE_LR_RULES
from hvdscale.study.quality.time_to_target import (
    TARGET_AT,
    median_range,
    pick_target,
    round_figures,
    run_to_target,
)

SURVIVES = 0.9
QUIET_LOAD = 2.5


def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    """Every (task, framework, strategy): the np=1 run, its target, then np=2 strong and weak."""
    work = Path(tempfile.mkdtemp(prefix="bench_quality_"))
    common = [f"measure.eval_every={args.eval_every}"]
    if "nmt" in args.tasks:
        subprocess.run([sys.executable, "-m", "hvdscale", "data", "gettext", "--lang", "de",
                        "--out", str(work / "gettext")], check=True)
    runs, targets = [], {}
    for rnd in range(args.rounds):
        for task in args.tasks:
            sets = common + ([f"data.text.src={work}/gettext/train.en",
                              f"data.text.tgt={work}/gettext/train.de"] if task == "nmt" else [])
            cap = args.cap_s[task]
            for fw in args.frameworks:
                for strategy in args.strategies:
                    one = run_to_target(task, fw, strategy, 1, [
                        *sets, "measure.until.metric=loss", "measure.until.target=0",
                        f"measure.until.max_time_s={cap}"], work)
                    target = pick_target(one["curve"])
                    targets[f"{task}/{fw}/{strategy}/{rnd}"] = target
                    runs.append({**one, "round": rnd, "target": target})
                    for scaling in ("strong", "weak"):  # interleaved: strong, weak
                        two = run_to_target(task, fw, strategy, 2, [
                            *sets, f"data.scaling={scaling}", "measure.until.metric=loss",
                            f"measure.until.target={target}",
                            f"measure.until.max_time_s={2 * cap}",
                            f"optim.scale_lr={args.scale_lr}"], work)
                        runs.append({**two, "round": rnd, "target": target})
                    print(f"{task}/{fw}/{strategy} round {rnd}: target {target:.3f}",
                          flush=True)
    loads = [x for r in runs for x in (r["load_before"], r["load_after"])]
    return {"runs": runs, "targets": targets, "target_rule": f"1-rank loss at {TARGET_AT:.0%} "
            "of its capped training time", "cap_s": args.cap_s, "rounds": args.rounds,
            "scale_lr": args.scale_lr, "quiet": all(x <= QUIET_LOAD for x in loads),
            "max_load": max(loads)}


def _row(runs: list[dict], np_: int, scaling: str | None) -> list[dict]:
    return [r for r in runs if r["np"] == np_ and (scaling is None or r["scaling"] == scaling)]


def render(raw: dict[str, Any]) -> str:
    """The BENCHMARKS.md tables, from the raw file alone."""
    caps = ", ".join(f"{k} {v:g} s" for k, v in sorted(raw["cap_s"].items()))
    out = [f"Target: {raw['target_rule']}; cap at np=1: {caps}, twice that at np=2; "
           f"{raw['rounds']} round(s), optim.scale_lr={raw['scale_lr']}; "
           f"{'quiet' if raw['quiet'] else 'NOT quiet'} (max 1-min load {raw['max_load']:.1f}).",
           "", "| task | framework | strategy | target loss | np=1 time to target (s) | "
           "scaling | np=2 batch/rank | np=2 time to target (s) | np=2 stopped at (s) | speedup "
           "| throughput speedup | stat. eff. | gain survived? |",
           "|--|--|--|--|--|--|--|--|--|--|--|--|--|"]
    keys = sorted({(r["task"], r["framework"], r["strategy"]) for r in raw["runs"]})
    for task, fw, strategy in keys:
        runs = [r for r in raw["runs"] if (r["task"], r["framework"], r["strategy"])
                == (task, fw, strategy)]
        for scaling in ("strong", "weak"):
            pairs = [(o, t) for o in _row(runs, 1, None) for t in _row(runs, 2, scaling)
                     if o["round"] == t["round"]]
            if not pairs:
                continue
            st = [round_figures(o, t) for o, t in pairs]
            per_rank = pairs[0][1]["batch_size"] / (2 if scaling == "strong" else 1)
            effs = [s["eff"] for s in st if s["eff"] is not None]
            verdict = "-"
            if scaling == "weak":
                if not effs:
                    verdict = "no: target not reached"
                elif statistics.median(effs) >= SURVIVES:
                    verdict = "yes"
                else:
                    verdict = f"no: steps to target x{median_range([s['steps_x'] for s in st])}"
            cells = [task, fw, strategy, median_range([o["target"] for o, _ in pairs], ".3f"),
                     median_range([s["ttt1"] for s in st], ".1f"), scaling, f"{per_rank:g}",
                     median_range([s["ttt2"] for s in st], ".1f"),
                     median_range([s["stop2"] for s in st], ".1f"),
                     median_range([s["speedup"] for s in st]),
                     median_range([s["thr"] for s in st]), median_range([s["eff"] for s in st]),
                     verdict]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--render", metavar="RAW.json", help="print the tables from a raw file")
    p.add_argument("--out", default="bench/results/quality.json")
    p.add_argument("--tasks", default="lm,nmt")
    p.add_argument("--frameworks", default="torch,tf")
    p.add_argument("--strategies", default="horovod,ps")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--scale-lr", default="none", choices=SCALE_LR_RULES)
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--lm-cap-s", type=float, default=10.0, help="np=1 training-time cap, lm")
    p.add_argument("--nmt-cap-s", type=float, default=12.0, help="np=1 training-time cap, nmt")
    p.add_argument("--smoke", action="store_true", help="tiny caps: proves the bench works")
    args = p.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())))
        return 0
    args.tasks = args.tasks.split(",")
    args.frameworks = args.frameworks.split(",")
    args.strategies = args.strategies.split(",")
    args.cap_s = {"lm": args.lm_cap_s, "nmt": args.nmt_cap_s}
    if args.smoke:
        args.cap_s, args.eval_every = {"lm": 3.0, "nmt": 3.0}, 10
    raw = run_bench(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(raw, indent=1))
    print(render(raw))
    return 0


if __name__ == "__main__":
    sys.exit(main())
