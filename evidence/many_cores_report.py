"""Tables and the ``predict --fit`` validation of an evidence/many_cores.sh output folder.

    python evidence/many_cores_report.py OUT [--fit-max 4] > OUT/report.md

OUT holds ``round<k>/<config>/`` sweep folders. Per config, strategy and n: words/s (median
over rounds, min-max), speedup and efficiency against the same strategy's n = 1, and the
per-step breakdown (compute, communication, idle; study.report.decompose). Then per round the
fit on n <= fit-max predicts every larger n (as bench/bench_predict_validate.py does), and the
error per strategy and n is tabled with the term the fit got most wrong. Writes
OUT/validate.json (the rows, recomputable from the records) and prints markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from hvdscale.config import load_config
from hvdscale.records.run import RunRecord
from hvdscale.records.store import load_records
from hvdscale.study.predict.inputs import reduced_bytes_per_step
from hvdscale.study.predict.validate import evaluate
from hvdscale.study.report.decompose import baseline, per_step
from hvdscale.study.sweep.timing import unaccounted

ROOT = Path(__file__).resolve().parents[1]

CONFIGS = {"demo": "configs/demo.yaml", "nmt_cpu_seed": "configs/nmt_cpu_seed.yaml"}


def _ok(folder: Path) -> list[RunRecord]:
    """The ok records of one round's sweep, less those its sweep never accounted for (finished
    after a deadline cut it; ``hvdscale.study.sweep.timing.unaccounted``)."""
    if not folder.is_dir():
        return []
    return [r for _, r in unaccounted(load_records(folder))[0] if isinstance(r, RunRecord)]


def scaling_rows(rounds: list[list[RunRecord]]) -> list[dict]:
    """Words/s (median over the rounds, min-max), and the speedup paired within each round:
    round k's n-rank words/s over round k's own 1-rank words/s of the same strategy (issue 50:
    never over another round's base), its median and range over the rounds that have both."""
    cells: dict[tuple[str, int], dict[int, RunRecord]] = {}
    for k, recs in enumerate(rounds):
        for r in recs:
            cells.setdefault((r.strategy_name, r.workers), {})[k] = r
    rows = []
    for (s, n), by in sorted(cells.items()):
        ws = [r.words_per_s for r in by.values()]
        one = cells.get((s, 1), {})
        sp = [r.words_per_s / one[k].words_per_s for k, r in by.items() if k in one]
        row: dict[str, Any] = {"strategy": s, "n": n, "rounds": len(ws),
                               "words_per_s": statistics.median(ws), "min": min(ws),
                               "max": max(ws), "paired_rounds": len(sp),
                               "loadavg_1min": [r.loadavg[0] for r in by.values()]}
        if sp:
            row["speedup"] = statistics.median(sp)
            row["speedup_min"], row["speedup_max"] = min(sp), max(sp)
            row["efficiency"] = row["speedup"] / n
        ones = list(one.values())
        if ones:
            g1 = baseline(ones).g1
            parts = [per_step(r, g1) for r in by.values()]
            row["breakdown_ms"] = {k: 1e3 * statistics.median(p[k] for p in parts)
                                   for k in ("compute", "comm", "idle")}
        rows.append(row)
    return rows


def validation_rows(name: str, rounds: list[list[RunRecord]], fit_max: int) -> list[dict]:
    """Per round: fit on n <= fit_max, the error at every larger n."""
    nbytes = reduced_bytes_per_step(load_config(str(ROOT / CONFIGS[name])))
    out = []
    for k, recs in enumerate(rounds):
        ranks = sorted({r.workers for r in recs})
        # A strategy cut before a second rank count <= fit_max cannot be fitted: named, and
        # the others still fitted (any two or more rank counts fit: 1, 2, 4 is enough).
        small: dict[str, set[int]] = {}
        for r in recs:
            if r.workers <= fit_max:
                small.setdefault(r.strategy_name, set()).add(r.workers)
        out += [{"round": k, "error": f"strategy {s}: only n = {min(ns)} measured up to "
                 f"n = {fit_max}, not fitted"} for s, ns in sorted(small.items()) if len(ns) < 2]
        recs = [r for r in recs if len(small.get(r.strategy_name, ())) >= 2]
        try:
            rows = evaluate(recs, fit_max, ranks, nbytes)
        except Exception as e:  # one round's failed fit must not hide the others' tables
            out.append({"round": k, "error": f"{type(e).__name__}: {e}"})
            continue
        out += [{"round": k, **r} for r in rows]
    return out


def speedup_cell(row: dict) -> str:
    """The paired speedup: median, and its range when two or more rounds paired."""
    if "speedup" not in row:
        return "—"
    if row.get("paired_rounds", 1) < 2:
        return f"{row['speedup']:.2f}"
    return f"{row['speedup']:.2f} [{row['speedup_min']:.2f}-{row['speedup_max']:.2f}]"


def render(name: str, scaling: list[dict], valid: list[dict]) -> str:
    """Markdown for one config."""
    lines = [f"## {name}", "", "Speed-up: each round's n ranks over the same round's 1 rank, "
             "median [range] over the rounds that have both; a verdict needs 3 such rounds.", "",
             "| strategy | n | words/s (median) | min-max | speedup | "
             "efficiency | compute ms | comm ms | idle ms | rounds |",
             "|:--|--:|--:|:--|--:|--:|--:|--:|--:|--:|"]
    negative = False
    for r in scaling:
        b = r.get("breakdown_ms", {})
        # A negative reading is noise (a part's time measured below the one-rank baseline):
        # shown as 0, and said under the table, never as a negative cause.
        comm, idle = (max(0.0, b.get(k, 0.0)) for k in ("comm", "idle"))
        negative |= b.get("comm", 0.0) < 0 or b.get("idle", 0.0) < 0
        lines.append(f"| {r['strategy']} | {r['n']} | {r['words_per_s']:,.0f} | "
                     f"{r['min']:,.0f}-{r['max']:,.0f} | {speedup_cell(r)} | "
                     f"{r.get('efficiency', float('nan')):.2f} | {b.get('compute', 0):.1f} | "
                     f"{comm:.1f} | {idle:.1f} | {r['rounds']} |")
    if negative:
        lines += ["", "Some comm or idle readings were below zero (noise): shown as 0.0."]
    lines += ["", "| round | strategy | n | measured words/s | predicted | error % | "
              "most wrong term |", "|--:|:--|--:|--:|--:|--:|:--|"]
    for v in valid:
        if "error" in v:
            lines.append(f"| {v['round']} | fit failed: {v['error']} | | | | | |")
            continue
        lines.append(f"| {v['round']} | {v['strategy']} | {v['n']} | "
                     f"{v['measured_words_per_s']:,.0f} | {v['predicted_words_per_s']:,.0f} | "
                     f"{100 * (v['ratio'] - 1):+.1f} | {v['most_wrong_term']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    """Print the report of an output folder and write its validate.json."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--fit-max", type=int, default=4)
    args = ap.parse_args()
    out = Path(args.out)
    rounds = sorted(p for p in out.glob("round*") if p.is_dir())
    result: dict[str, Any] = {"kind": "many_cores", "fit_max": args.fit_max, "configs": {}}
    machine = out / "machine.json"
    if machine.is_file():
        result["machine"] = json.loads(machine.read_text())
    text = []
    for name in CONFIGS:
        recs = [_ok(r / name) for r in rounds]
        recs = [r for r in recs if r]
        if not recs:
            continue
        scaling = scaling_rows(recs)
        valid = validation_rows(name, recs, args.fit_max)
        result["configs"][name] = {"scaling": scaling, "validation": valid}
        text.append(render(name, scaling, valid))
    tmp = out / ".validate.json.part"
    tmp.write_text(json.dumps(result, indent=2, default=str) + "\n")
    os.replace(tmp, out / "validate.json")
    if not text:
        print(f"no ok run records under {out}/round*/", file=sys.stderr)
        return 1
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
