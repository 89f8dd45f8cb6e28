"""Issue 41 on the CPU: fused, loop and compiled loop at np = 1 and 2, fp32 and bf16.

Every (precision, rnn_impl) pair is one ``hvdscale sweep --np 1,2 --strategies horovod`` with
``--set precision=... --set model.rnn_impl=...`` into one results directory; round r runs every
pair once (``--repeats r`` fills only round r), in an order rotated per round, so the pairs of
one round ran back to back and their ratios are paired. The raw file keeps every launch (words/s,
step time, compile seconds, the load the record took); ``--render`` prints the table
BENCHMARKS.md holds, from the raw file alone.

    nice -n 5 python bench/bench_precision.py --config configs/demo.yaml --rounds 2 \\
        --json bench/results/precision_demo.json
    python bench/bench_precision.py --render bench/results/precision_demo.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from emit import emit, paired, quiet_label  # bench/ is on sys.path when a script runs

from hvdscale.records.run import RunRecord
from hvdscale.study.sweep.launcher import read_out

IMPLS = ("fused", "loop", "compiled")
PRECISIONS = ("fp32", "bf16")
RANKS = (1, 2)


def _sweep(config: str, out: str, precision: str, impl: str, rounds: int) -> None:
    """One sweep of the pair (its round ``rounds`` only: the earlier ones are recorded)."""
    cmd = [sys.executable, "-m", "hvdscale", "sweep", config, "--np", ",".join(map(str, RANKS)),
           "--strategies", "horovod", "--repeats", str(rounds), "--out", out, "--no-plot",
           "--set", f"precision={precision}", "--set", f"model.rnn_impl={impl}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=3600)


def _launches(out: str) -> list[dict]:
    """Every ok record of the results directory, as the raw file keeps it."""
    rows = []
    for rec in read_out(Path(out)):
        if not isinstance(rec, RunRecord):
            continue
        name = rec.name
        prec = rec.precision or {}
        rows.append({"precision": rec.configured_precision,
                     "impl": rec.model_config.rnn_impl, "np": rec.ranks,
                     "round": int(name.rsplit("-round", 1)[1]) if "-round" in name else 1,
                     "words_per_s": rec.words_per_s,
                     "step_median_s": rec.step_median_s,
                     "compile_s": (rec.compile or {}).get("compile_s"),
                     "wire": prec["wire"], "grads": prec["grads"],
                     "loadavg": rec.loadavg})
    return rows


def measure(config: str, out: str, rounds: int) -> dict:
    """Run the rounds; the raw result."""
    pairs = [(p, i) for p in PRECISIONS for i in IMPLS]
    for r in range(1, rounds + 1):
        k = (r - 1) % len(pairs)
        for p, i in pairs[k:] + pairs[:k]:
            print(f"round {r}: {p} {i}", file=sys.stderr, flush=True)
            _sweep(config, out, p, i, r)
    return {"config": config, "rounds": rounds, "strategy": "horovod",
            "host_cores": os.cpu_count(), "launches": _launches(out)}


def _cell(raw: dict, p: str, impl: str, n: int) -> list[dict]:
    runs = [x for x in raw["launches"] if (x["precision"], x["impl"], x["np"]) == (p, impl, n)]
    return sorted(runs, key=lambda x: x["round"])


def _ratio(a: list[dict], b: list[dict]) -> str:
    s = paired([x["words_per_s"] for x in a], [x["words_per_s"] for x in b])
    return "-" if s is None else f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})"


def render(raw: dict) -> str:
    """The BENCHMARKS.md table: medians over rounds, paired ratios (median, range)."""
    q = quiet_label(raw)
    lines = [f"config `{raw['config']}`, horovod, {raw['rounds']} paired rounds, "
             f"{'quiet' if q['quiet'] else 'NOT quiet'}: 1-minute load up to "
             f"{q['load_1min_max']:.1f} on {raw['host_cores']} cores ({q['quiet_basis']}); "
             "ratios are per-round paired, median (min-max)",
             "",
             "| precision | np | fused w/s | loop w/s | compiled w/s | compiled/loop "
             "| compiled/fused | compile s | load max |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in PRECISIONS:
        for n in RANKS:
            cells = {i: _cell(raw, p, i, n) for i in IMPLS}
            if not all(cells.values()):
                continue
            med = {i: statistics.median(x["words_per_s"] for x in c) for i, c in cells.items()}
            comp = [x["compile_s"] for x in cells["compiled"] if x["compile_s"] is not None]
            load = max(x["loadavg"][0] for c in cells.values() for x in c)
            lines.append(f"| {p} | {n} | {med['fused']:,.0f} | {med['loop']:,.0f} | "
                         f"{med['compiled']:,.0f} | {_ratio(cells['compiled'], cells['loop'])} | "
                         f"{_ratio(cells['compiled'], cells['fused'])} | "
                         f"{statistics.median(comp):.1f} | {load:.2f} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="/tmp/bench_precision", help="the sweeps' results dir")
    ap.add_argument("--json", default="")
    ap.add_argument("--render", metavar="RAW", help="print the table of a raw file and exit")
    args = ap.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())))
        return 0
    emit(measure(args.config, args.out, args.rounds), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
