"""Sweep planning without launching: input checks, the launcher command lines, skip matching."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from hvdscale.errors import HvdscaleError
from hvdscale.records.store import read_records
from hvdscale.study.sweep import driver
from hvdscale.study.sweep.driver import (
    Outcome,
    launch_command,
    run_argv,
    run_sweep,
    time_left,
)
from hvdscale.study.sweep.launcher import error_summary
from hvdscale.study.sweep.plan import (
    SweepRequest,
    SweepSpec,
    parse_np,
    parse_strategies,
    plan_sweep,
    point_workers,
    recorded,
)
from hvdscale.study.sweep.shared_launch import shared_command
from tests.records_fixture import failed_record, run_dict, run_record

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "demo.yaml"


def _plan(tmp_path: Path, **kw: Any) -> SweepSpec:
    kw.setdefault("np", "1,2")
    kw.setdefault("strategies", "horovod,ps,independent")
    env = kw.pop("env", dict(os.environ))
    return plan_sweep(SweepRequest(CONFIG, out=tmp_path / "out", **kw), env=env, check_out=False)


def test_np_and_strategy_lists() -> None:
    assert parse_np("4,1, 2,2") == [1, 2, 4]
    assert parse_strategies("ps,horovod,ps") == ["ps", "horovod"]
    for bad in ("", "0", "1,,2", "1,x", "-1", "2.5"):
        with pytest.raises(HvdscaleError, match="--np"):
            parse_np(bad)
    with pytest.raises(HvdscaleError, match="unknown strategy 'allreduce'; choose from"):
        parse_strategies("horovod,allreduce")


def test_points_go_rank_count_by_rank_count(tmp_path: Path) -> None:
    spec = _plan(tmp_path)
    assert [(p.index, p.strategy, p.ranks) for p in spec.points] == [
        (1, "horovod", 1), (2, "ps", 1), (3, "independent", 1),
        (4, "horovod", 2), (5, "ps", 2), (6, "independent", 2)]
    assert all(p.cfg.strategy.name == p.strategy for p in spec.points)


@pytest.mark.parametrize("kw,needle", [
    ({"launcher": "slurm"}, "unknown launcher 'slurm'; choose from mpirun, horovodrun, "
     "srun, torchrun"),
    ({"np": "1,0"}, "--np entries must be positive integers"),
    ({"np": "64"}, "--np 64 is more ranks than this host's"),
    ({"launcher": "srun", "hostfile": ROOT / "hostfiles" / "localhost"},
     "--hostfile does not apply to srun"),
    ({"hostfile": ROOT / "hostfiles" / "localhost", "np": "1,4"}, "holds 2 slots"),
    ({"overrides": ["model.hiden=3"]}, "unknown config key 'model.hiden'"),
    ({"timeout_s": 0}, "--timeout must be a positive number"),
    # What every rank would refuse at start-up (check_world), refused before the first launch:
    ({"overrides": ["strategy.ps.num_servers=2"]},
     "point torch ps np=1: strategy.ps.num_servers=2 is more than the 1 ranks of this job"),
    ({"overrides": ["strategy.ps.placement=dedicated"]},
     "point torch ps np=1: strategy.ps.placement=dedicated with num_servers=1 leaves no worker"),
    ({"overrides": ["data.source=text", "data.text.src=/nonexistent/s.txt",
                    "data.text.tgt=/nonexistent/t.txt"]},
     "data.text.src: corpus file not found: /nonexistent/s.txt"),
    ({"overrides": ["data.source=text", f"data.text.src={CONFIG}", f"data.text.tgt={CONFIG}",
                    "data.text.tgt_vocab_file=/nonexistent/v.txt"]},
     "data.text.tgt_vocab_file: vocabulary file not found: /nonexistent/v.txt"),
])
def test_bad_input_is_refused_before_launch(tmp_path: Path, kw: dict, needle: str) -> None:
    with pytest.raises(HvdscaleError) as e:
        _plan(tmp_path, **kw)
    assert needle in str(e.value)
    assert not (tmp_path / "out").exists()


def test_missing_config(tmp_path: Path) -> None:
    with pytest.raises(HvdscaleError, match="config file not found"):
        plan_sweep(SweepRequest(tmp_path / "none.yaml", "1", "horovod", out=tmp_path),
                   check_out=False)


def test_inside_slurm_the_allocation_bounds_the_ranks(tmp_path: Path) -> None:
    env = {**os.environ, "SLURM_JOB_ID": "7", "SLURM_NTASKS": "8"}
    spec = plan_sweep(SweepRequest(CONFIG, "8", "horovod", launcher="mpirun", out=tmp_path),
                      env=env, check_out=False)
    assert spec.points[-1].ranks == 8
    with pytest.raises(HvdscaleError, match="SLURM_NTASKS=8"):
        plan_sweep(SweepRequest(CONFIG, "16", "horovod", launcher="mpirun", out=tmp_path),
                   env=env, check_out=False)


def test_srun_outside_an_allocation_leaves_placement_to_slurm(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    spec = _plan(tmp_path, np="64", launcher="srun", strategies="horovod", env=env)
    assert spec.points[0].ranks == 64


def test_mpirun_command(tmp_path: Path) -> None:
    spec = _plan(tmp_path, network_interfaces="eth1", launcher_args="--report-bindings",
                 overrides=["measure.steps=3"])
    p = spec.points[4]  # ps at 2 ranks
    cmd = launch_command(spec, p, Path("/tmp/hosts"),
                         env={"PATH": "/x", "HOROVOD_CYCLE_TIME": "1", "SECRET": "no"})
    assert cmd[:7] == ["mpirun", "-np", "2", "--bind-to", "none", "--map-by", "slot"]
    assert ("--allow-run-as-root" in cmd) == (os.geteuid() == 0)
    assert cmd[cmd.index("--hostfile") + 1] == "/tmp/hosts"
    assert "btl_tcp_if_include" in cmd and "eth1" in cmd
    assert "-x" in cmd and "PATH" in cmd and "HOROVOD_CYCLE_TIME" in cmd and "SECRET" not in cmd
    run = cmd[cmd.index(sys.executable):]
    assert run == [sys.executable, "-m", "hvdscale", "run", str(CONFIG), "--set",
                   "measure.steps=3", "--set", "framework=torch", "--set", "strategy.name=ps",
                   "--out", str(spec.out)]
    assert cmd.index("--report-bindings") < cmd.index(sys.executable)


def test_horovodrun_and_srun_commands(tmp_path: Path) -> None:
    spec = _plan(tmp_path, launcher="horovodrun", hostfile=ROOT / "hostfiles" / "localhost",
                 network_interfaces="hvd0")
    cmd = launch_command(spec, spec.points[3], Path("/tmp/clean"))
    assert cmd[:7] == ["horovodrun", "--mpi", "-np", "2", "-hostfile", "/tmp/clean",
                       "--network-interfaces"]
    spec = _plan(tmp_path, launcher="horovodrun")
    assert launch_command(spec, spec.points[3])[:6] == ["horovodrun", "--mpi", "-np", "2", "-H",
                                                        "localhost:2"]
    spec = _plan(tmp_path, launcher="srun", strategies="horovod",
                 env={**os.environ, "SLURM_JOB_ID": "1", "SLURM_NTASKS": "2"})
    assert launch_command(spec, spec.points[1])[:5] == ["srun", "--mpi=pmix", "-n", "2",
                                                        "--kill-on-bad-exit=1"]


def test_recorded_matches_config_and_ranks_only_for_ok(tmp_path: Path) -> None:
    spec = _plan(tmp_path)
    p = spec.points[3]
    ok = run_record(cfg=p.cfg, ranks=2, words_per_s=5.0)
    assert recorded([ok], p) is ok
    assert recorded([failed_record(cfg=p.cfg, ranks=2)], p) is None
    assert recorded([run_record(cfg=p.cfg, ranks=1, words_per_s=5.0)], p) is None
    other = plan_sweep(SweepRequest(CONFIG, "2", "horovod", out=tmp_path,
                                    overrides=["measure.steps=7"]), check_out=False).points[0]
    assert recorded([ok], other) is None  # a changed setting is a new point


def test_dedicated_ps_workers_exclude_servers(tmp_path: Path) -> None:
    spec = _plan(tmp_path, np="4", strategies="ps",
                 overrides=["strategy.ps.placement=dedicated", "strategy.ps.num_servers=1"],
                 env={**os.environ, "SLURM_JOB_ID": "1", "SLURM_NTASKS": "4"})
    assert point_workers(spec.points[0].cfg, 4) == 3


def test_error_summary_keeps_the_telling_line() -> None:
    stderr = ("Traceback (most recent call last):\n  File x\nRuntimeError: boom\n"
              "hvdscale: error (rank 1): injected failure at step:0\n"
              "--------------------------------------------------------------------------\n"
              "Primary job  terminated normally, but 1 process returned\n"
              "a non-zero exit code. Per user-direction, the job has been aborted.\n"
              "mpirun detected that one or more processes exited with non-zero status\n")
    assert error_summary(stderr) == "hvdscale: error (rank 1): injected failure at step:0"
    assert error_summary("") == "(no stderr)"
    assert error_summary("a\nb\nc\nd\n") == "b / c / d"


def test_error_summary_names_a_failed_node_not_the_killed_task() -> None:
    # srun's lines when a node of the step dies (as seen on the two-node test cluster).
    stderr = ("An MPI communication peer process has unexpectedly disconnected.  This\n"
              "  Peer host:  node-b\n"
              "srun: error: Node failure on node-b\n"
              "srun: error: node-a: task 0: Killed\n"
              "srun: launch/slurm: _step_signal: Terminating StepId=1.0\n"
              "srun: Force Terminated StepId=1.0\n")
    assert error_summary(stderr) == "srun: error: Node failure on node-b"


def test_a_point_that_wrote_its_record_then_overran_has_one_status(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A launcher that writes the point's record (as rank 0 does after the last barrier) and
    # then hangs while exiting, past the sweep's time limit.
    spec = dataclasses.replace(_plan(tmp_path, np="1", strategies="independent", timeout_s=1.0),
                               launch_per_point=True)
    point = spec.points[0]
    rec = run_dict(cfg=point.cfg, ranks=1, words_per_s=42.0)
    (tmp_path / "rec.json").write_text(json.dumps(rec) + "\n")
    spec.out.mkdir(parents=True)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mpirun").write_text(f"#!/bin/sh\ncat {tmp_path / 'rec.json'} >> "
                                   f"{spec.out / 'results.jsonl'}\nexec sleep 60\n")
    (bindir / "mpirun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    said: list[str] = []
    result = run_sweep(spec, say=said.append)
    (outcome,) = result.outcomes
    assert outcome.status == "ok" and outcome.words_per_s == 42.0
    kinds = [r.kind for r in read_records(spec.out)]
    assert kinds == ["run"], kinds  # one point, one status: not also "failed"
    # The progress line (after a busy-host warning, when others load this machine).
    said = [s for s in said if ": warning: this host is busy" not in s]
    assert said[0].startswith("[1/1] torch independent np=1: ok 42.0 words/s")
    assert "overran --timeout 1 s" in said[0]
    # A rerun skips it, consistently with its one status.
    assert recorded(read_records(spec.out), point) is not None


def test_frameworks_multiply_the_points_and_reach_the_launch(tmp_path: Path) -> None:
    spec = plan_sweep(SweepRequest(CONFIG, "1,2", "horovod,ps", out=tmp_path,
                                         frameworks="torch,tf"), env={"PATH": os.environ["PATH"]})
    got = [(p.ranks, p.cfg.framework, p.strategy) for p in spec.points]
    assert got == [(n, f, s) for n in (1, 2) for f in ("torch", "tf") for s in ("horovod", "ps")]
    tf_point = next(p for p in spec.points if p.cfg.framework == "tf")
    assert "framework=tf" in driver.run_argv(spec, tf_point)
    assert tf_point.label.startswith("tf ")


def test_frameworks_default_to_the_configs_own(tmp_path: Path) -> None:
    spec = plan_sweep(SweepRequest(CONFIG, "1", "horovod", out=tmp_path,
                                         overrides=["framework=tf"]),
                            env={"PATH": os.environ["PATH"]})
    assert [p.cfg.framework for p in spec.points] == ["tf"]


@pytest.mark.parametrize("bad", ["", "torch,mxnet", "TF"])
def test_bad_frameworks_are_one_clear_error(bad: str, tmp_path: Path) -> None:
    with pytest.raises(HvdscaleError, match="--frameworks: unknown framework"):
        plan_sweep(SweepRequest(CONFIG, "1", "horovod", out=tmp_path, frameworks=bad),
                         env={"PATH": os.environ["PATH"]})


def test_time_left_from_points_measured_so_far_by_rank_count(tmp_path: Path) -> None:
    p = _plan(tmp_path).points  # horovod, ps, independent at 1 rank, then at 2 ranks
    assert time_left([], list(p)) is None
    one = [Outcome(p[0], "ok", 10.0), Outcome(p[1], "failed", 20.0)]
    # Rank counts not launched yet take the mean of all launched points.
    assert time_left(one, [p[2], p[3]]) == pytest.approx(15.0 + 15.0)
    two = [*one, Outcome(p[3], "ok", 40.0)]
    assert time_left(two, [p[4], p[5]]) == pytest.approx(40.0 + 40.0)


def test_progress_interval_reaches_the_points_only_when_given(tmp_path: Path) -> None:
    assert "--progress-every" not in run_argv(_plan(tmp_path), _plan(tmp_path).points[0])
    spec = _plan(tmp_path, progress_every=60.0)
    argv = run_argv(spec, spec.points[0])
    assert argv[argv.index("--progress-every") + 1] == "60"


def test_error_summary_skips_tensorflow_start_up_logs_and_reads_stdout_if_needed() -> None:
    noise = ("WARNING: All log messages before absl::InitializeLog() is called are written to "
             "STDERR\nI0000 00:00:1795520194.683212    6530 port.cc:153] oneDNN custom "
             "operations are on.\n")
    said = "Checking connectivity\nRuntimeError: could not connect to some hosts via ssh\n"
    assert error_summary(noise, stdout=said) == (
        "RuntimeError: could not connect to some hosts via ssh")
    assert error_summary(noise + "hvdscale: error: bad key\n") == "hvdscale: error: bad key"


def test_a_torchrun_sweep_shares_a_launch_per_round_and_refuses_what_needs_mpi(
        tmp_path: Path) -> None:
    spec = _plan(tmp_path, launcher="torchrun", strategies="ddp,independent")
    assert not spec.launch_per_point  # run-points agrees over torchrun's store there
    shared = shared_command(spec, 2, tmp_path / "plan.json")
    assert shared[:3] == [sys.executable, "-m", "torch.distributed.run"] and "run-points" in shared
    cmd = launch_command(spec, spec.points[-1])
    assert cmd[:12] == [sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nnodes", "1", "--nproc-per-node", "2", "--max-restarts", "0",
                        "--monitor-interval", "0.1"]
    assert cmd[12:16] == ["--no-python", sys.executable, "-m", "hvdscale"], cmd
    with pytest.raises(HvdscaleError, match=r"^point torch ps np=1: strategy.name=ps does not "
                                            r"run under torchrun: .*--launcher mpirun\)$"):
        _plan(tmp_path, launcher="torchrun", strategies="ddp,ps")
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost slots=2\n")
    with pytest.raises(HvdscaleError, match="--hostfile does not apply to --launcher torchrun"):
        _plan(tmp_path, launcher="torchrun", strategies="ddp", hostfile=hosts)
