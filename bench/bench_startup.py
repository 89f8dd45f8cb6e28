"""Start-up against its floor: what ``hvdscale run`` costs from launch to exit beyond the
launcher starting N processes that import torch and Horovod and initialise, nothing else.

Each round, at each np: the floor (``mpirun -np N python -c "import torch, horovod.torch as
hvd; hvd.init()"``) and ``hvdscale run`` of the demo config with no warm-up and one measured
step on 64 sentences per rank (start-up, one step, the gather and the record), through the
same launcher line the sweep uses, in alternating order; wall time from spawn to exit of each,
the 1-minute load before each pair, and the run's start-up phases from its record. Round 0
warms the page cache and is left out. Then one small sweep (np 1 and 2, two rounds, the same
tiny run) for the sweep's own time between points (its sweep_timing.jsonl), and ``hvdscale
doctor`` on the simulated machine without network (tools/testbed/nodns.py; root only).

    python bench/bench_startup.py --np 1,2 --rounds 5 --json bench/results/startup.json
    python bench/bench_startup.py --render bench/results/startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from emit import emit, paired, quiet_label  # bench/ is on sys.path when a script runs
from simulated import testbed

from hvdscale.core.threads import single_host_launch_env
from hvdscale.records.provenance import mpi_library, mpi_transports
from hvdscale.records.startup_bench import StartupBenchRecord
from hvdscale.study.sweep.launcher import launch_env, launch_line, read_out

ROOT = Path(__file__).resolve().parents[1]
FLOOR = "import torch, horovod.torch as hvd; hvd.init()"
OPTIM = FLOOR + "; torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1)"
"""The floor plus one optimizer: any torch optimizer imports torch._dynamo (torch's own
start-up cost of every training run, hvdscale's included), which the bare floor never pays."""
TINY = ["--set", "measure.warmup_steps=0", "--set", "measure.steps=1",
        "--set", "data.synthetic.sentences_per_rank=64"]
GOAL_RATIO, GOAL_BETWEEN_S, GOAL_DOCTOR_S = 1.2, 1.0, 10.0


def _env() -> dict[str, str]:
    return launch_env({**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"})


def _line(np_: int, program: list[str]) -> list[str]:
    """A sweep point's launch line around ``program`` (no ``-x``: one host, env inherited)."""
    return launch_line("mpirun", np_, program, env={})


def _timed(cmd: list[str], extra: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, env={**_env(), **(extra or {})}, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"bench_startup: {' '.join(cmd[:6])}... failed:\n{r.stderr[-2000:]}")
    return time.perf_counter() - t0


def one_round(k: int, np_: int, out: Path) -> dict:
    """The floor and the run at ``np_``, in an order that alternates with ``k``."""
    cmds = {"floor": _line(np_, [sys.executable, "-c", FLOOR]),
            "floor_optim": _line(np_, [sys.executable, "-c", OPTIM]),
            "hvdscale": _line(np_, [sys.executable, "-m", "hvdscale", "run", "configs/demo.yaml",
                                    *TINY, "--quiet", "--out", str(out)])}
    cmds["floor_same_mpi"] = cmds["floor"]
    # The floor given the transports a run picks for itself on one host (core/threads.py): what
    # is left of the ratio once hvdscale's own MPI choice is taken away from the comparison.
    extra = {"floor_same_mpi": single_host_launch_env()}
    row: dict = {"round": k, "np": np_, "load": os.getloadavg()[0]}
    order = ["floor", "floor_same_mpi", "floor_optim", "hvdscale"]
    for name in (order if k % 2 == 0 else order[::-1]):
        row[f"{name}_s"] = _timed(cmds[name], extra.get(name))
    rec = read_out(out)[-1]
    marks = rec.startup
    row["startup_max_s"], row["startup_total_s"] = marks.max_s, marks.total_max_s
    return row


def sweep_timing(out: Path) -> list[dict]:
    """The sweep's own time between points, from one small sweep's sweep_timing.jsonl."""
    _timed([sys.executable, "-m", "hvdscale", "sweep", "configs/demo.yaml", "--np", "1,2",
            "--strategies", "horovod", "--repeats", "2", "--no-plot", "--out", str(out), *TINY])
    return [json.loads(x) for x in (out / "sweep_timing.jsonl").read_text().splitlines()]


def doctor_nodns(tmp: Path) -> dict:
    """``hvdscale doctor``'s wall time on the simulated machine without network."""
    load = os.getloadavg()[0]
    doctor = f"cd {ROOT} && {sys.executable} -m hvdscale doctor >/dev/null"
    s = _timed(testbed("nodns").nodns_argv(tmp, doctor))
    return {"doctor_s": s, "load": load}


def measure(args: argparse.Namespace) -> dict:
    """Every round at every np, then the sweep's and the doctor's times: the raw result."""
    nps = [int(x) for x in args.np.split(",")]
    rounds, doctors = [], []
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        for k in range(args.rounds + 1):
            for np_ in nps:
                row = one_round(k, np_, Path(tmp) / f"r{k}_np{np_}")
                row["warmup"] = k == 0
                rounds.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
            if k > 0 and os.geteuid() == 0 and k <= args.doctor_rounds:
                doctors.append(doctor_nodns(Path(tmp)))
        sweep = sweep_timing(Path(tmp) / "sweep")
    mpi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
    return {"bench": "startup", "np": nps, "host_cores": os.cpu_count(), "floor": FLOOR,
            "mpirun": shutil.which("mpirun"), "mpi": (mpi.splitlines() or ["?"])[0],
            # Issue 50: which MPI ran, its library and the transports in force, in the file.
            "mpi_library": mpi_library(), "mpi_transports": mpi_transports(),
            "floor_optim": OPTIM,
            "run_sets": TINY, "rounds": rounds, "doctor_nodns": doctors, "sweep_timing": sweep}


def _range(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def _mpi_said(d: dict) -> str:
    """Which MPI the raw file says ran (files before issue 50 did not record it)."""
    if not d.get("mpi"):
        return "MPI not recorded in this raw file (measured before issue 50)"
    return f"{d['mpi']}, transports: {d.get('mpi_transports', 'not recorded')}"


def render(d: dict) -> str:
    """The BENCHMARKS.md table, from the raw file alone."""
    q = quiet_label(d)
    lines = [f"{sum(not r['warmup'] for r in d['rounds']) // len(d['np'])} paired rounds per np "
             f"(a warm-up round left out); max 1-minute load {q['load_1min_max']:.1f}, "
             f"quiet={q['quiet']}; {_mpi_said(d)}.", "",
             "| np | floor s, median (range) | floor + optimizer s | hvdscale run s | ratio "
             f"run/floor, median (range), n | goal <= {GOAL_RATIO} | ratio run/(floor + "
             "optimizer) | ratio run/(floor, the run's MPI transports) | slowest phases "
             "(median s) | load max |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for np_ in d["np"]:
        rows = [r for r in d["rounds"] if r["np"] == np_ and not r["warmup"]]
        ratio = paired([r["hvdscale_s"] for r in rows], [r["floor_s"] for r in rows])
        r_opt = paired([r["hvdscale_s"] for r in rows], [r["floor_optim_s"] for r in rows])
        same = "-"  # raw files older than the column
        if all("floor_same_mpi_s" in r for r in rows):
            r_same = paired([r["hvdscale_s"] for r in rows], [r["floor_same_mpi_s"] for r in rows])
            same = f"{r_same['median']:.2f} ({r_same['min']:.2f}-{r_same['max']:.2f})"
        phases = {p: statistics.median(r["startup_max_s"][p] for r in rows)
                  for p in rows[0]["startup_max_s"]}
        top = sorted(phases, key=phases.get, reverse=True)[:3]
        met = "met" if ratio["median"] <= GOAL_RATIO else "NOT met"
        lines.append(f"| {np_} | {_range([r['floor_s'] for r in rows])} | "
                     f"{_range([r['floor_optim_s'] for r in rows])} | "
                     f"{_range([r['hvdscale_s'] for r in rows])} | {ratio['median']:.2f} "
                     f"({ratio['min']:.2f}-{ratio['max']:.2f}), {ratio['n']} | {met} | "
                     f"{r_opt['median']:.2f} ({r_opt['min']:.2f}-{r_opt['max']:.2f}) | "
                     f"{same} | " + ", ".join(f"{p} {phases[p]:.2f}" for p in top)
                     + f" | {max(r['load'] for r in rows):.1f} |")
    between = [t["between_s"] for t in d["sweep_timing"][1:]]
    starts = [t["launcher_start_s"] for t in d["sweep_timing"]]
    lines.append("")
    lines.append(f"Sweep ({len(d['sweep_timing'])} launches): its own time between points "
                 f"{_range(between)} s (goal <= {GOAL_BETWEEN_S:g} s beyond the launcher: "
                 f"{'met' if max(between) <= GOAL_BETWEEN_S else 'NOT met'}); the launcher's "
                 f"spawn to the first rank's process start {_range(starts)} s.")
    if d["doctor_nodns"]:
        docs = [x["doctor_s"] for x in d["doctor_nodns"]]
        lines.append(f"`hvdscale doctor` without network (simulated, {len(docs)} runs): "
                     f"{_range(docs)} s at load up to "
                     f"{max(x['load'] for x in d['doctor_nodns']):.1f} (goal < "
                     f"{GOAL_DOCTOR_S:g} s: {'met' if max(docs) < GOAL_DOCTOR_S else 'NOT met'}).")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Measure (or ``--render`` a raw file) and emit the raw result."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--np", default="1,2", help="rank counts, e.g. 1,2,4,8 (default 1,2)")
    ap.add_argument("--rounds", type=int, default=5, help="measured rounds (plus a warm-up)")
    ap.add_argument("--doctor-rounds", type=int, default=3,
                    help="rounds followed by a doctor on the simulated no-DNS machine")
    ap.add_argument("--json", default="", help="write the raw result here")
    ap.add_argument("--render", default="", help="print the table of a raw result")
    args = ap.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())), end="")
        return
    # Built as the typed record, so a field measure() set wrongly stops here, not in a reader.
    out = emit(StartupBenchRecord.from_dict(measure(args), where="the start-up bench's result"
                                            ).to_dict(), args.json)
    print(render(out), end="")


if __name__ == "__main__":
    main()
