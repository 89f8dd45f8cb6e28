"""The multi-rank test harness itself: a failure on rank 1 is visible from rank 0 and in the
summary line, a hang on one rank is cut by the per-test timeout, and no-tests is a failure."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.tagged import rank_text

ROOT = Path(__file__).resolve().parents[2]
SELFTEST = "tests/harness_selftest/test_rank1_fails.py"


def _env(reports: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "HVDSCALE_TEST_REPORTS": str(reports), **extra}


# The self-test makes one launch; summarize.py is told so (CI's run checks all of its own).
_ONE_LAUNCH = {**os.environ, "HVDSCALE_SUMMARIZE_LAUNCHES": "mpirun-np2"}


def _pytest_np2(reports: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    cmd = ["mpirun", "-np", "2", "--tag-output", sys.executable, "-m", "pytest",
           "-p", "no:cacheprovider", "-q", "--color=no", *args]
    return subprocess.run(cmd, cwd=ROOT, env=_env(reports, **env), capture_output=True,
                          text=True, timeout=120)


def test_rank1_failure_shows_on_rank0_and_in_summary(tmp_path: Path) -> None:
    r = _pytest_np2(tmp_path, SELFTEST)
    assert r.returncode != 0
    rank0 = rank_text(r.stdout, 0)  # by tag: two ranks' chunks can meet inside one line
    assert "failed on rank 1 of 2" in rank0 and "deliberate failure on rank 1" in rank0, \
        r.stdout[-6000:]
    assert sorted(p.name for p in tmp_path.glob("*.xml")) == ["mpirun-np2-rank0.xml",
                                                              "mpirun-np2-rank1.xml"]
    s = subprocess.run([sys.executable, "tests/summarize.py", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, env=_ONE_LAUNCH)
    assert s.returncode == 1
    assert "FAILED [mpirun-np2] (rank 1)" in s.stdout
    assert s.stdout.strip().splitlines()[-1].startswith("tests: 3 passed, 1 failed")


def test_hang_on_one_rank_fails_fast_instead_of_blocking(tmp_path: Path) -> None:
    t = time.monotonic()
    r = _pytest_np2(tmp_path, SELFTEST, "-k", "hangs", SELFTEST_HANG="1",
                    HVDSCALE_TEST_TIMEOUT="5")
    assert r.returncode != 0
    assert time.monotonic() - t < 60
    log = (tmp_path / "hang-mpirun-np2-rank1.log").read_text()
    # faulthandler's dump: the timeout, and the hanging test's frame.
    assert "Timeout" in log and "test_hangs_on_rank_1_only" in log


def test_no_tests_collected_is_a_failure(tmp_path: Path) -> None:
    s = subprocess.run([sys.executable, "tests/summarize.py", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, env=_ONE_LAUNCH)
    assert s.returncode == 1
    assert "FAILED launch mpirun-np2: no test passed in it" in s.stdout
    assert "tests: 0 passed, 1 failed" in s.stdout


def test_a_rank_that_fails_before_a_collective_ends_the_job(tmp_path: Path) -> None:
    t = time.monotonic()
    r = _pytest_np2(tmp_path, SELFTEST, "-x", "-k", "before_a_collective", SELFTEST_CROSS="1",
                    HVDSCALE_TEST_TIMEOUT="5")
    assert r.returncode != 0
    assert time.monotonic() - t < 60  # rank 1's own test limit ends it, not the 120-s cap
    # The job ends before rank 0 reports: each rank's hang log says what happened.
    rank0 = (tmp_path / "hang-mpirun-np2-rank0.log").read_text()
    assert "failed: " in rank0 and "deliberate failure on rank 0 before" in rank0, rank0
    rank1 = (tmp_path / "hang-mpirun-np2-rank1.log").read_text()
    assert "Timeout" in rank1 and "test_rank_0_fails_before_a_collective" in rank1, rank1
