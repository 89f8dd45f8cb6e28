"""The record's ``startup``: every rank's seconds from its process start to its first step, by
phase (``hvdscale.core.startup`` measures them), and the slowest rank's.

A record's ``startup``::

    {"phases": ["imports", ...],            # in the order they run
     "max_s": {"imports": 2.1, ...},        # per phase, the slowest rank's
     "total_max_s": 4.3,                    # the slowest rank's process start to first step
     "first_process_start": 1790000000.12,  # epoch s: the earliest rank process start
     "per_rank": [{"rank": 0, "process_start": ..., "total_s": ..., "phases": {...}}, ...]}

Records written before start-up was measured have no ``startup``.
"""

from __future__ import annotations

from typing import Annotated, Any

from hvdscale.core.startup import PHASES
from hvdscale.records.fields import Doc, Section


class Startup(Section, kw_only=True):
    """The run record's ``startup`` section."""

    phases: Annotated[list[str], Doc("the phases, in the order they run")]
    max_s: Annotated[dict[str, float], Doc("per phase, the slowest rank's", "s")]
    total_max_s: Annotated[float, Doc("the slowest rank's process start to first step", "s")]
    first_process_start: Annotated[float, Doc("the earliest rank's process start (epoch)", "s")]
    per_rank: Annotated[list[dict[str, Any]], Doc("each rank's process start, total and "
                                                  "phases", "s")]

LABELS = {
    "imports": "interpreter and imports",
    "mpi": "MPI initialisation",
    "horovod": "Horovod init (or world) and first barrier",
    "side_channel": "side channel and rendezvous",
    "process_group": "strategy (DDP/MWMS process group)",
    "data": "data",
    "model": "model and initial parameters",
    "first_step": "first step",
}
"""What each phase covers, for people (the report's table, docs/running.md)."""


def summarize_startup(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The record's ``startup`` from each rank's ``StartupClock.entry()``, in rank order."""
    per_rank = [{"rank": i, **e} for i, e in enumerate(entries)]
    return {
        "phases": list(PHASES),
        "max_s": {p: max(e["phases"].get(p, 0.0) for e in entries) for p in PHASES},
        "total_max_s": max(e["total_s"] for e in entries),
        "first_process_start": min(e["process_start"] for e in entries),
        "per_rank": per_rank,
    }

