"""``hvdscale sweep`` for real under mpirun: points, progress, report, skipping, failures.

One module-scoped sweep (1 and 2 ranks x all three strategies, tiny settings) feeds the report
checks and the rerun; the failure and bad-input tests use their own directories.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "TF_CPP_MIN_LOG_LEVEL": "2"}
TINY = ["--set", "measure.warmup_steps=1", "--set", "measure.steps=3",
        "--set", "data.synthetic.sentences_per_rank=64"]

pytestmark = pytest.mark.slow


def sweep(*args: str, env: dict[str, str] | None = None,
          timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hvdscale", "sweep", "configs/demo.yaml", *args],
                          cwd=ROOT, env=env or ENV, capture_output=True, text=True,
                          timeout=timeout)


def records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("sweep")
    r = sweep("--np", "1,2", "--strategies", "horovod,ps,independent", "--out", str(out), *TINY)
    return out, r


def test_sweep_runs_every_point_and_writes_the_report(swept: tuple) -> None:
    out, r = swept
    assert r.returncode == 0, r.stdout + r.stderr
    # Progress lines (a busy host's warning before a launch is its own line: issue 32).
    lines = [ln for ln in r.stdout.splitlines()
             if ln.startswith("[") and ": warning: this host is busy" not in ln]
    want = [("horovod", 1), ("ps", 1), ("independent", 1), ("horovod", 2), ("ps", 2),
            ("independent", 2)]
    assert len(lines) == 6
    for i, (line, (s, n)) in enumerate(zip(lines, want, strict=True), 1):
        # point i of n, words/s and times on one line each
        assert line.startswith(f"[{i}/6] torch {s} np={n}: ok "), line
        assert " words/s in " in line and "(elapsed " in line
        # the sweep's time left, from the points measured so far; none after the last
        assert (", sweep ~" in line and " left)" in line) == (i < 6), line
    recs = records(out)
    assert sorted((x["key"]["strategy"], x["ranks"]) for x in recs) == sorted(want)
    assert all(x["status"] == "ok" and x["words_per_s"] > 0 for x in recs)
    # The report: per-strategy seed-notes tables, the side-by-side table, CSV and the plot.
    md = (out / "report.md").read_text()
    assert r.stdout.rstrip().endswith(md.rstrip())  # the sweep ends by printing it
    for head in ("### torch / fused / horovod", "### torch / fused / ps",
                 "### torch / fused / independent",
                 "### Side by side: framework x strategy x RNN implementation",
                 "Processing speed (words/s)", "Speedup ratio", "Efficiency (%)"):
        assert head in md
    assert "Failed points" not in md
    csv = (out / "report.csv").read_text().splitlines()
    assert csv[0].startswith("experiment,name,") and len(csv) == 1 + 6
    (png,) = out.glob("scaling_*.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    # Each launch (one per rank count) is logged with its command line.
    (log,) = out.glob("logs/r1_np2_torch_*_1.stdout")
    assert log.read_text().startswith("$ mpirun -np 2 ")


def test_every_record_and_the_report_carry_start_up_and_the_sweeps_own_time(swept: tuple
                                                                            ) -> None:
    out, _ = swept
    for rec in records(out):
        s = rec["startup"]
        assert len(s["per_rank"]) == rec["ranks"] and s["total_max_s"] > 0
        # A launch's first point starts from the OS's process start: the interpreter and
        # torch's import are in it; the points after it start from their own beginning.
        first = rec["launch"]["position"] == 0
        assert all((r["phases"]["imports"] > 0.3) is first and r["phases"]["first_step"] > 0
                   for r in s["per_rank"])
    timing = [json.loads(x) for x in (out / "sweep_timing.jsonl").read_text().splitlines()]
    assert len(timing) == 6 and all(t["launch_s"] > t["point_s"] > 0 for t in timing)
    assert len({t["launch"] for t in timing}) == 2
    md = (out / "report.md").read_text()
    assert "## Start-up: process start to first step" in md
    assert "| demo torch / fused / ps | 2 | 1 |" in md
    assert "What the sweep cost: 2 launch(es) for 6 point(s)" in md


def test_rerun_skips_recorded_points_and_redo_measures_again(swept: tuple) -> None:
    out, _ = swept
    before = (out / "results.jsonl").read_bytes()
    t = time.monotonic()
    r = sweep("--np", "1,2", "--strategies", "horovod,ps,independent", "--out", str(out), *TINY,
              "--no-plot")
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t < 30  # nothing launched: no torch import, no mpirun
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("[")]
    assert len(lines) == 6 and all(": skipped, already recorded " in ln for ln in lines), lines
    assert (out / "results.jsonl").read_bytes() == before

    # A changed setting is a different point; --redo measures a recorded one again.
    r = sweep("--np", "1", "--strategies", "independent", "--out", str(out), *TINY, "--redo",
              "--no-plot")
    assert r.returncode == 0, r.stderr
    assert "[1/1] torch independent np=1: ok " in r.stdout
    recs = records(out)
    assert len(recs) == 7 and recs[-1]["key"]["strategy"] == "independent"
    assert "|1|1|" in (out / "report.md").read_text()  # still one table; 2 runs at 1 rank


def test_failed_point_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    # The ps point fails at run time, on its rank (a fault injected only into processes whose
    # command line says strategy.name=ps); the independent point after it still runs.
    env = {**ENV, "HVDSCALE_FAULT": "0:model", "HVDSCALE_FAULT_ARGV": "strategy.name=ps"}
    args = ["--np", "1", "--strategies", "ps,independent", "--out", str(tmp_path), *TINY,
            "--no-plot"]
    r = sweep(*args, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "[1/2] torch ps np=1: FAILED after " in r.stdout
    assert "failed on every rank: RuntimeError: injected failure at model" in r.stdout
    assert "[2/2] torch independent np=1: ok " in r.stdout  # went on past the failure
    assert "1 of 2 points failed" in r.stdout
    failed, ok = records(tmp_path)
    assert failed["status"] == "failed" and ok["status"] == "ok"
    assert failed["key"]["strategy"] == "ps" and failed["ranks"] == 1 and failed["workers"] == 1
    assert "injected failure at model" in failed["error"]
    # The failed record belongs to the same experiment as the runner's records.
    assert failed["key"]["experiment"] == ok["key"]["experiment"]
    md = (tmp_path / "report.md").read_text()
    assert "## Failed points" in md
    assert f"|{ok['key']['experiment']}|torch / fused / ps|1|failed on every rank: " in md

    # Rerun: the failed point is tried again, the recorded one skipped.
    r = sweep(*args, env=env)
    assert "[1/2] torch ps np=1: FAILED" in r.stdout
    assert "[2/2] torch independent np=1: skipped" in r.stdout
    assert [x["status"] for x in records(tmp_path)] == ["failed", "ok", "failed"]


def test_a_point_past_its_time_limit_is_ended_and_marked(tmp_path: Path) -> None:
    t = time.monotonic()
    r = sweep("--np", "1,2", "--strategies", "independent", "--out", str(tmp_path), *TINY,
              "--timeout", "1", "--no-plot")
    assert r.returncode == 1
    assert "[1/2] torch independent np=1: FAILED" in r.stdout and "timed out after 1 s" in r.stdout
    assert "[2/2] torch independent np=2: FAILED" in r.stdout
    assert time.monotonic() - t < 60
    assert [x["timed_out"] for x in records(tmp_path)] == [True, True]
    time.sleep(0.5)
    left = [p for p in psutil.process_iter(["cmdline"])
            if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    assert not left, left  # the launcher and its ranks are gone


@pytest.fixture()
def no_launch(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """PATH whose launchers only leave a mark: proof that bad input launches nothing."""
    bindir, mark = tmp_path / "bin", tmp_path / "launched"
    bindir.mkdir()
    for name in ("mpirun", "horovodrun", "srun"):
        f = bindir / name
        f.write_text(f"#!/bin/sh\necho {name} >> {mark}\nexit 1\n")
        f.chmod(0o755)
    return {**ENV, "PATH": f"{bindir}:{ENV['PATH']}"}, mark


@pytest.mark.parametrize("args,needle", [
    (["--launcher", "slurm"], "unknown launcher 'slurm'; choose from mpirun, horovodrun, "
     "srun, torchrun"),
    (["--np", "0"], "--np entries must be positive integers"),
    (["--np=-2"], "--np entries must be positive integers"),
    (["--np", "1,two"], "(got 'two' in '1,two')"),
    (["--np", ""], "--np needs a comma-separated list"),
    (["--strategies", "horovod,allreduce"], "unknown strategy 'allreduce'"),
    (["--hostfile", "hostfiles/localhost", "--np", "1,2,4"],
     "hostfile hostfiles/localhost holds 2 slots (localhost slots=2); 4 ranks do not fit"),
    (["--hostfile", "BADHOSTS"], "BADHOSTS:2: host localhost is listed twice"),
    (["--hostfile", "hostfiles/nonexistent"], "hostfile not found: hostfiles/nonexistent"),
    (["--np", "1,512"], "--np 512 is more ranks than this host's"),
    (["--launcher", "srun", "--hostfile", "hostfiles/localhost"], "does not apply to srun"),
    (["--config-missing"], "config file not found: configs/nope.yaml"),
    (["--strategies", "ps", "--set", "strategy.ps.num_servers=2"],
     "point torch ps np=1: strategy.ps.num_servers=2 is more than the 1 ranks of this job"),
    (["--set", "data.source=text", "--set", "data.text.src=/nonexistent/s.txt",
      "--set", "data.text.tgt=/nonexistent/t.txt"],
     "data.text.src: corpus file not found: /nonexistent/s.txt"),
])
def test_bad_input_is_one_error_and_launches_nothing(args: list[str], needle: str,
                                                     tmp_path: Path, no_launch: tuple,
                                                     swept: tuple) -> None:
    env, mark = no_launch
    out = tmp_path / "results"
    shutil.copytree(swept[0], out)  # earlier results that must stay untouched
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    bad = tmp_path / "bad_hosts"
    bad.write_text("localhost slots=1\nlocalhost slots=1\n")
    args = [str(bad) if a == "BADHOSTS" else a for a in args]
    cmd = ["--np", "1,2", *args, "--out", str(out), *TINY]
    if "--config-missing" in args:
        cmd.remove("--config-missing")
        r = subprocess.run([sys.executable, "-m", "hvdscale", "sweep", "configs/nope.yaml", *cmd],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    else:
        r = sweep(*cmd, env=env, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(errors) == 1 and errors[0].startswith("hvdscale: error: "), r.stderr
    assert needle.replace("BADHOSTS", str(bad)) in errors[0], errors[0]
    assert r.stdout == ""
    assert not mark.exists()  # no launcher ran
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
