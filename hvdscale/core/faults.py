"""For tests only: inject a failure at a named point of a run on one rank.

``HVDSCALE_FAULT="RANK:POINT"`` raises on that rank at that point (``config``, ``data``,
``model``, ``step:K``, ``results``); ``RANK:kill:POINT`` sends the process SIGKILL there,
``RANK:hang:POINT`` sleeps for an hour there, ``RANK:stop:POINT`` sends it SIGSTOP there (the
whole process freezes, its watchdog threads too: a rank that cannot name itself, as on a
frozen node), ``RANK:slow:POINT`` sleeps ``SLOW_S`` there (a slow step, not a hang: a timing
test's effect made larger than a loaded host's jitter), and ``RANK:mark:POINT`` only prints
``hvdscale-fault: rank R reached POINT`` to stderr (evidence for a test that the run got that
far). RANK may be ``*`` (every rank); several specs are separated by commas, e.g.
``*:mark:step:2,1:kill:step:5``. With ``HVDSCALE_FAULT_ARGV=TEXT`` set, faults act only in a
process whose command line contains TEXT (e.g. ``strategy.name=ps``: one point of a sweep),
or, in a launch of several points (``hvdscale run-points``), in the point whose own settings
contain it (``set_scope``).
The fail-fast tests use it to hit every phase of a real multi-rank run. Unset (always, outside
the tests), ``maybe_fault`` does nothing.
"""

from __future__ import annotations

import os
import signal
import sys
import time

FAULT_ENV = "HVDSCALE_FAULT"
ARGV_ENV = "HVDSCALE_FAULT_ARGV"
SLOW_S = 0.5
"""Seconds a ``slow`` fault adds at its point."""


_scope = ""


def set_scope(text: str) -> None:
    """The current point's own settings, matched by ``HVDSCALE_FAULT_ARGV`` like the command
    line (a launch of several points runs them all under one command line)."""
    global _scope
    _scope = text


def maybe_fault(rank: int, point: str) -> None:
    """Act out the injected faults whose spec names this rank and point."""
    specs = os.environ.get(FAULT_ENV, "")
    if not specs:
        return
    only = os.environ.get(ARGV_ENV, "")
    if only and only not in f"{' '.join(sys.argv)} {_scope}":
        return
    for spec in specs.split(","):
        want_rank, _, want_point = spec.strip().partition(":")
        if want_rank not in ("*", str(rank)):
            continue
        kind, _, at = want_point.partition(":")
        if kind in ("kill", "hang", "stop", "mark", "slow"):
            if at != point:
                continue
            if kind == "mark":
                sys.stderr.write(f"hvdscale-fault: rank {rank} reached {point}\n")
                sys.stderr.flush()
            elif kind == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif kind == "stop":
                os.kill(os.getpid(), signal.SIGSTOP)
            elif kind == "slow":
                time.sleep(SLOW_S)
            else:
                time.sleep(3600)
        elif want_point == point:
            raise RuntimeError(f"injected failure at {point} ({FAULT_ENV}={spec})")
