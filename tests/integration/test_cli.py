"""The command line for real: versions, a recorded run, bad input under mpirun without hangs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "TF_CPP_MIN_LOG_LEVEL": "2"}
TINY = ["--set", "measure.warmup_steps=1", "--set", "measure.steps=2",
        "--set", "data.synthetic.sentences_per_rank=64"]


def _run(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=timeout)


def test_version_names_the_stack() -> None:
    out = _run([sys.executable, "-m", "hvdscale", "--version"]).stdout
    for word in ("hvdscale 0.1.0", "torch 2.13.0", "tensorflow 2.21", "horovod 0.28.1",
                 "MPI library: Open MPI"):
        assert word in out


def test_single_process_run_writes_a_complete_record(tmp_path: Path) -> None:
    r = _run(["hvdscale", "run", "configs/demo.yaml", "--out", str(tmp_path), *TINY])
    assert r.returncode == 0, r.stderr
    (rec,) = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert rec["status"] == "ok" and rec["ranks"] == 1
    assert rec["words"] > 0 and rec["words_per_s"] > 0
    for key in ("config", "versions", "hosts", "threads", "git", "started", "final_loss",
                "fingerprints", "memory", "step_time", "padded_fraction"):
        assert key in rec
    assert rec["versions"]["horovod"] == "0.28.1" and rec["threads"]["intra_op"] == 1
    # device: auto on a machine without a GPU: the CPU, said by the record and by Horovod's side
    assert rec["device"]["per_rank"][0]["kind"] == "cpu" and rec["device"]["gpu"] is None
    assert rec["strategy"]["gpu_operations"] == {"nccl_built": False, "allreduce": "mpi",
                                                 "device": "cpu"}


@pytest.mark.parametrize("args,needle", [
    (["--set", "model.hiden=3"], "unknown config key 'model.hiden'"),
    (["--set", "data.batch_size=-1"], "data.batch_size must be >= 1"),
    (["--set", "data.source=text", "--set", "data.text.src=/nonexistent/src.txt",
      "--set", "data.text.tgt=/nonexistent/tgt.txt"], "corpus file not found"),
    (["--set", "strategy.name=ps", "--set", "strategy.ps.num_servers=3"],
     "more than the 2 ranks"),
    (["--set", "framework=tensorflow"], "framework must be one of torch"),
    (["--set", "strategy.name=allgather"], "strategy.name must be one of horovod, independent"),
    (["--set", "data.synthetic.sentences_per_rank=10"], "larger than the 10 sentences"),
    (["--set", "device=cuda"], "device=cuda but this process sees no GPU; CUDA_VISIBLE_DEVICES="),
    (["--set", "device=gpu"], "device must be one of auto, cpu, cuda"),
])
def test_bad_input_under_mpirun_fails_once_without_hang(args: list[str], needle: str,
                                                        tmp_path: Path) -> None:
    t = time.monotonic()
    r = _run(["mpirun", "-np", "2", "hvdscale", "run", "configs/demo.yaml", "--out",
              str(tmp_path), *TINY, *args], timeout=90)
    assert r.returncode != 0
    assert r.stderr.count(needle) == 1, r.stderr
    assert time.monotonic() - t < 60
    assert not (tmp_path / "results.jsonl").exists()


def _one_error_line(r: subprocess.CompletedProcess, needle: str) -> None:
    """Exit 2 and exactly one stderr line: the error, naming what is wrong; no traceback."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(lines) == 1 and lines[0].startswith("hvdscale: error"), r.stderr
    assert needle in lines[0], lines[0]


def test_one_rank_with_a_dedicated_server_is_refused(tmp_path: Path) -> None:
    # MPI is up when this is found; a one-rank job just exits, without Open MPI's
    # MPI_ABORT banner under the error.
    r = _run(["hvdscale", "run", "configs/demo.yaml", "--out", str(tmp_path), *TINY,
              "--set", "strategy.name=ps", "--set", "strategy.ps.placement=dedicated"])
    _one_error_line(r, "leaves no worker among 1 ranks")
    assert "MPI_ABORT" not in r.stderr + r.stdout


def test_out_that_is_an_existing_file_says_so(tmp_path: Path) -> None:
    f = tmp_path / "results.txt"
    f.write_text("mine\n")
    r = _run(["hvdscale", "run", "configs/demo.yaml", "--out", str(f), *TINY])
    _one_error_line(r, f"results directory {f} is an existing file, not a directory")
    r = _run([sys.executable, "-m", "hvdscale", "sweep", "configs/demo.yaml", "--np", "1",
              "--out", str(f)])
    _one_error_line(r, "is an existing file, not a directory")
    good = tmp_path / "good"
    good.mkdir()
    (good / "results.jsonl").write_text("")
    r = _run([sys.executable, "-m", "hvdscale", "report", str(good), "--out", str(f)])
    _one_error_line(r, f"report directory {f} is an existing file, not a directory")
    assert f.read_text() == "mine\n"


def _bad_inputs(d: Path) -> dict[str, Path]:
    """One file per user-facing input, each broken the way a user's might be."""
    latin1 = "batch: 3\nname: caf\xe9\n".encode("latin-1")
    files = {"config": latin1, "hostfile": b"localhost slots=2 # \xff\n",
             "vocab": b"a\nb\n\xff\xfe\n", "results_latin1": b'{"a": 1}\n\xe9\n',
             "results_nokey": b'{"status": "ok", "ranks": 1, "words_per_s": 3.0}\n',
             "results_list": b"[1, 2]\n", "corpus": b"a b c\nd e f\n"}
    for name, data in files.items():
        (d / name).write_bytes(data)
    return {name: d / name for name in files}


def test_bad_user_inputs_are_one_clear_line(tmp_path: Path) -> None:
    f = _bad_inputs(tmp_path)
    hv = [sys.executable, "-m", "hvdscale"]
    _one_error_line(_run([*hv, "config", str(f["config"])]),
                    f"config file {f['config']} is not UTF-8 text")
    _one_error_line(_run([*hv, "sweep", str(f["config"]), "--np", "1", "--dry-run"]),
                    "is not UTF-8 text")
    _one_error_line(_run([*hv, "config", str(tmp_path)]), "config file not found")
    _one_error_line(_run([*hv, "hostfile", str(f["hostfile"])]), "cannot be read")
    for name, needle in [("results_latin1", "results_latin1:2 is not UTF-8 text"),
                         ("results_nokey", "results_nokey:1: field 'name' of a run record "
                                           "is missing"),
                         ("results_list", "results_list:1 is not a JSON record")]:
        _one_error_line(_run([*hv, "report", str(f[name]), "--out", str(tmp_path / "rep")]),
                        needle)
    _one_error_line(_run([*hv, "report", str(tmp_path / "nothing")]), "no results at")


def test_a_vocabulary_that_is_not_utf8_is_one_clear_line(tmp_path: Path) -> None:
    f = _bad_inputs(tmp_path)
    r = _run(["hvdscale", "run", "configs/demo.yaml", "--out", str(tmp_path / "out"), *TINY,
              "--set", "model.kind=lm", "--set", "model.src_vocab=0",
              "--set", "data.source=text", "--set", f"data.text.src={f['corpus']}",
              "--set", f"data.text.src_vocab_file={f['vocab']}", "--set", "data.batch_size=1"])
    _one_error_line(r, f"data.text.src_vocab_file: vocabulary file {f['vocab']} is not UTF-8")


def test_vocab_mismatch_is_reported(tmp_path: Path) -> None:
    (tmp_path / "s.txt").write_text("a b c\nd e\n")
    (tmp_path / "t.txt").write_text("x y\nz\n")
    r = _run(["hvdscale", "run", "configs/demo.yaml", "--out", str(tmp_path), *TINY,
              "--set", "data.source=text", "--set", f"data.text.src={tmp_path / 's.txt'}",
              "--set", f"data.text.tgt={tmp_path / 't.txt'}", "--set", "data.batch_size=1"])
    assert r.returncode == 2
    assert "model.src_vocab=2000 does not match the vocabulary of data.text.src" in r.stderr


@pytest.mark.parametrize("sets,needle", [
    (["strategy.horovod.timeline=/nonexistent/dir/t.json"],
     "strategy.horovod.timeline=/nonexistent/dir/t.json: directory /nonexistent/dir does not"),
    (["strategy.horovod.autotune=true", "strategy.horovod.autotune_log=/tmp"],
     "strategy.horovod.autotune_log=/tmp is a directory"),
])
def test_horovod_log_paths_that_cannot_be_written_are_refused(sets: list[str], needle: str,
                                                              tmp_path: Path) -> None:
    # Horovod itself only logs an error and runs on without the file.
    r = _run(["hvdscale", "run", "configs/demo.yaml", "--out", str(tmp_path), *TINY,
              *[a for s in sets for a in ("--set", s)]])
    _one_error_line(r, needle)
