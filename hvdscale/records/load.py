"""Whether a run's host was busy: the one rule the sweep (before a launch) and the report (from
each record) share.

A run measures its host as much as its code: other processes on its cores slow every step. A
point's host is *busy* when it had less than a core free per rank x compute thread the point
runs there: free = cores - others, where ``others`` is the cores' worth of everything else
running, and the point needs (its ranks on that host) x (intra-op threads per rank) cores.
``SLACK`` forgives half a core: a load average is never exactly the ranks' own (start-up,
the launcher, the shell), and the rule should not mark a quiet host.

From a record (``record_load``): ``others`` = the 1-minute load average read on rank 0's host at
the end of the window, less the run's own demand. A short run adds less than its demand to a
1-minute average, so this under-counts others; it is chosen so that a sweep's back-to-back
launches (whose load lingers into the next) never mark each other. The load average trails by a
minute, so a hog that started just before the window is seen only in part.

Before a launch (``load_now``): ``others`` = the cores busy right now, sampled over a quarter
of a second (a sweep pays it between every two points; a longer sample sees the same hog);
the 1-minute load would still hold the previous point's own ranks, which have ended.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the record kinds import nothing of this module; only the hints need them
    from hvdscale.records.run import RunRecord

SLACK = 0.5
"""Cores of other work forgiven before a host counts as busy (as the benches' quiet label
forgives 0.5 above the 2 ranks of a 2-core host)."""


def is_busy(others: float, cores: int, demand: int) -> bool:
    """The rule: fewer cores free (``cores - others``) than the point's ``demand`` (its
    rank x thread count on the host), beyond ``SLACK``."""
    return cores - others + SLACK < demand


@dataclass(frozen=True)
class HostLoad:
    """A host's load as the rule reads it."""

    cores: int
    """CPU cores of the host."""
    demand: int
    """Ranks on the host x compute threads per rank."""
    others: float
    """Cores' worth of other work."""

    @property
    def free(self) -> float:
        """Cores free for the point."""
        return self.cores - self.others

    @property
    def busy(self) -> bool:
        """Less than a core free per rank x thread (``is_busy``)."""
        return is_busy(self.others, self.cores, self.demand)

    def describe(self) -> str:
        """``"1.2 of 2 cores free for 2 rank x threads"``: what the rule saw."""
        return (f"{max(0.0, self.free):.1f} of {self.cores} cores free for {self.demand} "
                f"rank x thread{'s' if self.demand != 1 else ''}")


def record_demand(rec: RunRecord) -> int | None:
    """Ranks on rank 0's host x intra-op threads per rank, from a run record; None if it does
    not say (a record from before threads were recorded)."""
    threads = rec.threads.intra_op
    if not isinstance(threads, int) or threads < 1:
        return None
    hosts = rec.rank_hosts or []
    local = hosts.count(hosts[0]) if hosts else rec.ranks
    if not isinstance(local, int) or local < 1:
        return None
    return local * threads


def record_load(rec: RunRecord) -> HostLoad | None:
    """The load of the host ``rec`` ran on, or None when the record lacks what the rule needs
    (``loadavg``, ``host_cores``: records written before the host's cores were recorded)."""
    cores, load = rec.host_cores, rec.loadavg
    demand = record_demand(rec)
    if not isinstance(cores, int) or cores < 1 or demand is None:
        return None
    if not isinstance(load, list | tuple) or not load or not isinstance(load[0], int | float):
        return None
    return HostLoad(cores, demand, max(0.0, float(load[0]) - demand))


def load_now(demand: int, sample_s: float = 0.25) -> HostLoad:
    """This host's load now, for a point about to run ``demand`` rank x threads here: the cores
    busy over ``sample_s`` seconds (all processes; none of the point's yet)."""
    import psutil

    cores = os.cpu_count() or 1
    busy_pct = psutil.cpu_percent(interval=sample_s)
    return HostLoad(cores, demand, cores * busy_pct / 100.0)
