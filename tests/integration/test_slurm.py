"""The SLURM batch scripts on a real single-node SLURM (Debian's slurmctld, slurmd and munge).

A module fixture starts munged, slurmctld and slurmd on private configs, state and ports under a
temporary directory, and stops them again (cancelling jobs, then ending every process that
carries this cluster's SLURM_CONF) even when a test fails. Every command has a time limit.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import (
    end_conf_processes,
    munge_dirs,
    munged_argv,
    pid_from,
    sh,
    signal_pids,
    slurm_conf,
    slurm_env,
    wait_idle,
)
from tests.integration.system_deps import SBIN, ensure_system_deps

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--set", "measure.warmup_steps=1", "--set", "measure.steps=3",
        "--set", "data.synthetic.sentences_per_rank=64"]

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A running one-node SLURM cluster; yields the environment that talks to it."""
    ensure_system_deps("slurmctld", "slurmd", "sbatch", "munged")
    if os.geteuid() != 0:
        pytest.skip("the private SLURM runs its daemons as root")
    d = tmp_path_factory.mktemp("slurm")
    munge_dirs(d, "spool")
    node = subprocess.run([str(SBIN / "slurmd"), "-C"], capture_output=True, text=True,
                          timeout=30).stdout.splitlines()[0]  # this machine as slurmd sees it
    name = node.split()[0].split("=", 1)[1]
    conf = d / "slurm.conf"
    conf.write_text(slurm_conf(d, "hvdscaletest", f"{name}(127.0.0.1)",
                               (_free_port(), _free_port()), f"""\
SlurmdSpoolDir={d / "spool"}
SlurmdPidFile={d / "slurmd.pid"}
SlurmdLogFile={d / "log" / "slurmd.log"}
{node} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes={name} Default=YES MaxTime=INFINITE State=UP
"""))
    env = slurm_env(conf)
    pidfiles = (d / "slurmd.pid", d / "slurmctld.pid", d / "munge" / "munged.pid")
    try:
        for cmd in (munged_argv(d), [str(SBIN / "slurmctld"), "-i"], [str(SBIN / "slurmd")]):
            sh(*cmd, env=env, timeout=60)
        wait_idle(lambda: {name: sh("sinfo", "-h", "-o", "%T", env=env, check=False,
                                    timeout=20).stdout.strip()}, 1,
                  lambda: "".join(f.read_text()[-2000:] for f in (d / "log").glob("*.log")))
        yield env
    finally:
        sh("scancel", "--full", "--partition=test", env=env, check=False)
        pids = [p for p in map(pid_from, pidfiles) if p is not None]
        signal_pids(pids, signal.SIGTERM)
        time.sleep(1)
        end_conf_processes(conf)
        signal_pids(pids, signal.SIGKILL)


def _submit(env: dict[str, str], script: str, out: Path, sbatch_args: list[str],
            extra_env: dict[str, str], args: list[str], wait: bool) -> str:
    """Submit one of launch/slurm's scripts (``wait``: until it ends); return sbatch's output."""
    out.mkdir(parents=True, exist_ok=True)
    job_env = {**env, "OUT": str(out / "results"),
               "HVDSCALE": f"{sys.executable} -m hvdscale", **extra_env}
    r = subprocess.run(["sbatch", *(["--wait"] if wait else ["--parsable"]),
                        f"--output={out / 'job.out'}", *sbatch_args, f"launch/slurm/{script}",
                        "configs/demo.yaml", *args],
                       cwd=ROOT, env=job_env, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, f"sbatch: {r.stdout}{r.stderr}\njob output:\n{_output(out)}"
    return r.stdout.strip()


def _wait_jobs(env: dict[str, str], job_ids: list[str], timeout: float = 400) -> None:
    """Poll until the jobs end and assert they completed with exit 0. (``sbatch --wait`` polls
    with growing sleeps of up to 32 s; one-second polls keep the test short.)"""
    deadline = time.monotonic() + timeout
    for job in job_ids:
        info = ""
        while time.monotonic() < deadline:
            info = subprocess.run(["scontrol", "-o", "show", "job", job], env=env,
                                  capture_output=True, text=True, timeout=20).stdout
            if "JobState=PENDING" not in info and "JobState=RUNNING" not in info \
                    and "JobState=COMPLETING" not in info:
                break
            time.sleep(1)
        assert "JobState=COMPLETED" in info and "ExitCode=0:0" in info, info


def _output(out: Path) -> str:
    log = out / "job.out"
    return log.read_text() if log.exists() else ""


def _records(out: Path) -> list[dict]:
    res = out / "results" / "results.jsonl"
    return [json.loads(x) for x in res.read_text().splitlines()] if res.exists() else []


def test_one_node_sweep_script_runs_every_point_with_srun(slurm: dict[str, str],
                                                           tmp_path: Path) -> None:
    # No sbatch options: the script's own #SBATCH header (one node, 2 tasks) is the allocation.
    # PyTorch's own DDP too: its rendezvous is agreed over MPI, which srun's PMIx provides.
    _submit(slurm, "sweep.sbatch", tmp_path, [],
            {"NP": "1,2", "STRATEGIES": "horovod,ps,ddp"}, TINY, wait=True)
    text, recs = _output(tmp_path), _records(tmp_path)
    assert "[6/6] torch ddp np=2: ok" in text, text
    assert sorted((r["key"]["strategy"], r["ranks"], r["status"]) for r in recs) == [
        ("ddp", 1, "ok"), ("ddp", 2, "ok"), ("horovod", 1, "ok"), ("horovod", 2, "ok"),
        ("ps", 1, "ok"), ("ps", 2, "ok")]
    # Each rank count's points ran in one srun step with PMIx, not an mpirun.
    (log,) = (tmp_path / "results/logs").glob("r1_np2_torch_*_1.stdout")
    launch = log.read_text().splitlines()[0]
    assert launch.startswith("$ srun --mpi=pmix -n 2"), launch
    assert len({r["launch"]["id"] for r in recs if r["ranks"] == 2}) == 1
    assert "|Ranks|" in text and (tmp_path / "results" / "report.md").exists()


def test_multinode_scripts_work_inside_an_allocation(slurm: dict[str, str],
                                                     tmp_path: Path) -> None:
    """The several-node scripts on a one-node allocation: horovodrun with the hostfile made
    from the node list, and mpirun reading the allocation itself."""
    # Both queued at once; the second starts when the first frees the node's two CPUs.
    one_node = ["--nodes=1", "--ntasks-per-node=2"]
    jobs = [_submit(slurm, "multinode_horovodrun.sbatch", tmp_path / "hvd", one_node,
                    {"NP": "2", "STRATEGIES": "horovod"}, TINY, wait=False),
            _submit(slurm, "multinode_mpirun.sbatch", tmp_path / "mpi", one_node,
                    {"NP": "2", "STRATEGIES": "ps"}, TINY, wait=False)]
    _wait_jobs(slurm, jobs)
    text, recs = _output(tmp_path / "hvd"), _records(tmp_path / "hvd")
    (hostfile,) = (tmp_path / "hvd" / "results").glob("hostfile.*")
    node = subprocess.run(["sinfo", "-h", "-o", "%N"], env=slurm, capture_output=True,
                          text=True, timeout=20).stdout.strip()
    assert hostfile.read_text() == f"{node} slots=2\n"
    assert [(r["key"]["strategy"], r["ranks"], r["status"]) for r in recs] == [
        ("horovod", 2, "ok")], text
    (log,) = (tmp_path / "hvd/results/logs").glob("r1_np2_torch_*_1.stdout")
    launch = log.read_text()
    assert launch.startswith("$ horovodrun --mpi -np 2 -hostfile ")

    text, recs = _output(tmp_path / "mpi"), _records(tmp_path / "mpi")
    assert [(r["key"]["strategy"], r["ranks"], r["status"]) for r in recs] == [
        ("ps", 2, "ok")], text
    (log,) = (tmp_path / "mpi/results/logs").glob("r1_np2_torch_*_1.stdout")
    launch = log.read_text()
    assert launch.startswith("$ mpirun -np 2 ") and "--hostfile" not in launch


def test_the_torchrun_script_runs_ddp_with_srun_and_torchrun_without_mpi(
        slurm: dict[str, str], tmp_path: Path) -> None:
    """launch/slurm/multinode_torchrun.sbatch on one node: srun starts one torchrun agent,
    which starts 2 ranks; mpi4py is unimportable there (tests/torchrun/nompi)."""
    nompi = ROOT / "tests" / "torchrun" / "nompi"
    _submit(slurm, "multinode_torchrun.sbatch", tmp_path,
            ["--nodes=1", "--ntasks-per-node=1", "--cpus-per-task=2"],
            {"NPROC": "2", "STRATEGIES": "ddp", "PYTHONPATH": f"{nompi}:{ROOT}",
             "TORCHRUN": f"{sys.executable} -m torch.distributed.run"}, TINY, wait=True)
    text, recs = _output(tmp_path), _records(tmp_path)
    assert "1 node(s) x 2 rank(s)" in text, text
    assert [(r["key"]["strategy"], r["ranks"], r["status"], r["launcher_backend"])
            for r in recs] == [("ddp", 2, "ok", "torchrun")], text


def test_doctor_under_srun_reports_the_allocation(slurm: dict[str, str]) -> None:
    # srun's PMIx joins the two tasks into one MPI job: one report, the job's allocation.
    env = {**slurm, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
    r = subprocess.run(["srun", "--mpi=pmix", "-n", "2", "--time=10", sys.executable, "-m",
                        "hvdscale", "doctor", "--json"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    lines = {ln["check"]: ln for ln in doc["lines"]}
    assert lines["ranks"]["value"] == "2 launched, facts gathered over mpi"
    assert lines["slurm"]["status"] == "ok" and lines["slurm"]["value"].startswith("job ")
    assert ", 2 task(s)" in lines["slurm"]["value"]
    assert doc["plan"]["np"] == 2 and doc["plan"]["layout_from"] == "launch"
    assert [f["slurm"]["SLURM_PROCID"] for f in doc["facts"]] == ["0", "1"]
