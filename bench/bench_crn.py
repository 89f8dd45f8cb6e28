"""What common random numbers buy (issue 62): two strategies' blocks paired by the batches they
trained on, against the same blocks unpaired; and the time to a +-2 % ratio that way, against
two points each measured alone to +-2 %. Raw: bench/results/crn_blocks.json.

One ``hvdscale sweep`` (the one driver: one launch per round and rank count) of configs/demo.yaml
at np=2, PyTorch, two strategies, ``--repeats`` interleaved rounds of ``--steps`` measured steps.
Each record keeps every rank's per-step times and words (``raw``); the file keeps those lists, so
``--render`` (and check_benchmarks) recompute every figure:

- per round, blocks of ``--block`` steps, A / B's words/s: the 95 % interval's half-width from
  the blocks paired (Student's t over the log ratios of blocks that held the same sentences:
  ``hvdscale.study.verdict.crn``) and unpaired (Welch's t over the two runs' log block rates),
  for the same measured time;
- per round, the measured time until the ratio's interval, valid at every look, is within
  +-2 % (A's and B's blocks both counted), against the time until A alone and B alone each
  reach +-2 % (the precision target's rule: ``hvdscale.train.blocks.ratio_interval``, anytime).

    python bench/bench_crn.py --rounds 3 --steps 150           # ~3 min on 2 cores
    python bench/bench_crn.py --render bench/results/crn_blocks.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "crn_blocks.json"
TARGET = 0.02
"""The precision both ways are measured to: +-2 %."""


def measure(rounds: int, steps: int, strategies: str, tmp: Path) -> list[dict[str, Any]]:
    """The sweep's records, reduced to what the figures need (round, strategy, load, raw)."""
    from hvdscale.records.run import RunRecord
    from hvdscale.records.store import read_records
    from hvdscale.study.paired.rounds import round_of

    out = tmp / "sweep"
    cmd = [sys.executable, "-m", "hvdscale", "sweep", str(ROOT / "configs" / "demo.yaml"),
           "--np", "2", "--frameworks", "torch", "--strategies", strategies,
           "--repeats", str(rounds), "--set", f"measure.steps={steps}",
           "--set", "measure.warmup_steps=5", "--no-plot", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=3600,
                   env=dict(os.environ))
    return [{"round": round_of(r), "strategy": r.strategy_name, "ranks": r.ranks,
             "load_1min": (r.loadavg or [None])[0], "raw": json.loads(
                 json.dumps(r.to_dict()["raw"]))} for r in read_records(out)
            if isinstance(r, RunRecord)]


def _record(row: dict[str, Any]) -> Any:
    """A RunRecord-like holder of a row's raw lists (what ``crn`` reads)."""
    import msgspec

    from hvdscale.records.sections import Raw

    class Held:
        raw = msgspec.convert(row["raw"], Raw)

    return Held()


def _time_to(n_max: int, half_at: Any) -> int | None:
    """The first block count from 3 at which ``half_at(n)`` <= the target (None: never)."""
    return next((n for n in range(3, n_max + 1) if half_at(n) <= TARGET), None)


def round_figures(a: dict[str, Any], b: dict[str, Any], block: int) -> dict[str, Any]:
    """One round's figures: paired and unpaired half-widths, and the times to +-2 %."""
    import numpy as np

    from hvdscale.study.verdict.crn import block_rates, block_ratio
    from hvdscale.study.verdict.decide import critical
    from hvdscale.train.blocks import ratio_interval

    ra, rb = _record(a), _record(b)
    br = block_ratio(ra, rb, block)  # raises if the batches differ
    (wa, ta), (wb, tb) = block_rates(ra, block), block_rates(rb, block)
    d = np.log(wa / ta) - np.log(wb / tb)

    def paired_half(n: int) -> float:  # relative half-width of the ratio, valid at every look
        return math.expm1(critical(n)[0] * float(d[:n].std(ddof=1)) / math.sqrt(n))

    def alone_half(w: Any, t: Any, n: int) -> float:
        rate, half = ratio_interval(list(w[:n]), list(t[:n]), anytime=True)
        return half / rate

    n_pair = _time_to(br.blocks, paired_half)
    n_a = _time_to(wa.size, lambda n: alone_half(wa, ta, n))
    n_b = _time_to(wb.size, lambda n: alone_half(wb, tb, n))
    pair_s = float(ta[:n_pair].sum() + tb[:n_pair].sum()) if n_pair else None
    alone_s = float(ta[:n_a].sum() + tb[:n_b].sum()) if n_a and n_b else None
    return {"blocks": br.blocks, "ratio": br.ratio, "paired_pct": 100 * math.expm1(br.paired_half),
            "unpaired_pct": 100 * math.expm1(br.unpaired_half), "gain": br.width_gain,
            "pair_s": pair_s, "alone_s": alone_s}


def _secs(s: float | None) -> str:
    return f"{s:.2f}" if s is not None else "not reached"


def _rng(xs: list[float], f: str) -> str:
    return f"{statistics.median(xs):{f}} [{min(xs):{f}}-{max(xs):{f}}]"


def _per_step(rows: list[dict[str, Any]], rounds: list[int], a_name: str, b_name: str) -> str:
    """Why pairing buys what it buys: per step, how the words and the step times vary, and how
    the step times follow the words and each other (the slowest rank's time per step)."""
    import numpy as np

    cv_w, cv_t, c_w, c_ab = [], [], [], []
    for r in rounds:
        a, b = (next(x["raw"] for x in rows if x["round"] == r and x["strategy"] == s)
                for s in (a_name, b_name))
        w = np.asarray(a["words"], dtype=float).sum(axis=0)
        ta, tb = (np.asarray(x["step_s"], dtype=float).max(axis=0) for x in (a, b))
        cv_w.append(w.std() / w.mean())
        cv_t += [ta.std() / ta.mean(), tb.std() / tb.mean()]
        c_w += [np.corrcoef(ta, w)[0, 1], np.corrcoef(tb, w)[0, 1]]
        c_ab.append(np.corrcoef(ta, tb)[0, 1])
    return (f"Per step, over the rounds: words vary by {100 * min(cv_w):.1f}-"
            f"{100 * max(cv_w):.1f}% (sd / mean), step times by {100 * min(cv_t):.1f}-"
            f"{100 * max(cv_t):.1f}%; a step time's correlation with its words "
            f"{min(c_w):.2f}-{max(c_w):.2f}, between the two runs' step times "
            f"{min(c_ab):.2f}-{max(c_ab):.2f}.")


def render(doc: dict[str, Any]) -> str:
    """The BENCHMARKS.md table, every figure recomputed from the raw lists."""
    a_name, b_name = doc["strategies"]
    rows = doc["records"]
    rounds = sorted({r["round"] for r in rows})
    lines = [f"| round | blocks of {doc['block']} steps | {a_name} / {b_name} | 95% +- paired "
             "| 95% +- unpaired | unpaired / paired | s to +-2% paired | s to +-2% alone |",
             "|--:|--:|--:|--:|--:|--:|--:|--:|"]
    figs = []
    for r in rounds:
        a = next(x for x in rows if x["round"] == r and x["strategy"] == a_name)
        b = next(x for x in rows if x["round"] == r and x["strategy"] == b_name)
        f = round_figures(a, b, doc["block"])
        figs.append(f)
        lines.append(f"| {r + 1} | {f['blocks']} | {f['ratio']:.3f} | {f['paired_pct']:.2f}% | "
                     f"{f['unpaired_pct']:.2f}% | {f['gain']:.2f} | {_secs(f['pair_s'])} | "
                     f"{_secs(f['alone_s'])} |")
    loads = [x["load_1min"] for x in rows if x["load_1min"] is not None]
    lines += ["", _per_step(rows, rounds, a_name, b_name)]
    both = [f["pair_s"] / f["alone_s"] for f in figs if f["pair_s"] and f["alone_s"]]
    lines += ["", f"Unpaired / paired half-width, median [range] over {len(figs)} rounds: "
              f"{_rng([f['gain'] for f in figs], '.2f')}. Time to +-2%, paired / alone: "
              + (f"{_rng(both, '.2f')} over {len(both)} rounds" if both else
                 "not reached both ways in any round")
              + f". {doc['steps']} measured steps a run, np=2, 1-minute load "
              f"{min(loads):.1f}-{max(loads):.1f}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure and write bench/results/crn_blocks.json, or ``--render`` it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--block", type=int, default=10, help="steps per block")
    ap.add_argument("--strategies", default="horovod,ddp", help="A,B")
    ap.add_argument("--render", metavar="JSON")
    args = ap.parse_args(argv)
    if args.render:
        print(render(json.loads(Path(args.render).read_text())))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        rows = measure(args.rounds, args.steps, args.strategies, Path(tmp))
    doc = {"config": "configs/demo.yaml", "np": 2, "steps": args.steps, "block": args.block,
           "strategies": args.strategies.split(","), "records": rows}
    OUT.write_text(json.dumps(doc) + "\n")  # the raw lists first: a render that fails loses none
    print(f"wrote {OUT}")
    print(render(doc))  # raises if any round's two runs did not see the same batches
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
