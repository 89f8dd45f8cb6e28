"""The back-test of issue 21 as a benchmark file: fit on n <= 4 of each seed table, predict the
rest (``hvdscale backtest``). Pure computation, no timing: the numbers are final anywhere.

    python bench/bench_backtest.py --out bench/results/backtest.json \
        --plot bench/results/backtest.png
    python bench/bench_backtest.py --render bench/results/backtest.json

The raw file is the back-test's JSON (one entry per table and held-out n); ``loadavg`` is kept
for the house's convention though nothing here depends on it.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from hvdscale.study.predict.backtest import plot, render_summary, run_backtest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--render", metavar="RAW.json", help="print the table from a raw file")
    ap.add_argument("--out", default="", help="write the raw JSON here")
    ap.add_argument("--plot", default="", help="write the plot (PNG) here")
    args = ap.parse_args()
    if args.render:
        print(render_summary(json.loads(Path(args.render).read_text())), end="")
        return 0
    before = os.getloadavg()[0]
    res = run_backtest()
    res["loadavg_before"], res["loadavg_after"] = before, os.getloadavg()[0]
    res["quiet"] = max(before, res["loadavg_after"]) <= 2.5
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    if args.plot:
        plot(res, Path(args.plot))
    print(render_summary(res), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
