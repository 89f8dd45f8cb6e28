"""The wrapper mutmut runs the tests through (issue 39, tools/mutation/mutation_runner.py): every
failing exit reaches mutmut as 1, and when mutmut kills the wrapper at its time limit, every
process the tests started dies with it, so the output mutmut reads ends instead of hanging the
run."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

MUTATION = Path(__file__).resolve().parents[2] / "tools" / "mutation"
sys.path.insert(0, str(MUTATION))

import mutation_runner  # noqa: E402


@pytest.mark.parametrize(("code", "seen"), [(0, 0), (1, 1), (2, 1), (5, 1), (124, 1)])
def test_every_failing_exit_is_one(code: int, seen: int) -> None:
    assert mutation_runner.run(60, [sys.executable, "-c", f"raise SystemExit({code})"]) == seen


def test_tests_past_the_wrappers_own_limit_fail() -> None:
    t0 = time.monotonic()
    assert mutation_runner.run(1, ["sleep", "30"]) == 1
    assert time.monotonic() - t0 < 10


def test_a_killed_wrapper_takes_the_tests_every_process_with_it() -> None:
    # As mutmut runs it: output to a stream read to its end, the wrapper SIGKILLed at the time
    # limit; the tests left a process in a process group of its own (as mpirun's ranks are).
    group = "import os, time; os.setpgid(0, 0); time.sleep(60)"
    cmd = [sys.executable, str(MUTATION / "mutation_runner.py"), "600", "sh", "-c",
           f"{sys.executable} -c '{group}' & sleep 60"]
    wrapper = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(2)  # the tests and the watchdog have started
    tests = [c for c in psutil.Process(wrapper.pid).children() if c.name() == "sh"]
    assert len(tests) == 1
    sid = tests[0].pid  # the tests' own session
    try:
        assert len(mutation_runner.session_pids(sid)) == 3  # sh, sleep, python in its group
        wrapper.send_signal(signal.SIGKILL)
        wrapper.wait()
        ready, _, _ = select.select([wrapper.stdout], [], [], 10)
        assert ready and wrapper.stdout.read() == b"", "the tests still hold the output open"
        deadline = time.monotonic() + 5
        while mutation_runner.session_pids(sid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert mutation_runner.session_pids(sid) == []
    finally:
        wrapper.kill()
        mutation_runner.kill_session(sid)  # a failed run leaves no sleeper behind
