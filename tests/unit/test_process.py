"""``study/sweep/process.start``, the one function that starts a launch: on its deadline, and
when the launcher exits leaving processes behind (a lost rank's peers), every process of the
launch is ended, wherever it went (its own session, handed to init), and what happened is one
line. The "launcher" is a small Python script that starts "ranks" the way launchers do.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from hvdscale.study.sweep.process import start

# A launcher that starts one rank in a session of its own that ignores SIGTERM (stuck in a
# collective) and one plain rank, writes their pids, then waits or (argv[2] == "leave") exits.
LAUNCHER = """
import os, signal, subprocess, sys, time
stuck = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
a = subprocess.Popen([sys.executable, "-c", stuck], start_new_session=True)
b = subprocess.Popen(["sleep", "600"])
open(sys.argv[1], "w").write(f"{a.pid} {b.pid}")
if sys.argv[2] == "leave":
    sys.exit(3)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _launch(tmp_path: Path, how: str, limit_s: float):
    pids = tmp_path / "pids"
    logs = (tmp_path / "out.log", tmp_path / "err.log")
    cmd = [sys.executable, "-c", LAUNCHER, str(pids), how]
    t = time.monotonic()
    ended = start(cmd, dict(os.environ), logs, limit_s)
    return ended, time.monotonic() - t, [int(p) for p in pids.read_text().split()]


def test_a_launch_past_its_deadline_is_ended_with_every_process(tmp_path: Path) -> None:
    ended, took, ranks = _launch(tmp_path, "wait", 1.5)
    assert ended.timed_out and ended.why == ("timed out after 1.5 s; ended the launch and its "
                                             "ranks")
    assert took < 1.5 + 10
    assert not [p for p in ranks if _running(p)]
    assert (tmp_path / "out.log").read_text().startswith("$ ")  # the line it started


def test_processes_a_launcher_leaves_behind_are_ended_and_said(tmp_path: Path) -> None:
    ended, _, ranks = _launch(tmp_path, "leave", 60)
    assert not ended.timed_out and ended.rc == 3
    assert ended.left_behind == 2 and ended.why == "exit 3; ended 2 process(es) it left running"
    assert not [p for p in ranks if _running(p)]
