"""``hvdscale run`` with two things wrong says both at once, with no traceback, alone and under
mpirun (where it must also end promptly): the preflight (hvdscale.train.preflight)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "TF_CPP_MIN_LOG_LEVEL": "2"}
TF32 = "precision tf32 is a GPU tensor-core mode and this rank computes on the CPU"


def _two_problems(tmp_path: Path) -> tuple[list[str], list[str]]:
    """The arguments of a run with a precision the CPU lacks and an --out that cannot be made,
    and the two refusals it must say."""
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "results"
    args = ["run", "configs/demo.yaml", "--out", str(out), "--set", "precision=tf32",
            "--set", "measure.warmup_steps=1", "--set", "measure.steps=2"]
    return args, [TF32, f"results directory {out} is not writable: Not a directory"]


def _says_both_once(stderr: str, needles: list[str]) -> None:
    assert "Traceback" not in stderr, stderr
    assert stderr.count("this run is refused for 2 reasons:") == 1, stderr
    for needle in needles:
        assert stderr.count(needle) == 1, stderr


def test_one_process_says_both_problems_in_one_error(tmp_path: Path) -> None:
    args, needles = _two_problems(tmp_path)
    r = subprocess.run([sys.executable, "-m", "hvdscale", *args], cwd=ROOT, env=ENV,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    _says_both_once(r.stderr, needles)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines[0] == "hvdscale: error (rank 0): this run is refused for 2 reasons:", lines
    assert len(lines) == 3 and all(ln.startswith("  - ") for ln in lines[1:]), lines


def test_under_mpirun_both_problems_once_and_the_job_ends(tmp_path: Path) -> None:
    args, needles = _two_problems(tmp_path)
    t = time.monotonic()
    r = subprocess.run(["mpirun", "-np", "2", sys.executable, "-m", "hvdscale", *args],
                       cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    took = time.monotonic() - t
    assert r.returncode != 0
    _says_both_once(r.stderr, needles)
    assert took < 90, f"the job took {took:.0f}s to end"
    assert "words/s" not in r.stdout


def test_run_points_records_a_refused_point_with_both_problems(tmp_path: Path) -> None:
    # Under run-points each point meets the same preflight; a point it refuses on every rank
    # is a failed record that names both problems, and the launch itself ends well.
    from hvdscale.records.launch_plan import LaunchPlan, PlannedPoint
    from hvdscale.records.store import write_record_file

    sets = ["precision=tf32", "strategy.name=ps", "strategy.ps.num_servers=3",
            "measure.warmup_steps=1", "measure.steps=2"]
    plan = tmp_path / "plan.json"
    write_record_file(plan, LaunchPlan(launch="L1", points=[PlannedPoint(
        label="refused", config="configs/demo.yaml", sets=sets)]))
    r = subprocess.run(["mpirun", "-np", "2", sys.executable, "-m", "hvdscale", "run-points",
                        str(plan), "--out", str(tmp_path / "out")], cwd=ROOT, env=ENV,
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    (rec,) = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert rec["status"] == "failed"
    assert rec["error"].startswith("failed on every rank: this run is refused for 2 reasons:")
    assert "strategy.ps.num_servers=3 is more than the 2 ranks of this job" in rec["error"]
    assert TF32 in rec["error"]
