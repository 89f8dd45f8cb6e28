"""One ``hvdscale run`` launched alone as the sweep launches a point (study/sweep/one_run.py, what
every bench in bench/ launches through), for real on 2 ranks: it returns the record this launch
appended (not an earlier one in the same directory), and a failed launch says why in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hvdscale.errors import HvdscaleError
from hvdscale.records.store import results_path
from hvdscale.study.sweep.one_run import RunLaunch, launch_run
from tests.records_fixture import run_dict

ROOT = Path(__file__).resolve().parents[2]
TINY = ["measure.warmup_steps=0", "measure.steps=2", "data.synthetic.sentences_per_rank=64",
        "strategy.name=horovod"]


def test_a_launch_returns_its_own_record_and_a_failure_says_why(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    results_path(out).write_text(json.dumps(run_dict("name=earlier", ranks=9)) + "\n")
    rec = launch_run(2, ROOT / "configs" / "demo.yaml", out, TINY,
                     RunLaunch(quiet=True, env={"TF_CPP_MIN_LOG_LEVEL": "2"}, cwd=ROOT))
    assert rec.status == "ok" and rec.ranks == 2 and rec.name != "earlier"
    # both ranks on this host: Open MPI's fabric transport left out (core/threads.py)
    assert rec.threads.mpi_btl == "^ofi"
    with pytest.raises(HvdscaleError, match=r"np=2 failed .*model.kind must be one of") as e:
        launch_run(2, ROOT / "configs" / "demo.yaml", out, ["model.kind=bogus"],
                   RunLaunch(cwd=ROOT))
    assert "\n" not in str(e.value)


def test_the_shell_launcher_starts_every_rank_and_passes_its_exit_status() -> None:
    # bench/run_all.sh's way to start a bench on every rank: one MPI job of 2 ranks.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_ALLOW")}
    # One write a line: with PYTHONUNBUFFERED, print's pieces of two ranks can interleave.
    hello = ("import sys; from mpi4py import MPI; c = MPI.COMM_WORLD; "
             "sys.stdout.write(f'rank {c.rank} of {c.size}\\n')")
    cmd = [sys.executable, "-m", "hvdscale.study.sweep.launcher", "--np", "2", "--",
           sys.executable, "-c"]
    r = subprocess.run([*cmd, hello], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(ln for ln in r.stdout.splitlines() if ln.startswith("rank")) == \
        ["rank 0 of 2", "rank 1 of 2"]
    r = subprocess.run([*cmd, "import sys; sys.exit(3)"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 3


def _marked(mark: str) -> list[int]:
    """Pids of the running processes whose environment carries ``mark``."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark.encode() in f.read():
                    with open(f"/proc/{pid}/stat") as s:
                        if s.read().rsplit(")", 1)[1].split()[0] != "Z":
                            out.append(int(pid))
        except OSError:
            continue
    return out


def test_a_run_past_its_deadline_is_ended_with_every_rank_and_says_so(tmp_path: Path) -> None:
    # A run far longer than its deadline: the launch and both its ranks must be gone after,
    # and the caller gets one line, not a TimeoutExpired traceback.
    mark = f"HVDSCALE_TEST_MARK_{os.getpid()}_{tmp_path.name}"
    long = ["measure.warmup_steps=0", "measure.steps=100000", "strategy.name=independent",
            "data.synthetic.sentences_per_rank=64"]
    with pytest.raises(HvdscaleError, match=r"np=2 timed out after 6 s") as e:
        launch_run(2, ROOT / "configs" / "demo.yaml", tmp_path, long,
                   RunLaunch(quiet=True, env={mark: "1", "TF_CPP_MIN_LOG_LEVEL": "2"},
                             cwd=ROOT, timeout_s=6))
    assert "\n" not in str(e.value)
    assert _marked(mark) == []
