"""The demo's sweep with ``--decide`` against today's ``--repeats 2``, paired (issue 62):
bench/results/demo_decide.json.

Each pair runs README's demo sweep (configs/demo.yaml, np 1 and 2, torch and tf, horovod, ps and
independent: 12 points) twice into fresh folders, order alternated: once as ``make demo`` ran it
(``--repeats 2``), once with ``--decide --budget B``. Kept per run: its wall time, the sweep's
last line, the 1-minute loads, and every record's series, ranks, round and words/s, so
``--render`` recomputes what was decided from the rounds alone: the report's A-vs-B table (the
fastest series at a rank count against each other one: 10 comparisons) and every pair of series
at a rank count (the answer's, what ``--decide`` measures until decided: 30).

    python bench/bench_demo_decide.py --pairs 3 --budget 150     # ~13 min on 2 cores
    python bench/bench_demo_decide.py --render bench/results/demo_decide.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "demo_decide.json"
DEMO = ["configs/demo.yaml", "--np", "1,2", "--frameworks", "torch,tf",
        "--strategies", "horovod,ps,independent", "--no-plot"]


def run_once(mode: str, budget: float, out: Path) -> dict[str, Any]:
    """One demo sweep (``repeats2`` or ``decide``): wall time, last line, loads, rounds."""
    from hvdscale.records.experiment import series_label
    from hvdscale.records.run import RunRecord
    from hvdscale.records.store import read_records
    from hvdscale.study.paired.rounds import round_of

    extra = ["--repeats", "2"] if mode == "repeats2" else ["--decide", "--budget", str(budget)]
    from hvdscale.study.sweep.launcher import launch_env

    env = launch_env({**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "hvdscale", "sweep", *DEMO, *extra, "--out",
                        str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=3600)
    wall = time.monotonic() - t0
    said = [x for x in r.stdout.splitlines() if x.startswith("hvdscale sweep --decide: ")]
    recs = [x for x in read_records(out) if isinstance(x, RunRecord)]
    return {"mode": mode, "wall_s": round(wall, 2), "returncode": r.returncode,
            "last_line": said[-1] if said else "", "load_before": load,
            "load_after": os.getloadavg()[0],
            "runs": [{"series": series_label(x.config), "ranks": x.ranks, "round": round_of(x),
                      "words_per_s": x.words_per_s} for x in recs]}


def _rounds(run: dict[str, Any]) -> dict[tuple[str, int], list[float | None]]:
    """Per (series, ranks), words/s per round (None: not measured in that round)."""
    rounds: dict[tuple[str, int], dict[int, float]] = {}
    for x in run["runs"]:
        rounds.setdefault((x["series"], x["ranks"]), {})[x["round"]] = x["words_per_s"]
    n_rounds = 1 + max(x["round"] for x in run["runs"])
    return {k: [v.get(r) for r in range(n_rounds)] for k, v in rounds.items()}


def outcomes(run: dict[str, Any]) -> dict[tuple, str]:
    """Every pair of series at a rank count (A before B by name): the procedure's outcome."""
    from hvdscale.study.paired.recommend import paired_summary, verdict_of

    seq = _rounds(run)
    out = {}
    for a in sorted(seq):
        for b in sorted(seq):
            if a < b and a[1] == b[1]:
                s = paired_summary(seq[a], seq[b])
                out[(a, b)] = verdict_of(s).outcome if s is not None else "undecided"
    return out


def decided(run: dict[str, Any]) -> tuple[int, int, int, int]:
    """(table decided, table total, all pairs decided, all pairs total) from a run's rounds."""
    from hvdscale.study.paired.recommend import paired_summary, verdict_of

    seq = _rounds(run)

    def ok(a: tuple[str, int], b: tuple[str, int]) -> bool:
        s = paired_summary(seq[a], seq[b])
        return s is not None and verdict_of(s).decided

    t_dec = t_all = p_dec = p_all = 0
    for n in sorted({k[1] for k in seq}):
        at = sorted(k for k in seq if k[1] == n)
        best = max(at, key=lambda k: statistics.median(w for w in seq[k] if w is not None))
        for k in at:
            if k != best:
                t_all += 1
                t_dec += ok(best, k)
        for i, a in enumerate(at):
            for b in at[i + 1:]:
                p_all += 1
                p_dec += ok(a, b)
    return t_dec, t_all, p_dec, p_all


def render(doc: dict[str, Any]) -> str:
    """The BENCHMARKS.md table, recomputed from the runs' rounds."""
    lines = ["| pair | mode | wall s | A-vs-B rows decided | all pairs decided | rounds |",
             "|--:|:--|--:|--:|--:|--:|"]
    walls: dict[str, list[float]] = {"repeats2": [], "decide": []}
    for i, pair in enumerate(doc["pairs"], 1):
        for run in pair:
            td, ta, pd, pa = decided(run)
            walls[run["mode"]].append(run["wall_s"])
            n = 1 + max(x["round"] for x in run["runs"])
            lines.append(f"| {i} | {run['mode']} | {run['wall_s']:.0f} | {td} of {ta} | "
                         f"{pd} of {pa} | {n} |")
    ratio = [d / r for d, r in zip(walls["decide"], walls["repeats2"], strict=True)]
    # A comparison decided in several --decide runs: the same direction each time?
    said: dict[tuple, set[str]] = {}
    for pair in doc["pairs"]:
        for key, o in outcomes(pair[1]).items():
            if o in ("faster", "slower"):
                said.setdefault(key, set()).add(o)
    flips = sum(len(v) > 1 for v in said.values())
    loads = [x for p in doc["pairs"] for r in p for x in (r["load_before"], r["load_after"])]
    lines += ["", f"Wall time, --decide --budget {doc['budget_s']:g} s / --repeats 2, paired: "
              f"median {statistics.median(ratio):.2f} [{min(ratio):.2f}-{max(ratio):.2f}] over "
              f"{len(ratio)} pairs; 1-minute load {min(loads):.1f}-{max(loads):.1f}. "
              f"Comparisons decided faster or slower in any --decide run: {len(said)}; "
              f"decided in opposite directions in two runs: {flips}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the pairs and write bench/results/demo_decide.json, or ``--render`` it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--budget", type=float, default=150.0, help="--decide's budget, seconds")
    ap.add_argument("--render", metavar="JSON")
    args = ap.parse_args(argv)
    if args.render:
        print(render(json.loads(Path(args.render).read_text())))
        return 0
    pairs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            order = ["repeats2", "decide"] if i % 2 == 0 else ["decide", "repeats2"]
            runs = {m: run_once(m, args.budget, Path(tmp) / f"{i}-{m}") for m in order}
            pairs.append([runs["repeats2"], runs["decide"]])
            print(f"pair {i + 1}: " + ", ".join(f"{m} {r['wall_s']:.0f} s" for m, r in
                                                   runs.items()), flush=True)
    doc = {"budget_s": args.budget, "config": "configs/demo.yaml", "pairs": pairs}
    OUT.write_text(json.dumps(doc) + "\n")
    print(f"wrote {OUT}")
    print(render(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
