"""Hunt flaky tests: run one phase of the suite N times and list every test that failed once.

    python tools/flakes.py unit --runs 30                 # tests/unit, in the suite's order
    python tools/flakes.py unit --runs 30 --shuffle       # modules and their tests shuffled
    python tools/flakes.py single --runs 3 --out bench/results/flakes/single.json
    python tools/flakes.py tests/unit/test_progress.py --runs 10   # any pytest paths

Each run is its own ``python -m pytest`` process (as tests/run.sh starts the single-process
phase) writing a junit file; a test counts as failed in a run when its junit case holds a
failure or an error. The printout lists each test that failed at least once with its rate
(failed runs / runs) and the runs it failed in, so a failure can be replayed: a shuffled run's
seed is recorded, and ``--seed S --runs 1 --shuffle`` repeats that order.

Shuffling keeps a module's tests together (modules in a random order, tests in a random order
within each), so module-scoped fixtures are built once per run as in the suite. The host's
1-minute load average is recorded before and after every run: a failure seen only on a loaded
host says something different from one seen on a quiet host.

The JSON written with ``--out`` (atomically) holds every run (exit code, seconds, counts, load,
seed, failed tests) and the per-test rates; docs/testing.md says how to read it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = {"unit": ["tests/unit"], "integration": ["tests/integration"],
          "single": ["tests/unit", "tests/integration"]}
"""Named phases: the paths tests/run.sh gives pytest for them (``single`` is its phase)."""
PHASE_ARGS = {"single": ["-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder"]}
"""The pytest arguments tests/run.sh adds for a phase (the single phase's two xdist workers)."""


def failed_tests(junit: Path) -> tuple[list[str], Counter]:
    """The ids (``file::name``) of the tests that failed or errored in one junit file, and the
    run's counts (tests, failures, errors, skipped)."""
    counts: Counter = Counter()
    failed: list[str] = []
    if not junit.is_file():
        return failed, counts
    for case in ET.parse(junit).getroot().iter("testcase"):
        counts["tests"] += 1
        kinds = {child.tag for child in case}
        if "skipped" in kinds:
            counts["skipped"] += 1
        bad = kinds & {"failure", "error"}
        for kind in bad:
            counts[kind + "s"] += 1
        if bad:
            path = case.get("classname", "").replace(".", "/")
            name = str(case.get("name")).split("@", 1)[0]  # xdist's "@GROUP" suffix
            failed.append(f"{path}.py::{name}")
    return failed, counts


def pytest_command(paths: list[str], junit: Path, seed: int | None,
                   extra: list[str] = ()) -> list[str]:
    """The pytest process of one run (``seed``: shuffled by tools/flake_order.py; ``extra``:
    more pytest arguments, e.g. ``-k`` or ``-p PLUGIN``)."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--color=no", "-q",
           f"--junitxml={junit}", *extra, *paths]
    if seed is not None:
        cmd[3:3] = ["-p", "tools.flake_order"]
    return cmd


def one_run(paths: list[str], index: int, seed: int | None, tmp: Path,
            timeout_s: float, extra: list[str] = ()) -> dict:
    """Run the phase once; its record (exit code, seconds, counts, load, failed tests)."""
    junit = tmp / f"run-{index}.xml"
    # The checkout first (tools.flake_order), then whatever the caller put on the path.
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    if seed is not None:
        env["HVDSCALE_FLAKE_SEED"] = str(seed)
    load_before = os.getloadavg()[0]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(pytest_command(paths, junit, seed, extra), cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout_s, check=False)
        rc, tail = proc.returncode, proc.stdout[-4000:]
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc, tail = 124, out[-4000:]
    failed, counts = failed_tests(junit)
    if rc not in (0, 1) and not failed:  # killed, timed out, or pytest itself broke
        failed = [f"<run ended with exit {rc}>"]
    return {"run": index, "seed": seed, "exit": rc, "seconds": round(time.monotonic() - t0, 1),
            "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
            "counts": dict(counts), "failed": failed, "tail": tail if failed else ""}


def rates(runs: list[dict]) -> list[dict]:
    """Each test that failed at least once: its failed runs and rate, the worst first."""
    seen: dict[str, list[int]] = {}
    for r in runs:
        for test in r["failed"]:
            seen.setdefault(test, []).append(r["run"])
    rows = [{"test": t, "failed_runs": idx, "rate": round(len(idx) / len(runs), 3)}
            for t, idx in seen.items()]
    return sorted(rows, key=lambda row: (-row["rate"], row["test"]))


def write_atomic(path: Path, data: dict) -> None:
    """``data`` as JSON at ``path``, whole or not at all (a killed hunt leaves the last one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a results file from its readers
    os.replace(tmp, path)


def summary(result: dict) -> str:
    """The printout: the runs, then one line per test that failed at least once."""
    runs = result["runs"]
    secs = sorted(r["seconds"] for r in runs)
    green = sum(1 for r in runs if not r["failed"])
    lines = [f"flakes: {result['phase']} x {len(runs)} runs "
             f"({'shuffled' if result['shuffle'] else 'suite order'}), {green} green; "
             f"median run {secs[len(secs) // 2]} s, "
             f"load {min(r['load_before'] for r in runs)}-{max(r['load_after'] for r in runs)}"]
    for row in result["flaky"]:
        lines.append(f"  {row['rate']:6.1%}  {row['test']}  (runs {row['failed_runs']})")
    if not result["flaky"]:
        lines.append("  no test failed in any run")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the hunt; exit 1 when any test failed in any run, 0 when every run was green."""
    ap = argparse.ArgumentParser(prog="tools/flakes.py", description=__doc__.split("\n")[0])
    ap.add_argument("phase", help=f"one of {', '.join(PHASES)}, or pytest paths (comma-separated)")
    ap.add_argument("--runs", type=int, default=10, help="how many runs (default 10)")
    ap.add_argument("--shuffle", action="store_true", help="shuffle modules and their tests")
    ap.add_argument("--seed", type=int, help="first run's seed (shuffled runs); default random")
    ap.add_argument("--out", type=Path, help="write the JSON result here (updated after each run)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds one run may take")
    ap.add_argument("--pytest-args", default="", help="more pytest arguments, space-separated")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    paths = PHASES.get(args.phase) or args.phase.split(",")
    for p in paths:
        if not (ROOT / p.split("::")[0]).exists():
            ap.error(f"no such phase or path: {p} (phases: {', '.join(PHASES)})")
    seed0 = args.seed if args.seed is not None else random.randrange(1 << 30)
    extra = PHASE_ARGS.get(args.phase, []) + args.pytest_args.split()
    result = {"phase": args.phase, "paths": paths, "shuffle": args.shuffle, "pytest_args": extra,
              "started": datetime.now(UTC).isoformat(timespec="seconds"),
              "host": platform.node(), "cores": os.cpu_count(), "python": platform.python_version(),
              "runs": [], "flaky": []}
    with tempfile.TemporaryDirectory(prefix="hvdscale-flakes-") as tmp:
        for i in range(args.runs):
            run = one_run(paths, i, seed0 + i if args.shuffle else None, Path(tmp), args.timeout,
                          extra)
            result["runs"].append(run)
            result["flaky"] = rates(result["runs"])
            c = run["counts"]
            print(f"run {i + 1}/{args.runs}: exit {run['exit']}, {run['seconds']} s, "
                  f"{c.get('tests', 0)} tests, {len(run['failed'])} failed"
                  f"{' ' + ', '.join(run['failed']) if run['failed'] else ''}", flush=True)
            if args.out:
                write_atomic(args.out, result)
    print(summary(result))
    return 1 if result["flaky"] else 0


if __name__ == "__main__":
    sys.exit(main())
