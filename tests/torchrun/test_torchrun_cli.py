"""`hvdscale run` under torchrun, for real on 2 ranks, on a target with no MPI: tests/run.sh's
torchrun phase runs this with mpi4py unimportable (tests/torchrun/nompi first on PYTHONPATH,
given to the ranks here too) and no MPI launcher on PATH.

DDP and independent replicas run and say torchrun in their record; horovod, ps and mwms are
refused in one line before anything loads; a rank that raises or is killed ends the job
promptly, non-zero; a Ctrl-C ends every rank and leaves the finished records as they were.
torchrun's own restarts are off (``--max-restarts 0``, its default, said explicitly here as
docs/running.md asks), and torchrun prints its own failure summary after a failed rank, a
traceback of torchrun's own frames: what is checked is that no rank adds one of hvdscale's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOMPI = Path(__file__).resolve().parent / "nompi"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
            "--max-restarts", "0", "--monitor-interval", "0.1"]
SMALL = ["--set", "measure.warmup_steps=2", "--set", "measure.steps=6",
         "--set", "data.synthetic.sentences_per_rank=128"]
EARLIER = json.dumps({"status": "ok", "earlier": True}) + "\n"
PROMPT_S = 45
"""A failed or killed rank's job ends within this (start-up included; a hang would hit none)."""


def _env(**extra: str) -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    pythonpath = f"{NOMPI}:{ROOT}" + (f":{path}" if path else "")
    return {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1", **extra}


def _cmd(out: Path, *sets: str) -> list[str]:
    return [*TORCHRUN, "-m", "hvdscale", "run", "configs/demo.yaml", "--out", str(out), *sets]


def _launch(out: Path, *sets: str, fault: str = "") -> tuple[subprocess.CompletedProcess, float]:
    t = time.monotonic()
    r = subprocess.run(_cmd(out, *SMALL, *sets), cwd=ROOT, env=_env(HVDSCALE_FAULT=fault),
                       capture_output=True, text=True, timeout=180)
    return r, time.monotonic() - t


def _seed(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.jsonl").write_text(EARLIER)


def _no_rank_traceback(out: str) -> bool:
    """Only torchrun's own traceback, if any: no frame of hvdscale's."""
    return "hvdscale/" not in out and out.count("Traceback") <= 1


def test_the_target_has_no_mpi() -> None:
    r = subprocess.run([sys.executable, "-c", "import mpi4py"], env=_env(), capture_output=True,
                       text=True)
    assert r.returncode != 0 and "ImportError" in r.stderr
    if os.environ.get("HVDSCALE_TORCHRUN_PHASE"):  # tests/run.sh strips the MPI launchers
        assert not any(shutil.which(x) for x in ("mpirun", "mpiexec", "horovodrun"))


def _check_record(rec: dict, strategy: str) -> None:
    assert rec["status"] == "ok" and rec["ranks"] == 2
    assert rec["launcher_backend"] == "torchrun"
    assert rec["versions"]["mpi"] is None, rec["versions"]  # no MPI library loaded or found
    if strategy == "ddp":
        assert rec["strategy"]["rendezvous"]["source"] == "launcher", rec["strategy"]


def test_a_ddp_run_under_torchrun_records_its_launch(tmp_path: Path) -> None:
    _seed(tmp_path)
    r, _ = _launch(tmp_path, "--set", "strategy.name=ddp")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "/ddp ranks=2 words/s=" in out
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert lines[0] + "\n" == EARLIER and len(lines) == 2
    _check_record(json.loads(lines[1]), "ddp")


def test_a_torchrun_sweep_runs_a_round_in_one_launch_and_a_failed_point_is_recorded(
        tmp_path: Path) -> None:
    """One torchrun for the round's two points (``hvdscale run-points``: the points agree over
    torchrun's store); ddp fails on every rank, so it gets a failed record and independent
    still runs in the same launch."""
    sweep = [sys.executable, "-m", "hvdscale", "sweep", "configs/demo.yaml", "--np", "2",
             "--strategies", "ddp,independent", "--launcher", "torchrun", "--out",
             str(tmp_path), "--no-plot", "--timeout", "150", *SMALL]
    r = subprocess.run(sweep, cwd=ROOT, env=_env(HVDSCALE_FAULT="*:model",
                                                 HVDSCALE_FAULT_ARGV="strategy.name=ddp"),
                       capture_output=True, text=True, timeout=240)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-3000:]  # a point failed: the sweep says so, after the report
    assert "[1/2] torch ddp np=2: FAILED" in out and "[2/2] torch independent np=2: ok" in out, \
        out[-3000:]
    recs = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [(x["status"], x["config"]["strategy"]["name"]) for x in recs] == [
        ("failed", "ddp"), ("ok", "independent")]
    _check_record(recs[1], "independent")
    (log,) = (tmp_path / "logs").glob("*.stdout")  # one launch for both points
    head = log.read_text().splitlines()[0]
    assert "torch.distributed.run --standalone" in head and "run-points" in head, head
    assert (tmp_path / "report.md").exists()


@pytest.mark.parametrize("sets,why", [
    (("strategy.name=horovod",), "Horovod's ranks are started by horovodrun"),
    (("framework=tf", "strategy.name=mwms"), "TF_CONFIG is agreed over MPI"),
])
def test_a_strategy_that_needs_mpi_is_refused_in_one_line(sets: tuple[str, ...], why: str,
                                                          tmp_path: Path) -> None:
    _seed(tmp_path)
    r, took = _launch(tmp_path, *(a for s in sets for a in ("--set", s)))
    out = r.stdout + r.stderr
    assert r.returncode != 0
    name = sets[-1].split("=")[1]
    said = [x for x in out.splitlines() if f"strategy.name={name} does not run under torchrun" in x]
    assert len(said) == 1, out[-3000:]
    assert why in said[0] and "launch it with mpirun" in said[0]
    assert _no_rank_traceback(out), out[-3000:]
    assert took < PROMPT_S, f"{took:.0f}s"  # refused before the framework loads
    assert (tmp_path / "results.jsonl").read_text() == EARLIER


@pytest.mark.parametrize("fault,said", [("*:mark:step:2,1:kill:step:4", "SIGKILL"),
                                        ("*:mark:step:2,1:step:4", "injected failure")])
def test_a_rank_that_fails_or_is_killed_ends_the_job(fault: str, said: str,
                                                     tmp_path: Path) -> None:
    _seed(tmp_path)
    r, took = _launch(tmp_path, "--set", "strategy.name=ddp", fault=fault)
    out = r.stdout + r.stderr
    assert all(f"rank {k} reached step:2" in out for k in (0, 1)), out[-3000:]  # in training
    assert r.returncode != 0 and took < PROMPT_S, f"{took:.0f}s: {out[-3000:]}"
    assert said in out, out[-3000:]
    if "kill" not in fault:
        assert out.count("hvdscale: rank 1 failed:") == 1, out[-3000:]
    # The other rank sees its peer go; torchrun ends it before it adds a message.
    assert "another rank left the job" not in out and "hvdscale: rank 0" not in out
    assert (tmp_path / "results.jsonl").read_text() == EARLIER


def _alive(marker: str) -> list[str]:
    r = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return r.stdout.split()


def test_ctrl_c_ends_every_rank_and_keeps_the_finished_records(tmp_path: Path) -> None:
    _seed(tmp_path)
    marker = f"name=ctrlc-{tmp_path.name}"  # a valid config value, unique to this test
    cmd = _cmd(tmp_path, "--set", "strategy.name=ddp", "--set", "measure.warmup_steps=1",
               "--set", "measure.steps=100000", "--set", marker)
    p = subprocess.Popen(cmd, cwd=ROOT, env=_env(HVDSCALE_FAULT="*:mark:step:2"),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    try:
        end = time.monotonic() + 90
        while sum("reached step:2" in x for x in lines) < 2 and time.monotonic() < end:
            assert p.poll() is None, "".join(lines)[-3000:]
            time.sleep(0.3)
        assert len(_alive(marker)) >= 3, "".join(lines)[-3000:]  # torchrun and both ranks
        os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
        p.wait(timeout=30)
        reader.join(timeout=10)
        end = time.monotonic() + 10
        while _alive(marker) and time.monotonic() < end:
            time.sleep(0.2)
        assert not _alive(marker), "a rank survived the Ctrl-C"
        assert p.returncode != 0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    out = "".join(lines)
    assert all(f"hvdscale: rank {k} interrupted" in out for k in (0, 1)), out[-3000:]
    assert "hvdscale/" not in out, out[-3000:]  # no rank's traceback
    assert (tmp_path / "results.jsonl").read_text() == EARLIER


def test_a_run_with_no_launcher_and_no_mpi_says_what_to_do(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "hvdscale", "run", "configs/demo.yaml", "--out",
                        str(tmp_path), *SMALL], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "Traceback" not in out, out[-3000:]
    (line,) = [x for x in out.splitlines() if x.startswith("hvdscale: error")]
    assert "mpi4py does not import" in line and "torchrun --nproc-per-node N" in line
