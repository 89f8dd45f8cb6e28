"""A/A evidence for the one decision procedure (issue 62): bench/results/aa_verdicts.json.

``simulated``: ``hvdscale.study.verdict.aa.simulated``, seeded, on noise drawn from the rounds
recorded under bench/results (comparisons looking after every round 3..10, recommendations
among 6 no-op candidates through ``recommend``, the old sign rule on the same draws, and the
power for a real 5 % difference).

``real``: ``--real N`` sweeps, each ``hvdscale sweep`` of one point (configs/demo.yaml, np=1,
the independent strategy, a few steps) over 2 x ``--pairs`` interleaved rounds. Rounds 0, 2,
4... are series A and 1, 3, 5... series B: two series of the same point that differ only in
their name, measured adjacent in time as a sweep's paired rounds are. ``decide`` looks at every
pair count from 3; a false verdict is a direction at any look. Each sweep's per-round words/s
and 1-minute loads are kept, so ``--render`` (and check_benchmarks) recompute the verdicts.

    python bench/bench_aa_verdicts.py --real 10 --pairs 3     # ~25 min on 2 loaded cores
    python bench/bench_aa_verdicts.py --render bench/results/aa_verdicts.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "aa_verdicts.json"


def real_verdicts(sweeps: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``real`` section's figures from its sweeps' per-round words/s."""
    from hvdscale.study.verdict import FASTER, MIN_ROUNDS, SLOWER, decide

    false, outcomes = 0, []
    for s in sweeps:
        w = s["words_per_s"]
        ratios = [a / b for a, b in zip(w[0::2], w[1::2], strict=False) if a and b]
        looks = [decide(ratios[:n]).outcome for n in range(MIN_ROUNDS, len(ratios) + 1)]
        false += any(o in (FASTER, SLOWER) for o in looks)
        outcomes.append(looks[-1] if looks else "too few rounds")
    return {"n": len(sweeps), "false_verdicts": false, "final_outcomes": outcomes}


def run_sweep(i: int, pairs: int, steps: int, tmp: Path) -> dict[str, Any]:
    """One real A/A sweep: its per-round words/s and loads, read from its records."""
    from hvdscale.records.store import read_records
    from hvdscale.study.paired.rounds import by_round

    out = tmp / f"sweep{i}"
    cmd = [sys.executable, "-m", "hvdscale", "sweep", str(ROOT / "configs" / "demo.yaml"),
           "--np", "1", "--strategies", "independent", "--repeats", str(2 * pairs),
           "--set", f"measure.steps={steps}", "--set", "measure.warmup_steps=3",
           "--no-plot", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=1800,
                   env=dict(os.environ))
    recs = by_round(read_records(out), 2 * pairs)
    return {"words_per_s": [r.words_per_s if r else None for r in recs],
            "load_1min": [(r.loadavg or [None])[0] if r else None for r in recs]}


def _pct(k: int, n: int) -> str:
    return f"{k} of {n} ({100 * k / n:.1f}%)"


def render(doc: dict[str, Any]) -> str:
    """The BENCHMARKS.md table, every figure recomputed: the simulation run again from its seed
    on the recorded noise, the real sweeps' verdicts from their per-round words/s."""
    from hvdscale.study.verdict import MIN_ROUNDS as MIN
    from hvdscale.study.verdict.aa import simulated

    sim = simulated(ROOT / "bench" / "results", seed=doc["simulated"]["seed"])
    real = real_verdicts(doc["real"]["sweeps"])
    c, r, old = sim["comparison"], sim["recommendation"], sim["sign_rule"]
    loads = [x for sw in doc["real"]["sweeps"] for x in sw["load_1min"] if x is not None]
    finals = ", ".join(f"{k} {v}" for k, v in sorted(Counter(real["final_outcomes"]).items()))
    lines = ["| A/A (identical series) | false verdicts |", "|:--|--:|",
             f"| simulated comparisons, a look after every round {MIN} to {c['max_rounds']}, "
             f"stopped at the first decision | {_pct(c['false_verdicts'], c['n'])} |",
             f"| the same, a false verdict at any look | {_pct(c['false_any_look'], c['n'])} |",
             f"| simulated recommendations among {r['candidates']} no-op candidates, looks "
             f"{MIN} to {r['max_rounds']} | {_pct(r['false_verdicts'], r['n'])} |",
             f"| the old rule (every round on one side of 1.0), same draws as the comparisons "
             f"| {_pct(old['false_verdicts'], old['n'])} |",
             f"| real sweeps, {doc['real']['pairs']} paired rounds each "
             f"({doc['real']['config']}) | {_pct(real['false_verdicts'], real['n'])} |", "",
             f"Noise: {sim['noise_deviations']} recorded round deviations, sd "
             f"{100 * sim['noise_sd']:.1f}% of a series' words/s (seed {sim['seed']}). Real "
             f"sweeps: {doc['real']['steps']} measured steps a run, 1-minute load "
             f"{min(loads):.1f}-{max(loads):.1f}; their final verdicts: {finals}.", "",
             "| a real 5% difference, at most | decided the right way | decided the wrong way |",
             "|:--|--:|--:|"]
    for m, p in sim["power_5pct"].items():
        lines.append(f"| {m} rounds | {_pct(p['right_direction'], p['n'])} | "
                     f"{_pct(p['false_verdicts'], p['n'])} |")
    if sim != doc["simulated"]:
        lines.append("The stored simulated figures differ from this recomputation.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Write (or ``--render``: recompute and print) bench/results/aa_verdicts.json."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", type=int, default=0, help="real A/A sweeps to run")
    ap.add_argument("--pairs", type=int, default=3, help="paired rounds per real sweep")
    ap.add_argument("--steps", type=int, default=10, help="measured steps per run")
    ap.add_argument("--render", metavar="JSON", help="print the table, recomputed from JSON")
    args = ap.parse_args(argv)
    from hvdscale.study.verdict.aa import simulated

    old = json.loads(OUT.read_text()) if OUT.exists() else {}
    if args.render:
        print(render(json.loads(Path(args.render).read_text())))
        return 0
    doc: dict[str, Any] = {"simulated": simulated(ROOT / "bench" / "results")}
    if args.real:
        sweeps = []
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.real):
                sweeps.append(run_sweep(i, args.pairs, args.steps, Path(tmp)))
                print(f"sweep {i + 1}/{args.real}: {sweeps[-1]}", flush=True)
        doc["real"] = {**real_verdicts(sweeps), "pairs": args.pairs, "steps": args.steps,
                       "config": "configs/demo.yaml np=1 independent", "sweeps": sweeps}
    elif "real" in old:
        doc["real"] = old["real"]
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
