"""Issue 64: DDP under torchrun against DDP under mpirun, paired rounds at np=2.

Each round launches the same ``hvdscale run`` of ``--config`` with ``strategy.name=ddp`` once
under each launcher (the launch lines built as the sweep builds them,
``hvdscale.study.sweep.launcher.launch_line``), the order alternating from round to round.
torchrun runs as on a target without MPI (tests/torchrun/nompi first on PYTHONPATH: mpi4py
and Horovod unimportable), mpirun with MPI. Per launch it keeps words/s, the ranks' start-up
(process start to first step, slowest rank, from the record), the launcher's own time before
the first rank's process started (``spawn_s``), the wall time and the 1-minute load before
the launch. ``--render`` prints BENCHMARKS.md's table from the raw file alone.

The control ``mpirun-setsid`` (``--launchers mpirun,torchrun,mpirun-setsid``) runs mpirun's
ranks each in a session of its own (``setsid -w``), as torchrun starts its ranks: with the
kernel's autogroup scheduling, each session is a scheduling group, so on a host loaded by
other sessions torchrun's ranks get a share each where mpirun's share one.

    nice -n 5 python bench/bench_torchrun.py --rounds 4 --json bench/results/torchrun_vs_mpirun.json
    python bench/bench_torchrun.py --render bench/results/torchrun_vs_mpirun.json
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

from emit import emit, paired, quiet_label, recorded_loads  # bench/ is on sys.path

from hvdscale.records.run import RunRecord
from hvdscale.study.sweep.launcher import launch_env, launch_line, read_out

ROOT = Path(__file__).resolve().parents[1]
NOMPI = ROOT / "tests" / "torchrun" / "nompi"
LAUNCHERS = ("mpirun", "torchrun")
SETSID = ["setsid", "-w"]
"""Each rank in a session of its own (torchrun's start_new_session), waited for by mpirun."""


def one_launch(args: argparse.Namespace, launcher: str, out: Path) -> dict[str, Any]:
    """One DDP run at ``args.np`` ranks under ``launcher``; its figures."""
    prog = [sys.executable, "-m", "hvdscale", "run", args.config, "--quiet", "--out", str(out),
            "--set", "strategy.name=ddp", *(a for s in args.set for a in ("--set", s))]
    env = launch_env()
    if launcher == "torchrun":
        env["PYTHONPATH"] = f"{NOMPI}:{ROOT}"
    elif launcher == "mpirun-setsid":
        prog = [*SETSID, *prog]
    load = os.getloadavg()[0]
    t0 = time.time()
    r = subprocess.run(launch_line(launcher.split("-")[0], args.np, prog), cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    wall = time.time() - t0
    if r.returncode != 0:
        raise SystemExit(f"{launcher} failed: {(r.stdout + r.stderr)[-3000:]}")
    (rec,) = read_out(out)
    assert isinstance(rec, RunRecord)
    return {"launcher": launcher, "load": load, "wall_s": round(wall, 3),
            "words_per_s": rec.words_per_s, "startup_s": rec.startup.total_max_s,
            "spawn_s": round(rec.startup.first_process_start - t0, 3),
            "launcher_backend": rec.launcher_backend,
            "step_median_s": rec.step_median_s}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every round, each launcher once, the order rotated by one from round to round."""
    rounds, launchers = [], args.launchers.split(",")
    for r in range(args.rounds):
        order = launchers[r % len(launchers):] + launchers[:r % len(launchers)]
        got = {}
        for launcher in order:
            with tempfile.TemporaryDirectory() as d:
                got[launcher] = one_launch(args, launcher, Path(d))
            print(f"round {r + 1} {launcher}: {got[launcher]}", file=sys.stderr, flush=True)
        rounds.append({"order": list(order), **got})
    return {"bench": "torchrun_vs_mpirun", "config": args.config, "np": args.np,
            "set": args.set, "rounds": rounds}


def render(raw: dict[str, Any]) -> str:
    """BENCHMARKS.md's table and the paired ratios under it."""
    rounds = raw["rounds"]
    launchers = rounds[0]["order"]
    bases = [x for x in launchers if x != "torchrun"]

    def col(launcher: str, key: str) -> list[float]:
        return [r[launcher][key] for r in rounds]

    keys = (("words_per_s", "words/s", "{:.0f}"), ("startup_s", "ranks' start-up (s)", "{:.2f}"),
            ("spawn_s", "launcher start to first rank's process (s)", "{:.2f}"),
            ("wall_s", "wall time of the launch (s)", "{:.1f}"))
    lines = [f"| DDP, {raw['config']} at np={raw['np']}, {len(rounds)} paired rounds | "
             + " | ".join(f"{x}, median" for x in launchers) + " | "
             + " | ".join(f"torchrun / {b}, paired: median [range]" for b in bases) + " |",
             "|---|" + "---|" * (len(launchers) + len(bases))]
    for key, label, fmt in keys:
        cells = [fmt.format(statistics.median(col(x, key))) for x in launchers]
        for b in bases:
            p = paired(col("torchrun", key), col(b, key))
            assert p is not None
            cells.append(f"{p['median']:.3f} [{p['min']:.3f}-{p['max']:.3f}]")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    from hvdscale.study.verdict import decide

    for b in bases:  # the words/s verdict, by the one procedure (issue 62), 2 % margin
        ratios = [t / x for t, x in zip(col("torchrun", "words_per_s"), col(b, "words_per_s"),
                                        strict=True)]
        lines.append(f"\nwords/s, torchrun / {b}: {decide(ratios).words('torchrun', b)}.")
    loads = recorded_loads(raw, skip=("loadavg_emit",))
    lines.append(f"\nOrder rotated by one launcher a round (round 1: {', '.join(launchers)}); "
                 f"1-minute load before the launches {min(loads):.1f}-{max(loads):.1f}, "
                 f"quiet={quiet_label(raw)['quiet']}.")
    return "\n".join(lines) + "\n"


def main() -> int:
    """Run the rounds (or ``--render`` a raw file) and emit the raw result."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--launchers", default=",".join(LAUNCHERS),
                    help="mpirun, torchrun, and the control mpirun-setsid, comma-separated")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--json", default="")
    ap.add_argument("--render", default="")
    args = ap.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())), end="")
        return 0
    emit(run(args), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
