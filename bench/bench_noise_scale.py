"""Gradient noise scale vs statistical efficiency (issue 33) on the Markov LM, torch, horovod.

Per round and per-rank batch size (sentences; ~20 tokens each): an np=1 run to its time cap
(target: its loss at 60% of the cap, study/time_to_target's rule), then an np=2 weak run to that
target; each np=2 run records B_simple (hvdscale.train.noise_scale, tokens) and its global
batch in tokens. Rounds rotate the batch order; load is recorded around every run.

    python bench/bench_noise_scale.py --out bench/results/noise_scale.json   # full
    python bench/bench_noise_scale.py --smoke --out /tmp/noise_smoke.json
    python bench/bench_noise_scale.py --render bench/results/noise_scale.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from emit import quiet_label  # bench/ is on sys.path when a script runs

from hvdscale.study.quality.time_to_target import (
    median_range,
    pick_target,
    round_figures,
    run_to_target,
)

ABOVE, BELOW = 2.0, 0.5
"""Global batch > ABOVE x B_simple: expect the weak gain lost; < BELOW x: expect it kept."""


def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    """Every round: for each batch (rotated), np=1 to the cap, then np=2 weak to its target."""
    work = Path(tempfile.mkdtemp(prefix="bench_noise_"))
    common = [f"measure.eval_every={args.eval_every}"]
    runs = []
    for rnd in range(args.rounds):
        order = args.batches[rnd % len(args.batches):] + args.batches[:rnd % len(args.batches)]
        for b in order:
            sets = [*common, f"data.batch_size={b}", "measure.until.metric=loss"]
            one = run_to_target("lm", "torch", "horovod", 1, [
                *sets, "measure.until.target=0", f"measure.until.max_time_s={args.cap_s}"], work)
            target = pick_target(one["curve"])
            two = run_to_target("lm", "torch", "horovod", 2, [
                *sets, "data.scaling=weak", f"measure.until.target={target}",
                f"measure.until.max_time_s={2 * args.cap_s}"], work)
            runs += [{**one, "round": rnd, "target": target},
                     {**two, "round": rnd, "target": target}]
            print(f"round {rnd} batch {b}: target {target:.3f} B_simple "
                  f"{two['noise_scale'].get('b_simple_tokens')}", flush=True)
    # No stored quiet label: render judges the loads each run recorded (emit.quiet_label).
    return {"runs": runs, "rounds": args.rounds, "cap_s": args.cap_s, "batches": args.batches}


def rows(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Per per-rank batch: global batch (tokens), B_simple and stat. eff. per round."""
    out = []
    for b in raw["batches"]:
        pairs = [(o, t) for o in raw["runs"] for t in raw["runs"]
                 if o["np"] == 1 and t["np"] == 2 and o["batch_size"] == b == t["batch_size"]
                 and o["round"] == t["round"]]
        ns = [t["noise_scale"] for _, t in pairs]
        out.append({"batch": b,
                    "tokens": [n.get("global_batch_tokens") for n in ns],
                    "b_simple": [n.get("b_simple_tokens") for n in ns],
                    "eff": [round_figures(o, t)["eff"] for o, t in pairs],
                    "eff_steps": [None if st["steps_x"] is None else 1.0 / (2.0 * st["steps_x"])
                                  for st in (round_figures(o, t) for o, t in pairs)]})
    return out


def predicted_eff(tokens: list, b_simple: list) -> float | None:
    """McCandlish et al.'s steps model S = S_min (1 + B_noise / B) for doubling the batch from
    B = tokens / 2 (np=1) to tokens (np=2): statistical efficiency (B + Bn) / (2B + Bn)."""
    t = [x for x in tokens if x is not None]
    s = [x for x in b_simple if x is not None and x > 0]
    if not t or not s:
        return None
    one, bn = statistics.median(t) / 2.0, statistics.median(s)
    return (one + bn) / (2.0 * one + bn)


def _verdict(tokens: list, b_simple: list) -> str:
    t = [x for x in tokens if x is not None]
    s = [x for x in b_simple if x is not None and x > 0]
    if not t or not s:
        return "no estimate"
    ratio = statistics.median(t) / statistics.median(s)
    if ratio > ABOVE:
        return f"well above (x{ratio:.1f}): expect lost"
    if ratio < BELOW:
        return f"well below (x{ratio:.2f}): expect kept"
    return f"near (x{ratio:.2f})"


def render(raw: dict[str, Any]) -> str:
    """The markdown table, from the raw file alone."""
    q = quiet_label(raw)  # from the loads recorded around each run, not a stored label
    out = [f"Markov LM, torch, horovod, np=2 weak vs np=1; cap {raw['cap_s']:g} s at np=1; "
           f"{raw['rounds']} round(s); {'quiet' if q['quiet'] else 'NOT quiet'} "
           f"(max 1-min load {q['load_1min_max']:.1f}).", "",
           "| batch/rank (sentences) | global batch (tokens) | B_simple (tokens) | stat. eff. "
           "| stat. eff. in steps | predicted from B_simple | global batch vs B_simple |",
           "|--|--|--|--|--|--|--|"]
    for r in rows(raw):
        pred = predicted_eff(r["tokens"], r["b_simple"])
        out.append(f"| {r['batch']} | {median_range(r['tokens'], '.0f')} | "
                   f"{median_range(r['b_simple'], '.0f')} "
                   f"| {median_range(r['eff'])} | {median_range(r['eff_steps'])} | "
                   f"{'-' if pred is None else format(pred, '.2f')} | "
                   f"{_verdict(r['tokens'], r['b_simple'])} |")
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--render", metavar="RAW.json", help="print the table from a raw file")
    p.add_argument("--out", default="bench/results/noise_scale.json")
    p.add_argument("--batches", default="4,16,64,256", help="per-rank batch sizes (sentences)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cap-s", type=float, default=10.0, help="np=1 training-time cap")
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--smoke", action="store_true", help="tiny: proves the bench works")
    args = p.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())))
        return 0
    args.batches = [int(x) for x in args.batches.split(",")]
    if args.smoke:
        args.batches, args.rounds, args.cap_s, args.eval_every = [4, 64], 1, 2.0, 5
    raw = run_bench(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(raw, indent=1))
    print(render(raw))
    return 0


if __name__ == "__main__":
    sys.exit(main())
