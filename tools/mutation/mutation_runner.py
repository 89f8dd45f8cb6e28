"""The test command mutmut runs for each mutant (issue 39), wrapped for two faults of mutmut 2.5.1.

1. mutmut counts only exit status 1 as "the tests failed": a mutant that breaks an import
   (pytest exits 2), kills a rank (mpirun exits with the rank's signal) or runs past ``timeout``
   (124) would count as a survivor. Here every failing status is 1 and a pass stays 0.
2. mutmut's time limit kills only its own child (SIGKILL, no process group): pytest or mpirun
   under that child kept running and kept open the terminal mutmut reads to its end, so a
   mutant that deadlocked the ranks hung the whole run (noise_scale's and the Horovod step's
   runs stopped so). Here the tests run in a session of their own, and a watchdog process that
   outlives this one kills every process of that session once this one is gone, killed or not:
   mutmut then sees its limit pass and records a timeout, as it means to.

Usage: ``python tools/mutation/mutation_runner.py LIMIT_S CMD ...`` (LIMIT_S: this wrapper's
own limit, past which the tests are killed and count as failed); ``--watch SID`` is the
watchdog's own entry point.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

DONE = b"done"
"""What the wrapper writes to the watchdog when it ends normally (EOF alone: it was killed)."""


def session_pids(sid: int) -> list[int]:
    """Every live process of session ``sid`` (mpirun's ranks have process groups of their own,
    so a process group kill would miss them; they stay in mpirun's session)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # ended while we looked
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if int(fields[3]) == sid:  # state, ppid, pgrp, session
            pids.append(int(entry))
    return pids


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid``; a process that is gone already is no error."""
    for pid in session_pids(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def watch(sid: int) -> int:
    """The watchdog: wait for the wrapper's word on stdin; on EOF without it, kill the session."""
    got = sys.stdin.buffer.read()
    if got != DONE:
        kill_session(sid)
    return 0


def run(limit_s: float, cmd: list[str]) -> int:
    """Run ``cmd`` in its own session: 0 when it passes, 1 for any failure or past ``limit_s``."""
    rc = run_status(limit_s, cmd)
    return 0 if rc == 0 else 1


def run_status(limit_s: float, cmd: list[str], cwd: Path | None = None,
               env: dict[str, str] | None = None, out: IO[bytes] | None = None) -> int | None:
    """``cmd``'s exit status, run as ``run`` runs it; None when it was still running at
    ``limit_s`` (a timeout, told apart from a failure: mutation_recheck.py needs both)."""
    proc = subprocess.Popen(cmd, start_new_session=True, cwd=cwd, env=env, stdout=out,
                            stderr=None if out is None else subprocess.STDOUT)
    read_end, write_end = os.pipe()  # made after the tests start: they never hold it
    subprocess.Popen([sys.executable, __file__, "--watch", str(proc.pid)], stdin=read_end,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)  # its own session: our kill never reaches it
    os.close(read_end)
    try:
        rc = proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        rc = None
    kill_session(proc.pid)  # what the tests left behind would hold mutmut's terminal open
    if rc is None:
        proc.wait()
    os.write(write_end, DONE)
    os.close(write_end)
    return rc


def main(argv: list[str]) -> int:
    """``--watch SID`` or ``LIMIT_S CMD ...``."""
    if len(argv) == 2 and argv[0] == "--watch":
        return watch(int(argv[1]))
    if len(argv) < 2:
        print("usage: mutation_runner.py LIMIT_S CMD ...", file=sys.stderr)
        return 2
    return run(float(argv[0]), argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
