"""Keep the gain (issue 33): which learning-rate rule turns weak scaling's larger global batch
into time to quality.

Per combination of task (``lm``: the Markov LM, ``nmt``: gettext NMT), framework, strategy and
optimizer (``adam``, or ``momentum``: SGD with momentum 0.9 at ``MOMENTUM_LR``), each round
runs: one np=1 run with no target (its loss at 60% of its time cap becomes the target, as in
bench/bench_quality.py), then, in an order rotated every round, np=2 strong scaling (the
control: the global batch stays) and np=2 weak scaling under every rule of
``hvdscale.train.lr`` (``optim.scale_lr``), each with and without a warm-up where that is a
different rule (``none`` has nothing to ramp; ``legw`` is a warm-up rule). The warm-up is
``WARMUP`` updates at one worker, about a tenth of the steps the np=1 run needs.

A diverged run (NaN, or a held-out loss above the initial weights') stops at once and never
counts as reaching the target. Per rule: reached rounds, time and steps to target (median and
range over rounds), statistical efficiency against the round's np=1 run (time-to-target
speedup / throughput speedup), and the verdict of ``hvdscale.study.quality.lr_rules`` (paired by
round). The raw file keeps every run's curve; ``--render`` recomputes everything from it.

    python bench/bench_lr_rules.py --out bench/results/lr_rules.json     # ~50 min, 3 rounds
    python bench/bench_lr_rules.py --smoke --combos lm/torch/horovod/adam --rounds 1
    python bench/bench_lr_rules.py --render bench/results/lr_rules.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from emit import quiet_label  # bench/ is on sys.path when a script runs

from hvdscale.study.quality.lr_rules import Outcome, rule_verdict
from hvdscale.study.quality.time_to_quality import crossing
from hvdscale.study.quality.time_to_target import pick_target, round_figures, run_to_target

ROOT = Path(__file__).resolve().parents[1]
MOMENTUM_LR = {"lm": 1.0, "nmt": 1.0}
"""SGD-with-momentum rate at one worker (the configs' Adam rates are Adam's): the middle of the
rates that trained the np=1 runs without diverging in a short sweep (0.5 and 2.0 both did)."""
WARMUP = {"lm": 50, "nmt": 10}
"""Warm-up updates at one worker: about a tenth of the updates np=1 needs to its target."""
ADAM_RULES = ("none", "linear", "linear+w", "sqrt", "sqrt+w", "legw", "sqrt_adam")
MOMENTUM_RULES = ("none", "linear", "linear+w", "sqrt", "sqrt+w", "legw")
DEFAULT_COMBOS = ("lm/torch/horovod/adam,lm/torch/horovod/momentum,lm/tf/horovod/adam,"
                  "lm/tf/horovod/momentum,lm/torch/ps/adam,nmt/torch/horovod/adam,"
                  "nmt/torch/horovod/momentum,nmt/tf/ps/adam")


def rule_sets(rule: str, task: str) -> list[str]:
    """``--set`` overrides of one rule (``+w``: with the task's warm-up)."""
    name = rule.removesuffix("+w")
    sets = [f"optim.scale_lr={name}"]
    if rule.endswith("+w") or name == "legw":
        sets.append(f"optim.warmup_steps={WARMUP[task]}")
    return sets


def _optim_sets(task: str, optim: str) -> list[str]:
    return ["optim.name=momentum", "optim.momentum=0.9",
            f"optim.lr={MOMENTUM_LR[task]}"] if optim == "momentum" else []


def _round(combo: str, rnd: int, args: argparse.Namespace, work: Path) -> list[dict]:
    """One round of one combination: the np=1 run, then the rotated np=2 runs."""
    task, fw, strategy, optim = combo.split("/")
    sets = [f"measure.eval_every={args.eval_every[task]}", *_optim_sets(task, optim)]
    if task == "nmt":
        sets += [f"data.text.src={work}/gettext/train.en", f"data.text.tgt={work}/gettext/train.de"]
    cap = args.cap_s[task]
    one = run_to_target(task, fw, strategy, 1, [*sets, "measure.until.metric=loss",
                                       "measure.until.target=0",
                                       f"measure.until.max_time_s={cap}"], work)
    target = pick_target(one["curve"])
    runs = [{**one, "combo": combo, "round": rnd, "target": target, "rule": "np1"}]
    rules = ADAM_RULES if optim == "adam" else MOMENTUM_RULES
    todo = [("strong", "none"), *[("weak", r) for r in rules]]
    k = rnd % len(todo)
    for scaling, rule in todo[k:] + todo[:k]:
        two = run_to_target(task, fw, strategy, 2, [
            *sets, *rule_sets(rule, task), f"data.scaling={scaling}",
            "measure.until.metric=loss", f"measure.until.target={target}",
            f"measure.until.max_time_s={2 * cap}"], work)
        label = rule if scaling == "weak" else "strong control"
        runs.append({**two, "combo": combo, "round": rnd, "target": target, "rule": label})
    print(f"{combo} round {rnd}: target {target:.3f}", flush=True)
    return runs


def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    """Every round of every combination, combinations interleaved within a round; the raw
    file is rewritten after each round so an interrupted bench keeps its whole rounds."""
    work = Path(tempfile.mkdtemp(prefix="bench_lr_rules_"))
    if any(c.startswith("nmt/") for c in args.combos):
        subprocess.run([sys.executable, "-m", "hvdscale", "data", "gettext", "--lang", "de",
                        "--out", str(work / "gettext")], check=True, cwd=ROOT,
                       capture_output=True)
    raw: dict[str, Any] = {"runs": [], "combos": args.combos, "cap_s": args.cap_s,
                           "eval_every": args.eval_every, "warmup": WARMUP,
                           "momentum_lr": MOMENTUM_LR, "rounds": 0, "cpu_count": os.cpu_count(),
                           "target_rule": "1-rank loss at 60% of its capped training time"}
    for rnd in range(args.rounds):
        for combo in args.combos:
            raw["runs"] += _round(combo, rnd, args, work)
        raw["rounds"] = rnd + 1
        tmp = Path(args.out).with_suffix(".tmp")
        tmp.write_text(json.dumps(raw, indent=1))
        os.replace(tmp, args.out)
    return raw


def outcome(run: dict) -> Outcome:
    """A run against its round's target: the interpolated crossing, unless it diverged or its
    own verdict says the target was not reached."""
    hit = crossing(run["curve"], run["target"]) if run.get("reached") else None
    if run.get("diverged") or hit is None:
        return Outcome(None, None, bool(run.get("diverged")))
    return Outcome(hit["train_s"], hit.get("updates", hit["step"]))


def _fmt(values: list[float], spec: str) -> str:
    if not values:
        return "-"
    med = format(statistics.median(values), spec)
    return med if len(values) == 1 else f"{med} ({format(min(values), spec)}-" \
                                        f"{format(max(values), spec)})"


def _combo_rows(runs: list[dict], rounds: int) -> tuple[list[str], dict[str, Any]]:
    """One combination's table rows and its verdict over the weak-scaling rules."""
    base = {r["round"]: r for r in runs if r["rule"] == "np1"}
    labels = [r["rule"] for r in runs if r["rule"] != "np1"]
    labels = list(dict.fromkeys(labels))
    per_rule: dict[str, list[Outcome | None]] = {}
    rows = []
    for label in labels:
        mine = {r["round"]: r for r in runs if r["rule"] == label}
        outs = [outcome(mine[i]) if i in mine else None for i in range(rounds)]
        if label != "strong control":
            per_rule[label] = outs
        ok = [o for o in outs if o is not None and o.reached]
        effs = [s["eff"] for i, r in mine.items() if i in base and outcome(r).reached
                for s in [round_figures(base[i], r)] if s["eff"] is not None]
        lr = mine[min(mine)]["optim"]
        rows.append(f"| {label} | {lr['lr_used']:g} | {lr['warmup_steps']} | "
                    f"{len(ok)} of {sum(o is not None for o in outs)} | "
                    f"{sum(o.diverged for o in outs if o is not None)} | "
                    f"{_fmt([o.time_s for o in ok], '.1f')} | "
                    f"{_fmt([o.steps for o in ok], '.0f')} | {_fmt(effs, '.2f')} |")
    return rows, rule_verdict(per_rule)


def _fewest_steps(stats: dict[str, Any]) -> str:
    """The rule(s) with the fewest median updates to the target (ties named together): the
    machine's speed plays no part in steps, so they show a rule's effect where times are
    within the noise."""
    steps = {k: s["steps_median"] for k, s in stats.items() if s["steps_median"] is not None}
    if not steps:
        return "-"
    best = min(steps.values())
    return ", ".join(k for k, v in steps.items() if v == best) + f" ({best:.0f})"


def render(raw: dict[str, Any]) -> str:
    """The BENCHMARKS.md tables, from the raw file alone (quiet recomputed from its loads)."""
    q = quiet_label(raw)
    caps = ", ".join(f"{k} {v:g} s" for k, v in sorted(raw["cap_s"].items()))
    out = [f"Target: {raw['target_rule']}; np=1 cap {caps}, twice that at np=2; "
           f"{raw['rounds']} paired round(s), order rotated; warm-up (+w, legw) "
           f"{', '.join(f'{k} {v}' for k, v in sorted(raw['warmup'].items()))} updates at one "
           f"worker; {'quiet' if q['quiet'] else 'NOT quiet'} (max 1-min load "
           f"{q['load_1min_max']:.1f} on {raw['cpu_count']} cores).", ""]
    summary = ["| task / framework / strategy / optimizer | first to the target (time) | verdict "
               "| fewest steps to the target (median) |", "|--|--|--|--|"]
    for combo in raw["combos"]:
        runs = [r for r in raw["runs"] if r["combo"] == combo]
        if not runs:
            continue
        rows, v = _combo_rows(runs, raw["rounds"])
        targets = [r["target"] for r in runs if r["rule"] == "np1"]
        out += [f"**{combo}** (np=2; target loss {_fmt(targets, '.3f')})",
                "", "| rule | lr at np=2 | warm-up updates | reached | diverged | "
                "time to target (s) | steps to target | stat. eff. |",
                "|--|--|--|--|--|--|--|--|", *rows, ""]
        summary.append(f"| {combo} | {v['winner'] or '-'} | {v['verdict']} | "
                       f"{_fewest_steps(v['stats'])} |")
    return "\n".join(out + summary)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--render", metavar="RAW.json", help="print the tables from a raw file")
    p.add_argument("--out", default="bench/results/lr_rules.json")
    p.add_argument("--combos", default=DEFAULT_COMBOS,
                   help="task/framework/strategy/optimizer,... (task lm|nmt, optimizer "
                        "adam|momentum)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--lm-cap-s", type=float, default=6.0, help="np=1 training-time cap, lm")
    p.add_argument("--nmt-cap-s", type=float, default=8.0, help="np=1 training-time cap, nmt")
    p.add_argument("--smoke", action="store_true", help="tiny caps: proves the bench works")
    args = p.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())))
        return 0
    args.combos = args.combos.split(",")
    args.cap_s = {"lm": args.lm_cap_s, "nmt": args.nmt_cap_s}
    args.eval_every = {"lm": 25, "nmt": 10}
    if args.smoke:
        args.cap_s = {"lm": 2.0, "nmt": 2.0}
    raw = run_bench(args)
    print(render(raw))
    return 0


if __name__ == "__main__":
    sys.exit(main())
