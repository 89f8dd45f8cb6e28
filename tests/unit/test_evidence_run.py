"""evidence/evidence_run.sh (issue 43): its plan fits the device tool's limits, and a GPU part
whose budget cannot hold a stage skips it and names the command that runs it later."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "evidence" / "evidence_run.sh"


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env}, cwd="/")


def test_the_plan_fits_one_session_of_device_time() -> None:
    r = _run("--plan")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "call 1: --part cpu, timeout_s 540" in r.stdout
    assert "call 2: --part gpu, timeout_s 300" in r.stdout
    # The GPU stages listed are gpu_device.sh's own, in its order of value.
    assert "install 180, check 120, seeds 300, profile 360, strategies 240" in r.stdout
    assert "= 870s of 900s" in r.stdout


def test_a_plan_past_the_limits_is_refused() -> None:
    over_call = _run("--plan", CPU_TIMEOUT_S="650")
    assert over_call.returncode == 1 and "a call exceeds 600s" in over_call.stdout
    over_session = _run("--plan", CPU_TIMEOUT_S="590", GPU_TIMEOUT_S="590")
    assert over_session.returncode == 1
    assert "exceed the session's 900s" in over_session.stdout


def test_stages_the_budget_cannot_hold_are_skipped_and_named(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    out = tmp_path / "gpu"
    r = _run("--rehearse-cpu", "--part", "gpu", str(bundle), str(out),
             BUDGET_S="100", STAGES="install,check,seeds,profile")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (out / "skipped.txt").read_text().split() == ["install", "check", "seeds", "profile"]
    assert not (out / "install.log").exists()  # nothing ran, so nothing was installed
    assert (out / "next.txt").read_text().startswith("STAGES=install,check,seeds,profile ")
    assert "skipped (no time left): install check seeds profile" in r.stdout


def test_bad_input_is_one_line() -> None:
    r = _run("--part", "both", "x", "y")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--part cpu|gpu" in r.stderr


def test_the_call_ends_when_the_script_does_not_when_the_packer_wakes(tmp_path: Path) -> None:
    """``--pack``'s packer sleeps PACK_EVERY_S between packs; its sleep held the caller's pipes
    open that long after the script ended (a device call, or a test, waited up to 20 s for
    nothing; 30 s here before the fix). The part fails at once (a bundle that is no bundle),
    after the packer started: the call returns within seconds, with the last pack written."""
    bundle = tmp_path / "fake.tar.gz"
    bundle.write_text("not a bundle\n")
    pack = tmp_path / "back" / "cpu.tar.gz"
    r = subprocess.run(["bash", str(SCRIPT), "--rehearse-cpu", "--pack", str(pack), "--part",
                        "cpu", str(bundle), str(tmp_path / "out")], capture_output=True,
                       text=True, timeout=30, env={**os.environ, "PACK_EVERY_S": "600",
                                                   "BUDGET_S": "100"}, cwd="/")
    assert r.returncode == 1 and "evidence_run --part cpu ended" in r.stdout, r.stdout + r.stderr
    assert pack.is_file()
