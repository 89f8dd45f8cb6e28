"""The step watchdog (hvdscale.core.supervise) survives whatever the side channel brings, and
ends the job even when its own analysis fails. Each case runs in its own process, because
ending the job is ``os._exit``: the process must exit with code 3, promptly, with one clear
message, instead of living on with a dead watchdog."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALIVE = "the process outlived its watchdog"

# Rank 0 waits in step 3 past a 1 s limit; rank 1's answering address is held by a forger
# that answers every ask with garbage: the old channel's reply shape with "state": "x", and a
# reply in the signed layout with a bad signature and impossible fields.
FORGED = """
    import struct, time
    from hvdscale.core import supervise
    from tests.peer_ranks import Forger, nonce_of, old_style, start_ranks, step_state, \\
        take_endpoint

    def forge(msg):
        bad = b"hvr1" + nonce_of(msg) + struct.pack("!IiBBdB", 1, -9, 77, 5, float("nan"), 0)
        return [*old_style(1, "x")(msg), bad + bytes(32)]

    f = Forger(forge)
    start_ranks({0: lambda: step_state(3, "communicate"), 1: lambda: step_state(3, "compute")},
                take_endpoint(1, f.sock))
    supervise.StepWatchdog.GRACE_S = 0.2
    dog = supervise.StepWatchdog(1.0, 0, lambda: "communicate")
    dog.start_step(3)
    time.sleep(20)
    assert f.seen, "the forger was never asked"
    print(ALIVE)
"""

# The watchdog's own look at the rank's phase fails in its thread.
BROKEN = """
    import threading, time
    from hvdscale.core import supervise

    def phase():
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("phase unreadable")
        return "compute"

    dog = supervise.StepWatchdog(1.0, 0, phase)
    dog.start_step(3)
    time.sleep(20)
    print(ALIVE)
"""


def _run(script: str) -> tuple[subprocess.CompletedProcess, float]:
    code = f"ALIVE = {ALIVE!r}\n" + textwrap.dedent(script)
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    return r, time.monotonic() - t


def test_a_forged_garbage_reply_does_not_kill_the_watchdog_and_the_job_ends() -> None:
    r, took = _run(FORGED)
    assert ALIVE not in r.stdout, r.stderr[-3000:]
    assert r.returncode == 3 and took < 15, (r.returncode, took, r.stderr[-3000:])
    assert ("hvdscale: error (rank 0): step 3: rank 0 has waited more than "
            "measure.step_timeout_s=1s for the other ranks; it waits for rank 1 (no answer "
            "within 2s: stopped, frozen or gone); ending the job.") in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr


def test_a_watchdog_whose_own_analysis_fails_still_ends_the_job() -> None:
    r, took = _run(BROKEN)
    assert ALIVE not in r.stdout, r.stderr[-3000:]
    assert r.returncode == 3 and took < 15, (r.returncode, took, r.stderr[-3000:])
    assert r.stderr.count("hvdscale: error (rank 0): the step watchdog failed (RuntimeError: "
                          "phase unreadable); ending the job.") == 1, r.stderr
