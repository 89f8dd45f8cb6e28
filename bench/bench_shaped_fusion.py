"""Horovod's fusion settings on a slow link (issue 63): ``hvdscale fusion`` across the two pinned
namespace hosts of tools/testbed/link.py, one rank a host, Open MPI over TCP on their veth
pair only, the pair limited with tbf (tools/testbed/shaping.py) to one rate. Every setting's
rounds are interleaved, and the recommendation and every gain are the decision procedure's
(hvdscale.study.paired.recommend).

    python bench/bench_shaped_fusion.py --rate 0.5 --out bench/results/shaped_fusion.json
    python bench/bench_shaped_fusion.py --render bench/results/shaped_fusion.json

Needs root, ``ip``, ``tc`` and sshd.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from root_bench import run_as_root
from simulated import tools_package  # bench/ is on sys.path when a script runs

from hvdscale.study.fusion.report import markdown

ROOT = Path(__file__).resolve().parents[1]
tools_package()  # tools/testbed from this checkout, as `python bench/...` runs from anywhere
from tools.testbed import link, shaping  # noqa: E402

GRID = ["--threshold-mb", "0,4,128", "--cycle-ms", "1,5", "--overlap", "hooks,after-backward"]
SETS = ["measure.warmup_steps=5", "measure.steps=40", "strategy.horovod.overlap=hooks"]


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The fusion sweep at one rate; its analysed result and what it ran under."""
    rate = shaping.check_rate(args.rate)
    work = Path(tempfile.mkdtemp(prefix="s63-fusion-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        h = stack.enter_context(link.ssh_hosts(work, str(os.getpid() % 10000), prefix="s63f",
                                               pin=True))
        qdiscs = shaping.shape(h.ns, rate)
        out = work / "fusion"
        argv = ["fusion", str(ROOT / args.config), "--np", "2", "--hostfile",
                str(link.hostfile(h, work)), "--repeats", str(args.rounds), "--no-autotune",
                "--timeline-steps", "0", "--no-plot", "--out", str(out), *GRID]
        for s in SETS:
            argv += ["--set", s]
        t0, load0 = time.time(), os.getloadavg()[0]
        link.hvdscale(h, argv, 3600, "fusion")
        res = json.loads((out / "fusion.json").read_text())
        shaping.unshape(h.ns)
    return {"kind": "shaped_fusion", "rate_gbit": rate, "config": args.config,
            "rounds": args.rounds, "grid": GRID, "sets": SETS, "qdisc": qdiscs,
            "wall_s": time.time() - t0, "loadavg": [load0, os.getloadavg()[0]],
            "cores": os.cpu_count(), "fusion": res,
            "mpi_transports": "Open MPI btl tcp,self over hvd0 only, one rank a host, each "
                              "host pinned to a core of its own"}


def render(raw: dict[str, Any]) -> str:
    """The fusion report (its table, gains and recommendation) from the raw result alone."""
    title = (f"Horovod fusion on a {raw['rate_gbit']:g} Gbit/s link "
             f"({Path(raw['config']).stem}, np=2, one rank a host)")
    load = raw["loadavg"]
    md = markdown(raw["fusion"], title).rstrip("\n")
    md = md.replace(f"# {title}", f"**{title}**", 1)  # a heading of its own inside BENCHMARKS.md
    return (md + "\n\n"
            f"{raw['rounds']} interleaved rounds; {raw['cores']} cores; 1-minute load "
            f"{min(load):.2f}-{max(load):.2f} (before and after); {raw['mpi_transports']}.\n")


def main() -> int:
    """Run the sweep (or ``--render`` a raw file); print the report."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=0.5, help="the link's rate in Gbit/s")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--config", default="configs/commheavy_torch.yaml")
    ap.add_argument("--out", default="", help="write the raw JSON here")
    ap.add_argument("--render", metavar="RAW.json", help="print the report from a raw file")
    args = ap.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())), end="")
        return 0
    return run_as_root("bench_shaped_fusion", lambda: run(args), render, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
